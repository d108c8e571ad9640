/*
 * tp_load.c - the loader: reads a trace, decodes each packet's envelope and
 * hands its contents to the modules, then runs the sorted parse stage
 * (tp_load.h).
 *
 * What the envelope covers, as Perfetto's proto tokenizer does:
 *  - trusted_packet_sequence_id -> struct tp_seq (per machine);
 *  - incremental state: SEQ_INCREMENTAL_STATE_CLEARED starts a new
 *    interning generation; SEQ_NEEDS_INCREMENTAL_STATE packets of a
 *    sequence that has no valid state are skipped and counted;
 *  - interned_data, stored per generation as the raw interned messages;
 *  - trace_packet_defaults (timestamp_clock_id, track_event_defaults);
 *  - timestamp + timestamp_clock_id, including sequence-scoped and
 *    incremental clocks, converted to trace time;
 *  - clock_snapshot (the clock graph and the clock_snapshot table);
 *  - machine_id, trusted uid / pid, previous_packet_dropped;
 *  - compressed_packets, inflated and loaded packet by packet.
 */
#include "tp_load.h"
#include "tp_flows.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_clock.h"
#include "tp_modules.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "tp_tracks.h"
#include "trace_io.h"

#define MAX_INFLATED (512u << 20) /* one compressed_packets, inflated */
#define MAX_DATA_FIELDS 8         /* data fields remembered per packet */

/* Interned messages of one generation: (field, iid) -> arena slice. */
struct gen {
	struct u64map *maps; /* one per InternedData field seen */
	uint32_t *fields;
	unsigned nmaps;
	uint64_t defaults_off; /* TracePacketDefaults in the arena */
	uint32_t defaults_len;
	bool defaults_has_clock; /* its timestamp_clock_id, decoded once */
	uint32_t defaults_clock;
	struct u64map str_cache; /* tp_interned_str() results */
};

struct tp_load_state {
	struct tp_seq **seqs;
	uint32_t nseqs, capseqs;
	struct u64map seq_of; /* machine << 32 | seq id -> index */
	struct gen *gens;     /* generation 0: packets of no sequence */
	uint32_t ngens, capgens;
	struct pb_buf arena;  /* interned messages and defaults */
	const struct tp_load_opts *opts;
	unsigned warnings;
	int depth;            /* compressed_packets nesting */
	/* compressed_packets: bytes inflated so far, the limit (UINT64_MAX:
	 * none); over_limit stops the load, at the packet at over_offset */
	uint64_t inflated, inflate_limit;
	bool over_limit;
	uint64_t over_offset;
};

static struct tp_load_state *L(struct tp_ctx *ctx);

/* ---- context ---------------------------------------------------------- */

struct tp_ctx_full {
	struct tp_ctx ctx;
	struct tp_load_state load;
};

static struct tp_load_state *L(struct tp_ctx *ctx)
{
	return &((struct tp_ctx_full *)ctx)->load;
}

static uint32_t gen_new(struct tp_load_state *ls)
{
	if (ls->ngens == ls->capgens) {
		ls->capgens = ls->capgens ? ls->capgens * 2 : 16;
		ls->gens = realloc(ls->gens, ls->capgens * sizeof(*ls->gens));
		if (!ls->gens)
			abort();
	}
	memset(&ls->gens[ls->ngens], 0, sizeof(ls->gens[0]));
	return ls->ngens++;
}

struct tp_ctx *tp_ctx_new(void)
{
	struct tp_ctx_full *f = calloc(1, sizeof(*f));
	if (!f)
		abort();
	struct tp_ctx *ctx = &f->ctx;
	ctx->pool = tp_strpool_new();
	tp_schema_init(ctx->tables, ctx->pool);
	ctx->sorter = tp_sorter_new();
	ctx->clocks = tp_clocks_new();
	ctx->args = tp_args_state_new();
	ctx->stats = tp_stats_new();
	ctx->tracks = tp_tracks_new();
	ctx->slices = tp_slices_new();
	ctx->flows = tp_flows_new();
	u64map_init(&ctx->machines);
	u64map_init(&f->load.seq_of);
	pb_buf_init(&f->load.arena);
	gen_new(&f->load);
	/* machine 0: the host the trace was recorded on */
	uint32_t m = tp_table_add_row(tp_tab(ctx, TP_T_MACHINE));
	tp_set_int(tp_tab(ctx, TP_T_MACHINE), TP_MACHINE_raw_id, m, 0);
	ctx->procs = tp_procs_new(ctx);
	tp_te_init(ctx);
	tp_ftrace_init(ctx);
	tp_system_init(ctx);
	return ctx;
}

