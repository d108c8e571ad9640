/*
 * test_vcpu_threads.c - finding a VM's vCPU threads (host/vcpu_threads.c):
 * thread names in a fake /proc tree, QMP query-cpus-fast replies (parsed,
 * and asked of a fake QEMU monitor), and the vcpu_map events read back by
 * vperfetto_tp into its vcpu table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "perfetto_fields.h"
#include "tp_load.h"
#include "tp_query.h"
#include "vcpu_threads.h"

static void test_names(void **state)
{
	(void)state;
	assert_int_equal(vcpu_index_from_name("CPU 0/KVM"), 0);
	assert_int_equal(vcpu_index_from_name("CPU 15/TCG"), 15);
	assert_int_equal(vcpu_index_from_name("crosvm_vcpu2"), 2);
	assert_int_equal(vcpu_index_from_name("crosvm_vcpu 4"), 4);
	assert_int_equal(vcpu_index_from_name("CPU 0/KVM "), -1);
	assert_int_equal(vcpu_index_from_name("ALL CPUs/TCG"), -1);
	assert_int_equal(vcpu_index_from_name("qemu-system-x86"), -1);
	assert_int_equal(vcpu_index_from_name("crosvm_vcpu"), -1);
	assert_int_equal(vcpu_index_from_name(NULL), -1);
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A fake /proc: process 1234 with a main thread, two vCPU threads (named
 * out of order) and an I/O thread. */
