/*
 * tp_track_event.c - the track_event module: TrackEvent, TrackDescriptor,
 * the legacy ThreadDescriptor / ProcessDescriptor packets, the delta
 * timestamps of StreamingProfilePacket and the range of interest.
 *
 * Tokenize (file order): track descriptors are reserved by uuid (their
 * kind, pid / tid, parent, name, merge behaviour, counter settings; a
 * later descriptor of a uuid may only name it), the legacy per-sequence
 * state is kept (pid / tid of the sequence's thread, delta timestamp
 * references, incremental counter values), every event's timestamp is
 * resolved and the event is pushed to the sorter with a small header and
 * a copy of its TrackEvent bytes.  Descriptors are pushed too, so that
 * process and thread names land in timestamp order.
 *
 * Parse (timestamp order): descriptors are resolved to a thread, a
 * process or the global scope (pid and tid reuse, parents); a track is
 * made only when an event (or a child's event) lands on it, named by its
 * reservation or else by that first event, and a track that may merge
 * with its siblings takes a lane of a shared set (all in tp_te_tracks.c).
 * Events go to their track (explicit uuid, sequence default, legacy pid /
 * tid fallback, legacy async ids, instant scopes) and become slices,
 * counter values, states and flows, with their debug annotations and
 * typed fields as args.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_compress.h"
#include "tp_flows.h"
#include "tp_ctx.h"
#include "tp_json.h"
#include "tp_seq.h"
#include "tp_modules.h"
#include "tp_process.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_sort.h"
#include "tp_states.h"
#include "tp_stats.h"
#include "tp_te_tracks.h"
#include "tp_tracks.h"

/* Field numbers and enum values are perfetto_fields.h's (protos/). */

#define MAX_NESTING 64
#define MAX_EXTRA_COUNTERS 32
#define CACHE_SIZE 1024
#define MAX_PENDING 4096 /* open slices whose args wait for their end */

/* ---- state -------------------------------------------------------------- */

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

/* A sequence's thread descriptor within one generation.  Events read it
 * when parsed, not when tokenized: a descriptor later in the same
 * generation holds for the events before it too, as Perfetto's shared
 * incremental state does. */
struct seq_td {
	bool valid;
	int64_t pid, tid;
};

struct cache_ent {
	uint32_t gen, field;
	uint64_t iid;
	tp_str s;
};

/* Args of an open slice, committed when it ends (as Perfetto does), so
 * that end-event args merge into one set. */
struct pending {
	uint32_t slice;
	uint32_t next_free;
	uint32_t active_pos;
	bool used;
	struct tp_args_builder b;
};

struct tp_te_state {
	uint8_t kind_event, kind_desc;
	/* distinct (category << 32 | name) of events, in order of use */
	struct u64map annotations;
	uint64_t *annotation_keys;
	size_t nannotations, capannotations;
	bool has_roi;
	int64_t roi_start_ns;
	struct pb_buf buf;
	struct tp_args_builder b, b2;
	struct u64map async_tracks;  /* legacy async id -> its root name */
	uint32_t *active; /* pending slots in use, most recent last */
	size_t nactive, capactive;
	struct pending *pending;
	size_t npending, cappending;
	uint32_t free_pending; /* free slot list head + 1 */
	struct seq_td *tds;
	size_t ntds, captds;
	struct cache_ent cache[CACHE_SIZE];
	/* frequent strings */
	tp_str s_slice, s_counter, s_thread, s_process;
	tp_str s_passthrough; /* "legacy_event.passthrough_utid" */
};

static struct tp_te_state *S(struct tp_ctx *ctx)
{
	return ctx->te;
}

static void parse_event(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len);
static void parse_desc(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
		       size_t len);

void tp_te_init(struct tp_ctx *ctx)
{
	struct tp_te_state *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	ctx->te = s;
	ctx->te_tracks = tp_te_tracks_new();
	s->kind_event = tp_sort_register(ctx->sorter, parse_event);
	s->kind_desc = tp_sort_register(ctx->sorter, parse_desc);
	u64map_init(&s->annotations);
	pb_buf_init(&s->buf);
	tp_args_builder_init(&s->b);
	tp_args_builder_init(&s->b2);
	u64map_init(&s->async_tracks);
	s->s_slice = tp_s(ctx, "slice");
	s->s_counter = tp_s(ctx, "counter");
	s->s_thread = tp_s(ctx, "thread");
	s->s_process = tp_s(ctx, "process");
	s->s_passthrough = tp_s(ctx, "legacy_event.passthrough_utid");
}

void tp_te_free(struct tp_ctx *ctx)
{
	struct tp_te_state *s = S(ctx);
	if (!s)
		return;
	tp_te_tracks_free(ctx->te_tracks);
	ctx->te_tracks = NULL;
	u64map_free(&s->annotations);
	free(s->annotation_keys);
	pb_buf_free(&s->buf);
	tp_args_builder_free(&s->b);
	tp_args_builder_free(&s->b2);
	u64map_free(&s->async_tracks);
	free(s->active);
	for (size_t i = 0; i < s->npending; i++)
		tp_args_builder_free(&s->pending[i].b);
	free(s->pending);
	free(s->tds);
	free(s);
	ctx->te = NULL;
}

static void commit_pending(struct tp_ctx *ctx, uint32_t slot);
static void annotation_args(struct tp_ctx *ctx);

void tp_te_first_packet(struct tp_ctx *ctx, uint32_t seq_id)
{
	tp_te_tracks_first_packet(ctx, seq_id);
}

/* Slices still open (or closed by nesting repair) get their args now. */
void tp_te_finish(struct tp_ctx *ctx)
{
	struct tp_te_state *s = S(ctx);
	while (s->nactive)
		commit_pending(ctx, s->active[s->nactive - 1]);
	tp_te_tracks_finish(ctx);
	annotation_args(ctx);
}

static struct te_seq *seq_state(struct tp_seq *seq)
{
	if (!seq)
		return NULL;
	if (!seq->te) {
		struct te_seq *t = calloc(1, sizeof *t);
		if (!t)
			abort();
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

/* ---- small helpers ---------------------------------------------------- */

static bool mul_overflow_us(int64_t us, int64_t *ns)
{
	return __builtin_mul_overflow(us, (int64_t)1000, ns);
}

static tp_str intern_bytes(struct tp_ctx *ctx, const uint8_t *p, size_t n)
{
	return tp_intern(ctx->pool, (const char *)p, strnlen((const char *)p, n));
}

/* The cache entry for (generation, field, iid): every input bit reaches
 * the slot index, so sequences (one generation each) do not evict each
 * other's names. */
static struct cache_ent *cache_slot(struct tp_te_state *s, uint32_t gen,
				    uint32_t field, uint64_t iid)
{
	uint64_t h = (iid + 1) * 0x9e3779b97f4a7c15ull ^
		     ((uint64_t)gen + 1) * 0xc2b2ae3d27d4eb4full ^
		     (uint64_t)field * 0x165667b19e3779f9ull;
	h ^= h >> 31;
	h *= 0xff51afd7ed558ccdull;
	return &s->cache[(h >> 40) & (CACHE_SIZE - 1)];
}

/* Interned string (InternedData field, iid) of generation gen, cached. */
static tp_str interned(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		       uint64_t iid)
{
	struct tp_te_state *s = S(ctx);
	struct cache_ent *e = cache_slot(s, gen, field, iid);

	if (e->s && e->gen == gen && e->field == field && e->iid == iid)
		return e->s;
	tp_str r = tp_interned_str(ctx, gen, field, iid, INTERNED_NAME);
	if (r) {
		e->gen = gen;
		e->field = field;
		e->iid = iid;
		e->s = r;
	}
	return r;
}

/* "debug.<name>" for an interned annotation name, cached. */
static tp_str interned_debug_key(struct tp_ctx *ctx, uint32_t gen,
				 uint64_t iid)
{
	const uint32_t field = 0x10000 | ID_DEBUG_ANNOTATION_NAMES;
	struct tp_te_state *s = S(ctx);
	struct cache_ent *e = cache_slot(s, gen, field, iid);

	if (e->s && e->gen == gen && e->field == field && e->iid == iid)
		return e->s;
	tp_str name = tp_interned_str(ctx, gen, ID_DEBUG_ANNOTATION_NAMES, iid,
				      INTERNED_NAME);
	if (!name)
		return 0;
	const char *n = tp_str_get(ctx->pool, name);
	size_t len = tp_str_len(ctx->pool, name);
	char *k = malloc(len + 7);
	if (!k)
		abort();
	memcpy(k, "debug.", 6);
	memcpy(k + 6, n, len);
	tp_str r = tp_intern(ctx->pool, k, len + 6);
	free(k);
	e->gen = gen;
	e->field = field;
	e->iid = iid;
	e->s = r;
	return r;
}

static uint32_t thread_upid(struct tp_ctx *ctx, uint32_t utid, bool *ok)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD);
	*ok = utid < t->nrows && !tp_is_null(t, TP_THREAD_upid, utid);
	return *ok ? (uint32_t)tp_get_int(t, TP_THREAD_upid, utid) : 0;
}

