/*
 * tp_memevents.c - counters of a process that events name by one of its
 * threads, and oom_score_adj_update / mm_event_record, as Perfetto's
 * EventTracker and FtraceParser make them.
 *
 * A thread's process may only become known later in the trace (a
 * process_tree packet, a task_newtask), so each value becomes a counter
 * row at once (its id in parse order) and gets its track at the end of
 * the trace, in the order the values came: the process's track
 * (oom_score_adj, mem.rss.file ...) or, if the thread never got a
 * process, a thread fallback track of the same name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_memevents.h"
#include "tp_procs.h"
#include "tp_stats.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

enum pending_kind { PC_MEMORY, PC_OOM_SCORE_ADJ, PC_MM_EVENT };

/* A counter row waiting for its track.  The strings are static. */
struct pending {
	uint32_t row;
	uint32_t utid;
	uint8_t kind;
	const char *key;    /* PC_MEMORY: its key; PC_MM_EVENT: the type */
	const char *metric; /* PC_MM_EVENT: count, max_lat, avg_lat */
};

struct tp_memevents {
	struct pending *v;
	uint32_t n, cap;
	struct tp_args_builder b;
};

struct tp_memevents *tp_memevents_new(void)
{
	struct tp_memevents *m = vp_xcalloc(1, sizeof *m);

	tp_args_builder_init(&m->b);
	return m;
}

void tp_memevents_free(struct tp_memevents *m)
{
	if (!m)
		return;
	free(m->v);
	tp_args_builder_free(&m->b);
	free(m);
}

uint32_t tp_process_counter_track(struct tp_ctx *ctx, uint32_t machine,
				  const char *type, int64_t id, tp_str name,
				  const char *k1, const char *v1,
				  const char *k2, const char *v2)
{
	struct tp_args_builder *b = &ctx->memevents->b;
	struct tp_track_spec s;
	bool thread = strstr(type, "_thread_fallback") != NULL;
	tp_str k = tp_s(ctx, thread ? "utid" : "upid");

	tp_track_spec_init(&s, machine);
	s.name = name;
	s.type = tp_s(ctx, type);
	s.event_type = tp_s(ctx, "counter");
	if (thread)
		s.utid = id;
	else
		s.upid = id;
	tp_args_builder_reset(b);
	tp_args_add_int(b, k, k, id);
	if (k1) {
		k = tp_s(ctx, k1);
		tp_args_add_str(b, k, k, tp_s(ctx, v1));
	}
	if (k2) {
		k = tp_s(ctx, k2);
		tp_args_add_str(b, k, k, tp_s(ctx, v2));
	}
	s.dimension_arg_set_id = tp_args_commit(ctx, b);
	return tp_track_intern(ctx, &s);
}

static void push(struct tp_ctx *ctx, uint32_t utid, enum pending_kind kind,
		 const char *key, const char *metric, int64_t ts, double value)
{
	struct tp_memevents *m = ctx->memevents;

	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->v = vp_xrealloc(m->v, m->cap * sizeof *m->v);
	}
	/* Track 0 for now: every pending row gets its own at the end. */
	m->v[m->n++] = (struct pending){
		.row = tp_counter_add(ctx, 0, ts, value, -1),
		.utid = utid,
		.kind = (uint8_t)kind,
		.key = key,
		.metric = metric,
	};
}

void tp_process_memory_for_thread(struct tp_ctx *ctx, uint32_t utid,
				  const char *key, int64_t ts, double value)
{
	push(ctx, utid, PC_MEMORY, key, NULL, ts, value);
}

/* ---- oom_score_adj_update, mm_event_record ---------------------------- */

static void oom_score_adj(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			  const uint8_t *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	int64_t adj = 0, pid = 0;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == OSA_OOM_SCORE_ADJ && f.wt == PB_WT_VARINT)
			/* int16: old tracers encoded negatives wrongly. */
			adj = (int16_t)f.val;
		else if (f.num == OSA_PID && f.wt == PB_WT_VARINT)
			pid = (uint32_t)f.val;
	}
	push(ctx, tp_thread_get(ctx, machine, pid), PC_OOM_SCORE_ADJ, NULL,
	     NULL, ts, (double)adj);
}

