/*
 * test_host_libvirt.c - unit tests of host/libvirt_domain.c: the lookup
 * through libvirt's built-in test driver (test:///default has a running
 * domain "test", which has no QEMU process), the pid file, and the search
 * of a fake /proc for the QEMU command line with the domain's uuid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libvirt_domain.h"

static char root[256];

static void write_bytes(const char *path, const char *p, size_t len)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, len, f), len);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "%s/host_libvirt.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_test_driver(void **state)
{
	(void)state;
	struct vp_error err;
	pid_t pid = 0;

	/* The domain exists and runs, but under the test driver. */
	assert_int_equal(libvirt_domain_pid("test:///default", "test", &pid,
					    &err),
			 -1);
	printf("# %s\n", err.msg);
	assert_non_null(strstr(err.msg, "test:///default"));
	assert_non_null(strstr(err.msg, "\"test\""));
	assert_non_null(strstr(err.msg, "no QEMU process"));
	assert_non_null(strcasestr(err.msg, "test driver"));

	assert_int_equal(libvirt_domain_pid("test:///default", "nosuch", &pid,
					    &err),
			 -1);
	printf("# %s\n", err.msg);
	assert_non_null(strstr(err.msg, "no domain \"nosuch\""));

	assert_int_equal(libvirt_domain_pid("bogus+scheme:///x", "test", &pid,
					    &err),
			 -1);
	printf("# %s\n", err.msg);
	assert_non_null(strstr(err.msg, "cannot connect"));
}

static void test_pid_file(void **state)
{
	(void)state;
	struct vp_error err;
	char path[400];
	pid_t pid = 0;

	snprintf(path, sizeof(path), "%s/vm.pid", root);
	write_bytes(path, "4321\n", 5);
	assert_int_equal(libvirt_read_pid_file(path, &pid, &err), 0);
	assert_int_equal(pid, 4321);
	write_bytes(path, "4321", 4);
	assert_int_equal(libvirt_read_pid_file(path, &pid, &err), 0);
	static const char *const bad[] = {"", "abc", "12a", "-5", "0",
					  "99999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		write_bytes(path, bad[i], strlen(bad[i]));
		assert_int_equal(libvirt_read_pid_file(path, &pid, &err), -1);
		assert_non_null(strstr(err.msg, "vm.pid"));
	}
	snprintf(path, sizeof(path), "%s/missing.pid", root);
	assert_int_equal(libvirt_read_pid_file(path, &pid, &err), -1);
	assert_non_null(strstr(err.msg, "missing.pid"));
}

static void make_proc(const char *pid, const char *argv, size_t len)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/proc", root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/proc/%s", root, pid);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/proc/%s/cmdline", root, pid);
	write_bytes(path, argv, len);
}

#define ARGV(s) s, sizeof(s) - 1

static void test_find_by_uuid(void **state)
{
	(void)state;
	struct vp_error err;
	char proc[400];
	pid_t pid = 0;
	const char *uuid = "6695eb01-f6a4-8304-79aa-97f2502e193f";

	make_proc("100", ARGV("bash\0-c\0echo -uuid\0"));
	make_proc("200", ARGV("/usr/bin/qemu-system-x86_64\0-name\0guest=vm1,"
			      "debug-threads=on\0-uuid\0"
			      "6695EB01-F6A4-8304-79AA-97F2502E193F\0-m\0"
			      "1024\0"));
	make_proc("300", ARGV("/usr/bin/qemu-system-x86_64\0-uuid\0"
			      "00000000-0000-0000-0000-000000000001\0"));
	make_proc("self", ARGV("x\0-uuid\0"
			       "6695eb01-f6a4-8304-79aa-97f2502e193f\0"));
	make_proc("400", ARGV("")); /* a kernel thread */
	snprintf(proc, sizeof(proc), "%s/proc", root);

	assert_int_equal(libvirt_find_qemu_by_uuid(proc, uuid, &pid, &err), 0);
	assert_int_equal(pid, 200);
	/* "-uuid" as the last argument, and a uuid nobody has. */
	make_proc("500", ARGV("qemu\0-uuid"));
	assert_int_equal(libvirt_find_qemu_by_uuid(
				 proc, "11111111-0000-0000-0000-000000000000",
				 &pid, &err),
			 -1);
	assert_non_null(strstr(err.msg, "11111111"));
	assert_int_equal(libvirt_find_qemu_by_uuid("/nonexistent", uuid, &pid,
						   &err),
			 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_test_driver),
		cmocka_unit_test(test_pid_file),
		cmocka_unit_test(test_find_by_uuid),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
