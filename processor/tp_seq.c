/*
 * tp_seq.c - per-sequence state: sequences, interning generations,
 * defaults, scoped and incremental clocks (see tp_seq.h).
 */
#include "tp_seq.h"

#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "pb_wire.h"
#include "seq_table.h"
#include "trace_model.h"
#include "tp_clock.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "u64map.h"
#include "vp_alloc.h"

/* Interned messages of one generation: (field, iid) -> arena slice. */
struct gen {
	struct u64map *maps; /* one per InternedData field seen */
	uint32_t *fields;
	unsigned nmaps;
	uint64_t defaults_off; /* TracePacketDefaults in the arena */
	uint32_t defaults_len;
	struct u64map str_cache; /* tp_interned_str() results */
};

struct tp_seqs {
	/* machine << 32 | seq id -> a struct tp_seq * (packets and the
	 * modules keep pointers to a sequence: it does not move) */
	struct seq_table seqs;
	struct gen *gens;     /* generation 0: packets of no sequence */
	uint32_t ngens, capgens;
	struct pb_buf arena;  /* interned messages and defaults */
	/* per machine: the sorter streams of its packets and of its track
	 * events */
	uint32_t (*streams)[2];
	uint32_t nstreams;
};

static struct tp_seqs *S(struct tp_ctx *ctx)
{
	return ctx->seqs;
}

static uint32_t gen_new(struct tp_seqs *ls)
{
	if (ls->ngens == ls->capgens) {
		ls->capgens = ls->capgens ? ls->capgens * 2 : 16;
		ls->gens = vp_xreallocarray(ls->gens, ls->capgens,
					    sizeof(*ls->gens));
	}
	memset(&ls->gens[ls->ngens], 0, sizeof(ls->gens[0]));
	return ls->ngens++;
}

struct tp_seqs *tp_seqs_new(void)
{
	struct tp_seqs *s = vp_xcalloc(1, sizeof(*s));

	seq_table_init(&s->seqs, sizeof(struct tp_seq *));
	pb_buf_init(&s->arena);
	gen_new(s);
	return s;
}

void tp_seqs_free(struct tp_seqs *ls)
{
	if (!ls)
		return;
	for (size_t i = 0; i < seq_table_count(&ls->seqs); i++) {
		struct tp_seq *q = *(struct tp_seq **)seq_table_at(&ls->seqs, i);
		free(q->loss_bit_count);
		free(q->clocks);
		free(q);
	}
	seq_table_free(&ls->seqs);
	for (uint32_t g = 0; g < ls->ngens; g++) {
		for (unsigned i = 0; i < ls->gens[g].nmaps; i++)
			u64map_free(&ls->gens[g].maps[i]);
		u64map_free(&ls->gens[g].str_cache);
		free(ls->gens[g].maps);
		free(ls->gens[g].fields);
	}
	free(ls->gens);
	free(ls->streams);
	pb_buf_free(&ls->arena);
	free(ls);
}

uint32_t tp_seq_new_gen(struct tp_ctx *ctx)
{
	return gen_new(S(ctx));
}

/* ---- sequences and interning ----------------------------------------- */

/* The sorter stream of a machine's packets (te: of its track events).
 * Perfetto makes the two when it makes the machine's reader, at the
 * machine's first packet, before what that packet makes; the machines'
 * first packets come in machine order, so making the streams of every
 * machine up to this one when it is first asked for is the same. */
static uint32_t machine_stream(struct tp_ctx *ctx, uint32_t machine, int te)
{
	struct tp_seqs *ls = S(ctx);
	if (machine >= ls->nstreams) {
		ls->streams = vp_xreallocarray(ls->streams, machine + 1,
					       sizeof(*ls->streams));
		for (uint32_t m = ls->nstreams; m <= machine; m++) {
			ls->streams[m][0] = tp_sort_stream(ctx->sorter);
			ls->streams[m][1] = tp_sort_stream(ctx->sorter);
		}
		ls->nstreams = machine + 1;
	}
	return ls->streams[machine][te];
}

