/*
 * kvm_tsc.c - reads KVM's per-vcpu TSC offset and scaling from debugfs,
 * remembers what was last written, and encodes the vperfetto/kvm_tsc
 * track events (see kvm_tsc.h).
 */
#include "kvm_tsc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_fields.h"
#include "vp_alloc.h"

/* Longest value file we accept: a 64-bit decimal and a newline. */
#define VALUE_MAX 32

/* A non-negative decimal int that is the whole of s[0..len). */
static bool parse_int(const char *s, size_t len, int *out)
{
	long v = 0;
	if (len == 0 || len > 9)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = (int)v;
	return true;
}

/* "<pid>-<fd>": the fd when the pid matches. */
static bool vm_dir_of(const char *name, int pid, int *fd)
{
	const char *dash = strchr(name, '-');
	int p;
	if (!dash || !parse_int(name, (size_t)(dash - name), &p) || p != pid)
		return false;
	return parse_int(dash + 1, strlen(dash + 1), fd);
}

static bool vcpu_dir_of(const char *name, int *vcpu)
{
	return strncmp(name, "vcpu", 4) == 0 &&
	       parse_int(name + 4, strlen(name + 4), vcpu);
}

/* out = a/b; false (and a message) if it does not fit. */
static bool join(char *out, const char *a, const char *b,
		 struct vp_error *err)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", a, b);
	if (n < 0 || n >= PATH_MAX) {
		vp_errorf(err, "%s/%s: path too long", a, b);
		return false;
	}
	return true;
}

static int errno_code(int e)
{
	return e == EACCES || e == EPERM ? KVM_TSC_NO_ACCESS : KVM_TSC_BAD_FILE;
}

/* Reads a small value file into buf (NUL-terminated, trailing white space
 * cut).  Returns 0, 1 if the file does not exist, or an error code. */
static int read_value(const char *path, char *buf, struct vp_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		int e = errno;
		vp_errorf(err, "%s: %s", path, strerror(e));
		return errno_code(e);
	}
	ssize_t n;
	size_t len = 0;
	while ((n = read(fd, buf + len, VALUE_MAX - len)) > 0 &&
	       len < VALUE_MAX)
		len += (size_t)n;
	int e = errno;
	close(fd);
	if (n < 0) {
		vp_errorf(err, "%s: read: %s", path, strerror(e));
		return errno_code(e);
	}
	if (len == VALUE_MAX) {
		vp_errorf(err, "%s: longer than a number", path);
		return KVM_TSC_BAD_FILE;
	}
	while (len > 0 && isspace((unsigned char)buf[len - 1]))
		len--;
	buf[len] = '\0';
	return 0;
}

/* A decimal with an optional '-' (signed) that fills the whole string. */
static bool parse_u64(const char *s, uint64_t *out)
{
	if (!isdigit((unsigned char)s[0]))
		return false;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end || errno == ERANGE)
		return false;
	*out = v;
	return true;
}

static bool parse_i64(const char *s, int64_t *out)
{
	bool neg = s[0] == '-';
	uint64_t m;
	if (!parse_u64(s + neg, &m))
		return false;
	if (neg ? m > (uint64_t)INT64_MAX + 1 : m > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - m) : (int64_t)m;
	return true;
}

/* One vcpu directory. */
static int read_vcpu(const char *dir, struct kvm_vcpu_tsc *r,
		     struct vp_error *err)
{
	char path[PATH_MAX], buf[VALUE_MAX + 1], ratio[VALUE_MAX + 1];
	int rc;

	if (!join(path, dir, "tsc-offset", err))
		return KVM_TSC_BAD_FILE;
	rc = read_value(path, buf, err);
	if (rc == 1) {
		vp_errorf(err, "%s: no such file (not an x86 KVM?)", path);
		return KVM_TSC_BAD_FILE;
	}
	if (rc < 0)
		return rc;
	if (!parse_i64(buf, &r->tsc_offset)) {
		vp_errorf(err, "%s: not a signed decimal: \"%.32s\"", path, buf);
		return KVM_TSC_BAD_FILE;
	}