/* The sequence's thread descriptor slot for generation gen: a new
 * generation starts from the one before's descriptor. */
static uint32_t seq_td_slot(struct tp_ctx *ctx, struct te_seq *t,
			    uint32_t gen)
{
	struct tp_te_state *s = S(ctx);

	if (t->td && t->td_gen == gen)
		return t->td - 1;
	if (s->ntds == s->captds) {
		s->captds = s->captds ? 2 * s->captds : 64;
		s->tds = realloc(s->tds, s->captds * sizeof *s->tds);
		if (!s->tds)
			abort();
	}
	struct seq_td *n = &s->tds[s->ntds];
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
	struct seq_td *td = &S(ctx)->tds[slot];

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
	t->ts_state = mul_overflow_us(ref, &t->ts_ns) ? TS_INVALID : TS_VALID;
	if (mul_overflow_us(tref, &t->thread_ts_ns))
		t->thread_ts_ns = 0;
	t->tic = iref;
}

/* ---- tokenize ----------------------------------------------------------- */

static int64_t packet_ts(struct tp_ctx *ctx, const struct tp_packet *pkt)
{
	if (pkt->has_ts)
		return pkt->ts;
	return ctx->have_ts ? ctx->last_ts : 0;
}

enum { DESC_TRACK = 'D', DESC_THREAD = 'T', DESC_PROCESS = 'P' };

static void push_desc(struct tp_ctx *ctx, const struct tp_packet *pkt,
		      uint8_t what, const uint8_t *p, size_t len)
{
	struct tp_te_state *s = S(ctx);
	struct pb_buf *b = &s->buf;

	pb_buf_reset(b);
	pb_put_raw(b, &what, 1);
	pb_put_raw_varint(b, pkt->machine);
	pb_put_raw_varint(b, pkt->seq ? pkt->seq->id : 0);
	pb_put_raw(b, p, len);
	tp_sort_push(ctx->sorter, pkt->queue, packet_ts(ctx, pkt),
		     s->kind_desc, b->data, b->len);
}

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
	push_desc(ctx, pkt, DESC_TRACK, p, len);
}

static void tokenize_thread_descriptor(struct tp_ctx *ctx,
				       const struct tp_packet *pkt,
				       const uint8_t *p, size_t len)
{
	if (!pkt->seq) {
		tp_stat_inc(ctx, "track_event_tokenizer_errors");
		return;
	}
	if (!pkt->seq->st.valid) {
		tp_stat_inc(ctx, "tokenizer_skipped_packets");
		return;
	}
	set_seq_thread(ctx, seq_state(pkt->seq), pkt->gen, p, len);
	push_desc(ctx, pkt, DESC_THREAD, p, len);
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
static bool counter_value(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  uint64_t uuid, double v, double *out)
{
	struct res *r = tp_te_res_find(ctx, uuid);
	if (!r || r->kind != RES_COUNTER)
		return false;
	if (r->unit_multiplier > 0)
		v *= (double)r->unit_multiplier;
	if (r->is_incremental) {
		struct te_seq *t = seq_state(pkt->seq);
		uint64_t bits = 0;
		double sum = 0;
		if (!t)
			return false;
		if (u64map_get(&t->counters, uuid, &bits))
			memcpy(&sum, &bits, sizeof sum);
		sum += v;
		memcpy(&bits, &sum, sizeof bits);
		u64map_put(&t->counters, uuid, bits);
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


/* Payload header flags. */
enum {
	F_THREAD_TS = 1,
	F_TIC = 2,
	F_PIDTID = 4,
	F_DEFAULT_UUID = 8,
	F_COUNTER = 16,
	F_EXTRA = 32,
	F_MACHINE = 64,
};

static void put_double(struct pb_buf *b, double d)
{
	pb_put_raw(b, &d, 8);
}

/* Extra counter values of an event: appended to the payload as n pairs. */
static bool tokenize_extra_counters(struct tp_ctx *ctx,
				    const struct tp_packet *pkt,
				    const uint8_t *p, size_t len,
				    struct pb_buf *out, size_t *count)
{
	uint64_t uuids[MAX_EXTRA_COUNTERS];
	double vals[MAX_EXTRA_COUNTERS];
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
					   MAX_EXTRA_COUNTERS);
		if (!nv)
			continue;
		size_t nu = collect_uuids(p, len, kinds[k].uuids, uuids,
					  MAX_EXTRA_COUNTERS);
		if (!nu)
			nu = default_extra_uuids(ctx, pkt->gen,
						 kinds[k].defaults, uuids,
						 MAX_EXTRA_COUNTERS);
		if (nu < nv)
			return false;
		for (size_t i = 0; i < nv; i++) {
			double v;
			if (!counter_value(ctx, pkt, uuids[i], vals[i], &v))
				return false;
			pb_put_raw_varint(out, uuids[i]);
			put_double(out, v);
			(*count)++;
		}
	}
	return true;
}

static void tokenize_track_event(struct tp_ctx *ctx,
				 const struct tp_packet *pkt,
				 const uint8_t *p, size_t len)
{
	struct tp_te_state *s = S(ctx);
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
		int64_t dns, nts;
		if (t->ts_state == TS_NONE) {
			tp_stat_inc(ctx, "tokenizer_skipped_packets");
			return;
		}
		if (t->ts_state == TS_INVALID || mul_overflow_us(delta, &dns) ||
		    __builtin_add_overflow(t->ts_ns, dns, &nts)) {
			t->ts_state = TS_INVALID;
			tp_stat_inc(ctx, "track_event_invalid_timestamp");
			return;
		}
		t->ts_ns = nts;
		if (!tp_to_trace_time(ctx, pkt, BUILTIN_CLOCK_MONOTONIC, nts, &ts))
			return;
	} else if (has_abs && abs_us) {
		int64_t ns;
		if (mul_overflow_us(abs_us, &ns)) {
			tp_stat_inc(ctx, "track_event_invalid_timestamp");
			return;
		}
		if (!tp_to_trace_time(ctx, pkt, BUILTIN_CLOCK_MONOTONIC, ns, &ts))
			return;
	} else if (pkt->has_ts) {
		ts = pkt->ts;
	} else {
		tp_stat_inc(ctx, "track_event_tokenizer_errors");
		return;
	}

	uint32_t flags = 0;
	int64_t thread_ts = 0, tic = 0;
	if (has_tdelta) {
		int64_t dns;
		if (t->ts_state != TS_VALID) {
			tp_stat_inc(ctx, "tokenizer_skipped_packets");
			return;
		}
		if (!mul_overflow_us(tdelta, &dns) &&
		    !__builtin_add_overflow(t->thread_ts_ns, dns, &thread_ts)) {
			t->thread_ts_ns = thread_ts;
			flags |= F_THREAD_TS;
		}
	} else if (has_tabs) {
		if (!mul_overflow_us(tabs, &thread_ts))
			flags |= F_THREAD_TS;
	}
	if (has_idelta) {
		if (t->ts_state != TS_VALID) {
			tp_stat_inc(ctx, "tokenizer_skipped_packets");
			return;
		}
		t->tic += idelta;
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
		uint64_t cu = has_track_uuid ? track_uuid : duuid;
		if ((!has_track_uuid && !(flags & F_DEFAULT_UUID)) ||
		    !has_counter || !counter_value(ctx, pkt, cu, cval, &cval)) {
			tp_stat_inc(ctx, "track_event_tokenizer_errors");
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
		if (!tokenize_extra_counters(ctx, pkt, p, len, &tmp, &n)) {
			pb_buf_free(&tmp);
			tp_stat_inc(ctx, "track_event_tokenizer_errors");
			return;
		}
		pb_put_raw_varint(b, n);
		pb_put_raw(b, tmp.data, tmp.len);
		pb_buf_free(&tmp);
	}
	pb_put_raw(b, p, len);
	tp_sort_push(ctx->sorter, pkt->queue, ts, s->kind_event, b->data,
		     b->len);
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
		if (!pkt->has_seq_id) {
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
		if (!pkt->has_seq_id) {
			tp_stat_add(ctx, "thread_descriptor_missing_sequence_id",
				    pkt->machine, -1, 1);
			return true;
		}
		tokenize_thread_descriptor(ctx, pkt, f->data, f->len);
		return true;
	case TP_PROCESS_DESCRIPTOR:
		push_desc(ctx, pkt, DESC_PROCESS, f->data, f->len);
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
				struct tp_te_state *s = S(ctx);
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

/* ---- parse: descriptors ------------------------------------------------- */

static void set_process_arg(struct tp_ctx *ctx, uint32_t upid,
			    const char *key, tp_str value)
{
	struct tp_table *t = tp_tab(ctx, TP_T_PROCESS);
	struct tp_args_builder *b = &S(ctx)->b;

	if (upid >= t->nrows)
		return;
	tp_args_builder_reset(b);
	if (!tp_is_null(t, TP_PROCESS_arg_set_id, upid))
		tp_args_load(ctx, tp_get_int(t, TP_PROCESS_arg_set_id, upid), b);
	tp_str k = tp_s(ctx, key);
	tp_args_add_str(b, k, k, value);
	int64_t id = tp_args_commit(ctx, b);
	if (id >= 0)
		tp_set_int(t, TP_PROCESS_arg_set_id, upid, id);
}

static void apply_process_descriptor(struct tp_ctx *ctx, uint32_t upid,
				     const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	char cmd[4096];
	size_t n = 0;
	tp_str name = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_LEN)
			continue;
		if (f.num == PD_PROCESS_NAME) {
			name = intern_bytes(ctx, f.data, f.len);
		} else if (f.num == PD_CMDLINE) {
			size_t l = strnlen((const char *)f.data, f.len);
			if (n && n < sizeof cmd)
				cmd[n++] = ' ';
			if (l > sizeof cmd - n)
				l = sizeof cmd - n;
			memcpy(cmd + n, f.data, l);
			n += l;
		}
	}
	if (n) {
		tp_str c = tp_intern(ctx->pool, cmd, n);
		tp_process_set_cmdline(ctx, upid, c);
		if (!name) {
			size_t first = 0;
			while (first < n && cmd[first] != ' ')
				first++;
			name = tp_intern(ctx->pool, cmd, first);
		}
	}
	if (name)
		tp_process_set_name(ctx, upid, name);
}

static void apply_chrome_process(struct tp_ctx *ctx, uint32_t upid,
				 const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == CPD_HOST_APP_PACKAGE_NAME && f.wt == PB_WT_LEN)
			set_process_arg(ctx, upid, "chrome.host_app_package_name",
					intern_bytes(ctx, f.data, f.len));
}

