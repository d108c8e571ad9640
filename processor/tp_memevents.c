/*
 * tp_memevents.c - kernel memory events of a process that name one of its
 * threads, as counters of the process.
 *
 * A thread's process may only become known later in the trace (a
 * process_tree packet, a task_newtask), so, as Perfetto's EventTracker
 * does, each value becomes a counter row at once (its id in parse order)
 * and gets its track at the end of the trace: the process's track
 * (oom_score_adj, mem.rss.file ...) or, if the thread never got a
 * process, a thread fallback track of the same name.
 *
 * rss_stat's mm_id and curr say whose memory it is: curr set means the
 * writing thread's own mm (remembered for that mm_id); unset means another
 * process's mm, the last thread seen with that mm_id while it lives.
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
#include "u64map.h"
#include "vp_alloc.h"

/* A counter row waiting for its track. */
struct pending {
	uint32_t row;
	uint32_t utid;
	uint32_t machine;
	tp_str type;  /* the process track's type */
	tp_str name;  /* the track's name */
};

struct tp_memevents {
	struct pending *v;
	uint32_t n, cap;
	struct u64map mm_utid; /* (machine, mm_id) -> utid */
};

struct tp_memevents *tp_memevents_new(void)
{
	struct tp_memevents *m = calloc(1, sizeof *m);

	if (!m)
		abort();
	u64map_init(&m->mm_utid);
	return m;
}

void tp_memevents_free(struct tp_memevents *m)
{
	if (!m)
		return;
	free(m->v);
	u64map_free(&m->mm_utid);
	free(m);
}

static void push(struct tp_ctx *ctx, uint32_t machine, uint32_t utid,
		 const char *type, tp_str name, int64_t ts, double value)
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
		.machine = machine,
		.type = tp_s(ctx, type),
		.name = name,
	};
}

/* ---- rss_stat --------------------------------------------------------- */

static const char *memory_key(int64_t member)
{
	static const char *const keys[] = { "rss.file", "rss.anon", "swap",
					    "rss.shmem", "unreclaimable" };
	if (member >= 0 && member < (int64_t)(sizeof keys / sizeof keys[0]))
		return keys[member];
	return "unknown";
}

static bool mm_owner(struct tp_ctx *ctx, uint32_t machine, uint64_t mm_id,
		     bool curr, int64_t tid, uint32_t *utid)
{
	struct tp_memevents *m = ctx->memevents;
	uint64_t key = (uint64_t)machine << 32 | (uint32_t)mm_id, v;

	if (curr) {
		*utid = tp_thread_get(ctx, machine, tid);
		u64map_put(&m->mm_utid, key, *utid);
		return true;
	}
	if (!u64map_get(&m->mm_utid, key, &v) || v == UINT32_MAX)
		return false;
	/* A dead owner's mm_id may be a new process's now, unknown yet. */
	if (!tp_thread_alive(ctx, machine, (uint32_t)v)) {
		u64map_put(&m->mm_utid, key, UINT32_MAX);
		return false;
	}
	*utid = (uint32_t)v;
	return true;
}

static void rss_stat(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t tid, bool throttled, const uint8_t *data,
		     size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	int64_t member = 0, size = 0;
	uint64_t mm_id = 0;
	bool curr = false, has_curr = false, has_mm = false;
	uint32_t n_member = throttled ? RSST_MEMBER : RSS_MEMBER;
	uint32_t n_size = throttled ? RSST_SIZE : RSS_SIZE;
	uint32_t n_curr = throttled ? RSST_CURR : RSS_CURR;
	uint32_t n_mm = throttled ? RSST_MM_ID : RSS_MM_ID;
	uint32_t utid;
	char name[64];

	/* The throttled form always has both. */
	has_curr = has_mm = throttled;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (f.num == n_member) {
			member = (int32_t)f.val;
		} else if (f.num == n_size) {
			size = (int64_t)f.val;
		} else if (f.num == n_curr) {
			curr = (uint32_t)f.val != 0;
			has_curr = true;
		} else if (f.num == n_mm) {
			mm_id = (uint32_t)f.val;
			has_mm = true;
		}
	}
	if (size < 0) {
		tp_stat_inc(ctx, "rss_stat_negative_size");
		return;
	}
	if (has_mm && has_curr) {
		if (!mm_owner(ctx, machine, mm_id, curr, tid, &utid)) {
			tp_stat_inc(ctx, "rss_stat_unknown_thread_for_mm_id");
			return;
		}
	} else {
		utid = tp_thread_get(ctx, machine, tid);
	}
	snprintf(name, sizeof name, "mem.%s", memory_key(member));
	push(ctx, machine, utid, "process_memory", tp_s(ctx, name), ts,
	     (double)size);
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
	push(ctx, machine, tp_thread_get(ctx, machine, pid), "oom_score_adj",
	     tp_s(ctx, "oom_score_adj"), ts, (double)adj);
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
	snprintf(name, sizeof name, "mem.mm.%s.count", t);
	push(ctx, machine, utid, "mm_event", tp_s(ctx, name), ts,
	     (double)count);
	snprintf(name, sizeof name, "mem.mm.%s.max_lat", t);
	push(ctx, machine, utid, "mm_event", tp_s(ctx, name), ts,
	     (double)max_lat);
	snprintf(name, sizeof name, "mem.mm.%s.avg_lat", t);
	push(ctx, machine, utid, "mm_event", tp_s(ctx, name), ts,
	     (double)avg_lat);
}

bool tp_memevent_parse(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		       int64_t tid, uint32_t id, const uint8_t *data,
		       size_t len)
{
	switch (id) {
	case FE_RSS_STAT:
	case FE_RSS_STAT_THROTTLED:
		rss_stat(ctx, ts, machine, tid, id == FE_RSS_STAT_THROTTLED,
			 data, len);
		return true;
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
		tp_track_spec_init(&s, p->machine);
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
