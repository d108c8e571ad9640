/*
 * tp_track_event.c - the track_event module: TrackEvent, TrackDescriptor,
 * the legacy ThreadDescriptor / ProcessDescriptor packets, the delta
 * timestamps of StreamingProfilePacket and the range of interest.  This
 * file holds the module's life (tp_modules.h) and the parse of one event,
 * from its payload to its track and what it becomes there; its parts:
 *
 *   tp_te_tokenize.c  file order: sequences' thread descriptors, delta
 *                     timestamps, defaults; each event pushed to the
 *                     sorter with a payload header (tp_te_event.h)
 *   tp_te_desc.c      descriptors in timestamp order: names of processes
 *                     and threads
 *   tp_te_tracks.c    descriptor tracks: reserved, resolved, made
 *   tp_te_decode.c    an event's payload and fields decoded, its phase
 *   tp_te_intern.c    interned names, cached
 *   tp_te_args.c      debug annotations and the other args
 *   tp_te_slices.c    slices (their args kept until their end), states
 *   tp_te_counters.c  counter values, extra counters, thread counters
 *   tp_te_legacy.c    legacy phases: async tracks, instant scopes, M
 *   tp_te_flows.c     flows
 *
 * Parse (timestamp order): an event goes to its track (explicit uuid,
 * sequence default, legacy pid / tid fallback, legacy async ids, instant
 * scopes) and becomes slices, counter values, states and flows, with its
 * debug annotations and typed fields as args.
 */
#include <stdlib.h>

#include "perfetto_fields.h"
#include "tp_ctx.h"
#include "tp_modules.h"
#include "tp_procs.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "tp_te_args.h"
#include "tp_te_counters.h"
#include "tp_te_decode.h"
#include "tp_te_desc.h"
#include "tp_te_flows.h"
#include "tp_te_intern.h"
#include "tp_te_legacy.h"
#include "tp_te_slices.h"
#include "tp_te_state.h"
#include "tp_te_tokenize.h"
#include "tp_te_tracks.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

static void parse_event(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len);

void tp_te_init(struct tp_ctx *ctx)
{
	struct tp_te_state *s = vp_xcalloc(1, sizeof *s);
	ctx->te = s;
	ctx->te_tracks = tp_te_tracks_new();
	/* String ids reach query results (a slice's stack_id hashes its
	 * name's and category's), so strings are first interned in the
	 * order they always were: these here. */
	static const char *const early[] = {
		"slice", "counter", "thread", "process",
		"legacy_event.passthrough_utid",
	};
	for (size_t i = 0; i < sizeof early / sizeof *early; i++)
		tp_s(ctx, early[i]);
	/* events first: the sorter's kinds are numbered in this order */
	s->tok = tp_te_tok_new(tp_sort_register(ctx->sorter, parse_event));
	s->desc = tp_te_desc_new(tp_sort_register(ctx->sorter,
						  tp_te_desc_parse));
	s->intern = tp_te_intern_new();
	s->args = tp_te_args_new(ctx);
	s->slices = tp_te_slices_new();
	s->legacy = tp_te_legacy_new();
}

void tp_te_free(struct tp_ctx *ctx)
{
	struct tp_te_state *s = ctx->te;
	if (!s)
		return;
	tp_te_tracks_free(ctx->te_tracks);
	ctx->te_tracks = NULL;
	tp_te_tok_free(s->tok);
	tp_te_desc_free(s->desc);
	tp_te_intern_free(s->intern);
	tp_te_args_free(s->args);
	tp_te_slices_free(s->slices);
	tp_te_legacy_free(s->legacy);
	free(s);
	ctx->te = NULL;
}

void tp_te_first_packet(struct tp_ctx *ctx, uint32_t seq_id)
{
	tp_te_tracks_first_packet(ctx, seq_id);
}

