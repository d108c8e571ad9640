/*
 * vp_bench_tp.h - LTTng-UST tracepoint provider for the SDK benchmark:
 * the same workload as sdk_bench.c (a begin with a name, optionally a
 * uint argument, and an end without payload), for scale.
 */
#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER vp_bench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "./vp_bench_tp.h"

#if !defined(VP_BENCH_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define VP_BENCH_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

TRACEPOINT_EVENT(vp_bench, begin,
	TP_ARGS(const char *, name),
	TP_FIELDS(ctf_string(name, name)))

TRACEPOINT_EVENT(vp_bench, begin_arg,
	TP_ARGS(const char *, name, uint64_t, value),
	TP_FIELDS(ctf_string(name, name)
		  ctf_integer(uint64_t, i, value)))

TRACEPOINT_EVENT(vp_bench, end,
	TP_ARGS(),
	TP_FIELDS())

#endif

#include <lttng/tracepoint-event.h>
