/*
 * tp_te_tokenize.c - the track_event module at tokenize, in file order
 * (see tp_te_tokenize.h).
 *
 * Track descriptors are reserved by uuid (tp_te_tracks.c) and pushed to
 * the sorter, so that process and thread names land in timestamp order
 * (tp_te_desc.c); the legacy per-sequence state is kept (pid / tid of the
 * sequence's thread, delta timestamp references, incremental counter
 * values); every event's timestamp is resolved and the event is pushed
 * with its payload header and a copy of its TrackEvent bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_ctx.h"
#include "tp_modules.h"
#include "tp_seq.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "tp_te_counters.h"
#include "tp_te_desc.h"
#include "tp_te_event.h"
#include "tp_te_state.h"
#include "tp_te_tokenize.h"
#include "tp_te_tracks.h"
#include "vp_alloc.h"

/* Per-sequence tokenizer state (tp_seq.te). */
enum { TS_NONE, TS_VALID, TS_INVALID };
struct te_seq {
	uint32_t td;     /* the sequence's thread descriptor slot + 1 */
	uint32_t td_gen; /* the generation that slot belongs to */
	uint8_t ts_state;
	int64_t ts_ns, thread_ts_ns, tic;
	bool defaults_cached;
	uint32_t defaults_gen;
	bool has_default_uuid;
	uint64_t default_uuid;
	/* uuid -> running value (double bits) of incremental counters: each
	 * sequence sums its own deltas, even on a track uuid shared with
	 * another sequence. */
	struct u64map counters;
};

struct tp_te_tok {
	uint8_t kind_event;
	struct pb_buf buf;
	struct tp_te_seq_td *tds; /* every sequence's, by generation */
	size_t ntds, captds;
	bool has_roi;
	int64_t roi_start_ns;
};

static struct tp_te_tok *T(struct tp_ctx *ctx)
{
	return ctx->te->tok;
}

struct tp_te_tok *tp_te_tok_new(uint8_t kind_event)
{
	struct tp_te_tok *t = vp_xcalloc(1, sizeof *t);
	t->kind_event = kind_event;
	pb_buf_init(&t->buf);
	return t;
}

void tp_te_tok_free(struct tp_te_tok *t)
{
	if (!t)
		return;
	pb_buf_free(&t->buf);
	free(t->tds);
	free(t);
}

/* ---- per-sequence state ------------------------------------------------- */

static struct te_seq *seq_state(struct tp_seq *seq)
{
	if (!seq)
		return NULL;
	if (!seq->te) {
		struct te_seq *t = vp_xcalloc(1, sizeof *t);
		u64map_init(&t->counters);
		seq->te = t;
	}
	return seq->te;
}

void tp_te_seq_reset(struct tp_ctx *ctx, struct tp_seq *seq)
{
	struct te_seq *t = seq->te;

	(void)ctx;
	if (!t)
		return;
	t->defaults_cached = false;
	tp_te_seq_lost(ctx, seq);
}

/* The sequence's delta state (reference timestamps, incremental counter
 * values) belongs to the packets before a loss or a reset: delta
 * timestamps wait for the next thread descriptor, counters restart
 * from 0. */
void tp_te_seq_lost(struct tp_ctx *ctx, struct tp_seq *seq)
{
	struct te_seq *t = seq->te;

	(void)ctx;
	if (!t)
		return;
	t->ts_state = TS_NONE;
	u64map_clear(&t->counters);
}

void tp_te_seq_free(struct tp_ctx *ctx, struct tp_seq *seq)
{
	struct te_seq *t = seq->te;

	(void)ctx;
	if (t)
		u64map_free(&t->counters);
	free(t);
	seq->te = NULL;
}

/* ---- thread descriptors ----------------------------------------------- */

/* The sequence's thread descriptor slot for generation gen: a new
 * generation starts from the one before's descriptor. */
static uint32_t seq_td_slot(struct tp_ctx *ctx, struct te_seq *t,
			    uint32_t gen)
{
	struct tp_te_tok *s = T(ctx);

	if (t->td && t->td_gen == gen)
		return t->td - 1;
	if (s->ntds == s->captds) {
		s->captds = s->captds ? 2 * s->captds : 64;
		s->tds = vp_xrealloc(s->tds, s->captds * sizeof *s->tds);
	}
	struct tp_te_seq_td *n = &s->tds[s->ntds];
	if (t->td)
		*n = s->tds[t->td - 1];
	else
		memset(n, 0, sizeof *n);
	t->td = (uint32_t)++s->ntds;
	t->td_gen = gen;
	return t->td - 1;
}

