/*
 * tp_te_counters.c - the counter values of track events (see
 * tp_te_counters.h).
 *
 * Values are made absolute at tokenize, where the order of a sequence's
 * packets is known (an incremental counter's deltas are summed per
 * sequence, even on a track uuid shared with another), and travel in the
 * event's payload to the parse, which puts them on their tracks.
 */
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_seq.h"
#include "tp_stats.h"
#include "tp_te_counters.h"
#include "tp_te_event.h"
#include "tp_te_tracks.h"
#include "tp_tracks.h"

/* Perfetto's kMaxNumExtraCounters: an event with more extra counter
 * values (of both kinds together) is dropped.  Each kind is collected up
 * to one more, enough to see that. */
#define MAX_EXTRA_COUNTERS 8
#define COLLECT_EXTRA (MAX_EXTRA_COUNTERS + 1)

/* ---- tokenize ----------------------------------------------------------- */

static size_t collect_uuids(const uint8_t *p, size_t len, uint32_t num,
			    uint64_t *out, size_t max)
{
	struct pb_reader r;
	struct pb_field f;
	size_t n = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != num)
			continue;
		if (f.wt == PB_WT_VARINT) {
			if (n < max)
				out[n++] = f.val;
		} else if (f.wt == PB_WT_LEN) {
			struct pb_packed_iter it;
			uint64_t v;
			pb_packed_init(&it, f.data, f.len);
			while (pb_packed_next(&it, &v))
				if (n < max)
					out[n++] = v;
		}
	}
	return n;
}

/* Extra counter track uuids of the defaults (field num), into out. */
static size_t default_extra_uuids(struct tp_ctx *ctx, uint32_t gen,
				  uint32_t num, uint64_t *out, size_t max)
{
	const uint8_t *d;
	size_t dlen;
	struct pb_reader r;
	struct pb_field f;

	tp_packet_defaults(ctx, gen, &d, &dlen);
	pb_reader_init(&r, d, dlen);
	while (pb_next(&r, &f))
		if (f.num == TPD_TRACK_EVENT_DEFAULTS && f.wt == PB_WT_LEN)
			return collect_uuids(f.data, f.len, num, out, max);
	return 0;
}

/* Counter value in absolute units for a counter track (tokenize order). */
bool tp_te_counter_value(struct tp_ctx *ctx, uint32_t machine,
			 struct u64map *sums, uint64_t uuid, double v,
			 double *out)
{
	struct res *r = tp_te_res_find(ctx, machine, uuid);
	if (!r || r->kind != RES_COUNTER)
		return false;
	if (r->unit_multiplier > 0)
		v *= (double)r->unit_multiplier;
	if (r->is_incremental) {
		uint64_t bits = 0;
		double sum = 0;
		if (!sums)
			return false;
		if (u64map_get(sums, uuid, &bits))
			memcpy(&sum, &bits, sizeof sum);
		sum += v;
		memcpy(&bits, &sum, sizeof bits);
		u64map_put(sums, uuid, bits);
		v = sum;
	}
	*out = v;
	return true;
}

/* Collects values (repeated int64 or double, packed or not) of field num. */
static size_t collect_values(const uint8_t *p, size_t len, uint32_t num,
			     bool is_double, double *out, size_t max)
{
	struct pb_reader r;
	struct pb_field f;
	size_t n = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != num)
			continue;
		if (!is_double && f.wt == PB_WT_VARINT) {
			if (n < max)
				out[n++] = (double)(int64_t)f.val;
		} else if (is_double && f.wt == PB_WT_FIXED64) {
			double d;
			memcpy(&d, &f.val, 8);
			if (n < max)
				out[n++] = d;
		} else if (f.wt == PB_WT_LEN && !is_double) {
			struct pb_packed_iter it;
			uint64_t v;
			pb_packed_init(&it, f.data, f.len);
			while (pb_packed_next(&it, &v))
				if (n < max)
					out[n++] = (double)(int64_t)v;
		} else if (f.wt == PB_WT_LEN && is_double) {
			for (size_t i = 0; i + 8 <= f.len; i += 8) {
				double d;
				memcpy(&d, f.data + i, 8);
				if (n < max)
					out[n++] = d;
			}
		}
	}
	return n;
}

/* The error of an extra counter value, checked in Perfetto's order: no
 * track uuid for it (or uuid 0), too many values, no counter track.  NULL
 * when it is fine; the counter's running sum is updated then. */
