/*
 * out_file.h - output files that never clobber an input and never leave
 * half a result.  Every command that writes a file writes it through this.
 *
 * An output is written aside, to "DIR/.NAME.vperfetto-tmp.PID" next to the
 * destination DIR/NAME, and only vp_out_commit() puts it in place: it
 * checks every write, fsyncs, then renames (the disk writes are started
 * every few MiB as the file is written, so the fsync has little left to
 * wait for).  Until then the destination is
 * untouched; vp_out_abort() (or any failure) removes the temporary file.
 * Several outputs of one run are committed together: all of them appear,
 * or (when a rename fails half-way) the ones already renamed are rolled
 * back to the files that were there before.
 *
 * The temporary names say what they are and whose they are: a run killed
 * with SIGKILL leaves ".NAME.vperfetto-tmp.PID", and the next open of the
 * same destination removes those whose PID is no longer running.
 *
 * Temporary files are kept in a fixed table that a signal handler may walk
 * (vp_out_signals): SIGINT/SIGTERM/SIGHUP remove them and end the process
 * with 128 + the signal, unless the program asked to see the first signal
 * itself (to stop cleanly), in which case only the next one does that.
 * The other signals that end a process without a core (SIGPIPE, SIGALRM,
 * SIGUSR1/2, SIGVTALRM, SIGPROF, SIGXCPU) remove them and end it at once;
 * SIGXFSZ is ignored, so that a write past `ulimit -f` fails (EFBIG) and
 * is reported like any other failed write.
 *
 * A destination that exists and is not a regular file (a FIFO, a
 * character device such as /dev/null) is written directly: it cannot be
 * replaced atomically and must not be replaced at all.  A destination
 * that is a symbolic link is written through it (the link stays).
 */
#ifndef VP_OUT_FILE_H
#define VP_OUT_FILE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vp_error.h"

struct vp_out;

/* Refuses (-1, err names both) when the output path names the same file
 * as one of the inputs: same device and inode, so another spelling, a
 * symbolic link or a hard link is caught too.  Inputs that cannot be
 * stat'ed (NULL, missing) are skipped; an output that does not exist yet
 * cannot be an input.  what: how the command line calls the output
 * ("-o", "--report"), used in the message. */
int vp_out_check_inputs(const char *what, const char *out,
			const char *const *inputs, size_t n_inputs,
			struct vp_error *err);

/* Refuses (-1) when two outputs of one run name the same file (same
 * inode if it exists, else the same directory and name). */
int vp_out_check_distinct(const char *what_a, const char *a,
			  const char *what_b, const char *b,
			  struct vp_error *err);

/* Creates the temporary file for path and registers it for removal on a
 * signal.  Its mode is the existing destination's, else 0666 & ~umask.
 * Removes stale temporaries of path left by dead processes first.
 * VP_OUT_DIRECT writes the destination itself (created or truncated), for
 * a file another process goes on writing after this one exits; it is not
 * atomic, and abort removes it only if this run created it. */
#define VP_OUT_DIRECT 1u
int vp_out_open(struct vp_out **out, const char *path, unsigned flags,
		struct vp_error *err);

/* The file written aside is then made durable every few MiB (started
 * and synced) by a thread of o's own, so that the writer neither waits
 * for the writeback nor, at the commit, for a disk's write cache to
 * empty all of it (a program that writes much and has time for nothing
 * else: the merge).  Without it, the writer only starts the writeback. */
void vp_out_flush_behind(struct vp_out *o);

/* The descriptor to write to (or to hand to another process). */
int vp_out_fd(const struct vp_out *o);
/* The destination and the file being written (the temporary, or the
 * destination itself when written directly). */
const char *vp_out_path(const struct vp_out *o);
const char *vp_out_temp_path(const struct vp_out *o);

/* Writes all of p; on failure err says "PATH: cannot write: REASON"
 * (ENOSPC, EIO, ...) and the output is poisoned: commit fails. */
int vp_out_write(struct vp_out *o, const void *p, size_t len,
		 struct vp_error *err);
struct iovec;
/* The same for n pieces, one after another (writev: no copy into one). */
int vp_out_writev(struct vp_out *o, const struct iovec *iov, int n,
		  struct vp_error *err);

/* fsync, close, rename into place, fsync the directory; frees o in all
 * cases.  On failure the temporary is removed and the destination is as
 * it was. */
int vp_out_commit(struct vp_out *o, struct vp_error *err);

/* The same for several outputs at once: all are synced before any is
 * renamed; if a rename fails, the ones done are rolled back (the old
 * files restored, new ones removed).  Frees every output; NULL entries
 * are skipped. */
int vp_out_commit_all(struct vp_out **outs, size_t n, struct vp_error *err);

/* Removes the temporary file (or, when writing directly into a file this
 * run created, that file) and frees o.  NULL is fine. */
void vp_out_abort(struct vp_out *o);

/* Signal handling for commands that write outputs.
 *
 * cooperative false: SIGINT, SIGTERM and SIGHUP remove every registered
 *   temporary and _exit(128 + signal) at once.
 * cooperative true: the first such signal is only counted (the program
 *   polls vp_out_signal_count() and stops cleanly); a second one acts as
 *   above.
 * Either way the other terminating signals (see the top of this file)
 * remove the temporaries and _exit(128 + signal) at once (SIGPIPE with no
 * message), and SIGXFSZ is ignored.  A program that would rather see
 * EPIPE sets SIGPIPE to SIG_IGN after this call.
 * Returns the counter, for code that takes a volatile sig_atomic_t *.
 * While vp_out_commit*() renames, signals wait until it is done. */
volatile sig_atomic_t *vp_out_signals(bool cooperative);
int vp_out_signal_count(void);

/* Async-signal-safe: unlinks every registered temporary file. */
void vp_out_cleanup_all(void);

#endif
