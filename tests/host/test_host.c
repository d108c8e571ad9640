/*
 * test_host.c - unit tests of host/: the clock_sync options and their
 * legacy_config overrides, KVM debugfs reading against a fake tree, the
 * change tracker and the kvm_tsc packets (checked with the merge's own
 * scanner), per-connection request handling, and the live sync endpoint
 * (UNIX listener, a QEMU chardev server socket that drops and comes back,
 * a pty, garbage, flooding and vanishing clients).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "clock_config.h"
#include "ipc_sock.h"
#include "kvm_tsc.h"
#include "pb_wire.h"
#include "sync_endpoint.h"
#include "sync_proto.h"
#include "sync_scan.h"
#include "vp_clock.h"

/* ----------------------------------------------------------- helpers */

struct warnings {
	int n;
	char text[4096];
};

static void collect(void *ctx, const char *msg)
{
	struct warnings *w = ctx;
	size_t len = strlen(w->text);
	snprintf(w->text + len, sizeof(w->text) - len, "%s\n", msg);
	w->n++;
}

static int apply(const char *text, struct host_clock_opts *o,
		 struct warnings *w)
{
	memset(w, 0, sizeof(*w));
	host_clock_opts_default(o);
	return host_clock_apply_legacy(text, strlen(text), o, collect, w);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_true(n > 0 && (size_t)n < sizeof(path));
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void make_dir(const char *path)
{
	assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
}

static void rm_rf(const char *path)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	assert_int_equal(system(cmd), 0);
}

/* A vcpu directory with an offset and, if ratio, the scaling files. */
static void make_vcpu(const char *kvm, const char *vm, int vcpu,
		      const char *offset, const char *ratio, const char *bits)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/%s", kvm, vm);
	make_dir(dir);
	snprintf(dir, sizeof(dir), "%s/%s/vcpu%d", kvm, vm, vcpu);
	make_dir(dir);
	write_file(dir, "tsc-offset", offset);
	if (ratio) {
		write_file(dir, "tsc-scaling-ratio", ratio);
		write_file(dir, "tsc-scaling-ratio-frac-bits", bits);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One exchange on fd; checks the reply and its causality. */
static void exchange(int fd, uint64_t seq)
{
	uint8_t req[VP_SYNC_REQUEST_SIZE], rep[VP_SYNC_REPLY_SIZE];
	struct vp_sync_decoder d;
	struct vp_sync_msg m;
	bool got = false;

	vp_sync_encode_request(req, seq);
	uint64_t send = vp_cpu_counter();
	assert_int_equal(write(fd, req, sizeof(req)), (ssize_t)sizeof(req));
	vp_sync_decoder_init(&d);
	uint64_t deadline = now_ms() + 10000;
	while (!got) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		assert_true(now_ms() < deadline);
		if (poll(&p, 1, 100) <= 0)
			continue;
		/* One request is outstanding: never more than its reply. */
		ssize_t n = read(fd, rep, sizeof(rep));
		if (n < 0 && errno == EAGAIN)
			continue;
		assert_true(n > 0);
		size_t used = vp_sync_decode(&d, rep, (size_t)n, &m, &got);
		assert_int_equal(used, (size_t)n);
	}
	uint64_t recv = vp_cpu_counter();
	assert_int_equal(m.type, VP_SYNC_REPLY);
	assert_int_equal(m.seq, seq);
	assert_true(send <= m.host_counter);
	assert_true(m.host_counter <= recv);
}

static int unix_connect(const char *path)
{
	struct vp_error err;
	int fd = vp_sock_connect(path, 5000, &err);
	if (fd < 0)
		fail_msg("%s", err.msg);
	return fd;
}

/* ------------------------------------------------------ clock_config */

