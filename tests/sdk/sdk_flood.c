/*
 * sdk_flood.c - a traced program that writes faster than the tracing
 * service drains its shared memory, for the buffer_exhausted_policy tests
 * (tests/sdk/sdk_stall.sh).
 *
 * Usage: sdk_flood SOCKET SHMEM_KB THREADS EVENTS [MIN_MS]
 *
 * Connects to the service at SOCKET asking for SHMEM_KB KiB of shared
 * memory, waits (up to 20 s) for a session to enable category "flood",
 * then each of THREADS threads writes an instant "start" (so every writer
 * has its first chunk committed before the flood: a writer that drops
 * before it ever had a chunk leaves no chunk_id gap for the service to
 * see), and then EVENTS begin/end pairs named "ev"
 * with annotation seq=0..EVENTS-1, as fast as it can; with MIN_MS it keeps
 * writing (more pairs) until MIN_MS ms have passed.  Flushes, shuts down,
 * and prints how many pairs it wrote.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "vperfetto/vperfetto.h"

VP_CATEGORY(flood, "flood", "sdk_flood's events");

static unsigned long g_events;
static unsigned long g_min_ms;
/* Every writer's first chunk is out before anyone floods. */
static pthread_barrier_t g_started, g_go;

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *writer(void *arg)
{
	unsigned long *written = arg;
	TRACE_EVENT_INSTANT(flood, "start");
	pthread_barrier_wait(&g_started);
	pthread_barrier_wait(&g_go);
	uint64_t until = ms_now() + g_min_ms;
	for (unsigned long i = 0; i < g_events || ms_now() < until; i++) {
		TRACE_EVENT_BEGIN(flood, "ev", VP_ARG_UINT("seq", i));
		TRACE_EVENT_END(flood);
		(*written)++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: %s SOCKET SHMEM_KB THREADS EVENTS "
				"[MIN_MS]\n", argv[0]);
		return 2;
	}
	unsigned threads = (unsigned)strtoul(argv[3], NULL, 0);
	g_events = strtoul(argv[4], NULL, 0);
	g_min_ms = argc == 6 ? strtoul(argv[5], NULL, 0) : 0;
	if (threads == 0 || threads > 16) {
		fprintf(stderr, "sdk_flood: THREADS must be 1..16\n");
		return 2;
	}
	struct vp_init_args a = {
		.backend = VP_BACKEND_SYSTEM,
		.producer_socket = argv[1],
		.producer_name = "sdk_flood",
		.shmem_size_kb = (uint32_t)strtoul(argv[2], NULL, 0),
	};
	if (vp_init(&a) < 0)
		return 1;
	for (int i = 0; i < 2000 && !VP_CATEGORY_ENABLED(flood); i++)
		usleep(10000);
	if (!VP_CATEGORY_ENABLED(flood)) {
		fprintf(stderr, "sdk_flood: tracing never started\n");
		vp_shutdown();
		return 1;
	}
	pthread_t th[16];
	unsigned long written[16] = {0};
	pthread_barrier_init(&g_started, NULL, threads + 1);
	pthread_barrier_init(&g_go, NULL, threads + 1);
	for (unsigned t = 0; t < threads; t++)
		if (pthread_create(&th[t], NULL, writer, &written[t]) != 0) {
			fprintf(stderr, "sdk_flood: pthread_create failed\n");
			return 1;
		}
	pthread_barrier_wait(&g_started);
	vp_flush();
	usleep(200000); /* the service copies the first chunks out */
	pthread_barrier_wait(&g_go);
	unsigned long total = 0;
	for (unsigned t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		total += written[t];
	}
	pthread_barrier_destroy(&g_started);
	pthread_barrier_destroy(&g_go);
	vp_flush();
	vp_shutdown();
	printf("%lu\n", total);
	return 0;
}
