/*
 * vcpu_threads.c - finding a VM's vCPU threads (thread names, QEMU's QMP
 * query-cpus-fast) and encoding vperfetto/vcpu_map events; see
 * vcpu_threads.h.
 */
#include "vcpu_threads.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "perfetto_fields.h"

int vcpu_index_from_name(const char *name)
{
	const char *p;
	int n = 0;
	bool crosvm;

	if (!name)
		return -1;
	crosvm = !strncmp(name, "crosvm_vcpu", 11);
	if (crosvm)
		p = name + 11 + (name[11] == ' ');
	else if (!strncmp(name, "CPU ", 4))
		p = name + 4;
	else
		return -1;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9' && n < 1000000)
		n = n * 10 + (*p++ - '0');
	if (crosvm)
		return *p ? -1 : n;
	return !strcmp(p, "/KVM") || !strcmp(p, "/TCG") ? n : -1;
}

static int cmp_vcpu(const void *a, const void *b)
{
	const struct vcpu_thread *x = a, *y = b;

	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* The first line of a small file, without its newline; false if it
 * cannot be read. */
static bool read_line(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return true;
}

int vcpu_threads_from_names(const char *proc_root, int pid,
			    struct vcpu_thread *out, size_t max,
			    struct vp_error *err)
{
	char path[256], comm[64];
	struct dirent *de;
	DIR *d;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/%d/task", proc_root, pid);
	d = opendir(path);
	if (!d)
		return vp_errorf(err, "%s: %s", path, strerror(errno));
	while ((de = readdir(d)) != NULL && n < max) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);
		if (*end || tid <= 0 || tid > 0x7fffffff)
			continue;
		snprintf(path, sizeof(path), "%s/%d/task/%ld/comm", proc_root,
			 pid, tid);
		if (!read_line(path, comm, sizeof(comm)))
			continue; /* the thread ended meanwhile */
		int idx = vcpu_index_from_name(comm);
		if (idx < 0)
			continue;
		out[n++] = (struct vcpu_thread){idx, (int)tid};
	}
	closedir(d);
	qsort(out, n, sizeof(*out), cmp_vcpu);
	return (int)n;
}

int vcpu_thread_tgid(const char *proc_root, int tid)
{
	char path[256], buf[2048];
	int fd, tgid = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/status", proc_root, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *p = strstr(buf, "\nTgid:");
	if (p && sscanf(p + 6, "%d", &tgid) != 1)
		tgid = -1;
	return tgid;
}

/* ---- QMP ---------------------------------------------------------------- */

