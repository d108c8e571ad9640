/*
 * test_out_file.c - outputs written aside (base/out_file.h): inputs
 * refused by inode, several outputs committed together or rolled back,
 * write errors that poison the commit, devices never replaced, stale
 * temporaries of dead processes removed and live ones kept, writeback
 * started by a thread of the output's own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "out_file.h"

static char dir[] = "/tmp/vp_test_out_file.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *path_of(const char *name)
{
	static char bufs[4][512];
	static int k;
	char *b = bufs[k++ % 4];
	snprintf(b, 512, "%s/%s", dir, name);
	return b;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *get(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* Files in dir whose name contains "vperfetto-tmp". */
static int temps(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL)
		n += strstr(e->d_name, "vperfetto-tmp") != NULL;
	closedir(d);
	return n;
}

static void test_inputs_by_inode(void **state)
{
	(void)state;
	struct vp_error err;
	char in[512];
	snprintf(in, sizeof(in), "%s", path_of("in.pb"));
	put(in, "input");
	symlink("in.pb", path_of("sym.pb"));
	link(in, path_of("hard.pb"));
	mkdir(path_of("sub"), 0755);
	const char *inputs[] = {NULL, "/nonexistent", in};

	assert_int_equal(vp_out_check_inputs("-o", in, inputs, 3, &err), -1);
	assert_non_null(strstr(err.msg, "names the input"));
	assert_int_equal(vp_out_check_inputs("-o", path_of("sym.pb"), inputs, 3,
					     &err), -1);
	assert_int_equal(vp_out_check_inputs("-o", path_of("hard.pb"), inputs,
					     3, &err), -1);
	assert_int_equal(vp_out_check_inputs("-o", path_of("sub/../in.pb"),
					     inputs, 3, &err), -1);
	assert_int_equal(vp_out_check_inputs("-o", path_of("new.pb"), inputs, 3,
					     &err), 0);
	assert_int_equal(vp_out_check_distinct("-o", path_of("new.pb"), "-r",
					       path_of("sub/../new.pb"), &err),
			 -1);
	assert_int_equal(vp_out_check_distinct("-o", path_of("a.pb"), "-r",
					       path_of("b.pb"), &err), 0);
	assert_string_equal(get(in), "input");
}

static void test_commit_keeps_mode(void **state)
{
	(void)state;
	struct vp_error err;
	struct vp_out *o;
	char *p = path_of("private.pb");
	put(p, "old");
	chmod(p, 0600);
	assert_int_equal(vp_out_open(&o, p, 0, &err), 0);
	assert_string_equal(get(p), "old"); /* untouched until commit */
	assert_int_equal(vp_out_write(o, "new", 3, &err), 0);
	assert_int_equal(vp_out_commit(o, &err), 0);
	assert_string_equal(get(p), "new");
	struct stat st;
	stat(p, &st);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(temps(), 0);
}

/* The second rename fails (its destination became a directory): the
 * first output is rolled back to the file that was there, and a new one
 * is removed. */
static void test_commit_all_rolls_back(void **state)
{
	(void)state;
	struct vp_error err;
	for (int existed = 0; existed < 2; existed++) {
		char *a = path_of("a.pb"), *b = path_of("b.json");
		unlink(a);
		if (existed)
			put(a, "old-a");
		struct vp_out *outs[2];
		assert_int_equal(vp_out_open(&outs[0], a, 0, &err), 0);
		assert_int_equal(vp_out_open(&outs[1], b, 0, &err), 0);
		assert_int_equal(vp_out_write(outs[0], "new-a", 5, &err), 0);
		assert_int_equal(vp_out_write(outs[1], "new-b", 5, &err), 0);
		mkdir(b, 0755);
		put(path_of("b.json/x"), "x");
		assert_int_equal(vp_out_commit_all(outs, 2, &err), -1);
		assert_non_null(strstr(err.msg, "b.json"));
		if (existed)
			assert_string_equal(get(a), "old-a");
		else
			assert_int_equal(access(a, F_OK), -1);
		assert_int_equal(temps(), 0);
		unlink(path_of("b.json/x"));
		rmdir(b);
	}
}

static void test_write_error_poisons(void **state)
{
	(void)state;
	struct vp_error err;
	struct vp_out *o;
	struct stat before, after;

	/* A device is written as it is and never replaced. */
	if (stat("/dev/full", &before) != 0)
		skip();
	assert_int_equal(vp_out_open(&o, "/dev/full", 0, &err), 0);
	assert_int_equal(vp_out_write(o, "x", 1, &err), -1);
	assert_non_null(strstr(err.msg, "/dev/full: cannot write: No space"));
	assert_int_equal(vp_out_commit(o, &err), -1);
	assert_int_equal(stat("/dev/full", &after), 0);
	assert_true(S_ISCHR(after.st_mode));
	assert_int_equal(before.st_ino, after.st_ino);
}

/* Pieces written with one writev, more than a call takes, empty ones
 * among them: the file holds them in order. */