/* Chrome's names of its thread types (chrome_enums.ThreadType), as
 * Perfetto's processor names threads that only give a type. */
static const char *const chrome_thread_names[] = {
	[1] = "CrProcessMain",
	[2] = "ChromeIOThread",
	[3] = "ThreadPoolBackgroundWorker&",
	[4] = "ThreadPoolForegroundWorker&",
	[5] = "ThreadPoolSingleThreadForegroundBlocking&",
	[6] = "ThreadPoolSingleThreadBackgroundBlocking&",
	[7] = "ThreadPoolService",
	[8] = "Compositor",
	[9] = "VizCompositorThread",
	[10] = "CompositorTileWorker&",
	[11] = "ServiceWorkerThread&",
	[12] = "NetworkService",
	[13] = "Chrome_ChildIOThread",
	[14] = "Chrome_IOThread",
	[15] = "CrBrowserMain",
	[16] = "CrRendererMain",
	[17] = "CrUtilityMain",
	[18] = "CrGpuMain",
	[19] = "CacheThread_BlockFile",
	[20] = "Media",
	[21] = "AudioOutputDevice",
	[22] = "AudioInputDevice",
	[23] = "GpuMemoryThread",
	[24] = "GpuVSyncThread",
	[25] = "DXVAVideoDecoderThread",
	[26] = "BrowserWatchdog",
	[27] = "WebRTC_Network",
	[28] = "Window owner thread",
	[29] = "WebRTC_Signaling",
	[30] = "WebRTC_Worker",
	[31] = "CrPPAPIMain",
	[32] = "GpuWatchdog",
	[33] = "swapper",
	[34] = "Gamepad polling thread",
	[35] = "WebCrypto",
	[36] = "Database thread",
	[37] = "Proxy Resolver",
	[38] = "Chrome_DevToolsADBThread",
	[39] = "NetworkConfigWatcher",
	[40] = "wasapi_render_thread",
	[41] = "LoaderLockSampler",
	[42] = "VSyncThread",
	[50] = "MemoryInfra",
	[51] = "StackSamplingProfiler",
	[52] = "CompositorGpuThread",
};

/* The name of chrome thread type `type`, 0 for none. */
static tp_str chrome_thread_name(struct tp_ctx *ctx, uint64_t type)
{
	size_t n = sizeof chrome_thread_names / sizeof *chrome_thread_names;
	if (type >= n || !chrome_thread_names[type])
		return 0;
	return tp_s(ctx, chrome_thread_names[type]);
}

/* A ThreadDescriptor names its thread, or else its legacy chrome thread
 * type does. */
static void apply_thread_name(struct tp_ctx *ctx, uint32_t utid,
			      const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str name = 0, type_name = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == THD_THREAD_NAME && f.wt == PB_WT_LEN && f.len)
			name = intern_bytes(ctx, f.data, f.len);
		else if (f.num == THD_CHROME_THREAD_TYPE &&
			 f.wt == PB_WT_VARINT)
			type_name = chrome_thread_name(ctx, f.val);
	}
	tp_thread_set_name(ctx, utid, name ? name : type_name);
}

/* A ChromeThreadDescriptor's type names the thread, below any name the
 * descriptor gives. */
static void apply_chrome_thread(struct tp_ctx *ctx, uint32_t utid,
				const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == CTD_THREAD_TYPE && f.wt == PB_WT_VARINT)
			tp_thread_set_name_prio(ctx, utid,
						chrome_thread_name(ctx, f.val),
						TP_NAME_PRIO_THREAD_TYPE);
}

static void parse_track_descriptor(struct tp_ctx *ctx, int64_t ts,
				   uint32_t machine, const uint8_t *p,
				   size_t len)
{
	struct desc d;

	if (!tp_te_desc_decode(p, len, &d) || !d.has_uuid)
		return;
	struct res *r = tp_te_res_find(ctx, d.uuid);
	if (!r)
		return;
	r = tp_te_resolve(ctx, r, ts);
	if (!r) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}

	if (d.thread && r->kind == RES_THREAD) {
		bool hp, ht;
		int64_t pid, tid;
		uint32_t utid = r->utid;
		tp_te_pid_tid(d.thread, d.thread_len, &hp, &pid, &ht, &tid);
		if (pid != r->pid || tid != r->tid)
			utid = tp_thread_update(ctx, machine, tid, pid);
		apply_thread_name(ctx, utid, d.thread, d.thread_len);
		if (d.chrome_thread)
			apply_chrome_thread(ctx, utid, d.chrome_thread,
					    d.chrome_thread_len);
	}
	if (d.process && r->kind == RES_PROCESS) {
		apply_process_descriptor(ctx, r->upid, d.process, d.process_len);
		if (d.chrome_process)
			apply_chrome_process(ctx, r->upid, d.chrome_process,
					     d.chrome_process_len);
	}
}

static void parse_desc(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
		       size_t len)
{
	const uint8_t *end = p + len;
	uint64_t machine, seq_id;

	if (len < 1)
		return;
	uint8_t what = *p++;
	if (!pb_read_varint(&p, end, &machine) ||
	    !pb_read_varint(&p, end, &seq_id))
		return;
	size_t n = (size_t)(end - p);
	if (what == DESC_TRACK) {
		parse_track_descriptor(ctx, ts, (uint32_t)machine, p, n);
	} else if (what == DESC_THREAD) {
		bool hp, ht;
		int64_t pid, tid;
		tp_te_pid_tid(p, n, &hp, &pid, &ht, &tid);
		if (!ht)
			return;
		uint32_t utid = hp ? tp_thread_update(ctx, (uint32_t)machine,
						      tid, pid)
				   : tp_thread_get(ctx, (uint32_t)machine, tid);
		apply_thread_name(ctx, utid, p, n);
	} else if (what == DESC_PROCESS) {
		bool hp, ht;
		int64_t pid, tid;
		tp_te_pid_tid(p, n, &hp, &pid, &ht, &tid);
		if (!hp)
			return;
		apply_process_descriptor(
			ctx, tp_process_get(ctx, (uint32_t)machine, pid), p, n);
	}
}

/* ---- parse: events ------------------------------------------------------ */

struct legacy {
	bool present;
	uint64_t name_iid;
	int32_t phase;
	bool has_phase;
	int64_t duration_us, thread_duration_us;
	bool has_unscoped_id, has_local_id, has_global_id;
	uint64_t unscoped_id, local_id, global_id;
	const uint8_t *id_scope;
	size_t id_scope_len;
	bool has_bind_id, has_flow_direction, bind_to_enclosing;
	uint64_t bind_id, flow_direction;
	uint64_t instant_event_scope;
	bool has_pid_override, has_tid_override;
	int64_t pid_override, tid_override;
};

