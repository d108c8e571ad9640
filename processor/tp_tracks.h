/*
 * tp_tracks.h - tracks (the rows of __intrinsic_track) and counter values.
 *
 * A track is a timeline that slices or counter values sit on.  Thread and
 * process tracks are created on demand, one default slice track per thread
 * and per process; counter tracks are found again by (machine, type, name,
 * dimension args), so every module that writes "cpufreq of cpu 3" lands on
 * the same track.
 */
#ifndef VP_TP_TRACKS_H
#define VP_TP_TRACKS_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

struct tp_tracks *tp_tracks_new(void);
void tp_tracks_free(struct tp_tracks *t);

/* Fields of a new track; zero / -1 means NULL. */
struct tp_track_spec {
	tp_str name;
	tp_str type;             /* classification, e.g. "thread", "cpu_frequency" */
	tp_str event_type;       /* "slice" or "counter" (default "slice") */
	tp_str counter_unit;
	int64_t parent_id;       /* -1: none */
	int64_t source_arg_set_id;    /* -1: none */
	int64_t dimension_arg_set_id; /* -1: none */
	int64_t utid, upid;      /* -1: none */
	uint32_t machine;
};
void tp_track_spec_init(struct tp_track_spec *s, uint32_t machine);

/* Always a new row. */
uint32_t tp_track_new(struct tp_ctx *ctx, const struct tp_track_spec *s);
/* The track with these type, name, dimensions, utid, upid and machine,
 * created from s the first time. */
uint32_t tp_track_intern(struct tp_ctx *ctx, const struct tp_track_spec *s);

/* The default slice track of a thread / process. */
uint32_t tp_track_thread(struct tp_ctx *ctx, uint32_t utid);
uint32_t tp_track_process(struct tp_ctx *ctx, uint32_t upid);

/* A counter track on a machine: global (cpu < 0) or for one cpu (then its
 * dimension args hold `cpu`). */
uint32_t tp_track_counter(struct tp_ctx *ctx, uint32_t machine, tp_str type,
			  tp_str name, int64_t cpu, tp_str unit);
/* A slice track of one cpu of a machine (interrupts, hrtimers): its type,
 * its name, and `cpu` as its dimension. */
uint32_t tp_track_cpu_slices(struct tp_ctx *ctx, uint32_t machine,
			     const char *type, const char *name, uint32_t cpu);

/* CPUs.  As in Perfetto, a cpu of a machine is known by its ucpu,
 * machine * TP_MAX_CPUS_PER_MACHINE + cpu (equal to cpu on the host), and
 * gets a row of __intrinsic_cpu the first time anything (a sched event, an
 * ftrace event, CpuInfo, a track with a cpu dimension) refers to it. */
#define TP_MAX_CPUS_PER_MACHINE 4096
int64_t tp_cpu_ucpu_slow(struct tp_ctx *ctx, uint32_t machine, uint32_t cpu);
bool tp_cpu_known(struct tp_ctx *ctx, uint32_t machine, uint32_t cpu);
/* The ucpu of (machine, cpu), creating its row the first time. */
static inline int64_t tp_cpu_ucpu(struct tp_ctx *ctx, uint32_t machine,
				  uint32_t cpu)
{
	if (tp_cpu_known(ctx, machine, cpu))
		return (int64_t)machine * TP_MAX_CPUS_PER_MACHINE + cpu;
	return tp_cpu_ucpu_slow(ctx, machine, cpu);
}
/* The __intrinsic_cpu row of (machine, cpu), created if needed;
 * UINT32_MAX when cpu is out of range. */
uint32_t tp_cpu_row(struct tp_ctx *ctx, uint32_t machine, uint32_t cpu);

/* Appends a counter value; returns the counter row id. */
uint32_t tp_counter_add(struct tp_ctx *ctx, uint32_t track, int64_t ts,
			double value, int64_t arg_set_id);

#endif