uint32_t tp_seq_te_queue(struct tp_ctx *ctx, struct tp_seq *s)
{
	if (s->te_queue == UINT32_MAX)
		s->te_queue = tp_sort_queue(
			ctx->sorter,
			TP_QUEUE_TRACK_EVENT | (uint64_t)s->machine << 32 | s->id,
			machine_stream(ctx, s->machine, 1));
	return s->te_queue;
}

struct tp_seq *tp_seq_get(struct tp_ctx *ctx, uint32_t machine, uint32_t id)
{
	struct tp_seqs *ls = S(ctx);
	uint64_t key = (uint64_t)machine << 32 | id;
	bool made;
	struct tp_seq **slot = seq_table_get(&ls->seqs, key, &made);
	if (!made)
		return *slot;
	struct tp_seq *s = vp_xcalloc(1, sizeof(*s));
	s->id = id;
	s->machine = machine;
	s->queue = tp_sort_queue(ctx->sorter, key,
				 machine_stream(ctx, machine, 0));
	s->te_queue = UINT32_MAX;
	s->gen = gen_new(ls);
	*slot = s;
	return s;
}

struct tp_seq *tp_seq_find(struct tp_ctx *ctx, uint32_t machine,
			   uint32_t seq_id)
{
	struct tp_seq **slot = seq_table_find(&S(ctx)->seqs,
					       (uint64_t)machine << 32 | seq_id);
	return slot ? *slot : NULL;
}

void tp_seq_visit(struct tp_ctx *ctx, void (*fn)(void *, struct tp_seq *),
		  void *arg)
{
	struct tp_seqs *ls = S(ctx);
	for (size_t i = 0; i < seq_table_count(&ls->seqs); i++)
		fn(arg, *(struct tp_seq **)seq_table_at(&ls->seqs, i));
}

static struct u64map *gen_map(struct gen *g, uint32_t field, bool create)
{
	for (unsigned i = 0; i < g->nmaps; i++)
		if (g->fields[i] == field)
			return &g->maps[i];
	if (!create)
		return NULL;
	g->maps = vp_xreallocarray(g->maps, g->nmaps + 1, sizeof(*g->maps));
	g->fields = vp_xreallocarray(g->fields, g->nmaps + 1,
				     sizeof(*g->fields));
	u64map_init(&g->maps[g->nmaps]);
	g->fields[g->nmaps] = field;
	return &g->maps[g->nmaps++];
}

/* Arena slices are packed as offset << 24 | length (messages over 16 MiB
 * are not interned). */
#define SLICE_LEN_BITS 24

static void intern_message(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
			   const uint8_t *data, size_t len)
{
	struct tp_seqs *ls = S(ctx);
	struct pb_reader r;
	struct pb_field f;
	uint64_t iid = 0;
	bool has_iid = false;

	/* the first iid, as Perfetto's FindField reads it */
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (!has_iid && f.num == INTERNED_IID &&
		    f.wt == PB_WT_VARINT) {
			iid = f.val;
			has_iid = true;
		}
	if (r.err != PB_OK || !has_iid || len >= (1u << SLICE_LEN_BITS)) {
		tp_stat_inc(ctx, "interned_data_tokenizer_errors");
		return;
	}
	uint64_t off = ls->arena.len, old;
	struct u64map *m = gen_map(&ls->gens[gen], field, true);
	/* An iid defined again in the same generation keeps its first
	 * message, as Perfetto's IncrementalState (the format forbids a
	 * different one; the first is what was read already). */
	if (u64map_get(m, iid, &old))
		return;
	pb_put_raw(&ls->arena, data, len);
	u64map_put(m, iid, off << SLICE_LEN_BITS | len);
}

