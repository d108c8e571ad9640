/*
 * tp_te_legacy.c - what a legacy event's phase changes (see
 * tp_te_legacy.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_compress.h"
#include "tp_ctx.h"
#include "tp_process.h"
#include "tp_procs.h"
#include "tp_te_decode.h"
#include "tp_te_intern.h"
#include "tp_te_legacy.h"
#include "tp_te_state.h"
#include "tp_tracks.h"
#include "u64map.h"
#include "vp_alloc.h"

struct tp_te_legacy {
	struct u64map async_tracks; /* legacy async id -> its root name */
	struct tp_args_builder b;
};

static struct tp_te_legacy *LS(struct tp_ctx *ctx)
{
	return ctx->te->legacy;
}

struct tp_te_legacy *tp_te_legacy_new(void)
{
	struct tp_te_legacy *l = vp_xcalloc(1, sizeof *l);
	u64map_init(&l->async_tracks);
	tp_args_builder_init(&l->b);
	return l;
}

void tp_te_legacy_free(struct tp_te_legacy *l)
{
	if (!l)
		return;
	u64map_free(&l->async_tracks);
	tp_args_builder_free(&l->b);
	free(l);
}

/* The name a legacy async id's tracks keep as their `name` dimension:
 * the first event's name for that id (within the process when
 * process-scoped), so that later events of other names share them. */
static tp_str legacy_async_root_name(struct tp_ctx *ctx, const struct ev *e,
				     bool process_scoped, uint32_t upid)
{
	struct tp_te_legacy *s = LS(ctx);
	uint64_t h = (uint64_t)e->source_id * 0x9e3779b97f4a7c15ull;
	h ^= (uint64_t)e->machine * 0xff51afd7ed558ccdull;
	if (process_scoped)
		h ^= ((uint64_t)upid + 1) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 31;
	uint64_t v;
	if (u64map_get(&s->async_tracks, h, &v))
		return (tp_str)v;
	u64map_put(&s->async_tracks, h, e->name_id);
	return e->name_id;
}

/* Legacy async events (b/e/n, S/T/p/F) go on compressed tracks made from
 * their id's scope and root name (and process, when the id is local): a
 * begin takes a free track of the set, an end the one its id holds. */
static uint32_t legacy_async_track(struct tp_ctx *ctx, const struct ev *e,
				   bool process_scoped)
{
	struct tp_te_legacy *s = LS(ctx);
	struct tp_args_builder *b = &s->b;
	int32_t ph = e->le.phase;
	bool legacy = ph == 'S' || ph == 'T' || ph == 'p' || ph == 'F';
	tp_str scope = legacy ? e->name_id : e->category_id;
	uint32_t upid = e->has_upid ? e->upid : 0;
	tp_str k;

	if (e->le.id_scope) {
		char buf[TE_KEY_MAX];
		const char *c = e->category_id
					? tp_str_get(ctx->pool, e->category_id)
					: "";
		snprintf(buf, sizeof buf, "%s:%.*s", c,
			 (int)strnlen((const char *)e->le.id_scope,
				      e->le.id_scope_len),
			 (const char *)e->le.id_scope);
		scope = tp_s(ctx, buf);
	}
	tp_str root = legacy_async_root_name(ctx, e, process_scoped, upid);

	struct tp_track_spec sp;
	tp_track_spec_init(&sp, e->machine);
	sp.type = tp_s(ctx, process_scoped ? "legacy_async_process_slice"
					   : "legacy_async_global_slice");
	sp.name = e->name_id;
	tp_args_builder_reset(b);
	k = tp_s(ctx, "source");
	tp_args_add_str(b, k, k, tp_s(ctx, "chrome"));
	k = tp_s(ctx, "trace_id_is_process_scoped");
	tp_args_add_bool(b, k, k, process_scoped);
	k = tp_s(ctx, "upid");
	tp_args_add_uint(b, k, k, upid);
	if (scope) {
		k = tp_s(ctx, "source_scope");
		tp_args_add_str(b, k, k, scope);
	}
	sp.source_arg_set_id = tp_args_commit(ctx, b);

	struct tp_args_builder dims;
	tp_args_builder_init(&dims);
	if (process_scoped) {
		sp.upid = upid;
		k = tp_s(ctx, "upid");
		tp_args_add_int(&dims, k, k, upid);
	}
	if (scope) {
		k = tp_s(ctx, "scope");
		tp_args_add_str(&dims, k, k, scope);
	}
	if (root) {
		k = tp_s(ctx, "name");
		tp_args_add_str(&dims, k, k, root);
	}
	enum tp_compress_use use;
	uint32_t track;
	if (ph == 'b' || ph == 'S')
		use = TP_COMPRESS_BEGIN;
	else if (ph == 'e' || ph == 'T')
		use = TP_COMPRESS_END;
	else /* an instant opens and closes on the same track */
		use = TP_COMPRESS_INSTANT;
	track = tp_compress_track(ctx, &sp, &dims, use, e->source_id);
	tp_args_builder_free(&dims);
	return track;
}