void tp_ctx_free(struct tp_ctx *ctx)
{
	if (!ctx)
		return;
	struct tp_load_state *ls = L(ctx);
	for (uint32_t i = 0; i < ls->nseqs; i++) {
		tp_te_seq_free(ctx, ls->seqs[i]);
		free(ls->seqs[i]->loss_bit_count);
		free(ls->seqs[i]->clocks);
		free(ls->seqs[i]);
	}
	free(ls->seqs);
	for (uint32_t g = 0; g < ls->ngens; g++) {
		for (unsigned i = 0; i < ls->gens[g].nmaps; i++)
			u64map_free(&ls->gens[g].maps[i]);
		u64map_free(&ls->gens[g].str_cache);
		free(ls->gens[g].maps);
		free(ls->gens[g].fields);
	}
	free(ls->gens);
	u64map_free(&ls->seq_of);
	pb_buf_free(&ls->arena);
	tp_te_free(ctx);
	tp_ftrace_free(ctx);
	tp_system_free(ctx);
	tp_sorter_free(ctx->sorter);
	tp_clocks_free(ctx->clocks);
	tp_args_state_free(ctx->args);
	tp_stats_free(ctx->stats);
	tp_tracks_free(ctx->tracks);
	tp_slices_free(ctx->slices);
	tp_flows_free(ctx->flows);
	tp_procs_free(ctx->procs);
	for (unsigned i = 0; i < TP_T_COUNT; i++)
		tp_table_free(&ctx->tables[i]);
	u64map_free(&ctx->machines);
	tp_strpool_free(ctx->pool);
	free(ctx);
}

uint32_t tp_machine(struct tp_ctx *ctx, uint32_t raw)
{
	uint64_t v;
	if (raw == 0)
		return 0;
	if (u64map_get(&ctx->machines, raw, &v))
		return (uint32_t)v;
	struct tp_table *t = tp_tab(ctx, TP_T_MACHINE);
	uint32_t id = tp_table_add_row(t);
	tp_set_int(t, TP_MACHINE_raw_id, id, raw);
	u64map_put(&ctx->machines, raw, id);
	return id;
}

uint32_t tp_packet_machine(struct tp_ctx *ctx, uint32_t raw,
			   bool counts_for_host)
{
	if (raw == 0) {
		if (counts_for_host)
			ctx->host_has_data = true;
		return 0;
	}
	if (!ctx->machine_resolved) {
		ctx->machine_resolved = true;
		if (!ctx->host_has_data) {
			tp_set_int(tp_tab(ctx, TP_T_MACHINE), TP_MACHINE_raw_id,
				   0, raw);
			u64map_put(&ctx->machines, raw, 0);
		}
	}
	return tp_machine(ctx, raw);
}

void tp_warn(struct tp_ctx *ctx, const char *fmt, ...)
{
	struct tp_load_state *ls = L(ctx);
	va_list ap;
	if ((ls->opts && ls->opts->quiet) || ls->warnings >= 20)
		return;
	ls->warnings++;
	fprintf(stderr, "vperfetto_tp: warning: %s: ", ctx->path ? ctx->path
							      : "trace");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (ls->warnings == 20)
		fprintf(stderr, "vperfetto_tp: further warnings suppressed; "
				"see the stats table\n");
}

/* ---- sequences and interning ----------------------------------------- */

static struct tp_seq *seq_get(struct tp_ctx *ctx, uint32_t machine,
			      uint32_t id)
{
	struct tp_load_state *ls = L(ctx);
	uint64_t key = (uint64_t)machine << 32 | id, v;
	if (u64map_get(&ls->seq_of, key, &v))
		return ls->seqs[v];
	if (ls->nseqs == ls->capseqs) {
		ls->capseqs = ls->capseqs ? ls->capseqs * 2 : 16;
		ls->seqs = realloc(ls->seqs, ls->capseqs * sizeof(*ls->seqs));
		if (!ls->seqs)
			abort();
	}
	struct tp_seq *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	s->id = id;
	s->machine = machine;
	s->queue = tp_sort_queue(ctx->sorter, key);
	s->gen = gen_new(ls);
	u64map_put(&ls->seq_of, key, ls->nseqs);
	ls->seqs[ls->nseqs++] = s;
	return s;
}

