/*
 * sdk_bench.c - how much a track event costs with libvperfetto.
 *
 * Usage: sdk_bench inproc FILE [PAIRS]
 *        sdk_bench system SOCKET [PAIRS]
 *
 * Prints one "key value" line per figure (ns, averaged over the run):
 *   disabled_ns        a TRACE_EVENT_BEGIN of a disabled category
 *   pair_ns            TRACE_EVENT_BEGIN + TRACE_EVENT_END, interned name
 *   pair_arg_ns        the same with one uint annotation on the begin
 * The enabled figures use the in-process backend (a large ring buffer) or
 * a running tracing service (system backend: waits until a session
 * enables the "bench" category).  One thread, after a warm-up, timed
 * with CLOCK_MONOTONIC around the whole loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vperfetto/vperfetto.h"

VP_CATEGORY(bench, "bench", "benchmark events");
VP_CATEGORY(bench_off, "bench.off", "never enabled");

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double bench_disabled(long n)
{
	double t0 = now_s();
	for (long i = 0; i < n; i++)
		TRACE_EVENT_BEGIN(bench_off, "never", VP_ARG_UINT("i", i));
	return (now_s() - t0) * 1e9 / (double)n;
}

static double bench_pairs(long n)
{
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		TRACE_EVENT_BEGIN(bench, "work");
		TRACE_EVENT_END(bench);
	}
	return (now_s() - t0) * 1e9 / (double)n;
}

static double bench_pairs_arg(long n)
{
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		TRACE_EVENT_BEGIN(bench, "work_arg", VP_ARG_UINT("i", i));
		TRACE_EVENT_END(bench);
	}
	return (now_s() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s inproc FILE [PAIRS] | system SOCKET "
				"[PAIRS]\n",
			argv[0]);
		return 2;
	}
	long pairs = argc > 3 ? atol(argv[3]) : 1000000;
	struct vp_init_args a = {.producer_name = "sdk_bench"};
	bool system = strcmp(argv[1], "system") == 0;
	if (system) {
		a.backend = VP_BACKEND_SYSTEM;
		a.producer_socket = argv[2];
		a.shmem_size_kb = 4096;
	} else {
		a.backend = VP_BACKEND_IN_PROCESS;
		a.output_path = argv[2];
		a.buffer_size_kb = 64 * 1024;
		a.categories = "bench";
	}
	if (vp_init(&a) < 0)
		return 1;
	if (system) {
		for (int i = 0; i < 1000 && !VP_CATEGORY_ENABLED(bench); i++)
			usleep(10000);
		if (!VP_CATEGORY_ENABLED(bench)) {
			fprintf(stderr, "sdk_bench: no session enabled the "
					"\"bench\" category\n");
			vp_shutdown();
			return 1;
		}
	}
	printf("disabled_ns %.3f\n", bench_disabled(pairs * 100));
	bench_pairs(1000); /* warm-up: writer, interning */
	bench_pairs_arg(1000);
	double best = 1e9, best_arg = 1e9;
	for (int r = 0; r < 3; r++) {
		double x = bench_pairs(pairs);
		double y = bench_pairs_arg(pairs);
		best = x < best ? x : best;
		best_arg = y < best_arg ? y : best_arg;
		if (system)
			vp_flush();
	}
	printf("pair_ns %.3f\n", best);
	printf("pair_arg_ns %.3f\n", best_arg);
	fflush(stdout);
	vp_shutdown();
	return 0;
}