/* The dimension args of a track of one process: its upid. */
static int64_t upid_dims(struct tp_ctx *ctx, uint32_t upid)
{
	struct tp_args_builder *b = &LS(ctx)->b;
	tp_str k = tp_s(ctx, "upid");

	tp_args_builder_reset(b);
	tp_args_add_int(b, k, k, upid);
	return tp_args_commit(ctx, b);
}

/* The source args of a track legacy Chrome events made. */
static int64_t chrome_source_args(struct tp_ctx *ctx)
{
	struct tp_args_builder *b = &LS(ctx)->b;
	tp_str k = tp_s(ctx, "source");

	tp_args_builder_reset(b);
	tp_args_add_str(b, k, k, tp_s(ctx, "chrome"));
	return tp_args_commit(ctx, b);
}

bool tp_te_legacy_track(struct tp_ctx *ctx, struct ev *e, uint32_t *track)
{
	int32_t ph = e->le.phase;

	if (!e->le.has_phase)
		return true;
	if (tp_te_async_phase(ph)) {
		bool process_scoped = false;
		if (e->le.has_unscoped_id) {
			e->source_id = (int64_t)e->le.unscoped_id;
		} else if (e->le.has_global_id) {
			e->source_id = (int64_t)e->le.global_id;
		} else if (e->le.has_local_id) {
			if (!e->has_upid)
				return false;
			e->source_id = (int64_t)e->le.local_id;
			process_scoped = true;
		} else {
			return false;
		}
		e->has_source_id = true;
		*track = legacy_async_track(ctx, e, process_scoped);
		/* The event's own thread, or none, replaces the sequence's. */
		e->has_passthrough = e->has_utid;
		e->passthrough_utid = e->utid;
		return true;
	}
	if (ph == 'i' || ph == 'I' || ph == 'R') {
		struct tp_track_spec sp;
		switch (e->le.instant_event_scope) {
		case SCOPE_GLOBAL:
			tp_track_spec_init(&sp, e->machine);
			sp.type = tp_s(ctx, "legacy_chrome_global_instants");
			*track = tp_track_intern(ctx, &sp);
			break;
		case SCOPE_PROCESS:
			if (!e->has_upid)
				return false;
			tp_track_spec_init(&sp, e->machine);
			sp.type = tp_s(ctx, "chrome_process_instant");
			sp.upid = e->upid;
			sp.dimension_arg_set_id = upid_dims(ctx, e->upid);
			sp.source_arg_set_id = chrome_source_args(ctx);
			*track = tp_track_intern(ctx, &sp);
			break;
		default:
			return e->has_utid;
		}
		/* The event's own thread, or none, replaces the sequence's. */
		e->has_passthrough = e->has_utid;
		e->passthrough_utid = e->utid;
		e->has_utid = false;
	}
	return true;
}

/* A metadata event's name: the first debug annotation's string value (0
 * when it has none, or an empty one); false when there is no annotation. */
static bool metadata_value(struct tp_ctx *ctx, const struct ev *e,
			   tp_str *v)
{
	struct pb_reader r, r2;
	struct pb_field f, g;

	*v = 0;
	pb_reader_init(&r, e->te, e->te_len);
	while (pb_next(&r, &f)) {
		if (f.num != TE_DEBUG_ANNOTATIONS || f.wt != PB_WT_LEN)
			continue;
		pb_reader_init(&r2, f.data, f.len);
		while (pb_next(&r2, &g))
			if (g.num == DA_STRING_VALUE && g.wt == PB_WT_LEN)
				*v = g.len ? tp_te_intern_bytes(ctx, g.data,
								g.len)
					   : 0;
		return true;
	}
	return false;
}

/* thread_name and process_name metadata events, as Perfetto's importer:
 * an event without its thread (process) or without annotations is a
 * parser error; the names rank as a descriptor's thread type (below a
 * thread descriptor's name) and as a descriptor's process name. */
void tp_te_metadata_event(struct tp_ctx *ctx, const struct ev *e)
{
	if (!e->name_id) {
		parser_error(ctx);
		return;
	}
	const char *n = tp_str_get(ctx->pool, e->name_id);
	bool thread = strcmp(n, "thread_name") == 0;
	bool process = strcmp(n, "process_name") == 0;
	tp_str v;
	if (!thread && !process)
		return;
	if (thread ? !e->has_utid : !e->has_upid) {
		parser_error(ctx);
		return;
	}
	if (!metadata_value(ctx, e, &v)) {
		parser_error(ctx);
		return;
	}
	if (!v)
		return;
	if (thread)
		tp_thread_set_name_prio(ctx, e->utid, v,
					TP_NAME_PRIO_THREAD_TYPE);
	else
		tp_process_set_name(ctx, e->upid, v);
}
