/*
 * sdk_example.c - a small program traced with libvperfetto, for the
 * end-to-end tests: in process (writes the trace file itself) or into a
 * tracing service (system backend).
 *
 * Usage: sdk_example inproc FILE
 *        sdk_example system PRODUCER_SOCKET SECONDS
 *
 * Two threads each emit SDK_EXAMPLE_ITERS outer slices with a nested
 * slice, an instant and a counter; the test expects
 * 2 * 2 * SDK_EXAMPLE_ITERS slices plus 2 * SDK_EXAMPLE_ITERS instants.
 * With the system backend it waits for tracing to start (up to SECONDS),
 * traces, and waits for the session to stop.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vperfetto/vperfetto.h"

#define SDK_EXAMPLE_ITERS 100

VP_CATEGORY(example, "example", "the example program's events");
VP_CATEGORY(example_off, "example.off", "never enabled by the tests");

static void *worker(void *arg)
{
	int idx = (int)(intptr_t)arg;
	char name[16];
	snprintf(name, sizeof(name), "worker%d", idx);
	pthread_setname_np(pthread_self(), name);
	for (int i = 0; i < SDK_EXAMPLE_ITERS; i++) {
		TRACE_EVENT_BEGIN(example, "outer", VP_ARG_UINT("i", i),
				  VP_ARG_STRING("thread", name));
		TRACE_EVENT_BEGIN(example, "inner",
				  VP_ARG_DOUBLE("ratio", i / 3.0));
		TRACE_EVENT_INSTANT(example, "mark", VP_ARG_BOOL("even",
								 i % 2 == 0));
		TRACE_EVENT_END(example);
		TRACE_COUNTER(example, "progress", i);
		TRACE_EVENT_BEGIN(example_off, "hidden");
		TRACE_EVENT_END(example_off);
		TRACE_EVENT_END(example);
	}
	return NULL;
}

static void run_workers(void)
{
	pthread_t th[2];
	for (intptr_t i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "inproc") == 0) {
		struct vp_init_args a = {
			.backend = VP_BACKEND_IN_PROCESS,
			.output_path = argv[2],
			.categories = "example*,-example.off",
		};
		if (vp_init(&a) < 0)
			return 1;
		run_workers();
		vp_shutdown();
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "system") == 0) {
		struct vp_init_args a = {
			.backend = VP_BACKEND_SYSTEM,
			.producer_socket = argv[2],
			.producer_name = "sdk_example",
		};
		int secs = atoi(argv[3]);
		if (vp_init(&a) < 0)
			return 1;
		/* Wait for a session to enable the category. */
		for (int i = 0; i < secs * 100 && !VP_CATEGORY_ENABLED(example);
		     i++)
			usleep(10000);
		if (!VP_CATEGORY_ENABLED(example)) {
			fprintf(stderr, "sdk_example: tracing never started\n");
			vp_shutdown();
			return 1;
		}
		run_workers();
		vp_flush();
		/* Until the session stops. */
		for (int i = 0; i < secs * 100 && VP_CATEGORY_ENABLED(example);
		     i++)
			usleep(10000);
		vp_shutdown();
		return 0;
	}
	fprintf(stderr, "usage: %s inproc FILE | system SOCKET SECONDS\n",
		argv[0]);
	return 2;
}
