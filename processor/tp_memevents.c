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
#include "tp_ctx.h"
#include "tp_memevents.h"
#include "tp_procs.h"
#include "tp_stats.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

/* A counter row waiting for its track. */
struct pending {
	uint32_t row;
	uint32_t utid;
	tp_str type;  /* the process track's type */
	tp_str name;  /* the track's name */
};

struct tp_memevents {
	struct pending *v;
	uint32_t n, cap;
};

struct tp_memevents *tp_memevents_new(void)
{
	struct tp_memevents *m = calloc(1, sizeof *m);

	if (!m)
		abort();
	return m;
}

void tp_memevents_free(struct tp_memevents *m)
{
	if (!m)
		return;
	free(m->v);
	free(m);
}

void tp_process_counter_for_thread(struct tp_ctx *ctx, uint32_t utid,
				   const char *type, tp_str name, int64_t ts,
				   double value)
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
		.type = tp_s(ctx, type),
		.name = name,
	};
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
	tp_process_counter_for_thread(ctx, tp_thread_get(ctx, machine, pid),
				      "oom_score_adj",
				      tp_s(ctx, "oom_score_adj"), ts,
				      (double)adj);
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
	char name[96];

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
	const char *metric[] = { "count", "max_lat", "avg_lat" };
	uint64_t v[] = { count, max_lat, avg_lat };
	for (unsigned i = 0; i < 3; i++) {
		snprintf(name, sizeof name, "mem.mm.%s.%s", t, metric[i]);
		tp_process_counter_for_thread(ctx, utid, "mm_event",
					      tp_s(ctx, name), ts,
					      (double)v[i]);
	}
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

void tp_memevents_finish(struct tp_ctx *ctx)
{
	struct tp_memevents *m = ctx->memevents;
	struct tp_table *tt = tp_tab(ctx, TP_T_THREAD);
	struct tp_table *ct = tp_tab(ctx, TP_T_COUNTER);
	char type[64];

	for (uint32_t i = 0; i < m->n; i++) {
		const struct pending *p = &m->v[i];
		struct tp_track_spec s;
		tp_track_spec_init(&s, (uint32_t)tp_get_int(
					       tt, TP_THREAD_machine_id, p->utid));
		s.name = p->name;
		s.event_type = tp_s(ctx, "counter");
		if (!tp_is_null(tt, TP_THREAD_upid, p->utid)) {
			s.type = p->type;
			s.upid = tp_get_int(tt, TP_THREAD_upid, p->utid);
		} else {
			snprintf(type, sizeof type, "%s_thread_fallback",
				 tp_str_get(ctx->pool, p->type));
			s.type = tp_s(ctx, type);
			s.utid = p->utid;
		}
		tp_set_int(ct, TP_COUNTER_track_id, p->row,
			   tp_track_intern(ctx, &s));
	}
	m->n = 0;
}