static const char *extra_counter(struct tp_ctx *ctx,
				 const struct tp_packet *pkt,
				 struct u64map *sums, uint64_t uuid,
				 size_t index, double v, double *out)
{
	if (!uuid)
		return "track_event_extra_counter_track_uuid_mismatch";
	if (index >= MAX_EXTRA_COUNTERS)
		return "track_event_extra_counter_exceeds_max";
	if (!tp_te_counter_value(ctx, pkt->machine, sums, uuid, v, out))
		return "track_event_extra_counter_invalid_track";
	return NULL;
}

bool tp_te_tokenize_extra_counters(struct tp_ctx *ctx,
				   const struct tp_packet *pkt,
				   struct u64map *sums, const uint8_t *p,
				   size_t len, struct pb_buf *out,
				   size_t *count)
{
	uint64_t uuids[COLLECT_EXTRA];
	double vals[COLLECT_EXTRA];
	static const struct {
		uint32_t values, uuids, defaults;
		bool is_double;
	} kinds[2] = {
		{ TE_EXTRA_COUNTER_VALUES, TE_EXTRA_COUNTER_TRACK_UUIDS,
		  TED_EXTRA_COUNTER_TRACK_UUIDS, false },
		{ TE_EXTRA_DOUBLE_COUNTER_VALUES,
		  TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS,
		  TED_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS, true },
	};

	*count = 0;
	for (int k = 0; k < 2; k++) {
		size_t nv = collect_values(p, len, kinds[k].values,
					   kinds[k].is_double, vals,
					   COLLECT_EXTRA);
		if (!nv)
			continue;
		size_t nu = collect_uuids(p, len, kinds[k].uuids, uuids,
					  COLLECT_EXTRA);
		if (!nu)
			nu = default_extra_uuids(ctx, pkt->gen,
						 kinds[k].defaults, uuids,
						 COLLECT_EXTRA);
		if (!nu) {
			tp_stat_inc(ctx, "track_event_extra_counter_"
					 "missing_track_uuids");
			return false;
		}
		for (size_t i = 0; i < nv; i++) {
			double v;
			const char *err = extra_counter(ctx, pkt, sums,
							i < nu ? uuids[i] : 0,
							*count, vals[i], &v);
			if (err) {
				tp_stat_inc(ctx, err);
				return false;
			}
			pb_put_raw_varint(out, uuids[i]);
			put_double(out, v);
			(*count)++;
		}
	}
	return true;
}

/* ---- parse -------------------------------------------------------------- */

void tp_te_extra_counters(struct tp_ctx *ctx, const struct ev *e, int64_t ts)
{
	const uint8_t *p = e->extra, *end = e->te;
	for (uint64_t i = 0; i < e->nextra; i++) {
		uint64_t uuid;
		double v;
		if (!pb_read_varint(&p, end, &uuid) || end - p < 8)
			return;
		memcpy(&v, p, 8);
		p += 8;
		struct res *r = tp_te_event_res(ctx, uuid, e->machine, ts);
		int64_t track = r ? tp_te_track_for(ctx, r, 0, e->seq_id,
						   USE_OTHER)
				  : -1;
		if (track >= 0)
			tp_counter_add(ctx, (uint32_t)track, ts, v, -1);
	}
}

/* The counter track of the thread is found again by type, name and
 * thread. */
static void legacy_thread_counter(struct tp_ctx *ctx, const struct ev *e,
				  const char *type, const char *name,
				  int64_t ts, int64_t value)
{
	struct tp_track_spec sp;

	tp_track_spec_init(&sp, e->machine);
	sp.type = tp_s(ctx, type);
	sp.name = tp_s(ctx, name);
	sp.event_type = tp_s(ctx, "counter");
	sp.utid = e->utid;
	sp.dimension_arg_set_id = tp_args_one_int(ctx, "utid", e->utid);
	tp_counter_add(ctx, tp_track_intern(ctx, &sp), ts, (double)value, -1);
}

void tp_te_legacy_thread_counters(struct tp_ctx *ctx, const struct ev *e,
				  int64_t ts)
{
	if (!e->has_utid)
		return;
	if (e->flags & F_THREAD_TS)
		legacy_thread_counter(ctx, e, "thread_time", "thread_time", ts,
				      e->thread_ts);
	if (e->flags & F_TIC)
		legacy_thread_counter(ctx, e, "thread_instructions",
				      "thread_instruction_count", ts, e->tic);
}