void tp_te_finish(struct tp_ctx *ctx)
{
	tp_te_slices_finish(ctx);
	tp_te_tracks_finish(ctx);
	tp_te_args_finish(ctx);
}

/* ---- the event's thread and track --------------------------------------- */

static uint32_t thread_upid(struct tp_ctx *ctx, uint32_t utid, bool *ok)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD);
	*ok = utid < t->nrows && !tp_is_null(t, TP_THREAD_upid, utid);
	return *ok ? (uint32_t)tp_get_int(t, TP_THREAD_upid, utid) : 0;
}

static void set_thread(struct tp_ctx *ctx, struct ev *e, uint32_t utid)
{
	bool ok;
	e->has_utid = true;
	e->utid = utid;
	e->upid = thread_upid(ctx, utid, &ok);
	e->has_upid = ok;
}

/* Perfetto's tids for threads it makes up, unique per process: the pid
 * in the high 32 bits. */
static int64_t synthetic_tid(int64_t tid, int64_t pid)
{
	return (int64_t)((uint64_t)pid << 32) | tid;
}

static bool is_synthetic_tid(int64_t tid)
{
	return ((uint64_t)tid & 0xffffffff00000000ull) != 0;
}

/* An event on a process's or a global descriptor track still names, as
 * an arg, the thread of its sequence (on a process's track only when
 * that thread belongs to the process): the thread is made even when the
 * arg is not kept. */
static void sequence_passthrough(struct tp_ctx *ctx, struct ev *e,
				 bool same_process)
{
	bool ok;

	if (!(e->flags & F_PIDTID))
		return;
	uint32_t utid = tp_thread_update(ctx, e->machine, e->tid, e->pid);
	if (same_process && (thread_upid(ctx, utid, &ok) != e->upid || !ok))
		return;
	e->has_passthrough = true;
	e->passthrough_utid = utid;
}

/* Picks the event's track: a descriptor's (*rout, its track made later
 * by tp_te_track_for) or a thread's (*track UINT32_MAX); false when it
 * cannot. */
static bool event_track_for(struct tp_ctx *ctx, struct ev *e, int64_t ts,
			    uint32_t *track, struct res **rout)
{
	uint64_t uuid = 0;
	*rout = NULL;

	if (e->has_track_uuid)
		uuid = e->track_uuid;
	else if (e->flags & F_DEFAULT_UUID)
		uuid = e->default_uuid;

	if (uuid) {
		struct res *r = tp_te_event_res(ctx, uuid, e->machine, ts);
		if (!r)
			return false;
		*rout = r;
		if (r->scope == SCOPE_T)
			set_thread(ctx, e, r->utid);
		else if (r->scope == SCOPE_P) {
			e->has_upid = true;
			e->upid = r->upid;
			sequence_passthrough(ctx, e, true);
		} else {
			sequence_passthrough(ctx, e, false);
		}
		return true;
	}

	bool pid_tid_valid = (e->flags & F_PIDTID) != 0;
	bool fallback = (!e->has_track_uuid || !e->has_type) && pid_tid_valid;
	int64_t pid = (uint32_t)e->pid, tid = e->tid;
	if (e->le.has_pid_override)
		fallback = true;
	if (e->le.has_tid_override && pid_tid_valid)
		fallback = true;
	if (fallback) {
		if (e->le.has_pid_override) {
			/* a thread of its own in that process: pid << 32 | -1,
			 * which is -1 */
			pid = (uint32_t)e->le.pid_override;
			tid = synthetic_tid(-1, pid);
		}
		if (e->le.has_tid_override) {
			tid = (uint32_t)e->le.tid_override;
			if (is_synthetic_tid(e->tid))
				tid = synthetic_tid(tid, pid);
		}
		if (!pid || !tid)
			return false; /* 0 is the swapper's */
		uint32_t utid = tp_thread_update(ctx, e->machine, tid, pid);
		set_thread(ctx, e, utid);
		*track = UINT32_MAX; /* the thread's track, made on demand */
		return true;
	}
	struct res *r = tp_te_event_res(ctx, 0, e->machine, ts);
	if (!r)
		return false;
	*rout = r;
	return true;
}