static void test_writev_pieces(void **state)
{
	(void)state;
	struct vp_error err;
	struct vp_out *o;
	static uint8_t data[300 * 301];
	struct iovec iov[300];
	size_t at = 0;

	for (int i = 0; i < 300; i++) {
		size_t len = i % 7 == 0 ? 0 : (size_t)i;
		memset(data + at, i & 0xff, len);
		iov[i] = (struct iovec){data + at, len};
		at += len;
	}
	const char *path = path_of("writev.bin");
	assert_int_equal(vp_out_open(&o, path, 0, &err), 0);
	assert_int_equal(vp_out_writev(o, iov, 300, &err), 0);
	assert_int_equal(vp_out_commit(o, &err), 0);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static uint8_t back[sizeof(data)];
	assert_int_equal(fread(back, 1, sizeof(back), f), at);
	fclose(f);
	assert_memory_equal(back, data, at);

	/* on a full device, the error and a poisoned output */
	struct stat st;
	if (stat("/dev/full", &st) != 0)
		return;
	assert_int_equal(vp_out_open(&o, "/dev/full", 0, &err), 0);
	assert_int_equal(vp_out_writev(o, iov, 300, &err), -1);
	assert_non_null(strstr(err.msg, "/dev/full: cannot write: No space"));
	assert_int_equal(vp_out_commit(o, &err), -1);
}

/* With writeback started by a thread of the output's own: the bytes all
 * there after the commit, and after an abort no temporary and no thread
 * left (the abort waits for it). */
static void test_flush_behind(void **state)
{
	(void)state;
	struct vp_error err;
	struct vp_out *o;
	static uint8_t chunk[1 << 20];
	const int n = 40;

	const char *path = path_of("behind.bin");
	assert_int_equal(vp_out_open(&o, path, 0, &err), 0);
	vp_out_flush_behind(o);
	for (int i = 0; i < n; i++) {
		memset(chunk, i, sizeof(chunk));
		assert_int_equal(vp_out_write(o, chunk, sizeof(chunk), &err), 0);
	}
	assert_int_equal(vp_out_commit(o, &err), 0);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	for (int i = 0; i < n; i++) {
		assert_int_equal(fread(chunk, 1, sizeof(chunk), f), sizeof(chunk));
		assert_int_equal(chunk[0], i);
		assert_int_equal(chunk[sizeof(chunk) - 1], i);
	}
	assert_int_equal(fgetc(f), EOF);
	fclose(f);

	assert_int_equal(vp_out_open(&o, path_of("gone.bin"), 0, &err), 0);
	vp_out_flush_behind(o);
	for (int i = 0; i < n; i++)
		assert_int_equal(vp_out_write(o, chunk, sizeof(chunk), &err), 0);
	vp_out_abort(o);
	assert_int_equal(temps(), 0);
	assert_null(get(path_of("gone.bin")));
}

static void test_stale_temporaries(void **state)
{
	(void)state;
	struct vp_error err;
	struct vp_out *o;
	char name[128];

	/* A dead process's leftover. */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	snprintf(name, sizeof(name), ".t.pb.vperfetto-tmp.%d", (int)child);
	put(path_of(name), "stale");
	char dead[512];
	snprintf(dead, sizeof(dead), "%s", path_of(name));
	/* A live one (our parent) and a name that is not ours. */
	snprintf(name, sizeof(name), ".t.pb.vperfetto-tmp.%d", (int)getppid());
	put(path_of(name), "live");
	char live[512];
	snprintf(live, sizeof(live), "%s", path_of(name));
	put(path_of(".t.pb.vperfetto-tmp.x1"), "other");

	assert_int_equal(vp_out_open(&o, path_of("t.pb"), 0, &err), 0);
	assert_int_equal(access(dead, F_OK), -1);
	assert_int_equal(access(live, F_OK), 0);
	assert_int_equal(access(path_of(".t.pb.vperfetto-tmp.x1"), F_OK), 0);
	/* The same destination twice in one run is refused. */
	struct vp_out *o2;
	assert_int_equal(vp_out_open(&o2, path_of("t.pb"), 0, &err), -1);
	vp_out_abort(o);
	assert_int_equal(access(path_of("t.pb"), F_OK), -1);
	unlink(live);
	unlink(path_of(".t.pb.vperfetto-tmp.x1"));
	assert_int_equal(temps(), 0);
}

static void test_directory_refused(void **state)
{
	(void)state;
	struct vp_error err;
	struct vp_out *o;
	mkdir(path_of("d"), 0755);
	assert_int_equal(vp_out_open(&o, path_of("d"), 0, &err), -1);
	assert_non_null(strstr(err.msg, "Is a directory"));
}

/* A signal removes the registered temporaries and exits 128 + N. */
static void test_signal_cleanup(void **state)
{
	(void)state;
	pid_t child = fork();
	if (child == 0) {
		struct vp_error err;
		struct vp_out *o;
		vp_out_signals(false);
		if (vp_out_open(&o, path_of("sig.pb"), 0, &err) < 0)
			_exit(1);
		raise(SIGTERM);
		_exit(2);
	}
	int st;
	waitpid(child, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 128 + SIGTERM);
	assert_int_equal(temps(), 0);
	assert_int_equal(access(path_of("sig.pb"), F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inputs_by_inode),
		cmocka_unit_test(test_commit_keeps_mode),
		cmocka_unit_test(test_commit_all_rolls_back),
		cmocka_unit_test(test_write_error_poisons),
		cmocka_unit_test(test_writev_pieces),
		cmocka_unit_test(test_flush_behind),
		cmocka_unit_test(test_stale_temporaries),
		cmocka_unit_test(test_directory_refused),
		cmocka_unit_test(test_signal_cleanup),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
