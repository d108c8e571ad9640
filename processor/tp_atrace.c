/*
 * tp_atrace.c - atrace's async slices on shared process tracks.
 *
 * An async slice is keyed by a cookie, and many may be open at once; as in
 * Perfetto (v58) they go on a set of tracks per (process, name) for S/F
 * (type atrace_async_slice, named after the slice) and per (process,
 * track name) for G/H/N (atrace_async_slice_for_track, named after the
 * track), a new track of the set only when the others are busy
 * (tp_compress.h).  S/F slices do not nest: a second S on a track whose
 * slice is open is dropped (Android's PowerManager writes such S lines).
 * N|tgid|DeviceStateChanged|name goes to a global android_device_state
 * track instead.
 */
#include "tp_atrace.h"

#include <string.h>

#include "tp_args.h"
#include "tp_compress.h"
#include "tp_ctx.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_tracks.h"

/* The dimensions of a set: the process and the name. */
static void set_spec(struct tp_ctx *ctx, uint32_t machine, const char *type,
		     uint32_t upid, tp_str name, struct tp_track_spec *s,
		     struct tp_args_builder *dims)
{
	tp_track_spec_init(s, machine);
	s->type = tp_s(ctx, type);
	s->name = name;
	s->upid = upid;
	tp_str k = tp_s(ctx, "upid");
	tp_args_add_int(dims, k, k, upid);
	k = tp_s(ctx, "name");
	tp_args_add_str(dims, k, k, name);
}

/* An arg set of one unsigned arg (utid, end_utid), or of one int (cookie). */
static int64_t one_arg(struct tp_ctx *ctx, const char *key, int64_t v,
		       bool is_uint)
{
	struct tp_args_builder b;
	tp_str k = tp_s(ctx, key);
	tp_args_builder_init(&b);
	if (is_uint)
		tp_args_add_uint(&b, k, k, (uint64_t)v);
	else
		tp_args_add_int(&b, k, k, v);
	int64_t id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return id;
}

void tp_atrace_async(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t tgid, tp_str name, int64_t cookie, bool begin)
{
	struct tp_track_spec s;
	struct tp_args_builder dims;
	uint32_t upid = tp_process_get(ctx, machine, tgid);
	tp_args_builder_init(&dims);
	set_spec(ctx, machine, "atrace_async_slice", upid, name, &s, &dims);
	if (begin) {
		uint32_t t = tp_compress_track(ctx, &s, &dims,
					       TP_COMPRESS_BEGIN_ONCE, cookie);
		tp_slice_begin_unnestable(ctx, t, ts, name,
					  one_arg(ctx, "cookie", cookie, false));
	} else {
		uint32_t t = tp_compress_track(ctx, &s, &dims, TP_COMPRESS_END,
					       cookie);
		tp_slice_end(ctx, t, ts, 0, 0, -1);
	}
	tp_args_builder_free(&dims);
}

void tp_atrace_track_begin(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			   int64_t pid, int64_t tgid, tp_str track,
			   tp_str name, int64_t cookie)
{
	struct tp_track_spec s;
	struct tp_args_builder dims;
	uint32_t upid = tp_process_get(ctx, machine, tgid);
	tp_args_builder_init(&dims);
	set_spec(ctx, machine, "atrace_async_slice_for_track", upid, track, &s,
		 &dims);
	uint32_t t = tp_compress_track(ctx, &s, &dims, TP_COMPRESS_BEGIN,
				       cookie);
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	tp_slice_begin(ctx, t, ts, 0, name, one_arg(ctx, "utid", utid, true));
	tp_args_builder_free(&dims);
}

void tp_atrace_track_end(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			 int64_t pid, int64_t tgid, tp_str track,
			 int64_t cookie)
{
	struct tp_track_spec s;
	struct tp_args_builder dims;
	uint32_t upid = tp_process_get(ctx, machine, tgid);
	tp_args_builder_init(&dims);
	set_spec(ctx, machine, "atrace_async_slice_for_track", upid, track, &s,
		 &dims);
	uint32_t t = tp_compress_track(ctx, &s, &dims, TP_COMPRESS_END,
				       cookie);
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	tp_slice_end(ctx, t, ts, 0, 0, one_arg(ctx, "end_utid", utid, true));
	tp_args_builder_free(&dims);
}

void tp_atrace_track_instant(struct tp_ctx *ctx, int64_t ts,
			     uint32_t machine, int64_t pid, int64_t tgid,
			     tp_str track, tp_str name)
{
	struct tp_track_spec s;
	const char *tn = tp_str_get(ctx->pool, track);
	if (tn && strcmp(tn, "DeviceStateChanged") == 0) {
		tp_track_spec_init(&s, machine);
		s.type = tp_s(ctx, "android_device_state");
		s.name = track;
		tp_slice_complete(ctx, tp_track_intern(ctx, &s), ts, 0, 0, name,
				  -1);
		return;
	}
	struct tp_args_builder dims;
	uint32_t upid = tp_process_get(ctx, machine, tgid);
	tp_args_builder_init(&dims);
	set_spec(ctx, machine, "atrace_async_slice_for_track", upid, track, &s,
		 &dims);
	uint32_t t = tp_compress_scoped(ctx, &s, &dims, ts, 0);
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	tp_slice_complete(ctx, t, ts, 0, 0, name,
			  one_arg(ctx, "utid", utid, true));
	tp_args_builder_free(&dims);
}