struct tp_seq *tp_seq_find(struct tp_ctx *ctx, uint32_t machine,
			   uint32_t seq_id)
{
	struct tp_load_state *ls = L(ctx);
	uint64_t v;
	if (!u64map_get(&ls->seq_of, (uint64_t)machine << 32 | seq_id, &v))
		return NULL;
	return ls->seqs[v];
}

void tp_seq_visit(struct tp_ctx *ctx, void (*fn)(void *, struct tp_seq *),
		  void *arg)
{
	struct tp_load_state *ls = L(ctx);
	for (uint32_t i = 0; i < ls->nseqs; i++)
		fn(arg, ls->seqs[i]);
}

static struct u64map *gen_map(struct gen *g, uint32_t field, bool create)
{
	for (unsigned i = 0; i < g->nmaps; i++)
		if (g->fields[i] == field)
			return &g->maps[i];
	if (!create)
		return NULL;
	g->maps = realloc(g->maps, (g->nmaps + 1) * sizeof(*g->maps));
	g->fields = realloc(g->fields, (g->nmaps + 1) * sizeof(*g->fields));
	if (!g->maps || !g->fields)
		abort();
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
	struct tp_load_state *ls = L(ctx);
	struct pb_reader r;
	struct pb_field f;
	uint64_t iid = 0;
	bool has_iid = false;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == INTERNED_IID && f.wt == PB_WT_VARINT) {
			iid = f.val;
			has_iid = true;
		}
	if (r.err != PB_OK || !has_iid || len >= (1u << SLICE_LEN_BITS)) {
		tp_stat_inc(ctx, "interned_data_tokenizer_errors");
		return;
	}
	uint64_t off = ls->arena.len, old;
	struct u64map *m = gen_map(&ls->gens[gen], field, true);
	pb_put_raw(&ls->arena, data, len);
	/* A redefined iid may have a cached name: forget the cache then (a
	 * new iid cannot be in it, failed lookups are not cached). */
	if (u64map_get(m, iid, &old) && ls->gens[gen].str_cache.count)
		u64map_clear(&ls->gens[gen].str_cache);
	u64map_put(m, iid, off << SLICE_LEN_BITS | len);
}

static void intern_data(struct tp_ctx *ctx, uint32_t gen, const uint8_t *data,
			size_t len)
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
	struct tp_load_state *ls = L(ctx);
	uint64_t v;
	if (gen >= ls->ngens)
		return false;
	struct u64map *m = gen_map(&ls->gens[gen], field, false);
	if (!m || !u64map_get(m, iid, &v))
		return false;
	*data = ls->arena.data + (v >> SLICE_LEN_BITS);
	*len = (size_t)(v & ((1u << SLICE_LEN_BITS) - 1));
	return true;
}

tp_str tp_interned_str(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		       uint64_t iid, uint32_t name_field)
{
	struct tp_load_state *ls = L(ctx);
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
	struct tp_load_state *ls = L(ctx);
	*data = NULL;
	*len = 0;
	if (gen < ls->ngens && ls->gens[gen].defaults_len) {
		*data = ls->arena.data + ls->gens[gen].defaults_off;
		*len = ls->gens[gen].defaults_len;
	}
}

static void set_defaults(struct tp_ctx *ctx, uint32_t gen, const uint8_t *data,
			 size_t len)
{
	struct tp_load_state *ls = L(ctx);
	if (len > UINT32_MAX)
		return;
	struct gen *g = &ls->gens[gen];
	struct pb_reader r;
	struct pb_field f;
	g->defaults_off = ls->arena.len;
	g->defaults_len = (uint32_t)len;
	g->defaults_has_clock = false;
	pb_put_raw(&ls->arena, data, len);
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == TPD_TIMESTAMP_CLOCK_ID && f.wt == PB_WT_VARINT &&
		    f.val <= UINT32_MAX) {
			g->defaults_has_clock = true;
			g->defaults_clock = (uint32_t)f.val;
		}
}

/* ---- clocks ----------------------------------------------------------- */