static void test_legacy_ok(void **state)
{
	(void)state;
	struct host_clock_opts o;
	struct warnings w;

	assert_int_equal(apply("period_ms=50 clock=monotonic", &o, &w), 0);
	assert_int_equal(o.period_ms, 50);
	assert_int_equal(o.clock_id, VP_BUILTIN_CLOCK_MONOTONIC);
	assert_int_equal(w.n, 0);

	/* Other separators, any case for the clock, the last item wins. */
	assert_int_equal(apply(" clock=MONOTONIC,\tperiod_ms=7;\n"
			       "period_ms=250 clock=BootTime ",
			       &o, &w),
			 0);
	assert_int_equal(o.period_ms, 250);
	assert_int_equal(o.clock_id, VP_BUILTIN_CLOCK_BOOTTIME);

	assert_int_equal(apply("", &o, &w), 0);
	assert_int_equal(o.period_ms, HOST_CLOCK_DEFAULT_PERIOD_MS);
	assert_int_equal(o.clock_id, VP_BUILTIN_CLOCK_BOOTTIME);
}

static void test_legacy_bad(void **state)
{
	(void)state;
	struct host_clock_opts o;
	struct warnings w;

	int bad = apply("period_ms=abc clock=monotonic foo=1 noequals "
			"period_ms=0 clock= period_ms=-5 period_ms=3600001 "
			"clock=realtime",
			&o, &w);
	assert_int_equal(bad, 8);
	assert_int_equal(w.n, 8);
	/* Bad items keep the default; good ones still apply. */
	assert_int_equal(o.period_ms, HOST_CLOCK_DEFAULT_PERIOD_MS);
	assert_int_equal(o.clock_id, VP_BUILTIN_CLOCK_MONOTONIC);
	/* Each message names its item. */
	assert_non_null(strstr(w.text, "\"period_ms=abc\""));
	assert_non_null(strstr(w.text, "\"foo=1\": unknown key"));
	assert_non_null(strstr(w.text, "\"noequals\": want key=value"));
	assert_non_null(strstr(w.text, "\"period_ms=0\""));
	assert_non_null(strstr(w.text, "\"clock=realtime\""));

	/* Untrusted bytes are quoted escaped and cut short. */
	char bin[200];
	memset(bin, 'x', sizeof(bin));
	memcpy(bin, "k\x01\x7f\"=", 5);
	memset(&w, 0, sizeof(w));
	host_clock_opts_default(&o);
	assert_int_equal(host_clock_apply_legacy(bin, sizeof(bin), &o,
						 collect, &w),
			 1);
	assert_non_null(strstr(w.text, "k\\x01\\x7f\\x22="));
	assert_non_null(strstr(w.text, "...\""));
	assert_null(strchr(w.text, '\x01'));

	/* A NUL inside a value. */
	memset(&w, 0, sizeof(w));
	assert_int_equal(host_clock_apply_legacy("clock=boot\0time", 15, &o,
						 collect, &w),
			 1);
}

static void test_parse_flags(void **state)
{
	(void)state;
	struct vp_error err;
	uint32_t v;

	assert_int_equal(host_clock_parse_period("1", &v, &err), 0);
	assert_int_equal(v, 1);
	assert_int_equal(host_clock_parse_period("3600000", &v, &err), 0);
	assert_int_equal(host_clock_parse_period(" 5", &v, &err), -1);
	assert_int_equal(host_clock_parse_period("+5", &v, &err), -1);
	assert_int_equal(host_clock_parse_period("5ms", &v, &err), -1);
	assert_int_equal(host_clock_parse_period("99999999999999999999", &v,
						 &err),
			 -1);
	assert_int_equal(host_clock_parse_clock("monotonic", &v, &err), 0);
	assert_int_equal(v, VP_BUILTIN_CLOCK_MONOTONIC);
	assert_int_equal(host_clock_parse_clock("tsc", &v, &err), -1);
	assert_non_null(strstr(err.msg, "tsc"));
	assert_string_equal(host_clock_name(VP_BUILTIN_CLOCK_BOOTTIME),
			    "boottime");
}