static const char *mm_event_type(uint64_t type)
{
	static const char *const types[] = { "min_flt", "maj_flt", "read_io",
					     "compaction", "reclaim",
					     "swp_flt", "kern_alloc" };
	return type < sizeof types / sizeof types[0] ? types[type] : NULL;
}

static void mm_event_record(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			    int64_t tid, const uint8_t *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t type = 0, count = 0, max_lat = 0, avg_lat = 0;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (f.num == MMER_TYPE)
			type = (uint32_t)f.val;
		else if (f.num == MMER_COUNT)
			count = (uint32_t)f.val;
		else if (f.num == MMER_MAX_LAT)
			max_lat = (uint32_t)f.val;
		else if (f.num == MMER_AVG_LAT)
			avg_lat = (uint32_t)f.val;
	}
	uint32_t utid = tp_thread_get(ctx, machine, tid);
	const char *t = mm_event_type(type);
	if (!t) {
		tp_stat_inc(ctx, "mm_unknown_type");
		return;
	}
	push(ctx, utid, PC_MM_EVENT, t, "count", ts, (double)count);
	push(ctx, utid, PC_MM_EVENT, t, "max_lat", ts, (double)max_lat);
	push(ctx, utid, PC_MM_EVENT, t, "avg_lat", ts, (double)avg_lat);
}

bool tp_memevent_parse(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		       int64_t tid, uint32_t id, const uint8_t *data,
		       size_t len)
{
	switch (id) {
	case FE_OOM_SCORE_ADJ_UPDATE:
		oom_score_adj(ctx, ts, machine, data, len);
		return true;
	case FE_MM_EVENT_RECORD:
		mm_event_record(ctx, ts, machine, tid, data, len);
		return true;
	default:
		return false;
	}
}

/* ---- end of trace ----------------------------------------------------- */

/* The track of a pending row: its thread's process's, else its thread's
 * (a "*_thread_fallback" type). */
static uint32_t pending_track(struct tp_ctx *ctx, const struct pending *p)
{
	struct tp_table *tt = tp_tab(ctx, TP_T_THREAD);
	uint32_t machine = (uint32_t)tp_get_int(tt, TP_THREAD_machine_id,
						p->utid);
	bool known = !tp_is_null(tt, TP_THREAD_upid, p->utid);
	int64_t id = known ? tp_get_int(tt, TP_THREAD_upid, p->utid) : p->utid;
	char name[96];

	switch (p->kind) {
	case PC_MEMORY:
		snprintf(name, sizeof name, "mem.%s", p->key);
		return tp_process_counter_track(
			ctx, machine,
			known ? "process_memory"
			      : "process_memory_thread_fallback",
			id, tp_s(ctx, name), "process_memory_key", p->key,
			NULL, NULL);
	case PC_OOM_SCORE_ADJ:
		return tp_process_counter_track(
			ctx, machine,
			known ? "oom_score_adj" : "oom_score_adj_thread_fallback",
			id, tp_s(ctx, "oom_score_adj"), NULL, NULL, NULL, NULL);
	default:
		snprintf(name, sizeof name, "mem.mm.%s.%s", p->key, p->metric);
		return tp_process_counter_track(
			ctx, machine,
			known ? "mm_event" : "mm_event_thread_fallback", id,
			tp_s(ctx, name), "mm_event_type", p->key,
			"mm_event_metric", p->metric);
	}
}

void tp_memevents_finish(struct tp_ctx *ctx)
{
	struct tp_memevents *m = ctx->memevents;
	struct tp_table *ct = tp_tab(ctx, TP_T_COUNTER);

	for (uint32_t i = 0; i < m->n; i++)
		tp_set_int(ct, TP_COUNTER_track_id, m->v[i].row,
			   pending_track(ctx, &m->v[i]));
	m->n = 0;
}