static void set_seq_thread(struct tp_ctx *ctx, struct te_seq *t,
			   uint32_t gen, const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	int64_t ref = 0, tref = 0, iref = 0;
	uint32_t slot = seq_td_slot(ctx, t, gen); /* may move tds */
	struct tp_te_seq_td *td = &T(ctx)->tds[slot];

	td->valid = true;
	td->pid = td->tid = 0;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		switch (f.num) {
		case THD_PID: td->pid = (int32_t)f.val; break;
		case THD_TID: td->tid = (int64_t)f.val; break;
		case THD_REFERENCE_TIMESTAMP_US: ref = (int64_t)f.val; break;
		case THD_REFERENCE_THREAD_TIME_US: tref = (int64_t)f.val; break;
		case THD_REFERENCE_THREAD_INSTRUCTION_COUNT:
			iref = (int64_t)f.val;
			break;
		default: break;
		}
	}
	t->ts_state = TS_VALID;
	t->ts_ns = sat_us_to_ns(ref);
	t->thread_ts_ns = sat_us_to_ns(tref);
	t->tic = iref;
}

const struct tp_te_seq_td *tp_te_seq_td(struct tp_ctx *ctx, uint32_t slot)
{
	struct tp_te_tok *s = T(ctx);
	return slot < s->ntds ? &s->tds[slot] : NULL;
}

bool tp_te_before_roi(struct tp_ctx *ctx, int64_t ts)
{
	struct tp_te_tok *s = T(ctx);
	return s->has_roi && ts < s->roi_start_ns;
}

/* ---- tokenize ----------------------------------------------------------- */

static void tokenize_track_descriptor(struct tp_ctx *ctx,
				      const struct tp_packet *pkt,
				      const uint8_t *p, size_t len)
{
	struct desc d;

	if (!tp_te_desc_decode(p, len, &d)) {
		tp_stat_inc(ctx, "track_event_tokenizer_errors");
		return;
	}
	if (!d.has_uuid) {
		tp_stat_inc(ctx, "track_descriptor_missing_uuid");
		return;
	}
	if (d.thread && pkt->seq && pkt->seq->st.valid) {
		bool hp, ht;
		int64_t pid, tid;
		tp_te_pid_tid(d.thread, d.thread_len, &hp, &pid, &ht, &tid);
		if (hp && ht)
			set_seq_thread(ctx, seq_state(pkt->seq), pkt->gen,
				       d.thread,
				       d.thread_len);
	}
	tp_te_reserve(ctx, pkt, &d);
	tp_te_desc_push(ctx, pkt, TE_DESC_TRACK, p, len);
}

static void tokenize_thread_descriptor(struct tp_ctx *ctx,
				       const struct tp_packet *pkt,
				       const uint8_t *p, size_t len)
{
	/* Perfetto's stat names for each reason a descriptor is skipped */
	if (!pkt->seq || !pkt->env->has_seq_id) {
		tp_stat_inc(ctx, "thread_descriptor_missing_sequence_id");
		return;
	}
	if (!pkt->seq->st.valid) {
		tp_stat_inc(ctx,
			    "thread_descriptor_skipped_incremental_state_invalid");
		return;
	}
	set_seq_thread(ctx, seq_state(pkt->seq), pkt->gen, p, len);
	tp_te_desc_push(ctx, pkt, TE_DESC_THREAD, p, len);
}

static void tokenize_streaming_profile(struct tp_ctx *ctx,
				       const struct tp_packet *pkt,
				       const uint8_t *p, size_t len)
{
	struct te_seq *t = seq_state(pkt->seq);
	struct pb_reader r;
	struct pb_field f;

	if (!t)
		return;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != SPP_TIMESTAMP_DELTA_US)
			continue;
		struct pb_packed_iter it;
		uint64_t v;
		if (f.wt == PB_WT_LEN) {
			pb_packed_init(&it, f.data, f.len);
		} else if (f.wt == PB_WT_VARINT) {
			it.p = it.end = NULL;
			it.bad = false;
		} else {
			continue;
		}
		bool single = f.wt == PB_WT_VARINT, done = false;
		while (!done) {
			if (single) {
				v = f.val;
				done = true;
			} else if (!pb_packed_next(&it, &v)) {
				break;
			}
			int64_t dns, nts;
			if (t->ts_state != TS_VALID ||
			    mul_overflow_us((int64_t)v, &dns) ||
			    __builtin_add_overflow(t->ts_ns, dns, &nts)) {
				if (t->ts_state == TS_VALID)
					t->ts_state = TS_INVALID;
				tp_stat_inc(ctx,
					    "streaming_profile_invalid_timestamp");
				continue;
			}
			t->ts_ns = nts;
		}
	}
}