static void test_ds_config(void **state)
{
	(void)state;
	struct host_clock_opts def = {VP_BUILTIN_CLOCK_MONOTONIC, 30}, o;
	struct warnings w = {0};
	struct pb_buf b;

	/* DataSourceConfig { name, target_buffer, legacy_config } */
	pb_buf_init(&b);
	pb_put_string(&b, 1, "vperfetto.clock_sync");
	pb_put_varint(&b, 2, 0);
	pb_put_string(&b, 1000, "period_ms=20 clock=boottime");
	assert_int_equal(host_clock_opts_from_ds_config(b.data, b.len, &def,
							&o, collect, &w),
			 0);
	assert_int_equal(o.period_ms, 20);
	assert_int_equal(o.clock_id, VP_BUILTIN_CLOCK_BOOTTIME);

	/* No legacy_config: the command-line defaults. */
	pb_buf_reset(&b);
	pb_put_string(&b, 1, "vperfetto.clock_sync");
	assert_int_equal(host_clock_opts_from_ds_config(b.data, b.len, &def,
							&o, collect, &w),
			 0);
	assert_int_equal(o.period_ms, 30);
	assert_int_equal(o.clock_id, VP_BUILTIN_CLOCK_MONOTONIC);

	/* A bad key: a warning, the defaults for it. */
	pb_put_string(&b, 1000, "period_ms=10 speed=3");
	assert_int_equal(host_clock_opts_from_ds_config(b.data, b.len, &def,
							&o, collect, &w),
			 1);
	assert_int_equal(o.period_ms, 10);
	assert_non_null(strstr(w.text, "speed=3"));

	/* Truncated bytes: reported, defaults. */
	memset(&w, 0, sizeof(w));
	assert_int_equal(host_clock_opts_from_ds_config(b.data, b.len - 3,
							&def, &o, collect, &w),
			 1);
	assert_int_equal(o.period_ms, 30);
	assert_non_null(strstr(w.text, "DataSourceConfig"));
	pb_buf_free(&b);
}

/* --------------------------------------------------------------- KVM */

struct tree {
	char root[256];
	char kvm[300];
};

static int tree_setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	snprintf(t->root, sizeof(t->root), "%s/host_kvm.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(t->root))
		return -1;
	snprintf(t->kvm, sizeof(t->kvm), "%s/kvm", t->root);
	make_dir(t->kvm);
	*state = t;
	return 0;
}

static int tree_teardown(void **state)
{
	struct tree *t = *state;
	rm_rf(t->root);
	free(t);
	return 0;
}

static void test_kvm_read(void **state)
{
	struct tree *t = *state;
	struct kvm_vcpu_tsc *v;
	struct vp_error err;

	make_vcpu(t->kvm, "4242-12", 1, "-9223372036854775808\n",
		  "281474976710656\n", "48\n");
	make_vcpu(t->kvm, "4242-12", 0, "-123456789\n", "281474976710656\n",
		  "48\n");
	make_vcpu(t->kvm, "4242-15", 0, "77", NULL, NULL); /* no scaling */
	make_vcpu(t->kvm, "42-3", 0, "1\n", NULL, NULL);    /* another pid */
	/* Not VM or vcpu directories: ignored. */
	make_dir(t->kvm);
	char other[400];
	snprintf(other, sizeof(other), "%s/4242-12/pit", t->kvm);
	make_dir(other);
	snprintf(other, sizeof(other), "%s/4242-x", t->kvm);
	make_dir(other);

	int n = kvm_tsc_read_vm(t->root, 4242, &v, &err);
	assert_int_equal(n, 3);
	assert_int_equal(v[0].vm_fd, 12);
	assert_int_equal(v[0].vcpu, 0);
	assert_int_equal(v[0].vm_pid, 4242);
	assert_int_equal(v[0].tsc_offset, -123456789);
	assert_true(v[0].has_scaling);
	assert_int_equal(v[0].tsc_scaling_ratio, 1ull << 48);
	assert_int_equal(v[0].tsc_scaling_frac_bits, 48);
	assert_int_equal(v[1].vcpu, 1);
	assert_true(v[1].tsc_offset == INT64_MIN);
	assert_int_equal(v[2].vm_fd, 15);
	assert_int_equal(v[2].tsc_offset, 77);
	assert_false(v[2].has_scaling);
	free(v);

	n = kvm_tsc_read_vm(t->root, 42, &v, &err);
	assert_int_equal(n, 1);
	free(v);
}

