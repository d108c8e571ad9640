/*
 * sdk_bench_lttng.c - the workload of sdk_bench.c through LTTng-UST
 * tracepoints (provider in vp_bench_tp.h, compiled into this program).
 *
 * Usage: sdk_bench_lttng [PAIRS]
 * Prints "lttng_pair_ns X" and "lttng_pair_arg_ns Y" (best of three runs
 * after a warm-up).  Run inside an lttng session with vp_bench:* enabled,
 * or the tracepoints are disabled and the figures mean nothing.
 */
#define TRACEPOINT_DEFINE
#define TRACEPOINT_CREATE_PROBES
#include "vp_bench_tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double pairs(long n)
{
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		tracepoint(vp_bench, begin, "work");
		tracepoint(vp_bench, end);
	}
	return (now_s() - t0) * 1e9 / (double)n;
}

static double pairs_arg(long n)
{
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		tracepoint(vp_bench, begin_arg, "work_arg", (uint64_t)i);
		tracepoint(vp_bench, end);
	}
	return (now_s() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int enabled = tracepoint_enabled(vp_bench, begin) != 0;
	pairs(1000);
	pairs_arg(1000);
	double best = 1e9, best_arg = 1e9;
	for (int r = 0; r < 3; r++) {
		double x = pairs(n), y = pairs_arg(n);
		best = x < best ? x : best;
		best_arg = y < best_arg ? y : best_arg;
	}
	printf("lttng_enabled %d\n", enabled);
	printf("lttng_pair_ns %.3f\n", best);
	printf("lttng_pair_arg_ns %.3f\n", best_arg);
	return 0;
}