/* ---- parse -------------------------------------------------------------- */

static void parse_event(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len)
{
	struct ev e;

	if (!tp_te_decode(ctx, p, len, &e)) {
		parser_error(ctx);
		return;
	}
	e.ts = ts;
	if ((e.has_type && e.type) || e.le.has_phase)
		tp_te_note_annotation(ctx, &e);
	/* Cropping drops every kind of event before the range of interest,
	 * before it can touch a track or a thread. */
	if (tp_te_before_roi(ctx, ts)) {
		tp_stat_inc(ctx,
			"track_event_dropped_packets_outside_of_range_of_interest");
		return;
	}

	uint32_t track;
	struct res *r;
	if (!event_track_for(ctx, &e, ts, &track, &r)) {
		parser_error(ctx);
		return;
	}
	tp_te_legacy_thread_counters(ctx, &e, ts);
	if (e.nextra)
		tp_te_extra_counters(ctx, &e, ts);
	if (r) {
		/* Only events naming a uuid tell the track their sequence. */
		int64_t t = tp_te_track_for(ctx, r, e.name_id,
					  r->uuid ? (int64_t)e.seq_id : -1,
					  tp_te_event_use(&e));
		if (t < 0) {
			parser_error(ctx);
			return;
		}
		track = (uint32_t)t;
	}

	if (e.has_type && e.type == TE_TYPE_COUNTER && !e.le.has_phase) {
		if (!r || r->kind != RES_COUNTER || !(e.flags & F_COUNTER)) {
			parser_error(ctx);
			return;
		}
		tp_counter_add(ctx, track, ts, e.counter, -1);
		return;
	}
	if (e.has_type && e.type == TE_TYPE_STATE) {
		tp_te_state_event(ctx, &e, r, track, ts);
		return;
	}
	if (r && r->kind == RES_COUNTER) {
		parser_error(ctx);
		return;
	}
	if (!tp_te_legacy_track(ctx, &e, &track)) {
		parser_error(ctx);
		return;
	}
	if (track == UINT32_MAX)
		track = tp_track_thread(ctx, e.utid);
	int32_t ph = tp_te_phase(&e);
	if (!ph || ph == 'C') {
		parser_error(ctx);
		return;
	}

	bool async = e.le.has_phase && tp_te_async_phase(ph);
	int64_t slice;
	switch (ph) {
	case 'B':
	case 'b':
	case 'S':
		slice = tp_te_slice_begin(ctx, &e, track, ts, async);
		if (slice >= 0) /* not when too deep: dropped */
			tp_te_flows(ctx, &e, slice);
		break;
	case 'E':
	case 'e':
	case 'F':
		slice = tp_te_slice_end(ctx, &e, track, ts, async);
		if (slice >= 0)
			tp_te_flows(ctx, &e, slice);
		break;
	case 'X':
		slice = tp_te_slice_complete(ctx, &e, track, ts, async);
		if (slice == -1) /* (-2: too deep, dropped and counted) */
			parser_error(ctx);
		if (slice < 0)
			return;
		tp_te_flows(ctx, &e, slice);
		break;
	case 'i':
	case 'I':
	case 'R': /* a legacy mark: an instant with legacy_event.phase */
	case 'n':
	case 'T':
	case 'p':
		slice = tp_te_slice_instant(ctx, &e, track, ts, async);
		if (slice >= 0)
			tp_te_flows(ctx, &e, slice);
		break;
	case 's':
	case 't':
	case 'f':
		tp_te_flow_v1(ctx, &e, track);
		break;
	case 'M':
		tp_te_metadata_event(ctx, &e);
		break;
	default:
		parser_error(ctx);
		break;
	}
}