static void test_kvm_errors(void **state)
{
	struct tree *t = *state;
	struct kvm_vcpu_tsc *v;
	struct vp_error err;
	char dir[400];

	/* No such VM. */
	assert_int_equal(kvm_tsc_read_vm(t->root, 999, &v, &err),
			 KVM_TSC_NO_VM);
	assert_null(v);
	assert_non_null(strstr(err.msg, "999"));
	/* No kvm directory under the mount point. */
	snprintf(dir, sizeof(dir), "%s/nothing", t->root);
	assert_int_equal(kvm_tsc_read_vm(dir, 1, &v, &err),
			 KVM_TSC_NO_DEBUGFS);
	assert_non_null(strstr(err.msg, "nothing/kvm"));
	/* A VM without vcpus yet: no readings, no error. */
	snprintf(dir, sizeof(dir), "%s/5-1", t->kvm);
	make_dir(dir);
	assert_int_equal(kvm_tsc_read_vm(t->root, 5, &v, &err), 0);
	free(v);

	/* Bad contents, each named with its path. */
	static const char *const bad_offsets[] = {
		"", "12x", "- 5", "+5", "99999999999999999999",
		"9223372036854775808", "123456789012345678901234567890123"};
	for (size_t i = 0; i < sizeof(bad_offsets) / sizeof(*bad_offsets);
	     i++) {
		make_vcpu(t->kvm, "6-1", 0, bad_offsets[i], NULL, NULL);
		assert_int_equal(kvm_tsc_read_vm(t->root, 6, &v, &err),
				 KVM_TSC_BAD_FILE);
		assert_non_null(strstr(err.msg, "6-1/vcpu0/tsc-offset"));
	}
	make_vcpu(t->kvm, "7-1", 0, "5", "1", "64");
	assert_int_equal(kvm_tsc_read_vm(t->root, 7, &v, &err),
			 KVM_TSC_BAD_FILE);
	assert_non_null(strstr(err.msg, "frac-bits"));
	/* A ratio without its frac-bits. */
	make_vcpu(t->kvm, "8-1", 0, "5", "1", "1");
	snprintf(dir, sizeof(dir), "%s/8-1/vcpu0/tsc-scaling-ratio-frac-bits",
		 t->kvm);
	unlink(dir);
	assert_int_equal(kvm_tsc_read_vm(t->root, 8, &v, &err),
			 KVM_TSC_BAD_FILE);
	/* A vcpu without tsc-offset (not x86). */
	snprintf(dir, sizeof(dir), "%s/9-1", t->kvm);
	make_dir(dir);
	snprintf(dir, sizeof(dir), "%s/9-1/vcpu0", t->kvm);
	make_dir(dir);
	assert_int_equal(kvm_tsc_read_vm(t->root, 9, &v, &err),
			 KVM_TSC_BAD_FILE);
	assert_non_null(strstr(err.msg, "tsc-offset"));

	/* Permissions: only testable when not root. */
	if (geteuid() != 0) {
		assert_int_equal(chmod(t->kvm, 0), 0);
		assert_int_equal(kvm_tsc_read_vm(t->root, 5, &v, &err),
				 KVM_TSC_NO_ACCESS);
		assert_int_equal(chmod(t->kvm, 0755), 0);
	}
}

static void test_kvm_tracker(void **state)
{
	(void)state;
	struct kvm_tsc_tracker t;
	struct kvm_vcpu_tsc a = {.vm_pid = 1, .vm_fd = 3, .vcpu = 0,
				 .tsc_offset = -5},
			    b = a;
	b.vcpu = 1;

	kvm_tsc_tracker_init(&t);
	assert_true(kvm_tsc_tracker_changed(&t, &a));
	assert_true(kvm_tsc_tracker_changed(&t, &b));
	assert_false(kvm_tsc_tracker_changed(&t, &a));
	assert_false(kvm_tsc_tracker_changed(&t, &b));
	a.tsc_offset = -6;
	assert_true(kvm_tsc_tracker_changed(&t, &a));
	assert_false(kvm_tsc_tracker_changed(&t, &a));
	b.has_scaling = true;
	b.tsc_scaling_ratio = 1;
	assert_true(kvm_tsc_tracker_changed(&t, &b));
	b.tsc_scaling_frac_bits = 3;
	assert_true(kvm_tsc_tracker_changed(&t, &b));
	/* Another VM fd of the same pid is another vcpu. */
	a.vm_fd = 4;
	assert_true(kvm_tsc_tracker_changed(&t, &a));
	/* Many vcpus: the table grows. */
	for (int i = 0; i < 100; i++) {
		struct kvm_vcpu_tsc c = {.vm_pid = 2, .vcpu = i};
		assert_true(kvm_tsc_tracker_changed(&t, &c));
	}
	kvm_tsc_tracker_reset(&t);
	assert_true(kvm_tsc_tracker_changed(&t, &a));
	kvm_tsc_tracker_free(&t);
}