bool tp_to_trace_time(struct tp_ctx *ctx, const struct tp_packet *pkt,
		      uint32_t clock_id, int64_t ts, int64_t *out)
{
	uint64_t id = clock_id;
	if (clock_id >= SCOPED_CLOCK_FIRST && clock_id <= SCOPED_CLOCK_LAST) {
		if (!pkt->seq) {
			tp_stat_inc(ctx, "clock_sync_failure");
			return false;
		}
		id = tp_clock_seq_scoped(pkt->seq->id, clock_id);
	}
	if (!tp_clock_to_trace(ctx->clocks, pkt->machine, id, ts, out)) {
		tp_stat_add(ctx, "clock_sync_failure", pkt->machine, -1, 1);
		return false;
	}
	return true;
}

/* The sequence's scoped clocks, allocated on first use. */
static struct tp_seq_clocks *seq_clocks(struct tp_seq *s)
{
	if (!s->clocks) {
		s->clocks = calloc(1, sizeof(*s->clocks));
		if (!s->clocks)
			abort();
		for (unsigned i = 0; i < 64; i++)
			s->clocks->clock_mult[i] = 1;
	}
	return s->clocks;
}

static struct tp_incr_clock *incr_clock(struct tp_seq *s, uint32_t clock_id)
{
	struct tp_seq_clocks *c = s->clocks;
	for (unsigned i = 0; c && i < c->niclocks; i++)
		if (c->iclocks[i].clock_id == clock_id)
			return &c->iclocks[i];
	return NULL;
}

static void clock_snapshot(struct tp_ctx *ctx, struct tp_packet *pkt,
			   const uint8_t *data, size_t len)
{
	struct tp_clock_reading rd[32];
	uint32_t raw_ids[32];
	unsigned n = 0;
	uint64_t primary = 0;
	bool has_primary = false;
	struct pb_reader r, cr;
	struct pb_field f, cf;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == CS_PRIMARY_TRACE_CLOCK && f.wt == PB_WT_VARINT) {
			primary = f.val;
			has_primary = true;
			continue;
		}
		if (f.num != CS_CLOCKS || f.wt != PB_WT_LEN || n == 32)
			continue;
		uint64_t id = 0, mult = 1;
		int64_t ts = 0;
		bool incr = false;
		pb_reader_init(&cr, f.data, f.len);
		while (pb_next(&cr, &cf)) {
			if (cf.wt != PB_WT_VARINT)
				continue;
			if (cf.num == CLK_CLOCK_ID)
				id = cf.val;
			else if (cf.num == CLK_TIMESTAMP)
				ts = (int64_t)cf.val;
			else if (cf.num == CLK_IS_INCREMENTAL)
				incr = cf.val != 0;
			else if (cf.num == CLK_UNIT_MULTIPLIER_NS)
				mult = cf.val ? cf.val : 1;
		}
		if (id > UINT32_MAX)
			continue;
		bool scoped = id >= SCOPED_CLOCK_FIRST && id <= SCOPED_CLOCK_LAST;
		if (scoped && !pkt->seq) {
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
	if (r.err != PB_OK || n == 0) {
		tp_stat_inc(ctx, "invalid_clock_snapshots");
		if (n == 0)
			return;
	}
	if (has_primary &&
	    !tp_clock_set_trace_clock(ctx->clocks, pkt->machine, primary))
		tp_stat_inc(ctx, "clock_snapshot_not_monotonic");
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
		const char *name = builtin_clock_name(raw_ids[i]);
		if (name)
			tp_set_str(t, TP_CLOCK_SNAPSHOT_clock_name, row,
				   tp_s(ctx, name));
		tp_set_int(t, TP_CLOCK_SNAPSHOT_clock_value, row, rd[i].ts_ns);
		tp_set_int(t, TP_CLOCK_SNAPSHOT_snapshot_id, row, snap);
		tp_set_machine(t, TP_CLOCK_SNAPSHOT_machine_id, row, pkt->machine);
	}
}

/* The clock of the packet's timestamp: its own, else the sequence's
 * defaults, else BOOTTIME. */