struct ev {
	/* header */
	uint32_t flags, seq_id, gen, machine;
	int64_t thread_ts, tic, pid, tid;
	uint64_t default_uuid;
	double counter;
	const uint8_t *extra;
	uint64_t nextra;
	const uint8_t *te;
	size_t te_len;
	/* TrackEvent */
	bool has_type, has_track_uuid, has_debug;
	uint64_t type, track_uuid;
	const uint8_t *histogram; /* ChromeHistogramSample */
	size_t histogram_len;
	uint64_t name_iid;
	const uint8_t *name;
	size_t name_len;
	bool has_name;
	unsigned ncat_iids, ncats;
	uint64_t cat_iid;
	const uint8_t *cat;
	size_t cat_len;
	bool has_flows;
	struct legacy le;
	/* importing */
	tp_str category_id, name_id;
	bool has_utid, has_upid;
	uint32_t utid, upid;
	bool has_passthrough;
	uint32_t passthrough_utid;
	bool has_source_id;
	int64_t source_id;
};

static bool read_header(struct tp_ctx *ctx, const uint8_t **pp,
			const uint8_t *end, struct ev *e)
{
	uint64_t v;
	uint32_t td;
	const uint8_t *p = *pp;

#define RD(x)                                   \
	do {                                    \
		if (!pb_read_varint(&p, end, &v)) \
			return false;           \
		x;                              \
	} while (0)
	RD(e->flags = (uint32_t)v);
	RD(e->seq_id = (uint32_t)v);
	RD(e->gen = (uint32_t)v);
	if (e->flags & F_MACHINE)
		RD(e->machine = (uint32_t)v);
	if (e->flags & F_THREAD_TS)
		RD(e->thread_ts = pb_zigzag_decode(v));
	if (e->flags & F_TIC)
		RD(e->tic = pb_zigzag_decode(v));
	if (e->flags & F_PIDTID) {
		RD(td = (uint32_t)v);
		if (td >= S(ctx)->ntds)
			return false;
		const struct seq_td *d = &S(ctx)->tds[td];
		if (d->valid) {
			e->pid = d->pid;
			e->tid = d->tid;
		} else {
			e->flags &= ~(uint32_t)F_PIDTID;
		}
	}
	if (e->flags & F_DEFAULT_UUID)
		RD(e->default_uuid = v);
	if (e->flags & F_COUNTER) {
		if (end - p < 8)
			return false;
		memcpy(&e->counter, p, 8);
		p += 8;
	}
	if (e->flags & F_EXTRA) {
		RD(e->nextra = v);
		e->extra = p;
		for (uint64_t i = 0; i < e->nextra; i++) {
			if (!pb_read_varint(&p, end, &v) || end - p < 8)
				return false;
			p += 8;
		}
	}
#undef RD
	*pp = p;
	return true;
}

static void decode_legacy(const uint8_t *p, size_t len, struct legacy *le)
{
	struct pb_reader r;
	struct pb_field f;

	le->present = true;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case LE_NAME_IID: le->name_iid = f.val; break;
		case LE_PHASE:
			le->phase = (int32_t)f.val;
			le->has_phase = true;
			break;
		case LE_DURATION_US: le->duration_us = (int64_t)f.val; break;
		case LE_THREAD_DURATION_US:
			le->thread_duration_us = (int64_t)f.val;
			break;
		case LE_UNSCOPED_ID:
			le->has_unscoped_id = true;
			le->unscoped_id = f.val;
			break;
		case LE_LOCAL_ID:
			le->has_local_id = true;
			le->local_id = f.val;
			break;
		case LE_GLOBAL_ID:
			le->has_global_id = true;
			le->global_id = f.val;
			break;
		case LE_ID_SCOPE:
			if (f.wt == PB_WT_LEN) {
				le->id_scope = f.data;
				le->id_scope_len = f.len;
			}
			break;
		case LE_BIND_ID:
			le->has_bind_id = true;
			le->bind_id = f.val;
			break;
		case LE_BIND_TO_ENCLOSING:
			le->bind_to_enclosing = f.val != 0;
			break;
		case LE_FLOW_DIRECTION:
			le->has_flow_direction = true;
			le->flow_direction = f.val;
			break;
		case LE_INSTANT_EVENT_SCOPE:
			le->instant_event_scope = f.val;
			break;
		case LE_PID_OVERRIDE:
			le->has_pid_override = true;
			le->pid_override = (int32_t)f.val;
			break;
		case LE_TID_OVERRIDE:
			le->has_tid_override = true;
			le->tid_override = (int32_t)f.val;
			break;
		default: break;
		}
	}
}

static bool decode_event(struct ev *e)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, e->te, e->te_len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TE_TYPE:
			e->has_type = true;
			e->type = f.val;
			break;
		case TE_TRACK_UUID:
			e->has_track_uuid = true;
			e->track_uuid = f.val;
			break;
		case TE_NAME_IID:
			e->name_iid = f.val;
			e->has_name = false;
			break;
		case TE_NAME:
			if (f.wt == PB_WT_LEN) {
				e->name = f.data;
				e->name_len = f.len;
				e->has_name = true;
			}
			break;
		case TE_CATEGORY_IIDS:
			if (f.wt == PB_WT_VARINT) {
				if (!e->ncat_iids)
					e->cat_iid = f.val;
				e->ncat_iids++;
			} else if (f.wt == PB_WT_LEN) {
				struct pb_packed_iter it;
				uint64_t v;
				pb_packed_init(&it, f.data, f.len);
				while (pb_packed_next(&it, &v)) {
					if (!e->ncat_iids)
						e->cat_iid = v;
					e->ncat_iids++;
				}
			}
			break;
		case TE_CATEGORIES:
			if (f.wt == PB_WT_LEN) {
				if (!e->ncats) {
					e->cat = f.data;
					e->cat_len = f.len;
				}
				e->ncats++;
			}
			break;
		case TE_DEBUG_ANNOTATIONS: e->has_debug = true; break;
		case TE_CHROME_HISTOGRAM_SAMPLE:
			if (f.wt == PB_WT_LEN) {
				e->histogram = f.data;
				e->histogram_len = f.len;
			}
			break;
		case TE_LEGACY_EVENT:
			if (f.wt == PB_WT_LEN)
				decode_legacy(f.data, f.len, &e->le);
			break;
		case TE_FLOW_IDS:
		case TE_FLOW_IDS_OLD:
		case TE_TERMINATING_FLOW_IDS:
		case TE_TERMINATING_FLOW_IDS_OLD:
			e->has_flows = true;
			break;
		default: break;
		}
	}
	return r.err == PB_OK;
}

/* Categories joined with ',' (the multi-category slow path). */
static tp_str join_categories(struct tp_ctx *ctx, const struct ev *e)
{
	struct pb_reader r;
	struct pb_field f;
	char buf[4096];
	size_t n = 0;

	pb_reader_init(&r, e->te, e->te_len);
	while (pb_next(&r, &f)) {
		const char *s = NULL;
		size_t l = 0;
		uint64_t iids[64];
		size_t ni = 0;
		if (f.num == TE_CATEGORIES && f.wt == PB_WT_LEN && !e->ncat_iids) {
			s = (const char *)f.data;
			l = strnlen(s, f.len);
		} else if (f.num == TE_CATEGORY_IIDS && f.wt == PB_WT_VARINT) {
			iids[ni++] = f.val;
		} else if (f.num == TE_CATEGORY_IIDS && f.wt == PB_WT_LEN) {
			struct pb_packed_iter it;
			uint64_t v;
			pb_packed_init(&it, f.data, f.len);
			while (pb_packed_next(&it, &v) && ni < 64)
				iids[ni++] = v;
		} else {
			continue;
		}
		for (size_t k = 0; k <= ni; k++) {
			if (k < ni) {
				tp_str c = interned(ctx, e->gen,
						    ID_EVENT_CATEGORIES, iids[k]);
				if (!c)
					continue;
				s = tp_str_get(ctx->pool, c);
				l = tp_str_len(ctx->pool, c);
			} else if (ni) {
				break;
			}
			if (!s)
				continue;
			if (n && n < sizeof buf)
				buf[n++] = ',';
			if (l > sizeof buf - n)
				l = sizeof buf - n;
			memcpy(buf + n, s, l);
			n += l;
		}
	}
	return n ? tp_intern(ctx->pool, buf, n) : 0;
}

