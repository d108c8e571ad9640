/*
 * record_proc.h - the processes vperfetto_record runs: finding our other
 * programs, starting them with their output in a log file, and stopping
 * them within a bounded time.
 */
#ifndef HOST_RECORD_PROC_H
#define HOST_RECORD_PROC_H

#include <stdbool.h>
#include <sys/types.h>

#include "vp_error.h"

/* Finds program `name` (e.g. "vtraced"): in $VPERFETTO_BIN_DIR, beside
 * our own executable, at its place in a build tree (build_subdir, relative
 * to the build root, e.g. "service"), then on $PATH.  Writes the
 * path into out.  0, or -1 with a message naming where it looked. */
int record_find_program(const char *name, const char *build_subdir,
			char *out, size_t out_len, struct vp_error *err);

/* Starts argv[0] with stdin from /dev/null and stdout and stderr appended
 * to log_path, in its own process group so a terminal's Ctrl-C reaches
 * only us.  Returns the pid, or -1 with a message. */
pid_t record_spawn(char *const argv[], const char *log_path,
		   struct vp_error *err);

/* Sends sig to pid, waits up to timeout_ms for it to exit, then SIGKILL.
 * *status gets the wait status (may be NULL).  Returns 0 when it exited
 * by itself after sig, 1 when it had to be killed, -1 if pid was not our
 * child. */
int record_stop(pid_t pid, int sig, int timeout_ms, int *status);

/* True while pid (our child) has not exited; reaps it if it has, and
 * stores its wait status in *status (may be NULL). */
bool record_alive(pid_t pid, int *status);

/* Waits up to timeout_ms for a service to accept connections on the
 * UNIX socket at path (a connection is made and closed: the file alone
 * exists from bind(), before listen(), and a client that came in
 * between was refused).  0 or -1. */
int record_wait_socket(const char *path, int timeout_ms);

/* The last line of a log file, for error messages ("" if none). */
void record_log_tail(const char *path, char *out, size_t out_len);

#endif