static uint32_t packet_clock(struct tp_ctx *ctx, const struct tp_packet *pkt,
			     bool has_clock, uint32_t clock)
{
	struct tp_load_state *ls = L(ctx);
	if (has_clock)
		return clock;
	if (pkt->seq && pkt->gen < ls->ngens &&
	    ls->gens[pkt->gen].defaults_has_clock)
		return ls->gens[pkt->gen].defaults_clock;
	return BUILTIN_CLOCK_BOOTTIME;
}

/* Resolves pkt->raw_ts (in pkt->clock_id) into pkt->ts. */
static bool packet_time(struct tp_ctx *ctx, struct tp_packet *pkt)
{
	int64_t ts = pkt->raw_ts;
	uint32_t id = pkt->clock_id;
	if (id >= SCOPED_CLOCK_FIRST && id <= SCOPED_CLOCK_LAST && pkt->seq) {
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
	if (!tp_to_trace_time(ctx, pkt, id, ts, &pkt->ts))
		return false;
	pkt->has_ts = true;
	return true;
}

/* ---- packets ---------------------------------------------------------- */

static void load_packet(struct tp_ctx *ctx, const uint8_t *data, size_t len,
			uint64_t offset);

static bool is_envelope_field(uint32_t num)
{
	switch (num) {
	case TP_TIMESTAMP:
	case TP_TIMESTAMP_CLOCK_ID:
	case TP_TRUSTED_PACKET_SEQUENCE_ID:
	case TP_SEQUENCE_FLAGS:
	case TP_INCREMENTAL_STATE_CLEARED:
	case TP_PREVIOUS_PACKET_DROPPED:
	case TP_FIRST_PACKET_ON_SEQUENCE:
	case TP_TRUSTED_UID:
	case TP_TRUSTED_PID:
	case TP_MACHINE_ID:
	case TP_INTERNED_DATA:
	case TP_TRACE_PACKET_DEFAULTS:
	case TP_CLOCK_SNAPSHOT:
		return true;
	default:
		return false;
	}
}

static void compressed_packets(struct tp_ctx *ctx, const uint8_t *data,
			       size_t len, uint64_t offset)
{
	struct tp_load_state *ls = L(ctx);
	z_stream z;
	struct pb_buf out;

	if (ls->depth > 0) {
		tp_stat_inc(ctx, "compressed_packets_nested");
		return;
	}
	if (ls->over_limit)
		return;
	memset(&z, 0, sizeof(z));
	if (inflateInit(&z) != Z_OK)
		return;
	pb_buf_init(&out);
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
	/* This field may inflate to the trace's budget left (one byte more
	 * tells a stream that would go past it), at most MAX_INFLATED. */
	uint64_t budget = ls->inflate_limit - ls->inflated;
	bool by_budget = budget < MAX_INFLATED;
	size_t cap = by_budget ? (size_t)budget + 1 : MAX_INFLATED;
	int rc = Z_OK;
	while (rc == Z_OK) {
		if (out.len >= cap) {
			rc = Z_MEM_ERROR;
			break;
		}
		pb_buf_reserve(&out, 1u << 16);
		z.next_out = out.data + out.len;
		size_t room = out.cap - out.len;
		if (room > cap - out.len)
			room = cap - out.len;
		z.avail_out = (uInt)(room > UINT32_MAX ? UINT32_MAX : room);
		rc = inflate(&z, Z_NO_FLUSH);
		out.len = (size_t)(z.next_out - out.data);
	}
	inflateEnd(&z);
	ls->inflated += out.len;
	if (by_budget && out.len > budget) {
		/* Past the limit for the whole trace: the load stops here. */
		tp_stat_inc(ctx, "compressed_packets_over_limit");
		ls->over_limit = true;
		ls->over_offset = offset;
		pb_buf_free(&out);
		return;
	}
	if (rc != Z_STREAM_END) {
		tp_stat_inc(ctx, "compressed_packets_invalid");
		tp_warn(ctx, "byte offset %llu: compressed_packets do not "
			     "inflate (%s); the packets inflated so far are kept",
			(unsigned long long)offset,
			rc == Z_MEM_ERROR ? "too large" : "corrupt");
	}
	struct pb_reader r;
	struct pb_field f;
	ls->depth++;
	pb_reader_init(&r, out.data, out.len);
	while (pb_next(&r, &f))
		if (f.num == TRACE_PACKET_FIELD && f.wt == PB_WT_LEN)
			load_packet(ctx, f.data, f.len, offset);
	if (r.err != PB_OK && rc == Z_STREAM_END)
		tp_stat_inc(ctx, "compressed_packets_invalid");
	ls->depth--;
	pb_buf_free(&out);
}

static void dispatch_field(struct tp_ctx *ctx, const struct tp_packet *pkt,
			   const struct pb_field *f)
{
	if (f->num == TP_COMPRESSED_PACKETS && f->wt == PB_WT_LEN) {
		compressed_packets(ctx, f->data, f->len, pkt->offset);
		return;
	}
	if (tp_te_tokenize(ctx, pkt, f))
		return;
	if (tp_ftrace_tokenize(ctx, pkt, f))
		return;
	tp_system_tokenize(ctx, pkt, f);
}

static void load_packet(struct tp_ctx *ctx, const uint8_t *data, size_t len,
			uint64_t offset)
{
	struct tp_packet pkt;
	struct pb_reader r;
	struct pb_field f;
	bool has_seq = false, has_ts = false, has_clock = false;
	uint32_t seq_id = 0, clock = 0, raw_machine = 0;
	bool has_sync_marker = false, has_compressed = false;
	uint64_t dropped = 0;
	const uint8_t *interned = NULL, *defaults = NULL, *snapshot = NULL;
	size_t interned_len = 0, defaults_len = 0, snapshot_len = 0;

	struct pb_field data_fields[MAX_DATA_FIELDS];
	unsigned ndata = 0;

	memset(&pkt, 0, sizeof(pkt));
	pkt.data = data;
	pkt.len = len;
	pkt.offset = offset;
	ctx->packets++;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		bool v = f.wt == PB_WT_VARINT;
		switch (f.num) {
		case TP_TIMESTAMP:
			if (v) {
				pkt.raw_ts = (int64_t)f.val;
				has_ts = true;
			}
			break;
		case TP_TIMESTAMP_CLOCK_ID:
			if (v && f.val <= UINT32_MAX) {
				clock = (uint32_t)f.val;
				has_clock = true;
			}
			break;
		case TP_TRUSTED_PACKET_SEQUENCE_ID:
			if (v && f.val <= UINT32_MAX) {
				seq_id = (uint32_t)f.val;
				has_seq = seq_id != 0;
			}
			break;
		case TP_SEQUENCE_FLAGS:
			if (v)
				pkt.seq_flags = (uint32_t)f.val;
			break;
		case TP_INCREMENTAL_STATE_CLEARED:
			if (v && f.val)
				pkt.incremental_state_cleared = true;
			break;
		case TP_PREVIOUS_PACKET_DROPPED:
			if (v)
				dropped = f.val;
			break;
		case TP_FIRST_PACKET_ON_SEQUENCE:
			if (v && f.val)
				pkt.first_on_sequence = true;
			break;
		case TP_TRUSTED_UID:
			if (v) {
				pkt.trusted_uid = (int32_t)f.val;
				pkt.has_trusted_uid = true;
			}
			break;
		case TP_TRUSTED_PID:
			if (v) {
				pkt.trusted_pid = (int32_t)f.val;
				pkt.has_trusted_pid = true;
			}
			break;
		case TP_MACHINE_ID:
			if (v && f.val <= UINT32_MAX)
				raw_machine = (uint32_t)f.val;
			break;
		case TP_INTERNED_DATA:
			if (f.wt == PB_WT_LEN) {
				interned = f.data;
				interned_len = f.len;
			}
			break;
		case TP_TRACE_PACKET_DEFAULTS:
			if (f.wt == PB_WT_LEN) {
				defaults = f.data;
				defaults_len = f.len;
			}
			break;
		case TP_CLOCK_SNAPSHOT:
			if (f.wt == PB_WT_LEN) {
				snapshot = f.data;
				snapshot_len = f.len;
			}
			break;
		case TP_SYNCHRONIZATION_MARKER:
			has_sync_marker = true;
			if (ndata < MAX_DATA_FIELDS)
				data_fields[ndata] = f;
			ndata++;
			break;
		case TP_COMPRESSED_PACKETS:
			has_compressed = true;
			if (ndata < MAX_DATA_FIELDS)
				data_fields[ndata] = f;
			ndata++;
			break;
		default:
			if (ndata < MAX_DATA_FIELDS)
				data_fields[ndata] = f;
			ndata++;
			break;
		}
	}
	if (r.err != PB_OK) {
		tp_stat_inc(ctx, "packet_decode_errors");
		tp_warn(ctx, "byte offset %llu: malformed packet (%s at packet "
			     "byte %zu); packet skipped",
			(unsigned long long)offset, pb_err_str(r.err), r.err_off);
		return;
	}

	struct tp_load_state *ls = L(ctx);
	pkt.machine = tp_packet_machine(ctx, raw_machine,
					!has_sync_marker && !has_compressed);
	if (has_seq) {
		struct tp_seq *s = seq_get(ctx, pkt.machine, seq_id);
		pkt.seq = s;
		pkt.queue = s->queue;
		if (pkt.incremental_state_cleared ||
		    (pkt.seq_flags & SEQ_INCREMENTAL_STATE_CLEARED)) {
			if (s->seen_any)
				s->gen = gen_new(ls);
			s->incremental_valid = true;
			if (s->clocks)
				s->clocks->niclocks = 0;
			tp_te_seq_reset(ctx, s);
		}
		if (dropped && s->seen_any) {
			s->packets_lost++;
			if (!s->loss_bit_count) {
				s->loss_bit_count = calloc(
					TP_LOSS_BITS, sizeof(*s->loss_bit_count));
				if (!s->loss_bit_count)
					abort();
			}
			for (unsigned b = 0; b < TP_LOSS_BITS; b++)
				if (dropped >> b & 1)
					s->loss_bit_count[b]++;
			s->incremental_valid = pkt.incremental_state_cleared ||
					       (pkt.seq_flags &
						SEQ_INCREMENTAL_STATE_CLEARED);
		}
		s->seen_any = true;
		s->packets++;
		pkt.gen = s->gen;
		if ((pkt.seq_flags & SEQ_NEEDS_INCREMENTAL_STATE) &&
		    !s->incremental_valid) {
			s->packets_needing_state_dropped++;
			tp_stat_add(ctx, "tokenizer_skipped_packets",
				    pkt.machine, -1, 1);
			return;
		}
	} else {
		pkt.queue = tp_sort_queue(ctx->sorter,
					  (uint64_t)pkt.machine << 32);
	}

	if (interned) {
		if (pkt.seq)
			intern_data(ctx, pkt.gen, interned, interned_len);
		else
			tp_stat_inc(ctx, "interned_data_tokenizer_errors");
	}
	if (defaults && pkt.seq)
		set_defaults(ctx, pkt.gen, defaults, defaults_len);
	if (snapshot)
		clock_snapshot(ctx, &pkt, snapshot, snapshot_len);
	if (has_ts) {
		pkt.clock_id = packet_clock(ctx, &pkt, has_clock, clock);
		if (!packet_time(ctx, &pkt))
			return; /* counted as clock_sync_failure */
		if (!ctx->have_ts || pkt.ts < ctx->first_ts)
			ctx->first_ts = pkt.ts;
		if (!ctx->have_ts || pkt.ts > ctx->last_ts)
			ctx->last_ts = pkt.ts;
		ctx->have_ts = true;
	}
	pkt.needs_incremental_state =
		(pkt.seq_flags & SEQ_NEEDS_INCREMENTAL_STATE) != 0;

	/* The data fields, each to the module that knows it (scanned again
	 * only in the rare packet with more than MAX_DATA_FIELDS of them). */
	if (ndata <= MAX_DATA_FIELDS) {
		for (unsigned i = 0; i < ndata; i++)
			dispatch_field(ctx, &pkt, &data_fields[i]);
		return;
	}
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (!is_envelope_field(f.num))
			dispatch_field(ctx, &pkt, &f);
}