	/* The scaling files exist only where KVM can scale the TSC. */
	if (!join(path, dir, "tsc-scaling-ratio", err))
		return KVM_TSC_BAD_FILE;
	rc = read_value(path, ratio, err);
	if (rc < 0)
		return rc;
	r->has_scaling = false;
	if (rc == 1)
		return 0;
	if (!parse_u64(ratio, &r->tsc_scaling_ratio)) {
		vp_errorf(err, "%s: not a decimal: \"%.32s\"", path, ratio);
		return KVM_TSC_BAD_FILE;
	}
	if (!join(path, dir, "tsc-scaling-ratio-frac-bits", err))
		return KVM_TSC_BAD_FILE;
	rc = read_value(path, buf, err);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		vp_errorf(err, "%s: no such file, but the ratio is there",
			  path);
		return KVM_TSC_BAD_FILE;
	}
	if (!parse_u64(buf, &r->tsc_scaling_frac_bits) ||
	    r->tsc_scaling_frac_bits > 63) {
		vp_errorf(err, "%s: not a number of bits (0..63): \"%.32s\"",
			  path, buf);
		return KVM_TSC_BAD_FILE;
	}
	r->has_scaling = true;
	return 0;
}

/* Adds the vcpus of one VM directory to *v. */
static int read_vm_dir(const char *dir, int pid, int fd,
		       struct kvm_vcpu_tsc **v, size_t *n, size_t *cap,
		       struct vp_error *err)
{
	DIR *d = opendir(dir);
	if (!d) {
		int e = errno;
		vp_errorf(err, "%s: %s", dir, strerror(e));
		return errno_code(e);
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		int vcpu;
		if (!vcpu_dir_of(de->d_name, &vcpu))
			continue;
		VP_XGROW(*v, *cap, *n + 1);
		char sub[PATH_MAX];
		if (!join(sub, dir, de->d_name, err)) {
			rc = KVM_TSC_BAD_FILE;
			break;
		}
		struct kvm_vcpu_tsc *r = &(*v)[*n];
		memset(r, 0, sizeof(*r));
		r->vm_pid = pid;
		r->vm_fd = fd;
		r->vcpu = vcpu;
		rc = read_vcpu(sub, r, err);
		if (rc == 0)
			(*n)++;
	}
	closedir(d);
	return rc;
}

static int cmp_vcpu(const void *a, const void *b)
{
	const struct kvm_vcpu_tsc *x = a, *y = b;
	if (x->vm_fd != y->vm_fd)
		return x->vm_fd < y->vm_fd ? -1 : 1;
	return (x->vcpu > y->vcpu) - (x->vcpu < y->vcpu);
}

int kvm_tsc_read_vm(const char *debugfs, int pid, struct kvm_vcpu_tsc **out,
		    struct vp_error *err)
{
	char kvm[PATH_MAX];
	struct kvm_vcpu_tsc *v = NULL;
	size_t n = 0, cap = 0;
	bool found = false;
	int rc = 0;

	*out = NULL;
	if (!join(kvm, debugfs ? debugfs : KVM_TSC_DEFAULT_DEBUGFS, "kvm",
		  err))
		return KVM_TSC_NO_DEBUGFS;
	DIR *d = opendir(kvm);
	if (!d) {
		int e = errno;
		if (e == EACCES || e == EPERM) {
			vp_errorf(err, "%s: %s (reading KVM's debugfs needs root)",
				  kvm, strerror(e));
			return KVM_TSC_NO_ACCESS;
		}
		vp_errorf(err,
			  "%s: %s (debugfs not mounted, or no kvm module "
			  "loaded)",
			  kvm, strerror(e));
		return KVM_TSC_NO_DEBUGFS;
	}
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		int fd;
		if (!vm_dir_of(de->d_name, pid, &fd))
			continue;
		char dir[PATH_MAX];
		if (!join(dir, kvm, de->d_name, err)) {
			rc = KVM_TSC_BAD_FILE;
			break;
		}
		found = true;
		rc = read_vm_dir(dir, pid, fd, &v, &n, &cap, err);
	}
	closedir(d);
	if (rc < 0) {
		free(v);
		return rc;
	}
	if (!found) {
		free(v);
		vp_errorf(err,
			  "%s: no %d-<fd> directory: process %d runs no KVM "
			  "VM (or has exited)",
			  kvm, pid, pid);
		return KVM_TSC_NO_VM;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_vcpu);
	*out = v;
	return (int)n;
}

/* ------------------------------------------------------------- tracker */

void kvm_tsc_tracker_init(struct kvm_tsc_tracker *t)
{
	memset(t, 0, sizeof(*t));
}