/* The packets, read back by the merge's scanner and by hand. */
static void test_kvm_packets(void **state)
{
	(void)state;
	struct kvm_vcpu_tsc r = {.vm_pid = 4242, .vm_fd = 12, .vcpu = 3,
				 .tsc_offset = -1234567890123ll,
				 .has_scaling = true,
				 .tsc_scaling_ratio = 1ull << 48,
				 .tsc_scaling_frac_bits = 48};
	struct pb_buf b;
	struct vp_error err;

	pb_buf_init(&b);
	struct sync_scanner *s = sync_scanner_new("test");
	kvm_tsc_encode_track(&b, 4242, 1000, 1);
	assert_int_equal(sync_scan_packet(s, b.data, b.len, 0, &err), 0);
	pb_buf_reset(&b);
	kvm_tsc_encode_event(&b, &r, 5000, 0);
	assert_int_equal(sync_scan_packet(s, b.data, b.len, 0, &err), 0);
	r.has_scaling = false;
	r.tsc_offset = 17;
	pb_buf_reset(&b);
	kvm_tsc_encode_event(&b, &r, 6000, 0);
	assert_int_equal(sync_scan_packet(s, b.data, b.len, 0, &err), 0);

	struct sync_data *d = sync_scanner_data(s);
	assert_int_equal(d->n_kvm, 2);
	assert_int_equal(d->kvm[0].vm_pid, 4242);
	assert_int_equal(d->kvm[0].vcpu, 3);
	assert_true(d->kvm[0].tsc_offset == -1234567890123ll);
	assert_int_equal(d->kvm[0].ratio, 1ull << 48);
	assert_int_equal(d->kvm[0].frac_bits, 48);
	assert_int_equal(d->kvm[0].ts, 5000);
	assert_int_equal(d->kvm[1].tsc_offset, 17);
	assert_int_equal(d->kvm[1].ratio, 0);
	assert_int_equal(d->n_bad_sync_events, 0);
	sync_scanner_free(s);

	/* The event sits on the track the descriptor names. */
	struct pb_reader rd;
	struct pb_field f;
	uint64_t uuid = 0;
	pb_reader_init(&rd, b.data, b.len);
	while (pb_next(&rd, &f))
		if (f.num == 11 && f.wt == PB_WT_LEN) { /* track_event */
			struct pb_reader te;
			struct pb_field g;
			pb_reader_init(&te, f.data, f.len);
			while (pb_next(&te, &g))
				if (g.num == 11) /* track_uuid */
					uuid = g.val;
		}
	assert_int_equal(uuid, kvm_tsc_track_uuid(4242));
	assert_int_not_equal(kvm_tsc_track_uuid(1), kvm_tsc_track_uuid(2));
	pb_buf_free(&b);
}

/* ------------------------------------------------- request handling */