/* ---- driving the load ------------------------------------------------- */

static void progress_draw(struct tp_ctx *ctx, const char *stage, double frac)
{
	struct tp_load_state *ls = L(ctx);
	if (!ls->opts || !ls->opts->progress)
		return;
	int w = 40, n = (int)(frac * w);
	if (n > w)
		n = w;
	fprintf(stderr, "\r%-8s [%.*s%*s] %3d%%", stage, n,
		"########################################", w - n, "",
		(int)(frac * 100));
	fflush(stderr);
}

static void progress_sort(struct tp_ctx *ctx, double frac)
{
	progress_draw(ctx, "parsing", frac);
}

/* Runs the parse stage and writes the derived tables. */
static void limits_init(struct tp_load_state *ls,
			const struct tp_load_opts *opts)
{
	ls->inflate_limit = opts && opts->max_inflate ? opts->max_inflate
						      : TP_DEFAULT_MAX_INFLATE;
	ls->inflated = 0;
	ls->over_limit = false;
}

static int over_limit_error(struct tp_ctx *ctx, struct vp_error *err)
{
	struct tp_load_state *ls = L(ctx);
	return vp_errorf(err,
			 "%s: byte offset %llu: compressed_packets inflate "
			 "to over %llu bytes in all (a compression bomb?); "
			 "--max-inflate sets the cap (default %llu MiB); "
			 "the load stops",
			 ctx->path ? ctx->path : "trace",
			 (unsigned long long)ls->over_offset,
			 (unsigned long long)ls->inflate_limit,
			 (unsigned long long)(TP_DEFAULT_MAX_INFLATE >> 20));
}