void tp_seq_intern_data(struct tp_ctx *ctx, uint32_t gen,
			const uint8_t *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.wt == PB_WT_LEN)
			intern_message(ctx, gen, f.num, f.data, f.len);
	if (r.err != PB_OK)
		tp_stat_inc(ctx, "interned_data_tokenizer_errors");
}

bool tp_interned(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		 uint64_t iid, const uint8_t **data, size_t *len)
{
	struct tp_seqs *ls = S(ctx);
	uint64_t v;
	if (gen >= ls->ngens)
		return false;
	struct u64map *m = gen_map(&ls->gens[gen], field, false);
	if (!m || !u64map_get(m, iid, &v)) {
		/* every failed lookup, as Perfetto's IncrementalState counts */
		tp_stat_inc(ctx, "interned_data_tokenizer_errors");
		return false;
	}
	*data = ls->arena.data + (v >> SLICE_LEN_BITS);
	*len = (size_t)(v & ((1u << SLICE_LEN_BITS) - 1));
	return true;
}

tp_str tp_interned_str(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		       uint64_t iid, uint32_t name_field)
{
	struct tp_seqs *ls = S(ctx);
	const uint8_t *data;
	size_t len;
	struct pb_reader r;
	struct pb_field f;
	tp_str s = 0;
	uint64_t key = 0, v;
	/* Names are looked up once per event: remember each answer. */
	bool cacheable = gen < ls->ngens && iid < (1ull << 40) &&
			 field < (1u << 12) && name_field < (1u << 12);

	if (cacheable) {
		key = (uint64_t)field << 52 | (uint64_t)name_field << 40 | iid;
		if (u64map_get(&ls->gens[gen].str_cache, key, &v))
			return (tp_str)v;
	}
	if (!tp_interned(ctx, gen, field, iid, &data, &len))
		return 0;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == name_field && f.wt == PB_WT_LEN)
			s = tp_intern(ctx->pool, (const char *)f.data, f.len);
	if (cacheable)
		u64map_put(&ls->gens[gen].str_cache, key, s);
	return s;
}

void tp_packet_defaults(struct tp_ctx *ctx, uint32_t gen, const uint8_t **data,
			size_t *len)
{
	struct tp_seqs *ls = S(ctx);
	*data = NULL;
	*len = 0;
	if (gen < ls->ngens && ls->gens[gen].defaults_len) {
		*data = ls->arena.data + ls->gens[gen].defaults_off;
		*len = ls->gens[gen].defaults_len;
	}
}

void tp_seq_set_defaults(struct tp_ctx *ctx, uint32_t gen,
			 const uint8_t *data, size_t len)
{
	struct tp_seqs *ls = S(ctx);
	if (len > UINT32_MAX)
		return;
	struct gen *g = &ls->gens[gen];
	g->defaults_off = ls->arena.len;
	g->defaults_len = (uint32_t)len;
	pb_put_raw(&ls->arena, data, len);
}

/* ---- clocks ----------------------------------------------------------- */

bool tp_to_trace_time(struct tp_ctx *ctx, const struct tp_packet *pkt,
		      uint32_t clock_id, int64_t ts, int64_t *out)
{
	uint64_t id = clock_id;
	if (clock_id >= SCOPED_CLOCK_FIRST && clock_id <= SCOPED_CLOCK_LAST) {
		if (!tp_pkt_scoped_ok(pkt)) {
			tp_stat_inc(ctx, "clock_sync_failure");
			return false;
		}
		id = tp_clock_seq_scoped(pkt->seq->id, clock_id);
	}
	if (!tp_clock_to_trace(ctx->clocks, pkt->machine, id, ts, out)) {
		/* on the trace's first machine whatever the packet's: Perfetto
		 * counts a failed conversion through the trace file's import
		 * log, which belongs to the file, not to a machine */
		tp_stat_add(ctx,
			    tp_clock_failure_stat(ctx->clocks, pkt->machine,
						  id),
			    0, -1, 1);
		return false;
	}
	return true;
}