static void test_conn_feed(void **state)
{
	(void)state;
	struct sync_conn *c = malloc(sizeof(*c));
	uint8_t in[256];
	size_t n = 0;

	sync_conn_init(c);
	/* Two requests, garbage between, a reply frame (not for us). */
	n += vp_sync_encode_request(in + n, 7);
	memcpy(in + n, "junkVPS", 7);
	n += 7;
	n += vp_sync_encode_reply(in + n, 1, 2);
	n += vp_sync_encode_request(in + n, 8);
	/* Fed in two pieces: the second request straddles them. */
	assert_int_equal(sync_conn_feed(c, in, n - 5, 1000), 1);
	assert_int_equal(sync_conn_feed(c, in + n - 5, 5, 2000), 1);
	assert_int_equal(c->served, 2);
	assert_int_equal(c->unexpected, 1);
	assert_true(c->dec.skipped_bytes >= 7);
	assert_int_equal(c->out_len, 2 * VP_SYNC_REPLY_SIZE);

	struct vp_sync_decoder d;
	struct vp_sync_msg m;
	bool got;
	vp_sync_decoder_init(&d);
	size_t used = vp_sync_decode(&d, c->out, c->out_len, &m, &got);
	assert_true(got);
	assert_int_equal(m.seq, 7);
	assert_int_equal(m.host_counter, 1000);
	vp_sync_decode(&d, c->out + used, c->out_len - used, &m, &got);
	assert_true(got);
	assert_int_equal(m.seq, 8);
	assert_int_equal(m.host_counter, 2000);

	/* Partly written, then the rest. */
	sync_conn_consumed(c, 10);
	assert_int_equal(sync_conn_room(c), SYNC_CONN_MAX_REPLIES - 2);
	sync_conn_consumed(c, 2 * VP_SYNC_REPLY_SIZE - 10);
	assert_int_equal(c->out_len, 0);
	assert_int_equal(sync_conn_room(c), SYNC_CONN_MAX_REPLIES);

	/* A full queue drops and counts. */
	uint8_t req[VP_SYNC_REQUEST_SIZE];
	vp_sync_encode_request(req, 1);
	for (unsigned i = 0; i < SYNC_CONN_MAX_REPLIES + 5; i++)
		sync_conn_feed(c, req, sizeof(req), i);
	assert_int_equal(sync_conn_room(c), 0);
	assert_int_equal(c->dropped, 5);
	/* Consuming past half compacts the queue. */
	sync_conn_consumed(c, (SYNC_CONN_MAX_REPLIES / 2 + 1) *
				      VP_SYNC_REPLY_SIZE);
	assert_int_equal(c->out_off, 0);
	assert_int_equal(sync_conn_room(c), SYNC_CONN_MAX_REPLIES / 2 + 1);
	free(c);
}

/* --------------------------------------------------- live endpoint */

static void wait_clients(struct sync_endpoint *ep, uint64_t n)
{
	struct sync_endpoint_stats st;
	uint64_t deadline = now_ms() + 10000;
	do {
		sync_endpoint_get_stats(ep, &st);
		if (st.clients >= n)
			return;
		usleep(10000);
	} while (now_ms() < deadline);
	fail_msg("the endpoint never got %llu clients", (unsigned long long)n);
}

static void test_endpoint_unix(void **state)
{
	struct tree *t = *state;
	char path[400];
	struct sync_endpoint *ep;
	struct vp_error err;

	if (!VP_HAVE_CPU_COUNTER) {
		skip();
		return;
	}
	snprintf(path, sizeof(path), "%s/sync.sock", t->root);
	struct sync_endpoint_opts o = {.unix_path = path};
	assert_int_equal(sync_endpoint_start(&o, &ep, &err), 0);

	/* A flooder that never reads its replies. */
	int flood = unix_connect(path);
	fcntl(flood, F_SETFL, O_NONBLOCK);
	uint8_t req[VP_SYNC_REQUEST_SIZE];
	vp_sync_encode_request(req, 1);
	size_t sent = 0;
	for (int i = 0; i < 200000; i++) {
		if (write(flood, req, sizeof(req)) != (ssize_t)sizeof(req))
			break;
		sent++;
	}
	assert_true(sent > SYNC_CONN_MAX_REPLIES);
	/* One that talks garbage, then asks; one that leaves at once. */
	int junk = unix_connect(path);
	assert_int_equal(write(junk, "VPSY\x09garbage!!", 13), 13);
	int gone = unix_connect(path);
	close(gone);
	/* The others are answered all the same, and causally. */
	int good = unix_connect(path);
	for (uint64_t i = 0; i < 200; i++)
		exchange(good, i);
	exchange(junk, 99);
	close(good);
	close(junk);
	close(flood);

	struct sync_endpoint_stats st;
	sync_endpoint_stop(ep, &st);
	assert_true(st.served >= 201);
	assert_int_equal(st.clients, 4);
	assert_true(st.garbage_bytes >= 5);
	/* The socket file is gone. */
	assert_int_equal(access(path, F_OK), -1);

	/* A path that cannot be listened on is an error. */
	struct sync_endpoint_opts bad = {.unix_path = "/nonexistent/dir/s"};
	assert_int_equal(sync_endpoint_start(&bad, &ep, &err), -1);
	assert_non_null(strstr(err.msg, "/nonexistent/dir/s"));
}