/* The sequence's TrackEventDefaults.track_uuid, cached per generation. */
static bool default_uuid(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 struct te_seq *t, uint64_t *uuid)
{
	if (!t->defaults_cached || t->defaults_gen != pkt->gen) {
		const uint8_t *d;
		size_t dlen;
		struct pb_reader r, r2;
		struct pb_field f, g;

		t->defaults_cached = true;
		t->defaults_gen = pkt->gen;
		t->has_default_uuid = false;
		tp_packet_defaults(ctx, pkt->gen, &d, &dlen);
		pb_reader_init(&r, d, dlen);
		while (pb_next(&r, &f)) {
			if (f.num != TPD_TRACK_EVENT_DEFAULTS ||
			    f.wt != PB_WT_LEN)
				continue;
			pb_reader_init(&r2, f.data, f.len);
			while (pb_next(&r2, &g))
				if (g.num == TED_TRACK_UUID &&
				    g.wt == PB_WT_VARINT) {
					t->has_default_uuid = true;
					t->default_uuid = g.val;
				}
		}
	}
	*uuid = t->default_uuid;
	return t->has_default_uuid;
}

/* What is wrong with a counter event, in Perfetto's order, under its
 * stat: no track uuid (its own or the defaults'), no value, a uuid that is
 * not a counter track.  NULL when it is fine: *v is then the absolute
 * value (the running sum of an incremental counter updated). */
static const char *counter_error(struct tp_ctx *ctx,
				 const struct tp_packet *pkt,
				 struct te_seq *t, bool has_uuid,
				 uint64_t uuid, bool has_default_uuid,
				 bool has_value, double *v)
{
	if (!has_uuid && !has_default_uuid)
		return "track_event_counter_missing_track_uuid";
	if (!has_value)
		return "track_event_counter_missing_value";
	if (!tp_te_counter_value(ctx, pkt->machine, &t->counters, uuid, *v,
				 v))
		return "track_event_counter_invalid_track_uuid";
	return NULL;
}

/* A track event's timestamp below 0 (before any clock conversion, where
 * an offset could turn it positive again) drops it, as Perfetto does. */
static bool negative_timestamp(struct tp_ctx *ctx, int64_t ts)
{
	if (ts >= 0)
		return false;
	tp_stat_inc(ctx, "track_event_invalid_timestamp");
	return true;
}

