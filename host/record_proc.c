/*
 * record_proc.c - finding, starting and stopping the programs of a
 * vperfetto_record run.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "record_proc.h"
#include "ipc_sock.h"

static bool executable(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

/* dir + "/" + name into out if that is an executable file. */
static bool try_path(char *out, size_t out_len, const char *dir,
		     const char *name)
{
	int n = snprintf(out, out_len, "%s/%s", dir, name);
	return n > 0 && (size_t)n < out_len && executable(out);
}

int record_find_program(const char *name, const char *build_subdir,
			char *out, size_t out_len, struct vp_error *err)
{
	const char *env = getenv("VPERFETTO_BIN_DIR");
	if (env && *env && try_path(out, out_len, env, name))
		return 0;

	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			if (try_path(out, out_len, self, name))
				return 0;
			/* In a build tree we live in <root>/host. */
			char alt[PATH_MAX];
			int m = snprintf(alt, sizeof(alt), "%s/../%s", self,
					 build_subdir);
			if (m > 0 && (size_t)m < sizeof(alt) &&
			    try_path(out, out_len, alt, name))
				return 0;
		}
	}

	const char *path = getenv("PATH");
	if (path) {
		char *copy = strdup(path), *save = NULL;
		for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d;
		     d = strtok_r(NULL, ":", &save)) {
			if (try_path(out, out_len, d, name)) {
				free(copy);
				return 0;
			}
		}
		free(copy);
	}
	return vp_errorf(err, "cannot find %s (looked in $VPERFETTO_BIN_DIR, "
			 "beside vperfetto_record, in the build tree's %s/ "
			 "and on $PATH)", name, build_subdir);
}

pid_t record_spawn(char *const argv[], const char *log_path,
		   struct vp_error *err)
{
	int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
		       0644);
	if (log < 0) {
		vp_errorf(err, "%s: %s", log_path, strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		vp_errorf(err, "fork: %s", strerror(errno));
		close(log);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0)
			dup2(null, STDIN_FILENO);
		dup2(log, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		setpgid(0, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], argv);
		/* The child's final error (exit 127), not a log line: it
		 * lands in the program's log, whose tail the run's own
		 * error message quotes. */
		fprintf(stderr, "vperfetto_record: exec %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	close(log);
	return pid;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

bool record_alive(pid_t pid, int *status)
{
	int st;
	pid_t r = waitpid(pid, &st, WNOHANG);
	if (r == 0)
		return true;
	if (r == pid && status)
		*status = st;
	return false;
}

int record_stop(pid_t pid, int sig, int timeout_ms, int *status)
{
	int st = 0;
	if (pid <= 0)
		return -1;
	if (!record_alive(pid, &st)) {
		if (status)
			*status = st;
		return 0;
	}
	kill(pid, sig);
	for (int waited = 0; waited < timeout_ms; waited += 20) {
		if (!record_alive(pid, &st)) {
			if (status)
				*status = st;
			return 0;
		}
		sleep_ms(20);
	}
	kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (status)
		*status = st;
	return 1;
}

int record_wait_socket(const char *path, int timeout_ms)
{
	struct stat st;
	for (int waited = 0; waited <= timeout_ms; waited += 20) {
		struct vp_error err;
		int fd;
		if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
		    (fd = vp_sock_connect(path, 100, &err)) >= 0) {
			close(fd);
			return 0;
		}
		sleep_ms(20);
	}
	return -1;
}

void record_log_tail(const char *path, char *out, size_t out_len)
{
	char buf[4096];
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(buf, sizeof(buf), f))
		if (buf[0] != '\n')
			snprintf(out, out_len, "%s", buf);
	fclose(f);
	size_t n = strlen(out);
	if (n && out[n - 1] == '\n')
		out[n - 1] = 0;
}
