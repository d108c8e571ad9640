/*
 * vp_log.h - one logging facility for every program and library of
 * vperfetto.
 *
 * Messages go to stderr as "PROGRAM: LEVEL: text".  Which levels print is
 * one setting per process:
 *   - programs start at VP_LOG_WARN; each -v on their command line raises
 *     it one step (vp_log_verbose);
 *   - libvperfetto, inside someone else's program, is silent (VP_LOG_NONE)
 *     unless asked;
 *   - the environment variable VPERFETTO_LOG (none, error, warn, info,
 *     debug) overrides both, for a program or an application alike.
 * Errors that end a command are not log messages: a program prints them
 * itself (with the file and offset a vp_error carries) and exits non-zero;
 * so is its usage text.  Everything else a program or library says on
 * stderr goes through here, at one of these levels:
 *   - error: something failed and its work is lost (a session without
 *     snapshots, a client refused), but the program goes on;
 *   - warn: the program goes on with less than was asked (no kvm_tsc
 *     records for a VM, a host that does not answer, garbage skipped),
 *     and, at the same level, the end of such a condition ("... again"),
 *     so that whoever reads the warnings knows it is over;
 *   - info: what the program does: sessions, connections, requests, the
 *     steps of a run, retries, the counts at exit (-v);
 *   - debug: what only someone debugging the program wants (-v -v).
 * vp_log_fatal is for the one message before an abort() that the caller
 * asked for: it prints whatever the level.
 */
#ifndef VP_LOG_H
#define VP_LOG_H

#include <stdarg.h>

enum vp_log_level {
	VP_LOG_NONE = 0,
	VP_LOG_ERROR,
	VP_LOG_WARN,
	VP_LOG_INFO,
	VP_LOG_DEBUG,
};

/* A program's first call: its name for the prefix and its default level
 * (VP_LOG_WARN for a program); VPERFETTO_LOG, when set, wins. */
void vp_log_init(const char *program, enum vp_log_level level);

/* One -v: one level more, up to VP_LOG_DEBUG (unless VPERFETTO_LOG set
 * the level: the environment wins over flags). */
void vp_log_verbose(void);

/* Whether a message of this level would print (to skip costly
 * formatting). */
int vp_log_enabled(enum vp_log_level level);

void vp_log(enum vp_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vp_vlog(enum vp_log_level level, const char *fmt, va_list ap);

/* Prints "PROGRAM: fatal: text" whatever the level (even VP_LOG_NONE, even
 * in the SDK) and abort()s. */
void vp_log_fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

#define vp_log_error(...) vp_log(VP_LOG_ERROR, __VA_ARGS__)
#define vp_log_warn(...) vp_log(VP_LOG_WARN, __VA_ARGS__)
#define vp_log_info(...) vp_log(VP_LOG_INFO, __VA_ARGS__)
#define vp_log_debug(...) vp_log(VP_LOG_DEBUG, __VA_ARGS__)

#endif