static void tokenize_track_event(struct tp_ctx *ctx,
				 const struct tp_packet *pkt,
				 const uint8_t *p, size_t len)
{
	struct tp_te_tok *s = T(ctx);
	struct te_seq *t = seq_state(pkt->seq);
	struct pb_reader r;
	struct pb_field f;
	bool has_delta = false, has_abs = false, has_tdelta = false,
	     has_tabs = false, has_idelta = false, has_iabs = false,
	     has_track_uuid = false, has_counter = false, has_extra = false;
	int64_t delta = 0, abs_us = 0, tdelta = 0, tabs = 0, idelta = 0,
		iabs = 0;
	uint64_t type = 0, track_uuid = 0;
	double cval = 0;

	if (!t) {
		tp_stat_inc(ctx, "track_event_tokenizer_errors");
		return;
	}
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TE_TIMESTAMP_DELTA_US:
			has_delta = true;
			delta = (int64_t)f.val;
			break;
		case TE_TIMESTAMP_ABSOLUTE_US:
			has_abs = true;
			abs_us = (int64_t)f.val;
			break;
		case TE_THREAD_TIME_DELTA_US:
			has_tdelta = true;
			tdelta = (int64_t)f.val;
			break;
		case TE_THREAD_TIME_ABSOLUTE_US:
			has_tabs = true;
			tabs = (int64_t)f.val;
			break;
		case TE_THREAD_INSTRUCTION_COUNT_DELTA:
			has_idelta = true;
			idelta = (int64_t)f.val;
			break;
		case TE_THREAD_INSTRUCTION_COUNT_ABSOLUTE:
			has_iabs = true;
			iabs = (int64_t)f.val;
			break;
		case TE_TYPE: type = f.val; break;
		case TE_TRACK_UUID:
			has_track_uuid = true;
			track_uuid = f.val;
			break;
		case TE_COUNTER_VALUE:
			has_counter = true;
			cval = (double)(int64_t)f.val;
			break;
		case TE_DOUBLE_COUNTER_VALUE:
			if (f.wt == PB_WT_FIXED64) {
				has_counter = true;
				memcpy(&cval, &f.val, 8);
			}
			break;
		case TE_EXTRA_COUNTER_VALUES:
		case TE_EXTRA_DOUBLE_COUNTER_VALUES:
			has_extra = true;
			break;
		default: break;
		}
	}
	if (r.err != PB_OK) {
		tp_stat_inc(ctx, "track_event_tokenizer_errors");
		return;
	}

	/* Timestamp. */
	int64_t ts;
	if (has_delta) {
		int64_t nts;
		if (t->ts_state == TS_NONE) {
			tp_stat_inc(ctx, "track_event_skipped_timestamp_delta_"
					 "without_valid_state");
			return;
		}
		if (t->ts_state == TS_INVALID) {
			tp_stat_inc(ctx, "track_event_invalid_timestamp");
			return;
		}
		t->ts_ns = nts = sat_add(t->ts_ns, sat_us_to_ns(delta));
		if (negative_timestamp(ctx, nts))
			return;
		/* MONOTONIC, in trace time where a snapshot links it; else
		 * as written (the failure counted), as Perfetto keeps it */
		if (!tp_to_trace_time(ctx, pkt, BUILTIN_CLOCK_MONOTONIC, nts, &ts))
			ts = nts;
	} else if (has_abs && abs_us) {
		int64_t ns = sat_us_to_ns(abs_us);
		if (negative_timestamp(ctx, ns))
			return;
		if (!tp_to_trace_time(ctx, pkt, BUILTIN_CLOCK_MONOTONIC, ns, &ts))
			ts = ns;
	} else if (pkt->has_ts && !pkt->ts_implied) {
		ts = pkt->ts;
		if (negative_timestamp(ctx, ts))
			return;
	} else { /* a track event needs a timestamp of its own */
		tp_stat_inc(ctx, "track_event_missing_timestamp");
		return;
	}

	uint32_t flags = 0;
	int64_t thread_ts = 0, tic = 0;
	if (has_tdelta) {
		if (t->ts_state != TS_VALID) {
			tp_stat_inc(ctx, "track_event_skipped_thread_time_delta_"
					 "without_valid_state");
			return;
		}
		thread_ts = sat_add(t->thread_ts_ns, sat_us_to_ns(tdelta));
		t->thread_ts_ns = thread_ts;
		flags |= F_THREAD_TS;
	} else if (has_tabs) {
		thread_ts = sat_us_to_ns(tabs);
		flags |= F_THREAD_TS;
	}
	if (has_idelta) {
		if (t->ts_state != TS_VALID) {
			tp_stat_inc(ctx, "track_event_skipped_thread_"
					 "instruction_delta_without_valid_state");
			return;
		}
		t->tic = sat_add(t->tic, idelta);
		tic = t->tic;
		flags |= F_TIC;
	} else if (has_iabs) {
		tic = iabs;
		flags |= F_TIC;
	}

	uint64_t duuid = 0;
	if (default_uuid(ctx, pkt, t, &duuid))
		flags |= F_DEFAULT_UUID;
	uint32_t td = seq_td_slot(ctx, t, pkt->gen);
	flags |= F_PIDTID;
	if (pkt->machine)
		flags |= F_MACHINE;

	if (type == TE_TYPE_COUNTER) {
		const char *err = counter_error(ctx, pkt, t, has_track_uuid,
						has_track_uuid ? track_uuid
							       : duuid,
						(flags & F_DEFAULT_UUID) != 0,
						has_counter, &cval);
		if (err) {
			tp_stat_inc(ctx, err);
			return;
		}
		flags |= F_COUNTER;
	}

	struct pb_buf *b = &s->buf;
	pb_buf_reset(b);
	pb_buf_reserve(b, 64 + len);
	if (has_extra)
		flags |= F_EXTRA;
	pb_put_raw_varint(b, flags);
	pb_put_raw_varint(b, pkt->seq ? pkt->seq->id : 0);
	pb_put_raw_varint(b, pkt->gen);
	if (flags & F_MACHINE)
		pb_put_raw_varint(b, pkt->machine);
	if (flags & F_THREAD_TS)
		pb_put_raw_varint(b, pb_zigzag_encode(thread_ts));
	if (flags & F_TIC)
		pb_put_raw_varint(b, pb_zigzag_encode(tic));
	if (flags & F_PIDTID)
		pb_put_raw_varint(b, td);
	if (flags & F_DEFAULT_UUID)
		pb_put_raw_varint(b, duuid);
	if (flags & F_COUNTER)
		put_double(b, cval);
	if (flags & F_EXTRA) {
		struct pb_buf tmp;
		size_t n;
		pb_buf_init(&tmp);
		if (!tp_te_tokenize_extra_counters(ctx, pkt, &t->counters,
						   p, len, &tmp, &n)) {
			pb_buf_free(&tmp); /* counted */
			return;
		}
		pb_put_raw_varint(b, n);
		pb_put_raw(b, tmp.data, tmp.len);
		pb_buf_free(&tmp);
	}
	pb_put_raw(b, p, len);
	tp_sort_push(ctx->sorter, tp_seq_te_queue(ctx, pkt->seq), ts,
		     s->kind_event, b->data, b->len);
}

