/*
 * vp_log.c - the logging facility (see vp_log.h): a level per process,
 * set by the program, its -v flags and VPERFETTO_LOG.
 */
#include "vp_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Until a program calls vp_log_init, this is a library in someone else's
 * process: silent unless VPERFETTO_LOG asks (read on first use). */
static enum vp_log_level g_level = VP_LOG_NONE;
static const char *g_program;
static int g_from_env;
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

static const char *const level_names[] = {
	[VP_LOG_NONE] = "none",   [VP_LOG_ERROR] = "error",
	[VP_LOG_WARN] = "warning", [VP_LOG_INFO] = "info",
	[VP_LOG_DEBUG] = "debug",
};

static void read_env(void)
{
	const char *v = getenv("VPERFETTO_LOG");
	static const char *const words[] = {"none", "error", "warn", "info",
					    "debug"};

	if (!v || !*v)
		return;
	for (int i = 0; i < 5; i++) {
		if (strcmp(v, words[i]) == 0) {
			g_level = (enum vp_log_level)i;
			g_from_env = 1;
			return;
		}
	}
	/* A level nobody knows: say so once, keep the default. */
	fprintf(stderr, "vperfetto: VPERFETTO_LOG=%s: not one of none, "
		"error, warn, info, debug\n", v);
}

static void load_env(void)
{
	pthread_once(&g_env_once, read_env);
}

void vp_log_init(const char *program, enum vp_log_level level)
{
	g_program = program;
	load_env();
	if (!g_from_env)
		g_level = level;
}

void vp_log_verbose(void)
{
	load_env();
	if (!g_from_env && g_level < VP_LOG_DEBUG)
		g_level++;
}

int vp_log_enabled(enum vp_log_level level)
{
	load_env();
	return level != VP_LOG_NONE && level <= g_level;
}

/* Formats and writes one message, whatever the level. */
static void emit(const char *level_name, const char *fmt, va_list ap)
{
	char line[1024];

	/* One write per message, so lines of threads do not interleave. */
	int n = snprintf(line, sizeof(line), "%s: %s: ",
			 g_program ? g_program : "vperfetto", level_name);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	size_t len = strlen(line);
	if (len && line[len - 1] != '\n' && len + 1 < sizeof(line)) {
		line[len++] = '\n';
		line[len] = '\0';
	}
	fputs(line, stderr);
}

void vp_vlog(enum vp_log_level level, const char *fmt, va_list ap)
{
	int saved = errno; /* callers log between a failure and its errno */

	if (!vp_log_enabled(level))
		return;
	emit(level_names[level], fmt, ap);
	errno = saved;
}

void vp_log(enum vp_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vp_vlog(level, fmt, ap);
	va_end(ap);
}

void vp_log_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit("fatal", fmt, ap);
	va_end(ap);
	abort();
}