/* The sequence's scoped clocks, allocated on first use. */
static struct tp_seq_clocks *seq_clocks(struct tp_seq *s)
{
	if (!s->clocks) {
		s->clocks = vp_xcalloc(1, sizeof(*s->clocks));
		for (unsigned i = 0; i < 64; i++)
			s->clocks->clock_mult[i] = 1;
	}
	return s->clocks;
}


/* Whether a snapshot's clocks have BOOTTIME and not TRACE_FILE. */
static bool names_boottime(const uint32_t *ids, size_t n)
{
	bool boot = false;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] == BUILTIN_CLOCK_TRACE_FILE)
			return false;
		boot |= ids[i] == BUILTIN_CLOCK_BOOTTIME;
	}
	return boot;
}

static struct tp_incr_clock *incr_clock(struct tp_seq *s, uint32_t clock_id)
{
	struct tp_seq_clocks *c = s->clocks;
	for (unsigned i = 0; c && i < c->niclocks; i++)
		if (c->iclocks[i].clock_id == clock_id)
			return &c->iclocks[i];
	return NULL;
}

void tp_seq_clock_snapshot(struct tp_ctx *ctx, struct tp_packet *pkt,
			   const uint8_t *data, size_t len)
{
	struct tp_clock_reading rd[32];
	uint32_t raw_ids[32];
	unsigned n = 0;
	struct vp_snapshot_iter it;
	struct vp_clock_reading ck;

	vp_snapshot_begin(&it, data, len);
	while (n < 32 && vp_snapshot_next(&it, &ck)) {
		uint64_t id = ck.id, mult = ck.unit_ns ? ck.unit_ns : 1;
		int64_t ts = (int64_t)ck.ts;
		bool incr = ck.incremental;
		if (id > UINT32_MAX)
			continue;
		bool scoped = id >= SCOPED_CLOCK_FIRST && id <= SCOPED_CLOCK_LAST;
		if (scoped && !tp_pkt_scoped_ok(pkt)) {
			tp_stat_inc(ctx, "invalid_clock_snapshots");
			continue;
		}
		if (scoped) {
			struct tp_seq *s = pkt->seq;
			struct tp_seq_clocks *c = seq_clocks(s);
			c->clock_mult[id - SCOPED_CLOCK_FIRST] = mult;
			struct tp_incr_clock *ic = incr_clock(s, (uint32_t)id);
			if (incr && !ic && c->niclocks < 4)
				ic = &c->iclocks[c->niclocks++];
			if (incr && ic) {
				ic->clock_id = (uint32_t)id;
				ic->last = ts;
				ic->mult_ns = mult;
			} else if (!incr && ic) {
				*ic = c->iclocks[--c->niclocks];
			}
		}
		raw_ids[n] = (uint32_t)id;
		rd[n].clock_id = scoped ? tp_clock_seq_scoped(pkt->seq->id,
							      (uint32_t)id)
					: id;
		rd[n].ts_ns = (int64_t)((uint64_t)ts * mult);
		n++;
	}
	/* primary_trace_clock may come after the 32nd clock */
	while (n == 32 && vp_snapshot_next(&it, &ck))
		;
	if (it.bad || n == 0) {
		tp_stat_inc(ctx, "invalid_clock_snapshots");
		if (n == 0)
			return;
	}
	if (it.has_primary) {
		if (!tp_clock_set_trace_clock(ctx->clocks, pkt->machine,
					      it.primary))
			tp_stat_inc(ctx, "clock_snapshot_not_monotonic");
		else if (pkt->machine == 0) /* Perfetto: when it takes it */
			tp_meta_set_int(ctx, "trace_time_clock_id", -1,
					(int64_t)it.primary);
	} else if (pkt->machine == 0 && names_boottime(raw_ids, n) &&
		   tp_clock_trace_clock(ctx->clocks, 0) ==
			   BUILTIN_CLOCK_BOOTTIME &&
		   !tp_clock_other_converted(ctx->clocks, 0)) {
		/* A snapshot of BOOTTIME and no TRACE_FILE names BOOTTIME the
		 * trace clock in Perfetto, which says so in the metadata
		 * unless a time was converted before. */
		tp_meta_set_int(ctx, "trace_time_clock_id", -1,
				BUILTIN_CLOCK_BOOTTIME);
	}
	uint32_t snap = tp_clock_add_snapshot(ctx->clocks, pkt->machine, rd, n);

	/* The clock_snapshot table: ts is the snapshot in trace time. */
	int64_t ts = 0;
	bool have = false;
	uint64_t trace_clock = tp_clock_trace_clock(ctx->clocks, pkt->machine);
	for (unsigned i = 0; i < n && !have; i++)
		if (rd[i].clock_id == trace_clock) {
			ts = rd[i].ts_ns;
			have = true;
		}
	if (!have)
		have = tp_clock_to_trace(ctx->clocks, pkt->machine,
					 rd[0].clock_id, rd[0].ts_ns, &ts);
	struct tp_table *t = tp_tab(ctx, TP_T_CLOCK_SNAPSHOT);
	for (unsigned i = 0; i < n; i++) {
		uint32_t row = tp_table_add_row(t);
		if (have)
			tp_set_int(t, TP_CLOCK_SNAPSHOT_ts, row, ts);
		tp_set_int(t, TP_CLOCK_SNAPSHOT_clock_id, row, raw_ids[i]);
		/* the name of a builtin clock of the six Perfetto's table
		 * names (REALTIME ... BOOTTIME, ids 1 to 6); others (TSC,
		 * PERF, sequence clocks, the counter's 64) have none */
		const char *name = builtin_clock_name(raw_ids[i]);
		if (raw_ids[i] <= BUILTIN_CLOCK_BOOTTIME &&
		    strcmp(name, "unknown") != 0)
			tp_set_str(t, TP_CLOCK_SNAPSHOT_clock_name, row,
				   tp_s(ctx, name));
		tp_set_int(t, TP_CLOCK_SNAPSHOT_clock_value, row, rd[i].ts_ns);
		tp_set_int(t, TP_CLOCK_SNAPSHOT_snapshot_id, row, snap);
		tp_set_machine(t, TP_CLOCK_SNAPSHOT_machine_id, row, pkt->machine);
	}
}

