/*
 * stack_writer.c - an SDK program for the multi-process tests of the
 * tracing stack (tests/stack/stack_test.sh).
 *
 * Connects to the tracing service through libvperfetto's system backend,
 * waits until a session enables category "stack", then writes, on each of
 * --threads threads, --events begin/end pairs named "work" with debug
 * annotations thread=<index> and seq=<0..N-1>, flushes and exits.  With
 * --forever it keeps writing until killed (the "producer killed mid-trace"
 * test).  --pad BYTES adds a string annotation of that size, to fill
 * buffers quickly; --pause-every N --pause-us U sleeps U us after every N
 * events, to stretch a run over time.  --linger: a long-lived producer
 * that never flushes: the threads stay, idle, until the session ends, and
 * nothing calls vp_flush() (all the service gets is what it asks for).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vperfetto/vperfetto.h"

VP_CATEGORY(stack, "stack", "Events of the multi-process stack tests");

struct opts {
	unsigned threads;
	unsigned long events;
	unsigned wait_ms;
	bool forever;
	size_t pad;
	unsigned long pause_every;
	unsigned pause_us;
	bool linger;
	const char *name;
	const char *socket;
};

static struct opts g_opts = {4, 10000, 10000, false, 0, 0, 0, false,
			     "stack_writer", NULL};
static char *g_pad;

struct thread_arg {
	unsigned index;
	unsigned long written;
};

static void *writer_thread(void *p)
{
	struct thread_arg *a = p;
	for (unsigned long i = 0; g_opts.forever || i < g_opts.events; i++) {
		if (g_pad)
			TRACE_EVENT_BEGIN(stack, "work",
					  VP_ARG_UINT("thread", a->index),
					  VP_ARG_UINT("seq", i),
					  VP_ARG_STRING("pad", g_pad));
		else
			TRACE_EVENT_BEGIN(stack, "work",
					  VP_ARG_UINT("thread", a->index),
					  VP_ARG_UINT("seq", i));
		TRACE_EVENT_END(stack);
		a->written++;
		if (g_opts.pause_every && (i + 1) % g_opts.pause_every == 0)
			usleep(g_opts.pause_us);
	}
	while (g_opts.linger && VP_CATEGORY_ENABLED(stack))
		usleep(10000);
	return NULL;
}

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--forever")) {
			g_opts.forever = true;
			continue;
		}
		if (!strcmp(a, "--linger")) {
			g_opts.linger = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "stack_writer: %s needs a value\n", a);
			return -1;
		}
		i++;
		if (!strcmp(a, "--threads"))
			g_opts.threads = (unsigned)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--events"))
			g_opts.events = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--wait-ms"))
			g_opts.wait_ms = (unsigned)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pad"))
			g_opts.pad = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pause-every"))
			g_opts.pause_every = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pause-us"))
			g_opts.pause_us = (unsigned)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--name"))
			g_opts.name = v;
		else if (!strcmp(a, "--socket"))
			g_opts.socket = v;
		else {
			fprintf(stderr, "stack_writer: unknown option %s\n", a);
			return -1;
		}
	}
	if (g_opts.threads == 0 || g_opts.threads > 64) {
		fprintf(stderr, "stack_writer: --threads must be 1..64\n");
		return -1;
	}
	return 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	if (parse_args(argc, argv))
		return 2;
	struct vp_init_args init = {
		.backend = VP_BACKEND_SYSTEM,
		.producer_name = g_opts.name,
		.producer_socket = g_opts.socket,
	};
	if (vp_init(&init))
		return 1;
	unsigned waited = 0;
	while (!VP_CATEGORY_ENABLED(stack)) {
		if (waited >= g_opts.wait_ms) {
			fprintf(stderr, "stack_writer: category 'stack' was not "
					"enabled within %u ms\n", g_opts.wait_ms);
			vp_shutdown();
			return 3;
		}
		sleep_ms(10);
		waited += 10;
	}
	if (g_opts.pad) {
		g_pad = malloc(g_opts.pad + 1);
		if (!g_pad)
			return 1;
		memset(g_pad, 'x', g_opts.pad);
		g_pad[g_opts.pad] = 0;
	}
	pthread_t tids[64];
	struct thread_arg args[64];
	for (unsigned t = 0; t < g_opts.threads; t++) {
		args[t] = (struct thread_arg){t, 0};
		if (pthread_create(&tids[t], NULL, writer_thread, &args[t])) {
			fprintf(stderr, "stack_writer: pthread_create failed\n");
			return 1;
		}
	}
	unsigned long total = 0;
	for (unsigned t = 0; t < g_opts.threads; t++) {
		pthread_join(tids[t], NULL);
		total += args[t].written;
	}
	if (!g_opts.linger)
		vp_flush();
	vp_shutdown();
	free(g_pad);
	printf("stack_writer: wrote %lu begin/end pairs on %u threads\n", total,
	       g_opts.threads);
	return 0;
}
