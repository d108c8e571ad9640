/*
 * tp_sessions.c - ConcurrentSessionEvent packets: the service's word on
 * the other tracing sessions that ran beside this one.  Each session is a
 * state track (type concurrent_tracing_sessions, one per session id)
 * whose states are the session's lifecycle: CONFIGURED, STARTED, ...,
 * DISABLED (closed where it opens: a marker, not an open-ended state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_modules.h"
#include "tp_sort.h"
#include "tp_states.h"
#include "tp_stats.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

struct tp_sessions_state {
	uint8_t kind;
	struct u64map tracks; /* session id -> track */
	struct tp_args_builder b;
};

static void parse_session_event(struct tp_ctx *ctx, int64_t ts,
				const uint8_t *p, size_t len);

void tp_sessions_init(struct tp_ctx *ctx)
{
	struct tp_sessions_state *s = vp_xcalloc(1, sizeof *s);
	s->kind = tp_sort_register(ctx->sorter, parse_session_event);
	u64map_init(&s->tracks);
	tp_args_builder_init(&s->b);
	ctx->sessions = s;
}

void tp_sessions_free(struct tp_ctx *ctx)
{
	struct tp_sessions_state *s = ctx->sessions;
	if (!s)
		return;
	u64map_free(&s->tracks);
	tp_args_builder_free(&s->b);
	free(s);
	ctx->sessions = NULL;
}

bool tp_sessions_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  const struct pb_field *f)
{
	if (f->num != TP_CONCURRENT_SESSION_EVENT || f->wt != PB_WT_LEN)
		return false;
	tp_sort_push(ctx->sorter, pkt->queue, pkt->ts,
		     ctx->sessions->kind, f->data, f->len);
	return true;
}

struct session_event {
	uint64_t state, id;
	const uint8_t *name;
	size_t name_len;
	int64_t consumer_uid, num_data_sources;
};

static const char *state_name(uint64_t state)
{
	switch (state) {
	case CSE_STATE_DISABLED: return "DISABLED";
	case CSE_STATE_CONFIGURED: return "CONFIGURED";
	case CSE_STATE_STARTED: return "STARTED";
	case CSE_STATE_DISABLING_WAITING_STOP_ACKS:
		return "DISABLING_WAITING_STOP_ACKS";
	case CSE_STATE_CLONED_READ_ONLY: return "CLONED_READ_ONLY";
	default: return NULL; /* unspecified, or a newer service's */
	}
}

static void decode(const uint8_t *p, size_t len, struct session_event *e)
{
	struct pb_reader r;
	struct pb_field f;

	memset(e, 0, sizeof *e);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case CSE_STATE: e->state = f.val; break;
		case CSE_SESSION_ID: e->id = f.val; break;
		case CSE_CONSUMER_UID: e->consumer_uid = (int32_t)f.val; break;
		case CSE_NUM_DATA_SOURCES:
			e->num_data_sources = (uint32_t)f.val;
			break;
		case CSE_SESSION_NAME:
			if (f.wt == PB_WT_LEN) {
				e->name = f.data;
				e->name_len = f.len;
			}
			break;
		default: break;
		}
	}
}

/* The session's track, named by its first event: the session's name (or
 * "Session <id>"), " (clone)" added for a clone, whose first event is
 * CLONED_READ_ONLY and whose name is its parent's. */
static uint32_t session_track(struct tp_ctx *ctx,
			      const struct session_event *e)
{
	struct tp_sessions_state *s = ctx->sessions;
	struct tp_track_spec sp;
	char name[512];
	uint64_t v;

	if (u64map_get(&s->tracks, e->id, &v))
		return (uint32_t)v;
	if (e->name_len)
		snprintf(name, sizeof name, "%.*s%s", (int)e->name_len,
			 (const char *)e->name,
			 e->state == CSE_STATE_CLONED_READ_ONLY ? " (clone)" : "");
	else
		snprintf(name, sizeof name, "Session %llu%s",
			 (unsigned long long)e->id,
			 e->state == CSE_STATE_CLONED_READ_ONLY ? " (clone)" : "");
	tp_track_spec_init(&sp, 0);
	sp.name = tp_s(ctx, name);
	sp.type = tp_s(ctx, "concurrent_tracing_sessions");
	sp.event_type = tp_s(ctx, "state");
	/* its dimension: the session id, signed as Perfetto keeps it */
	sp.dimension_arg_set_id = tp_args_one_int(ctx, "session_id",
						  (int64_t)e->id);
	uint32_t track = tp_track_new(ctx, &sp);
	u64map_put(&s->tracks, e->id, track);
	return track;
}

static void parse_session_event(struct tp_ctx *ctx, int64_t ts,
				const uint8_t *p, size_t len)
{
	struct tp_sessions_state *s = ctx->sessions;
	struct session_event e;
	bool repeated;

	decode(p, len, &e);
	const char *state = state_name(e.state);
	if (!state) {
		tp_stat_inc(ctx, "concurrent_session_event_unknown_state");
		return;
	}
	uint32_t track = session_track(ctx, &e);
	int64_t row = tp_state_update(ctx, track, ts, tp_s(ctx, state), 0,
				      &repeated);
	if (row >= 0) {
		struct tp_table *t = tp_tab(ctx, TP_T_STATE);
		tp_str k1 = tp_s(ctx, "consumer_uid");
		tp_str k2 = tp_s(ctx, "num_data_sources");
		tp_args_builder_reset(&s->b);
		if (repeated && !tp_is_null(t, TP_STATE_arg_set_id,
					    (uint32_t)row))
			tp_args_load(ctx,
				     tp_get_int(t, TP_STATE_arg_set_id,
						(uint32_t)row),
				     &s->b);
		tp_args_add_int(&s->b, k1, k1, e.consumer_uid);
		tp_args_add_int(&s->b, k2, k2, e.num_data_sources);
		int64_t id = tp_args_commit(ctx, &s->b);
		if (id >= 0)
			tp_set_int(t, TP_STATE_arg_set_id, (uint32_t)row, id);
	}
	if (e.state == CSE_STATE_DISABLED)
		tp_state_update(ctx, track, ts, 0, 0, &repeated);
}