static void resolve_names(struct tp_ctx *ctx, struct ev *e)
{
	if (e->ncat_iids + e->ncats > 1)
		e->category_id = join_categories(ctx, e);
	else if (e->ncat_iids)
		e->category_id = interned(ctx, e->gen, ID_EVENT_CATEGORIES,
					  e->cat_iid);
	else if (e->ncats)
		e->category_id = intern_bytes(ctx, e->cat, e->cat_len);

	if (e->has_name)
		e->name_id = intern_bytes(ctx, e->name, e->name_len);
	else if (e->name_iid)
		e->name_id = interned(ctx, e->gen, ID_EVENT_NAMES, e->name_iid);
	else if (e->le.name_iid)
		e->name_id =
			interned(ctx, e->gen, ID_EVENT_NAMES, e->le.name_iid);
}

/* ---- args ---------------------------------------------------------------- */

#define KEY_MAX 1024

static void nested_value(struct tp_ctx *ctx, const uint8_t *p, size_t len,
			 const char *flat, const char *key, int depth,
			 struct tp_args_builder *b);

static void add_arg(struct tp_ctx *ctx, struct tp_args_builder *b,
		    const char *flat, const char *key, struct tp_arg *a)
{
	a->flat_key = tp_s(ctx, flat);
	a->key = strcmp(flat, key) == 0 ? a->flat_key : tp_s(ctx, key);
	tp_args_add(b, a);
}

/* The value of a DebugAnnotation (or a dict entry / array element). */
static void annotation_value(struct tp_ctx *ctx, uint32_t gen,
			     const uint8_t *p, size_t len, const char *flat,
			     const char *key, tp_str key_id, int depth,
			     struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	struct tp_arg a;
	char fk[KEY_MAX], k[KEY_MAX];
	unsigned idx = 0;

	if (depth > MAX_NESTING) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	memset(&a, 0, sizeof a);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		bool have = true;
		switch (f.num) {
		case DA_BOOL_VALUE:
			a.type = TP_ARG_BOOL;
			a.i = f.val != 0;
			break;
		case DA_UINT_VALUE:
			a.type = TP_ARG_UINT;
			a.i = (int64_t)f.val;
			break;
		case DA_INT_VALUE:
			a.type = TP_ARG_INT;
			a.i = (int64_t)f.val;
			break;
		case DA_DOUBLE_VALUE:
			if (f.wt != PB_WT_FIXED64)
				continue;
			a.type = TP_ARG_REAL;
			memcpy(&a.d, &f.val, 8);
			break;
		case DA_STRING_VALUE:
			if (f.wt != PB_WT_LEN)
				continue;
			a.type = TP_ARG_STRING;
			a.s = intern_bytes(ctx, f.data, f.len);
			break;
		case DA_STRING_VALUE_IID:
			a.type = TP_ARG_STRING;
			a.s = interned(ctx, gen, ID_DEBUG_ANNOTATION_STRING_VALUES,
				       f.val);
			if (!a.s) {
				tp_stat_inc(ctx, "track_event_parser_errors");
				continue;
			}
			break;
		case DA_POINTER_VALUE:
			a.type = TP_ARG_POINTER;
			a.i = (int64_t)f.val;
			break;
		case DA_LEGACY_JSON_VALUE:
			if (f.wt == PB_WT_LEN)
				tp_json_to_args(ctx, (const char *)f.data, f.len,
						flat, key, b);
			have = false;
			break;
		case DA_NESTED_VALUE:
			if (f.wt == PB_WT_LEN)
				nested_value(ctx, f.data, f.len, flat, key,
					     depth + 1, b);
			have = false;
			break;
		case DA_DICT_ENTRIES: {
			if (f.wt != PB_WT_LEN)
				continue;
			/* The entry's own name. */
			struct pb_reader r2;
			struct pb_field g;
			const char *cn = NULL;
			size_t cl = 0;
			pb_reader_init(&r2, f.data, f.len);
			while (pb_next(&r2, &g)) {
				if (g.num == DA_NAME && g.wt == PB_WT_LEN) {
					cn = (const char *)g.data;
					cl = strnlen(cn, g.len);
				} else if (g.num == DA_NAME_IID) {
					tp_str s = interned(
						ctx, gen,
						ID_DEBUG_ANNOTATION_NAMES, g.val);
					if (s) {
						cn = tp_str_get(ctx->pool, s);
						cl = tp_str_len(ctx->pool, s);
					}
				}
			}
			if (!cn)
				continue;
			snprintf(fk, sizeof fk, "%s.%.*s", flat, (int)cl, cn);
			snprintf(k, sizeof k, "%s.%.*s", key, (int)cl, cn);
			annotation_value(ctx, gen, f.data, f.len, fk, k, 0,
					 depth + 1, b);
			have = false;
			break;
		}
		case DA_ARRAY_VALUES:
			if (f.wt != PB_WT_LEN)
				continue;
			snprintf(k, sizeof k, "%s[%u]", key, idx++);
			annotation_value(ctx, gen, f.data, f.len, flat, k, 0,
					 depth + 1, b);
			have = false;
			break;
		default:
			have = false;
			break;
		}
		if (!have)
			continue;
		if (key_id) {
			a.flat_key = a.key = key_id;
			tp_args_add(b, &a);
		} else {
			add_arg(ctx, b, flat, key, &a);
		}
	}
}

static void nested_value(struct tp_ctx *ctx, const uint8_t *p, size_t len,
			 const char *flat, const char *key, int depth,
			 struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t type = 0;
	struct tp_arg a;
	bool have = false;
	char fk[KEY_MAX], k[KEY_MAX];

	if (depth > MAX_NESTING) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	memset(&a, 0, sizeof a);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case NV_NESTED_TYPE: type = f.val; break;
		case NV_INT_VALUE:
			a.type = TP_ARG_INT;
			a.i = (int64_t)f.val;
			have = true;
			break;
		case NV_DOUBLE_VALUE:
			if (f.wt == PB_WT_FIXED64) {
				a.type = TP_ARG_REAL;
				memcpy(&a.d, &f.val, 8);
				have = true;
			}
			break;
		case NV_BOOL_VALUE:
			a.type = TP_ARG_BOOL;
			a.i = f.val != 0;
			have = true;
			break;
		case NV_STRING_VALUE:
			if (f.wt == PB_WT_LEN) {
				a.type = TP_ARG_STRING;
				a.s = intern_bytes(ctx, f.data, f.len);
				have = true;
			}
			break;
		default: break;
		}
	}
	if (type == NV_DICT) {
		/* dict_keys[i] pairs with dict_values[i]. */
		struct pb_reader rk, rv;
		struct pb_field fk_f, fv;
		pb_reader_init(&rk, p, len);
		pb_reader_init(&rv, p, len);
		for (;;) {
			bool gk = false, gv = false;
			while (pb_next(&rk, &fk_f))
				if (fk_f.num == NV_DICT_KEYS &&
				    fk_f.wt == PB_WT_LEN) {
					gk = true;
					break;
				}
			while (pb_next(&rv, &fv))
				if (fv.num == NV_DICT_VALUES &&
				    fv.wt == PB_WT_LEN) {
					gv = true;
					break;
				}
			if (!gk || !gv)
				break;
			int cl = (int)strnlen((const char *)fk_f.data, fk_f.len);
			snprintf(fk, sizeof fk, "%s.%.*s", flat, cl,
				 (const char *)fk_f.data);
			snprintf(k, sizeof k, "%s.%.*s", key, cl,
				 (const char *)fk_f.data);
			nested_value(ctx, fv.data, fv.len, fk, k, depth + 1, b);
		}
		return;
	}
	if (type == NV_ARRAY) {
		unsigned idx = 0;
		pb_reader_init(&r, p, len);
		while (pb_next(&r, &f)) {
			if (f.num != NV_ARRAY_VALUES || f.wt != PB_WT_LEN)
				continue;
			snprintf(k, sizeof k, "%s[%u]", key, idx++);
			nested_value(ctx, f.data, f.len, flat, k, depth + 1, b);
		}
		return;
	}
	if (have)
		add_arg(ctx, b, flat, key, &a);
}

static void debug_annotation(struct tp_ctx *ctx, const struct ev *e,
			     const uint8_t *p, size_t len,
			     struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str key = 0;
	char buf[KEY_MAX];

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == DA_NAME_IID && f.wt == PB_WT_VARINT) {
			key = interned_debug_key(ctx, e->gen, f.val);
			if (!key) {
				tp_stat_inc(ctx, "track_event_parser_errors");
				return;
			}
		} else if (f.num == DA_NAME && f.wt == PB_WT_LEN) {
			int l = (int)strnlen((const char *)f.data, f.len);
			snprintf(buf, sizeof buf, "debug.%.*s", l,
				 (const char *)f.data);
			key = tp_s(ctx, buf);
		}
	}
	if (!key) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	const char *ks = tp_str_get(ctx->pool, key);
	annotation_value(ctx, e->gen, p, len, ks, ks, key, 0, b);
}