/* A JSON integer at *p (after blanks); false if there is none. */
static bool json_int(const char **p, const char *end, long long *v)
{
	const char *s = *p;
	bool neg = false;
	long long n = 0;

	while (s < end && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n'))
		s++;
	if (s < end && *s == '-') {
		neg = true;
		s++;
	}
	if (s >= end || *s < '0' || *s > '9')
		return false;
	while (s < end && *s >= '0' && *s <= '9' && n < 0x7fffffffll)
		n = n * 10 + (*s++ - '0');
	*v = neg ? -n : n;
	*p = s;
	return true;
}

/*
 * The reply is {"return": [{"cpu-index": 0, "thread-id": 123, "props":
 * {"thread-id": 0, ...}, ...}, ...]}: the keys that matter sit at depth 3
 * (object, array, element); the props' own "thread-id" (a topology index)
 * is one level deeper and ignored.
 */
int vcpu_threads_parse_qmp(const char *json, size_t len,
			   struct vcpu_thread *out, size_t max)
{
	const char *p = json, *end = json + len;
	int depth = 0;
	long long cpu = -1, tid = -1;
	size_t n = 0;
	bool in_return = false;

	while (p < end) {
		char c = *p++;
		if (c == '"') {
			const char *s = p;
			while (p < end && *p != '"')
				p += (*p == '\\' && p + 1 < end) ? 2 : 1;
			if (p >= end)
				return -1;
			size_t sl = (size_t)(p - s);
			p++;
			const char *q = p;
			while (q < end && (*q == ' ' || *q == '\t'))
				q++;
			if (q >= end || *q != ':')
				continue; /* a value, not a key */
			q++;
			if (depth == 1 && sl == 6 && !memcmp(s, "return", 6))
				in_return = true;
			if (depth != 3 || !in_return)
				continue;
			long long v;
			if (sl == 9 && !memcmp(s, "cpu-index", 9) &&
			    json_int(&q, end, &v))
				cpu = v;
			else if (sl == 9 && !memcmp(s, "thread-id", 9) &&
				 json_int(&q, end, &v))
				tid = v;
		} else if (c == '{' || c == '[') {
			if (++depth == 3)
				cpu = tid = -1;
		} else if (c == '}' || c == ']') {
			if (depth == 3 && c == '}' && in_return && cpu >= 0 &&
			    tid > 0 && n < max && cpu <= 0x7fffffff &&
			    tid <= 0x7fffffff)
				out[n++] = (struct vcpu_thread){(int)cpu,
								(int)tid};
			if (--depth < 0)
				return -1;
		}
	}
	if (!in_return || depth != 0)
		return -1;
	qsort(out, n, sizeof(*out), cmp_vcpu);
	return (int)n;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads QMP messages (one per line) into buf until one holds `want`;
 * events and other replies are skipped.  Returns that message's length
 * at the start of buf, or -1. */
static ssize_t qmp_read_until(int fd, char *buf, size_t size, size_t *have,
			      const char *want, long long deadline,
			      struct vp_error *err)
{
	for (;;) {
		char *nl;
		while ((nl = memchr(buf, '\n', *have)) != NULL) {
			size_t ml = (size_t)(nl - buf) + 1;
			*nl = 0;
			if (strstr(buf, want)) {
				*nl = '\n';
				return (ssize_t)ml;
			}
			if (strstr(buf, "\"error\""))
				return vp_errorf(err, "QMP: %s", buf);
			memmove(buf, buf + ml, *have - ml);
			*have -= ml;
		}
		if (*have + 1 >= size)
			return vp_errorf(err, "QMP: a message of over %zu "
					 "bytes", size);
		long long left = deadline - now_ms();
		struct pollfd pfd = {fd, POLLIN, 0};
		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return vp_errorf(err, "QMP: no answer in time");
		ssize_t r = read(fd, buf + *have, size - 1 - *have);
		if (r <= 0)
			return vp_errorf(err, "QMP: %s",
					 r ? strerror(errno) : "closed");
		*have += (size_t)r;
	}
}

static int qmp_send(int fd, const char *msg, struct vp_error *err)
{
	size_t len = strlen(msg), off = 0;

	while (off < len) {
		ssize_t w = send(fd, msg + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return vp_errorf(err, "QMP: %s", strerror(errno));
		off += (size_t)w;
	}
	return 0;
}

int vcpu_threads_from_qmp(const char *path, int timeout_ms,
			  struct vcpu_thread *out, size_t max,
			  struct vp_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	long long deadline = now_ms() + timeout_ms;
	size_t have = 0, size = 1 << 16;
	char *buf;
	int fd, rc = -1;
	ssize_t ml;

	if (strlen(path) >= sizeof(sa.sun_path))
		return vp_errorf(err, "%s: path too long", path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return vp_errorf(err, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		vp_errorf(err, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	buf = malloc(size);
	if (!buf) {
		close(fd);
		return vp_errorf(err, "out of memory");
	}
	/* The greeting, capabilities negotiation, then the question. */
	if (qmp_read_until(fd, buf, size, &have, "\"QMP\"", deadline, err) < 0)
		goto out;
	have = 0;
	if (qmp_send(fd, "{\"execute\":\"qmp_capabilities\"}\r\n", err) < 0 ||
	    (ml = qmp_read_until(fd, buf, size, &have, "\"return\"", deadline,
				 err)) < 0)
		goto out;
	memmove(buf, buf + ml, have - (size_t)ml);
	have -= (size_t)ml;
	if (qmp_send(fd, "{\"execute\":\"query-cpus-fast\"}\r\n", err) < 0 ||
	    (ml = qmp_read_until(fd, buf, size, &have, "\"return\"", deadline,
				 err)) < 0)
		goto out;
	rc = vcpu_threads_parse_qmp(buf, (size_t)ml, out, max);
	if (rc < 0)
		vp_errorf(err, "QMP: query-cpus-fast: an answer that does not "
			       "parse");
out:
	free(buf);
	close(fd);
	return rc;
}

/* ---- packets ---------------------------------------------------------- */

/* "vcpumap" in ASCII in the high bits keeps these uuids clear of the
 * SDK's tracks and of kvm_tsc's. */
#define VCPU_MAP_UUID_BASE 0x766370756d617000ull

uint64_t vcpu_map_track_uuid(int pid)
{
	return VCPU_MAP_UUID_BASE ^ ((uint64_t)(uint32_t)pid << 8);
}

void vcpu_map_encode_track(struct pb_buf *b, int pid, uint64_t ts_ns)
{
	char name[64];

	snprintf(name, sizeof(name), "vcpu_map VM pid %d", pid);
	pb_put_varint(b, TP_TIMESTAMP, ts_ns);
	size_t td = pb_begin_nested(b, TP_TRACK_DESCRIPTOR);
	pb_put_varint(b, TD_UUID, vcpu_map_track_uuid(pid));
	pb_put_string(b, TD_NAME, name);
	pb_end_nested(b, td);
}

static void put_int(struct pb_buf *b, const char *name, int64_t v)
{
	size_t a = pb_begin_nested(b, TE_DEBUG_ANNOTATIONS);
	pb_put_string(b, DA_NAME, name);
	pb_put_varint(b, DA_INT_VALUE, (uint64_t)v);
	pb_end_nested(b, a);
}

static void put_str(struct pb_buf *b, const char *name, const char *v)
{
	size_t a = pb_begin_nested(b, TE_DEBUG_ANNOTATIONS);
	pb_put_string(b, DA_NAME, name);
	pb_put_string(b, DA_STRING_VALUE, v);
	pb_end_nested(b, a);
}

void vcpu_map_encode_event(struct pb_buf *b, const char *vm, int vmm_pid,
			   const struct vcpu_thread *t, const char *source,
			   uint64_t ts_ns)
{
	pb_put_varint(b, TP_TIMESTAMP, ts_ns);
	size_t te = pb_begin_nested(b, TP_TRACK_EVENT);
	pb_put_varint(b, TE_TYPE, TE_TYPE_INSTANT);
	pb_put_varint(b, TE_TRACK_UUID, vcpu_map_track_uuid(vmm_pid));
	pb_put_string(b, TE_CATEGORIES, "vperfetto");
	pb_put_string(b, TE_NAME, "vcpu_map");
	if (vm)
		put_str(b, "vm", vm);
	put_int(b, "vmm_pid", vmm_pid);
	put_int(b, "vcpu", t->vcpu);
	put_int(b, "host_tid", t->tid);
	put_str(b, "source", source);
	pb_end_nested(b, te);
}