void kvm_tsc_tracker_free(struct kvm_tsc_tracker *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

void kvm_tsc_tracker_reset(struct kvm_tsc_tracker *t)
{
	t->n = 0;
}

static bool same_vcpu(const struct kvm_vcpu_tsc *a,
		      const struct kvm_vcpu_tsc *b)
{
	return a->vm_pid == b->vm_pid && a->vm_fd == b->vm_fd &&
	       a->vcpu == b->vcpu;
}

static bool same_values(const struct kvm_vcpu_tsc *a,
			const struct kvm_vcpu_tsc *b)
{
	return a->tsc_offset == b->tsc_offset &&
	       a->has_scaling == b->has_scaling &&
	       a->tsc_scaling_ratio == b->tsc_scaling_ratio &&
	       a->tsc_scaling_frac_bits == b->tsc_scaling_frac_bits;
}

bool kvm_tsc_tracker_changed(struct kvm_tsc_tracker *t,
			     const struct kvm_vcpu_tsc *r)
{
	for (size_t i = 0; i < t->n; i++) {
		if (!same_vcpu(&t->v[i], r))
			continue;
		if (same_values(&t->v[i], r))
			return false;
		t->v[i] = *r;
		return true;
	}
	VP_XGROW(t->v, t->cap, t->n + 1);
	t->v[t->n++] = *r;
	return true;
}

/* ------------------------------------------------------------- packets */

/* A fixed tag ("kvm_tsc" in ASCII) in the high bits keeps these uuids
 * clear of the SDK's thread and process tracks. */
#define KVM_TSC_UUID_BASE 0x6b766d5f74736300ull

uint64_t kvm_tsc_track_uuid(int pid)
{
	return KVM_TSC_UUID_BASE ^ ((uint64_t)(uint32_t)pid << 8);
}

void kvm_tsc_encode_track(struct pb_buf *b, int pid, uint64_t ts_ns,
			  uint32_t seq_flags)
{
	char name[64];

	snprintf(name, sizeof(name), "kvm_tsc VM pid %d", pid);
	pb_put_varint(b, TP_TIMESTAMP, ts_ns);
	size_t td = pb_begin_nested(b, TP_TRACK_DESCRIPTOR);
	pb_put_varint(b, TD_UUID, kvm_tsc_track_uuid(pid));
	pb_put_string(b, TD_NAME, name);
	pb_end_nested(b, td);
	if (seq_flags)
		pb_put_varint(b, TP_SEQUENCE_FLAGS, seq_flags);
}

static void put_ann_int(struct pb_buf *b, const char *name, int64_t v)
{
	size_t a = pb_begin_nested(b, TE_DEBUG_ANNOTATIONS);
	pb_put_string(b, DA_NAME, name);
	pb_put_varint(b, DA_INT_VALUE, (uint64_t)v); /* int64: two's complement */
	pb_end_nested(b, a);
}

static void put_ann_uint(struct pb_buf *b, const char *name, uint64_t v)
{
	size_t a = pb_begin_nested(b, TE_DEBUG_ANNOTATIONS);
	pb_put_string(b, DA_NAME, name);
	pb_put_varint(b, DA_UINT_VALUE, v);
	pb_end_nested(b, a);
}

void kvm_tsc_encode_event(struct pb_buf *b, const struct kvm_vcpu_tsc *r,
			  uint64_t ts_ns, uint32_t seq_flags)
{
	pb_put_varint(b, TP_TIMESTAMP, ts_ns);
	size_t te = pb_begin_nested(b, TP_TRACK_EVENT);
	pb_put_varint(b, TE_TYPE, TE_TYPE_INSTANT);
	pb_put_varint(b, TE_TRACK_UUID, kvm_tsc_track_uuid(r->vm_pid));
	pb_put_string(b, TE_CATEGORIES, "vperfetto");
	pb_put_string(b, TE_NAME, "kvm_tsc");
	put_ann_int(b, "vm_pid", r->vm_pid);
	put_ann_int(b, "vcpu", r->vcpu);
	put_ann_int(b, "tsc_offset", r->tsc_offset);
	if (r->has_scaling) {
		put_ann_uint(b, "tsc_scaling_ratio", r->tsc_scaling_ratio);
		put_ann_uint(b, "tsc_scaling_frac_bits",
			     r->tsc_scaling_frac_bits);
	}
	pb_end_nested(b, te);
	if (seq_flags)
		pb_put_varint(b, TP_SEQUENCE_FLAGS, seq_flags);
}