/* The name of an interned histogram sample (name_iid, never with name):
 * looked up in the sequence's histogram_names. */
static void histogram_name(struct tp_ctx *ctx, const struct ev *e,
			   struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	bool has_name = false, has_iid = false;
	uint64_t iid = 0;

	pb_reader_init(&r, e->histogram, e->histogram_len);
	while (pb_next(&r, &f)) {
		if (f.num == CHS_NAME)
			has_name = true;
		else if (f.num == CHS_NAME_IID && f.wt == PB_WT_VARINT) {
			has_iid = true;
			iid = f.val;
		}
	}
	if (!has_iid)
		return;
	tp_str name = has_name ? 0 : tp_interned_str(ctx, e->gen,
						     ID_HISTOGRAM_NAMES, iid,
						     HN_NAME);
	if (!name) {
		/* both name and name_iid, or an unknown iid */
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	tp_str k = tp_s(ctx, "chrome_histogram_sample.name");
	tp_args_add_str(b, k, k, name);
}

/* The sample's own fields, as Perfetto reflects them into args. */
static void histogram_fields(struct tp_ctx *ctx, const struct ev *e,
			     struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str k;

	pb_reader_init(&r, e->histogram, e->histogram_len);
	while (pb_next(&r, &f)) {
		bool v = f.wt == PB_WT_VARINT;
		switch (f.num) {
		case CHS_NAME_HASH:
			if (!v)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.name_hash");
			tp_args_add_uint(b, k, k, f.val);
			break;
		case CHS_NAME:
			if (f.wt != PB_WT_LEN)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.name");
			tp_args_add_str(b, k, k, intern_bytes(ctx, f.data, f.len));
			break;
		case CHS_SAMPLE:
			if (!v)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.sample");
			tp_args_add_int(b, k, k, (int64_t)f.val);
			break;
		case CHS_NAME_IID:
			if (!v)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.name_iid");
			tp_args_add_uint(b, k, k, f.val);
			break;
		default: break;
		}
	}
}

static bool event_has_args(const struct ev *e)
{
	return e->has_debug || e->has_passthrough || e->has_source_id ||
	       e->histogram;
}

/* Builds the args of an event into b, in Perfetto's order: typed fields
 * looked up, the legacy source id, reflected typed fields, debug
 * annotations, the passthrough thread. */
static void build_event_args(struct tp_ctx *ctx, const struct ev *e,
			     bool async_phase, struct tp_args_builder *b)
{
	tp_str k;

	tp_args_builder_reset(b);
	if (e->histogram)
		histogram_name(ctx, e, b);
	if (e->has_source_id) {
		k = tp_s(ctx, "legacy_trace_source_id");
		tp_args_add_int(b, k, k, e->source_id);
	}
	if (e->histogram)
		histogram_fields(ctx, e, b);
	if (e->has_debug) {
		struct pb_reader r;
		struct pb_field f;
		pb_reader_init(&r, e->te, e->te_len);
		while (pb_next(&r, &f))
			if (f.num == TE_DEBUG_ANNOTATIONS && f.wt == PB_WT_LEN)
				debug_annotation(ctx, e, f.data, f.len, b);
	}
	if (e->has_passthrough) {
		k = S(ctx)->s_passthrough;
		tp_args_add_uint(b, k, k, e->passthrough_utid);
	}
	if (e->le.has_phase &&
	    ((async_phase && (e->le.phase == 'S' || e->le.phase == 'T' ||
			      e->le.phase == 'p')) ||
	     e->le.phase == 'R')) {
		char ph[2] = { (char)e->le.phase, 0 };
		k = tp_s(ctx, "legacy_event.phase");
		tp_args_add_str(b, k, k, tp_s(ctx, ph));
	}
}

/* The arg set of an event (-1 if empty). */
static int64_t event_args(struct tp_ctx *ctx, const struct ev *e,
			  bool async_phase)
{
	struct tp_args_builder *b = &S(ctx)->b;
	build_event_args(ctx, e, async_phase, b);
	return b->n ? tp_args_commit(ctx, b) : -1;
}

/* ---- flows --------------------------------------------------------------- */

/* Legacy v2 bind ids, TrackEvent flow ids and v1 flows share one id space
 * in tp_flows.c, as in Perfetto. */
static void event_flows(struct tp_ctx *ctx, const struct ev *e, int64_t slice)
{
	if (e->le.has_bind_id) {
		uint64_t id = e->le.bind_id;
		if (!e->le.has_flow_direction) {
			tp_stat_inc(ctx, "flow_without_direction");
		} else {
			switch (e->le.flow_direction) {
			case FLOW_OUT: tp_flow_begin(ctx, id, slice); break;
			case FLOW_INOUT: tp_flow_step(ctx, id, slice); break;
			case FLOW_IN: tp_flow_end(ctx, id, slice, false); break;
			default:
				tp_stat_inc(ctx, "flow_without_direction");
			}
		}
	}
	if (!e->has_flows)
		return;
	struct pb_reader r;
	struct pb_field f;
	for (int pass = 0; pass < 2; pass++) {
		pb_reader_init(&r, e->te, e->te_len);
		while (pb_next(&r, &f)) {
			bool term = f.num == TE_TERMINATING_FLOW_IDS ||
				    f.num == TE_TERMINATING_FLOW_IDS_OLD;
			bool flow = f.num == TE_FLOW_IDS ||
				    f.num == TE_FLOW_IDS_OLD;
			if ((pass == 0 && !flow) || (pass == 1 && !term))
				continue;
			uint64_t ids[64];
			size_t n = 0;
			if (f.wt == PB_WT_VARINT || f.wt == PB_WT_FIXED64) {
				ids[n++] = f.val;
			} else if (f.wt == PB_WT_LEN &&
				   (f.num == TE_FLOW_IDS ||
				    f.num == TE_TERMINATING_FLOW_IDS)) {
				for (size_t i = 0; i + 8 <= f.len && n < 64;
				     i += 8)
					memcpy(&ids[n++], f.data + i, 8);
			} else if (f.wt == PB_WT_LEN) {
				struct pb_packed_iter it;
				uint64_t v;
				pb_packed_init(&it, f.data, f.len);
				while (n < 64 && pb_packed_next(&it, &v))
					ids[n++] = v;
			}
			for (size_t i = 0; i < n; i++) {
				bool active = tp_flow_active(ctx, ids[i]);
				if (flow && !active)
					tp_flow_begin(ctx, ids[i], slice);
				else if (flow)
					tp_flow_step(ctx, ids[i], slice);
				else if (active)
					tp_flow_end(ctx, ids[i], slice, true);
			}
		}
	}
}

static void flow_v1(struct tp_ctx *ctx, const struct ev *e, uint32_t track)
{
	if (!e->le.has_unscoped_id) {
		tp_stat_inc(ctx, "flow_invalid_id");
		return;
	}
	uint64_t id = tp_flow_v1_id(ctx, e->le.unscoped_id, e->category_id,
				    e->name_id);
	switch (e->le.phase) {
	case 's': tp_flow_begin(ctx, id, tp_slice_top(ctx, track)); break;
	case 't': tp_flow_step(ctx, id, tp_slice_top(ctx, track)); break;
	case 'f':
		if (!e->le.bind_to_enclosing)
			tp_flow_end_pending(ctx, track, id);
		else
			tp_flow_end(ctx, id, tp_slice_top(ctx, track), false);
		break;
	default: break;
	}
}

/* ---- event import --------------------------------------------------------- */

static void parser_error(struct tp_ctx *ctx)
{
	tp_stat_inc(ctx, "track_event_parser_errors");
}

/* The name a legacy async id's tracks keep as their `name` dimension:
 * the first event's name for that id (within the process when
 * process-scoped), so that later events of other names share them. */
static tp_str legacy_async_root_name(struct tp_ctx *ctx, const struct ev *e,
				     bool process_scoped, uint32_t upid)
{
	struct tp_te_state *s = S(ctx);
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
	struct tp_te_state *s = S(ctx);
	struct tp_args_builder *b = &s->b2;
	int32_t ph = e->le.phase;
	bool legacy = ph == 'S' || ph == 'T' || ph == 'p' || ph == 'F';
	tp_str scope = legacy ? e->name_id : e->category_id;
	uint32_t upid = e->has_upid ? e->upid : 0;
	tp_str k;

	if (e->le.id_scope) {
		char buf[KEY_MAX];
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
		tp_args_add_uint(&dims, k, k, upid);
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

/* ---- pending slice args ---------------------------------------------------- */

static uint32_t pending_new(struct tp_ctx *ctx, uint32_t slice)
{
	struct tp_te_state *s = S(ctx);
	uint32_t slot;

	if (s->free_pending) {
		slot = s->free_pending - 1;
		s->free_pending = s->pending[slot].next_free;
	} else {
		if (s->npending == s->cappending) {
			size_t cap = s->cappending ? s->cappending * 2 : 64;
			struct pending *p =
				realloc(s->pending, cap * sizeof *p);
			if (!p)
				abort();
			s->pending = p;
			s->cappending = cap;
		}
		slot = (uint32_t)s->npending++;
		tp_args_builder_init(&s->pending[slot].b);
	}
	struct pending *p = &s->pending[slot];
	p->slice = slice;
	p->used = true;
	p->next_free = 0;
	tp_args_builder_reset(&p->b);
	if (s->nactive == s->capactive) {
		size_t cap = s->capactive ? s->capactive * 2 : 64;
		uint32_t *a = realloc(s->active, cap * sizeof *a);
		if (!a)
			abort();
		s->active = a;
		s->capactive = cap;
	}
	p->active_pos = (uint32_t)s->nactive;
	s->active[s->nactive++] = slot;
	return slot;
}

static void commit_pending(struct tp_ctx *ctx, uint32_t slot)
{
	struct tp_te_state *s = S(ctx);
	struct pending *p = &s->pending[slot];
	int64_t id = tp_args_commit(ctx, &p->b);

	if (id >= 0)
		tp_set_int(tp_tab(ctx, TP_T_SLICE), TP_SLICE_arg_set_id,
			   p->slice, id);
	uint32_t last = s->active[--s->nactive];
	s->active[p->active_pos] = last;
	s->pending[last].active_pos = p->active_pos;
	p->used = false;
	p->next_free = s->free_pending;
	s->free_pending = slot + 1;
}

/* Open slices are few and usually end in reverse order: search back. */
static bool pending_find(struct tp_ctx *ctx, uint32_t slice, uint32_t *slot)
{
	struct tp_te_state *s = S(ctx);
	for (size_t i = s->nactive; i-- > 0;)
		if (s->pending[s->active[i]].slice == slice) {
			*slot = s->active[i];
			return true;
		}
	return false;
}

/* Next index of array `prefix` (key text before '[') in b. */
static unsigned next_array_index(struct tp_ctx *ctx,
				 const struct tp_args_builder *b,
				 const char *prefix, size_t plen)
{
	unsigned next = 0;
	for (size_t i = 0; i < b->n; i++) {
		const char *k = tp_str_get(ctx->pool, b->v[i].key);
		if (!k || strncmp(k, prefix, plen) != 0 || k[plen] != '[')
			continue;
		unsigned idx = (unsigned)strtoul(k + plen + 1, NULL, 10);
		if (idx + 1 > next)
			next = idx + 1;
	}
	return next;
}

/* Merges end-event args (e_b) into the pending set of the slice: array
 * entries continue after the existing ones, the passthrough utid of the
 * begin stays. */
static void merge_end_args(struct tp_ctx *ctx, struct tp_args_builder *into,
			   const struct tp_args_builder *eb)
{
	tp_str passthrough = S(ctx)->s_passthrough;
	size_t base_n = into->n;
	struct tp_args_builder orig = { into->v, base_n, base_n };

	for (size_t i = 0; i < eb->n; i++) {
		struct tp_arg a = eb->v[i];
		if (a.key == passthrough) {
			bool have = false;
			for (size_t j = 0; j < into->n; j++)
				if (into->v[j].key == passthrough)
					have = true;
			if (have)
				continue;
		}
		const char *k = tp_str_get(ctx->pool, a.key);
		const char *br = k ? strchr(k, '[') : NULL;
		if (br) {
			size_t plen = (size_t)(br - k);
			unsigned base = next_array_index(ctx, &orig, k, plen);
			if (base) {
				char buf[KEY_MAX];
				unsigned idx =
					(unsigned)strtoul(br + 1, NULL, 10);
				const char *rest = strchr(br, ']');
				snprintf(buf, sizeof buf, "%.*s[%u]%s",
					 (int)plen, k, idx + base,
					 rest ? rest + 1 : "");
				a.key = tp_s(ctx, buf);
			}
		}
		tp_args_add(into, &a);
		orig.v = into->v; /* may have moved */
	}
}

/* A TYPE_STATE event sets the value of its state track (its name; none
 * ends the open state); its args go to the state it opens or continues. */
static void state_event(struct tp_ctx *ctx, const struct ev *e,
			const struct res *r, uint32_t track, int64_t ts)
{
	struct tp_te_state *s = S(ctx);
	struct tp_table *t = tp_tab(ctx, TP_T_STATE);
	bool repeated;

	if (!r || !r->is_state) {
		parser_error(ctx);
		return;
	}
	int64_t row = tp_state_update(ctx, track, ts, e->name_id,
				      e->category_id, &repeated);
	if (row < 0 || !e->name_id)
		return;
	build_event_args(ctx, e, false, &s->b2);
	if (!s->b2.n)
		return;
	struct tp_args_builder *into = &s->b;
	tp_args_builder_reset(into);
	if (repeated && !tp_is_null(t, TP_STATE_arg_set_id, (uint32_t)row))
		tp_args_load(ctx, tp_get_int(t, TP_STATE_arg_set_id,
					     (uint32_t)row), into);
	merge_end_args(ctx, into, &s->b2);
	int64_t id = tp_args_commit(ctx, into);
	if (id >= 0)
		tp_set_int(t, TP_STATE_arg_set_id, (uint32_t)row, id);
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
 * by event_track_id) or a thread's (*track UINT32_MAX); false when it
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

static bool is_async_phase(int32_t ph)
{
	return ph == 'b' || ph == 'e' || ph == 'n' || ph == 'S' || ph == 'F' ||
	       ph == 'T' || ph == 'p';
}

/* The dimension args of a track of one process: its upid. */
static int64_t upid_dims(struct tp_ctx *ctx, uint32_t upid)
{
	struct tp_args_builder *b = &S(ctx)->b2;
	tp_str k = tp_s(ctx, "upid");

	tp_args_builder_reset(b);
	tp_args_add_uint(b, k, k, upid);
	return tp_args_commit(ctx, b);
}

/* Legacy phases may move the event to another track. */
static bool legacy_track(struct tp_ctx *ctx, struct ev *e, uint32_t *track)
{
	int32_t ph = e->le.phase;

	if (!e->le.has_phase)
		return true;
	if (is_async_phase(ph)) {
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

static int32_t phase_of(const struct ev *e)
{
	if (e->le.has_phase)
		return e->le.phase;
	switch (e->type) {
	case TE_TYPE_SLICE_BEGIN: return e->has_utid ? 'B' : 'b';
	case TE_TYPE_SLICE_END: return e->has_utid ? 'E' : 'e';
	case TE_TYPE_INSTANT: return e->has_utid ? 'i' : 'n';
	case TE_TYPE_COUNTER: return 'C';
	default: return 0;
	}
}

/* How the event uses its descriptor track (see enum use). */
static enum use event_use(const struct ev *e)
{
	if (e->has_type && e->type == TE_TYPE_COUNTER)
		return USE_OTHER;
	switch (phase_of(e)) {
	case 'B': case 'b': case 'S':
		return USE_BEGIN;
	case 'E': case 'e': case 'F':
		return USE_END;
	case 'i': case 'I': case 'R': case 'n': case 'T': case 'p':
		return USE_INSTANT;
	default:
		return USE_OTHER;
	}
}

static void metadata_event(struct tp_ctx *ctx, const struct ev *e)
{
	if (!e->name_id) {
		parser_error(ctx);
		return;
	}
	const char *n = tp_str_get(ctx->pool, e->name_id);
	bool thread = strcmp(n, "thread_name") == 0;
	bool process = strcmp(n, "process_name") == 0;
	if (!thread && !process)
		return;
	/* The first annotation's string value is the name. */
	struct pb_reader r, r2;
	struct pb_field f, g;
	tp_str v = 0;
	pb_reader_init(&r, e->te, e->te_len);
	while (!v && pb_next(&r, &f)) {
		if (f.num != TE_DEBUG_ANNOTATIONS || f.wt != PB_WT_LEN)
			continue;
		pb_reader_init(&r2, f.data, f.len);
		while (pb_next(&r2, &g))
			if (g.num == DA_STRING_VALUE && g.wt == PB_WT_LEN &&
			    g.len)
				v = intern_bytes(ctx, g.data, g.len);
		break;
	}
	if (!v)
		return;
	if (thread) {
		if (!e->has_utid) {
			parser_error(ctx);
			return;
		}
		tp_thread_set_name(ctx, e->utid, v);
	} else {
		if (!e->has_upid) {
			parser_error(ctx);
			return;
		}
		struct tp_table *t = tp_tab(ctx, TP_T_PROCESS);
		if (e->upid < t->nrows && !tp_get_str(t, TP_PROCESS_name, e->upid))
			tp_process_set_name(ctx, e->upid, v);
	}
}

static void extra_counters(struct tp_ctx *ctx, const struct ev *e, int64_t ts)
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

/* A legacy event's thread time / instruction count (its own fields, not
 * extra counters) is also a value on a counter track of its thread, found
 * again by name and thread. */
/* The dimension args of a track of one thread: its utid. */
static int64_t utid_dims(struct tp_ctx *ctx, uint32_t utid)
{
	struct tp_args_builder *b = &S(ctx)->b2;
	tp_str k = tp_s(ctx, "utid");

	tp_args_builder_reset(b);
	tp_args_add_int(b, k, k, utid);
	return tp_args_commit(ctx, b);
}

static void legacy_thread_counter(struct tp_ctx *ctx, const struct ev *e,
				  const char *type, const char *name,
				  int64_t ts, int64_t value)
{
	struct tp_track_spec sp;

	tp_track_spec_init(&sp, e->machine);
	sp.type = tp_s(ctx, type);
	sp.name = tp_s(ctx, name);
	sp.event_type = S(ctx)->s_counter;
	sp.utid = e->utid;
	sp.dimension_arg_set_id = utid_dims(ctx, e->utid);
	tp_counter_add(ctx, tp_track_intern(ctx, &sp), ts, (double)value, -1);
}

static void legacy_thread_counters(struct tp_ctx *ctx, const struct ev *e,
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

/* Perfetto's diff tests load traces with proto content analysis, which
 * files every track event's packet under its (category, name) and gives
 * each distinct pair an arg set {event.category, event.name}; those sets
 * are part of the args its tests see, so we keep them too. */
static void note_annotation(struct tp_ctx *ctx, const struct ev *e)
{
	struct tp_te_state *s = S(ctx);
	uint64_t key = (uint64_t)e->category_id << 32 | e->name_id;
	uint64_t v;

	if (u64map_get(&s->annotations, key, &v))
		return;
	u64map_put(&s->annotations, key, s->nannotations);
	if (s->nannotations == s->capannotations) {
		s->capannotations = s->capannotations ? s->capannotations * 2
						      : 16;
		s->annotation_keys = realloc(
			s->annotation_keys,
			s->capannotations * sizeof *s->annotation_keys);
		if (!s->annotation_keys)
			abort();
	}
	s->annotation_keys[s->nannotations++] = key;
}

static void annotation_args(struct tp_ctx *ctx)
{
	struct tp_te_state *s = S(ctx);
	tp_str kc = tp_s(ctx, "event.category"), kn = tp_s(ctx, "event.name");

	for (size_t i = 0; i < s->nannotations; i++) {
		tp_args_builder_reset(&s->b);
		tp_args_add_str(&s->b, kc, kc,
				(tp_str)(s->annotation_keys[i] >> 32));
		tp_args_add_str(&s->b, kn, kn, (tp_str)s->annotation_keys[i]);
		tp_args_commit(ctx, &s->b);
	}
}

static bool before_roi(struct tp_ctx *ctx, int64_t ts)
{
	struct tp_te_state *s = S(ctx);
	return s->has_roi && ts < s->roi_start_ns;
}

static void parse_event(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len)
{
	struct ev e;
	const uint8_t *end = p + len;

	memset(&e, 0, sizeof e);
	if (!read_header(ctx, &p, end, &e)) {
		parser_error(ctx);
		return;
	}
	e.te = p;
	e.te_len = (size_t)(end - p);
	if (!decode_event(&e)) {
		parser_error(ctx);
		return;
	}
	resolve_names(ctx, &e);
	if ((e.has_type && e.type) || e.le.has_phase)
		note_annotation(ctx, &e);
	/* Cropping drops every kind of event before the range of interest,
	 * before it can touch a track or a thread. */
	if (before_roi(ctx, ts)) {
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
	legacy_thread_counters(ctx, &e, ts);
	if (e.nextra)
		extra_counters(ctx, &e, ts);
	if (r) {
		/* Only events naming a uuid tell the track their sequence. */
		int64_t t = tp_te_track_for(ctx, r, e.name_id,
					  r->uuid ? (int64_t)e.seq_id : -1,
					  event_use(&e));
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
		state_event(ctx, &e, r, track, ts);
		return;
	}
	if (r && r->kind == RES_COUNTER) {
		parser_error(ctx);
		return;
	}
	if (!legacy_track(ctx, &e, &track)) {
		parser_error(ctx);
		return;
	}
	if (track == UINT32_MAX)
		track = tp_track_thread(ctx, e.utid);
	int32_t ph = phase_of(&e);
	if (!ph || ph == 'C') {
		parser_error(ctx);
		return;
	}

	bool async = e.le.has_phase && is_async_phase(ph);
	int64_t slice = -1;
	switch (ph) {
	case 'B':
	case 'b':
	case 'S':
		slice = tp_slice_begin(ctx, track, ts, e.category_id, e.name_id,
				       -1);
		if (event_has_args(&e)) {
			if (S(ctx)->nactive < MAX_PENDING) {
				uint32_t slot = pending_new(ctx, (uint32_t)slice);
				build_event_args(ctx, &e, async,
						 &S(ctx)->pending[slot].b);
			} else {
				int64_t id = event_args(ctx, &e, async);
				if (id >= 0)
					tp_set_int(tp_tab(ctx, TP_T_SLICE),
						   TP_SLICE_arg_set_id,
						   (uint32_t)slice, id);
			}
		}
		if (e.flags & F_THREAD_TS)
			tp_slice_set_thread_ts(ctx, (uint32_t)slice, e.thread_ts);
		event_flows(ctx, &e, slice);
		break;
	case 'E':
	case 'e':
	case 'F':
		slice = tp_slice_end(ctx, track, ts, e.category_id, e.name_id,
				     -1);
		if (slice >= 0) {
			struct tp_te_state *s = S(ctx);
			uint32_t slot;
			build_event_args(ctx, &e, async, &s->b);
			if (pending_find(ctx, (uint32_t)slice, &slot)) {
				merge_end_args(ctx, &s->pending[slot].b, &s->b);
				commit_pending(ctx, slot);
			} else if (s->b.n) {
				struct tp_table *t = tp_tab(ctx, TP_T_SLICE);
				uint32_t sl = (uint32_t)slice;
				int64_t id;
				if (!tp_is_null(t, TP_SLICE_arg_set_id, sl)) {
					tp_args_builder_reset(&s->b2);
					tp_args_load(ctx,
						     tp_get_int(t,
								TP_SLICE_arg_set_id,
								sl),
						     &s->b2);
					merge_end_args(ctx, &s->b2, &s->b);
					id = tp_args_commit(ctx, &s->b2);
				} else {
					id = tp_args_commit(ctx, &s->b);
				}
				if (id >= 0)
					tp_set_int(t, TP_SLICE_arg_set_id, sl,
						   id);
			}
		}
		if (slice >= 0 && (e.flags & F_THREAD_TS))
			tp_slice_end_thread_ts(ctx, (uint32_t)slice,
					       e.thread_ts);
		if (slice >= 0)
			event_flows(ctx, &e, slice);
		break;
	case 'X': {
		int64_t dur;
		if (mul_overflow_us(e.le.duration_us, &dur) || dur < 0) {
			parser_error(ctx);
			return;
		}
		slice = tp_slice_complete(ctx, track, ts, dur, e.category_id,
					  e.name_id, event_args(ctx, &e, async));
		if (e.flags & F_THREAD_TS) {
			int64_t tdur = 0;
			tp_slice_set_thread_ts(ctx, (uint32_t)slice, e.thread_ts);
			if (!mul_overflow_us(e.le.thread_duration_us, &tdur))
				tp_slice_end_thread_ts(ctx, (uint32_t)slice,
						       e.thread_ts + tdur);
		}
		event_flows(ctx, &e, slice);
		break;
	}
	case 'i':
	case 'I':
	case 'R': /* a legacy mark: an instant with legacy_event.phase */
	case 'n':
	case 'T':
	case 'p':
		slice = tp_slice_complete(ctx, track, ts, 0, e.category_id,
					  e.name_id, event_args(ctx, &e, async));
		if (e.flags & F_THREAD_TS)
			tp_slice_set_thread_ts(ctx, (uint32_t)slice, e.thread_ts);
		event_flows(ctx, &e, slice);
		break;
	case 's':
	case 't':
	case 'f':
		flow_v1(ctx, &e, track);
		break;
	case 'M':
		metadata_event(ctx, &e);
		break;
	default:
		parser_error(ctx);
		break;
	}
}