static void load_finish(struct tp_ctx *ctx)
{
	progress_draw(ctx, "parsing", 0.0);
	tp_sort_drain(ctx->sorter, ctx, progress_sort);
	ctx->sorting_done = true;
	tp_te_finish(ctx);
	tp_ftrace_finish(ctx);
	tp_system_finish(ctx);
	tp_stats_finish(ctx);
	for (unsigned i = 0; i < TP_T_COUNT; i++)
		tp_table_shrink(&ctx->tables[i]);
	struct tp_load_state *ls = L(ctx);
	if (ls->opts && ls->opts->progress)
		fprintf(stderr, "\r%60s\r", "");
}

int tp_load_file(struct tp_ctx *ctx, const char *path,
		 const struct tp_load_opts *opts, struct vp_error *err)
{
	struct tp_load_state *ls = L(ctx);
	struct trace_reader *rd;
	struct trace_record rec;
	struct vp_error rerr;
	int rc;

	ls->opts = opts;
	limits_init(ls, opts);
	ctx->path = path;
	if (trace_reader_open(&rd, path, err) < 0)
		return -1;
	ctx->file_size = trace_reader_size(rd);
	uint64_t next_draw = 0;
	while ((rc = trace_reader_next(rd, &rec, &rerr)) == 1) {
		if (rec.field == TRACE_PACKET_FIELD && rec.wt == PB_WT_LEN)
			load_packet(ctx, rec.data, rec.len, rec.data_offset);
		else
			tp_stat_inc(ctx, "unknown_trace_fields");
		if (ls->over_limit) {
			trace_reader_close(rd);
			if (opts && opts->progress)
				fprintf(stderr, "\r%60s\r", "");
			return over_limit_error(ctx, err);
		}
		if (rec.offset >= next_draw && ctx->file_size) {
			progress_draw(ctx, "loading",
				      (double)rec.offset / (double)ctx->file_size);
			next_draw = rec.offset + (ctx->file_size / 100 + 1);
		}
	}
	if (rc < 0) {
		/* Keep what was read: a truncated trace is still a trace. */
		tp_stat_inc(ctx, "trace_truncated");
		if (!(opts && opts->quiet))
			fprintf(stderr, "\nvperfetto_tp: warning: %s; "
					"loading what came before\n", rerr.msg);
	}
	trace_reader_close(rd);
	load_finish(ctx);
	return 0;
}

int tp_load_buffer(struct tp_ctx *ctx, const uint8_t *data, size_t len,
		   const struct tp_load_opts *opts)
{
	struct tp_load_state *ls = L(ctx);
	struct pb_reader r;
	struct pb_field f;

	ls->opts = opts;
	limits_init(ls, opts);
	ctx->file_size = len;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == TRACE_PACKET_FIELD && f.wt == PB_WT_LEN)
			load_packet(ctx, f.data, f.len,
				    (uint64_t)(f.data - data));
		else
			tp_stat_inc(ctx, "unknown_trace_fields");
		if (ls->over_limit)
			return -1;
	}
	if (r.err != PB_OK) {
		tp_stat_inc(ctx, "trace_truncated");
		tp_warn(ctx, "byte offset %zu: %s; loading what came before",
			r.err_off, pb_err_str(r.err));
	}
	load_finish(ctx);
	return 0;
}