static void test_proc_tree(void **state)
{
	(void)state;
	char root[] = "/tmp/vcpu_threads.XXXXXX", p[512];
	const char *names[] = {"qemu-system-x86", "CPU 1/KVM", "CPU 0/KVM",
			       "IO mon_iothread"};
	struct vcpu_thread t[8];
	struct vp_error err;

	assert_non_null(mkdtemp(root));
	snprintf(p, sizeof(p), "%s/1234", root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/1234/task", root);
	assert_int_equal(mkdir(p, 0755), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/1234/task/%d", root, 1234 + i);
		assert_int_equal(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/1234/task/%d/comm", root, 1234 + i);
		char line[64];
		snprintf(line, sizeof(line), "%s\n", names[i]);
		put_file(p, line);
	}
	snprintf(p, sizeof(p), "%s/1235", root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/1235/status", root);
	put_file(p, "Name:\tCPU 1/KVM\nUmask:\t0022\nState:\tR\nTgid:\t1234\n"
		    "Ngid:\t0\nPid:\t1235\n");

	assert_int_equal(vcpu_threads_from_names(root, 1234, t, 8, &err), 2);
	assert_int_equal(t[0].vcpu, 0);
	assert_int_equal(t[0].tid, 1236);
	assert_int_equal(t[1].vcpu, 1);
	assert_int_equal(t[1].tid, 1235);
	assert_int_equal(vcpu_thread_tgid(root, 1235), 1234);
	assert_int_equal(vcpu_thread_tgid(root, 999), -1);
	assert_int_equal(vcpu_threads_from_names(root, 999, t, 8, &err), -1);
	assert_non_null(strstr(err.msg, "999/task"));

	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

/* As QEMU 7.2 answers for two vCPUs under TCG; "props" has a thread-id of
 * its own (the topology's), which is not the host thread. */
static const char qmp_reply[] =
	"{\"return\": [{\"thread-id\": 4242, \"props\": {\"core-id\": 0, "
	"\"thread-id\": 0, \"socket-id\": 0}, \"qom-path\": "
	"\"/machine/unattached/device[0]\", \"cpu-index\": 0, \"target\": "
	"\"x86_64\"}, {\"thread-id\": 4243, \"props\": {\"core-id\": 0, "
	"\"thread-id\": 0, \"socket-id\": 1}, \"qom-path\": "
	"\"/machine/unattached/device[1]\", \"cpu-index\": 1, \"target\": "
	"\"x86_64\"}]}\r\n";

static void test_qmp_parse(void **state)
{
	(void)state;
	struct vcpu_thread t[8];

	assert_int_equal(vcpu_threads_parse_qmp(qmp_reply, strlen(qmp_reply),
						t, 8), 2);
	assert_int_equal(t[0].vcpu, 0);
	assert_int_equal(t[0].tid, 4242);
	assert_int_equal(t[1].vcpu, 1);
	assert_int_equal(t[1].tid, 4243);
	/* at most max */
	assert_int_equal(vcpu_threads_parse_qmp(qmp_reply, strlen(qmp_reply),
						t, 1), 1);
	const char *bad[] = {
		"{\"error\": {\"class\": \"CommandNotFound\"}}",
		"{\"return\": [{\"thread-id\": 1, \"cpu-index\": 0}",
		"{\"return\": [{\"thread-id\": 1, \"cpu-index\": 0}]}}",
		"{\"return\": \"x",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(vcpu_threads_parse_qmp(bad[i], strlen(bad[i]),
							t, 8), -1);
	/* A thread id past any tid (found by the fuzzer) is none. */
	const char *huge = "{\"return\": [{\"cpu-index\": 0, "
			   "\"thread-id\": 99999999999}]}";
	assert_int_equal(vcpu_threads_parse_qmp(huge, strlen(huge), t, 8), 0);
	/* An element without a thread id is no vCPU. */
	const char *partial = "{\"return\": [{\"cpu-index\": 0}]}";
	assert_int_equal(vcpu_threads_parse_qmp(partial, strlen(partial), t,
						8), 0);
}

/* A fake QEMU monitor: greeting, capabilities, an event in between, then
 * the query-cpus-fast reply split over two writes. */
struct fake_qmp {
	int lfd;
	bool saw_caps, saw_query;
};

static bool read_cmd(int fd, const char *want)
{
	char buf[256];
	size_t n = 0;
	while (n < sizeof(buf) - 1) {
		ssize_t r = read(fd, buf + n, 1);
		if (r <= 0)
			return false;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
	return strstr(buf, want) != NULL;
}

static void *fake_qmp_main(void *arg)
{
	struct fake_qmp *f = arg;
	int fd = accept(f->lfd, NULL, NULL);
	static const char greet[] =
		"{\"QMP\": {\"version\": {\"qemu\": {\"major\": 7}}, "
		"\"capabilities\": [\"oob\"]}}\r\n";
	static const char ev[] =
		"{\"timestamp\": {\"seconds\": 1}, \"event\": \"RESUME\"}\r\n";
	size_t half = sizeof(qmp_reply) / 2;

	if (fd < 0)
		return NULL;
	if (write(fd, greet, strlen(greet)) < 0)
		goto out;
	f->saw_caps = read_cmd(fd, "qmp_capabilities");
	if (write(fd, "{\"return\": {}}\r\n", 16) < 0)
		goto out;
	f->saw_query = read_cmd(fd, "query-cpus-fast");
	if (write(fd, ev, strlen(ev)) < 0 || write(fd, qmp_reply, half) < 0)
		goto out;
	usleep(20000);
	if (write(fd, qmp_reply + half, strlen(qmp_reply) - half) < 0)
		goto out;
out:
	close(fd);
	return NULL;
}

static void test_qmp_socket(void **state)
{
	(void)state;
	char dir[] = "/tmp/vcpu_qmp.XXXXXX", path[128];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct fake_qmp f = {0};
	struct vcpu_thread t[8];
	struct vp_error err;
	pthread_t th;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/qmp.sock", dir);
	strcpy(sa.sun_path, path);
	f.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(f.lfd >= 0);
	assert_int_equal(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f.lfd, 1), 0);
	assert_int_equal(pthread_create(&th, NULL, fake_qmp_main, &f), 0);
	int n = vcpu_threads_from_qmp(path, 2000, t, 8, &err);
	pthread_join(th, NULL);
	assert_int_equal(n, 2);
	assert_true(f.saw_caps);
	assert_true(f.saw_query);
	assert_int_equal(t[1].tid, 4243);

	/* Nobody answers: a bounded wait and a message. */
	assert_int_equal(vcpu_threads_from_qmp(path, 100, t, 8, &err), -1);
	assert_non_null(strstr(err.msg, "no answer"));
	close(f.lfd);
	unlink(path);
	assert_int_equal(vcpu_threads_from_qmp(path, 100, t, 8, &err), -1);
	rmdir(dir);
}

/* The events as the host clock producer writes them, read back by
 * vperfetto_tp (the VM placed on machine 1 by the caller). */
static void test_events_in_tp(void **state)
{
	(void)state;
	struct pb_buf trace, pkt;
	struct vcpu_thread t[2] = {{0, 4242}, {1, 4243}};
	struct tp_vcpu_assign a = {.n = 1, .vmm_pid = {4241}, .machine = {1}};
	struct tp_load_opts o = {.quiet = true, .vcpu_assign = &a};
	struct vp_error err;

	pb_buf_init(&trace);
	pb_buf_init(&pkt);
	vcpu_map_encode_track(&pkt, 4241, 1000);
	pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID, 5);
	pb_put_bytes(&trace, 1, pkt.data, pkt.len);
	for (int i = 0; i < 2; i++) {
		pb_buf_reset(&pkt);
		vcpu_map_encode_event(&pkt, i ? NULL : "vm1", 4241, &t[i], "qmp",
				      1000 + (uint64_t)i);
		pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID, 5);
		pb_put_bytes(&trace, 1, pkt.data, pkt.len);
	}
	struct tp_ctx *ctx = tp_ctx_new();
	assert_int_equal(tp_load_buffer(ctx, trace.data, trace.len, &o), 0);
	sqlite3 *db = tp_query_open(ctx, &err);
	assert_non_null(db);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db,
		"select group_concat(machine_id || ':' || cpu || ':' || tid"
		" || ':' || vmm_pid || ':' || ifnull(vm, '-') || ':' || source,"
		" ' ') from (select * from vcpu order by cpu)", -1, &st, NULL),
		SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0),
			    "1:0:4242:4241:vm1:qmp 1:1:4243:4241:-:qmp");
	sqlite3_finalize(st);
	tp_query_close(db);
	tp_ctx_free(ctx);
	pb_buf_free(&pkt);
	pb_buf_free(&trace);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_proc_tree),
		cmocka_unit_test(test_qmp_parse),
		cmocka_unit_test(test_qmp_socket),
		cmocka_unit_test(test_events_in_tp),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