bool tp_te_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
		    const struct pb_field *f)
{
	if (f->wt != PB_WT_LEN) {
		switch (f->num) {
		case TP_TRACK_EVENT:
		case TP_PROCESS_DESCRIPTOR:
		case TP_THREAD_DESCRIPTOR:
		case TP_STREAMING_PROFILE_PACKET:
		case TP_TRACK_DESCRIPTOR:
		case TP_TRACK_EVENT_RANGE_OF_INTEREST:
			return true;
		default:
			return false;
		}
	}
	switch (f->num) {
	case TP_TRACK_EVENT:
		/* Dropped without a sequence id, as Perfetto drops them. */
		if (!pkt->env->has_seq_id) {
			tp_stat_add(ctx, "track_event_missing_sequence_id",
				    pkt->machine, -1, 1);
			return true;
		}
		if (!pkt->seq) {
			tp_stat_inc(ctx, "track_event_tokenizer_errors");
			return true;
		}
		tokenize_track_event(ctx, pkt, f->data, f->len);
		return true;
	case TP_TRACK_DESCRIPTOR:
		tokenize_track_descriptor(ctx, pkt, f->data, f->len);
		return true;
	case TP_THREAD_DESCRIPTOR:
		if (!pkt->env->has_seq_id) {
			tp_stat_add(ctx, "thread_descriptor_missing_sequence_id",
				    pkt->machine, -1, 1);
			return true;
		}
		tokenize_thread_descriptor(ctx, pkt, f->data, f->len);
		return true;
	case TP_PROCESS_DESCRIPTOR:
		tp_te_desc_push(ctx, pkt, TE_DESC_PROCESS, f->data, f->len);
		return true;
	case TP_STREAMING_PROFILE_PACKET:
		tokenize_streaming_profile(ctx, pkt, f->data, f->len);
		return false; /* samples belong to the profiling module */
	case TP_TRACK_EVENT_RANGE_OF_INTEREST: {
		struct pb_reader r;
		struct pb_field g;
		bool found = false;
		pb_reader_init(&r, f->data, f->len);
		while (pb_next(&r, &g))
			if (g.num == ROI_START_US && g.wt == PB_WT_VARINT) {
				struct tp_te_tok *s = T(ctx);
				int64_t us = (int64_t)g.val;
				found = true;
				if (mul_overflow_us(us, &s->roi_start_ns))
					s->roi_start_ns =
						us < 0 ? INT64_MIN : INT64_MAX;
				s->has_roi = true;
				tp_meta_set_int(ctx, "range_of_interest_start_us",
						-1, us);
			}
		if (!found)
			tp_stat_inc(ctx, "track_event_tokenizer_errors");
		return true;
	}
	default:
		return false;
	}
}