/* Resolves pkt->raw_ts (in pkt->clock_id) into pkt->ts; a failure is
 * counted only when count_failure (tp_seq.h). */
bool tp_seq_packet_time(struct tp_ctx *ctx, struct tp_packet *pkt,
			bool count_failure)
{
	int64_t ts = pkt->raw_ts;
	uint32_t id = pkt->clock_id;
	if (id >= SCOPED_CLOCK_FIRST && id <= SCOPED_CLOCK_LAST &&
	    tp_pkt_scoped_ok(pkt)) {
		struct tp_seq *s = pkt->seq;
		struct tp_incr_clock *ic = incr_clock(s, id);
		if (ic) {
			ic->last = (int64_t)((uint64_t)ic->last + (uint64_t)ts);
			ts = (int64_t)((uint64_t)ic->last * ic->mult_ns);
		} else if (s->clocks) {
			ts = (int64_t)((uint64_t)ts *
				       s->clocks->clock_mult[id -
							     SCOPED_CLOCK_FIRST]);
		}
	}
	if (count_failure) {
		if (!tp_to_trace_time(ctx, pkt, id, ts, &pkt->ts))
			return false;
	} else {
		uint64_t cid = id;
		if (id >= SCOPED_CLOCK_FIRST && id <= SCOPED_CLOCK_LAST) {
			if (!tp_pkt_scoped_ok(pkt))
				return false;
			cid = tp_clock_seq_scoped(pkt->seq->id, id);
		}
		if (!tp_clock_to_trace(ctx->clocks, pkt->machine, cid, ts,
				       &pkt->ts))
			return false;
	}
	pkt->has_ts = true;
	return true;
}