/* QEMU's chardev server socket: we play QEMU, drop the connection, and
 * the endpoint comes back. */
static void test_endpoint_chardev_socket(void **state)
{
	struct tree *t = *state;
	char path[400];
	struct sync_endpoint *ep;
	struct vp_error err;

	if (!VP_HAVE_CPU_COUNTER) {
		skip();
		return;
	}
	snprintf(path, sizeof(path), "%s/qemu.sock", t->root);
	/* Not there yet: a warning, retried. */
	struct sync_endpoint_opts o = {.qemu_chardev = path};
	assert_int_equal(sync_endpoint_start(&o, &ep, &err), 0);
	usleep(100000);
	int lfd = vp_sock_listen(path, &err);
	assert_true(lfd >= 0);
	fcntl(lfd, F_SETFL, 0); /* blocking accept */

	for (int round = 0; round < 2; round++) {
		int fd = accept(lfd, NULL, NULL);
		assert_true(fd >= 0);
		/* A stale half frame from before, as on a serial line. */
		assert_int_equal(write(fd, "VPSY\x01", 5), 5);
		for (uint64_t i = 0; i < 20; i++)
			exchange(fd, i);
		close(fd); /* the VM goes away; the endpoint reconnects */
	}
	struct sync_endpoint_stats st;
	sync_endpoint_stop(ep, &st);
	assert_int_equal(st.served, 40);
	assert_true(st.clients >= 2);
	close(lfd);
	vp_sock_unlink(path);
}

/* A pty stands for a character device. */
static void test_endpoint_chardev_pty(void **state)
{
	(void)state;
	struct sync_endpoint *ep;
	struct vp_error err;

	if (!VP_HAVE_CPU_COUNTER) {
		skip();
		return;
	}
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
		printf("SKIP: no pty: %s\n", strerror(errno));
		skip();
		return;
	}
	struct termios tio;
	assert_int_equal(tcgetattr(m, &tio), 0);
	cfmakeraw(&tio);
	assert_int_equal(tcsetattr(m, TCSANOW, &tio), 0);
	struct sync_endpoint_opts o = {.qemu_chardev = ptsname(m)};
	assert_int_equal(sync_endpoint_start(&o, &ep, &err), 0);
	wait_clients(ep, 1);
	usleep(50000); /* the endpoint made its end raw right after open */
	for (uint64_t i = 0; i < 20; i++)
		exchange(m, i);
	struct sync_endpoint_stats st;
	sync_endpoint_stop(ep, &st);
	assert_int_equal(st.served, 20);
	close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_legacy_ok),
		cmocka_unit_test(test_legacy_bad),
		cmocka_unit_test(test_parse_flags),
		cmocka_unit_test(test_ds_config),
		cmocka_unit_test_setup_teardown(test_kvm_read, tree_setup,
						tree_teardown),
		cmocka_unit_test_setup_teardown(test_kvm_errors, tree_setup,
						tree_teardown),
		cmocka_unit_test(test_kvm_tracker),
		cmocka_unit_test(test_kvm_packets),
		cmocka_unit_test(test_conn_feed),
		cmocka_unit_test_setup_teardown(test_endpoint_unix, tree_setup,
						tree_teardown),
		cmocka_unit_test_setup_teardown(test_endpoint_chardev_socket,
						tree_setup, tree_teardown),
		cmocka_unit_test(test_endpoint_chardev_pty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
