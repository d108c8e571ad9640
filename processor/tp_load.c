/*
 * tp_load.c - the loader: reads a trace, has each packet's envelope decoded
 * and its sequence's state applied by the trace model the merge shares
 * (wire/trace_model.h), hands the payload to the modules, then runs the
 * sorted parse stage (tp_load.h).  What a sequence keeps between packets
 * for the processor (interning generations, stored defaults, scoped
 * clocks) is tp_seq.c's.
 *
 * What the loader does with the envelope, as Perfetto's proto tokenizer:
 *  - trusted_packet_sequence_id -> struct tp_seq (per machine);
 *  - the trace model's events: a clear starts a new interning generation
 *    and resets the track event state; a loss is counted by reason; a
 *    packet needing state the sequence lost is skipped and counted;
 *  - interned_data, stored per generation as the raw interned messages;
 *  - trace_packet_defaults, stored per generation (track_event_defaults);
 *  - timestamp in its clock (the packet's, the defaults', BOOTTIME),
 *    including sequence-scoped and incremental clocks, to trace time;
 *  - clock_snapshot (the clock graph and the clock_snapshot table);
 *  - machine_id, trusted uid / pid;
 *  - compressed_packets, inflated and loaded packet by packet.
 */
#include "tp_load.h"
#include "tp_input.h"
#include "tp_flows.h"
#include "tp_states.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_clock.h"
#include "tp_compress.h"
#include "tp_diag.h"
#include "tp_memory.h"
#include "tp_android_log.h"
#include "tp_modules.h"
#include "tp_procs.h"
#include "tp_seq.h"
#include "tp_slices.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "tp_syscalls.h"
#include "tp_memevents.h"
#include "tp_binder.h"
#include "tp_tracks.h"
#include "trace_io.h"
#include "trace_model.h"
#include "vp_alloc.h"
#include "vp_log.h"

#define MAX_INFLATED (512u << 20) /* one compressed_packets, inflated */

struct tp_load_state {
	const struct tp_load_opts *opts;
	int depth;            /* compressed_packets nesting */
	/* compressed_packets: bytes inflated so far, the limit (UINT64_MAX:
	 * none); over_limit stops the load, at the packet at over_offset */
	uint64_t inflated, inflate_limit;
	bool over_limit;
	uint64_t over_offset;
	/* packets whose clock could not be converted yet (packet_time()) */
	struct deferred {
		uint8_t *data;
		size_t len;
		uint64_t offset;
		uint32_t machine;
		struct tp_seq *seq;
	} *deferred;
	size_t ndeferred, capdeferred;
	/* per machine: the latest packet time (packet_latest()) */
	int64_t *latest;
	uint32_t nlatest;
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

struct tp_ctx *tp_ctx_new(void)
{
	struct tp_ctx_full *f = vp_xcalloc(1, sizeof(*f));
	struct tp_ctx *ctx = &f->ctx;
	ctx->pool = tp_strpool_new();
	tp_schema_init(ctx->tables, ctx->pool);
	ctx->sorter = tp_sorter_new();
	ctx->clocks = tp_clocks_new();
	ctx->args = tp_args_state_new();
	ctx->stats = tp_stats_new();
	ctx->diag = tp_diag_new();
	ctx->memory = tp_memory_new();
	ctx->compress = tp_compress_new();
	ctx->tracks = tp_tracks_new();
	ctx->slices = tp_slices_new();
	ctx->flows = tp_flows_new();
	ctx->syscalls = tp_syscalls_new();
	ctx->memevents = tp_memevents_new();
	ctx->binder = tp_binder_new();
	ctx->states = tp_states_new();
	u64map_init(&ctx->machines);
	ctx->seqs = tp_seqs_new();
	/* machine 0: the host the trace was recorded on */
	uint32_t m = tp_table_add_row(tp_tab(ctx, TP_T_MACHINE));
	tp_set_int(tp_tab(ctx, TP_T_MACHINE), TP_MACHINE_raw_id, m, 0);
	ctx->procs = tp_procs_new(ctx);
	tp_te_init(ctx);
	tp_ftrace_init(ctx);
	tp_system_init(ctx);
	tp_sessions_init(ctx);
	tp_alog_init(ctx);
	return ctx;
}

static void free_te_seq(void *arg, struct tp_seq *seq)
{
	tp_te_seq_free(arg, seq);
}

void tp_ctx_free(struct tp_ctx *ctx)
{
	if (!ctx)
		return;
	tp_seq_visit(ctx, free_te_seq, ctx);
	tp_seqs_free(ctx->seqs);
	tp_te_free(ctx);
	tp_ftrace_free(ctx);
	tp_system_free(ctx);
	tp_sessions_free(ctx);
	tp_alog_free(ctx);
	for (size_t k = 0; k < L(ctx)->ndeferred; k++)
		free(L(ctx)->deferred[k].data);
	free(L(ctx)->deferred);
	free(L(ctx)->latest);
	tp_sorter_free(ctx->sorter);
	tp_clocks_free(ctx->clocks);
	tp_args_state_free(ctx->args);
	tp_stats_free(ctx->stats);
	tp_diag_free(ctx->diag);
	tp_memory_free(ctx->memory);
	tp_compress_free(ctx->compress);
	tp_tracks_free(ctx->tracks);
	tp_slices_free(ctx->slices);
	tp_flows_free(ctx->flows);
	tp_syscalls_free(ctx->syscalls);
	tp_memevents_free(ctx->memevents);
	tp_binder_free(ctx->binder);
	tp_states_free(ctx->states);
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
	tp_procs_machine_seen(ctx, id);
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

/* ---- packets ---------------------------------------------------------- */

static void load_packet(struct tp_ctx *ctx, const uint8_t *data, size_t len,
			uint64_t offset);
static bool packet_time(struct tp_ctx *ctx, struct tp_packet *pkt,
			const struct vp_packet *p, bool at_eof);
static void dispatch_payload(struct tp_ctx *ctx, struct tp_packet *pkt,
			     const struct vp_packet *p);
static void defer_packet(struct tp_load_state *ls,
			 const struct tp_packet *pkt);
static void packet_latest(struct tp_ctx *ctx, struct tp_packet *pkt);

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
	if (tp_sessions_tokenize(ctx, pkt, f))
		return;
	if (tp_alog_tokenize(ctx, pkt, f))
		return;
	tp_system_tokenize(ctx, pkt, f);
}

/* Applies the packet to its sequence's state (trace_model.h), acting on
 * what that says; false when the rest of the packet is to be skipped: it
 * needs incremental state its sequence has lost (load_packet counts that
 * after the kinds Perfetto reads first). */
static bool sequence_state(struct tp_ctx *ctx, struct tp_packet *pkt,
			   const struct vp_packet *p)
{
	struct tp_seq *s = pkt->seq;
	uint64_t losses = s->st.losses;
	unsigned ev = vp_seq_update(&s->st, p);

	if (p->first_on_sequence)
		tp_te_first_packet(ctx, p->seq_id);
	if (ev & VP_SEQ_NEW_GENERATION)
		s->gen = tp_seq_new_gen(ctx);
	if (ev & VP_SEQ_CLEARED) {
		if (s->clocks)
			s->clocks->niclocks = 0;
		tp_te_seq_reset(ctx, s);
	}
	if (s->st.losses != losses) { /* previous_packet_dropped's reasons */
		if (!s->loss_bit_count) {
			s->loss_bit_count = vp_xcalloc(TP_LOSS_BITS,
						   sizeof(*s->loss_bit_count));
		}
		for (unsigned b = 0; b < TP_LOSS_BITS; b++)
			if (p->previous_packet_dropped >> b & 1)
				s->loss_bit_count[b]++;
	}
	if (ev & VP_SEQ_LOST)
		tp_te_seq_lost(ctx, s);
	pkt->gen = s->gen;

	/* Interned data and defaults are taken before the skip below, as
	 * Perfetto takes them; Perfetto reads interned data, like track
	 * events, only from packets that name their sequence, and only while
	 * the sequence's incremental state is valid (whether or not the
	 * packet needs that state): before, the entries could land in the
	 * wrong generation. */
	if (p->interned.data && !p->has_seq_id)
		tp_stat_add(ctx, "interned_data_missing_sequence_id",
			    pkt->machine, -1, 1);
	else if (p->interned.data && !s->st.valid)
		tp_stat_add(ctx,
			    "interned_data_skipped_incremental_state_invalid",
			    pkt->machine, -1, 1);
	else if (p->interned.data)
		tp_seq_intern_data(ctx, pkt->gen, p->interned.data,
				   p->interned.len);
	if (p->defaults.data)
		tp_seq_set_defaults(ctx, pkt->gen, p->defaults.data,
				    p->defaults.len);
	return !(ev & VP_SEQ_SKIP);
}

/* The packet kinds Perfetto's reader is done with before it asks whether
 * the sequence's incremental state is valid and before it looks at the
 * timestamp: a clock snapshot, a remote clock sync and a service event end
 * the packet there (nothing beside them is read); trace stats are read
 * there, and the packet goes on (dispatch_payload does not read them
 * again).  True when the packet is done. */
static bool early_kinds(struct tp_ctx *ctx, struct tp_packet *pkt,
			const struct vp_packet *p)
{
	struct pb_reader r;
	struct pb_field spare, stats, service;
	const struct pb_field *f;
	bool have_stats = false, have_service = false, remote = false;

	if (p->snapshot.data) {
		tp_seq_clock_snapshot(ctx, pkt, p->snapshot.data,
				      p->snapshot.len);
		return true;
	}
	/* the last of each, as Perfetto's decoder keeps it */
	for (size_t i = 0; vp_packet_field(p, &i, &r, &spare, &f);) {
		if (f->wt != PB_WT_LEN)
			continue;
		if (f->num == TP_TRACE_STATS) {
			stats = *f;
			have_stats = true;
		} else if (f->num == TP_SERVICE_EVENT) {
			service = *f;
			have_service = true;
		} else if (f->num == TP_REMOTE_CLOCK_SYNC) {
			remote = true;
		}
	}
	if (have_stats)
		tp_system_tokenize(ctx, pkt, &stats);
	if (remote)
		return true; /* clocks of other machines: none to take here */
	if (have_service) {
		/* with its timestamp as written, not converted */
		pkt->ts = pkt->raw_ts;
		pkt->has_ts = p->has_ts;
		tp_system_tokenize(ctx, pkt, &service);
		return true;
	}
	return false;
}

static void load_packet(struct tp_ctx *ctx, const uint8_t *data, size_t len,
			uint64_t offset)
{
	struct tp_packet pkt;
	struct vp_packet p;

	memset(&pkt, 0, sizeof(pkt));
	pkt.data = data;
	pkt.len = len;
	pkt.offset = offset;
	ctx->packets++;

	if (!vp_packet_decode(&p, data, len)) {
		tp_stat_inc(ctx, "packet_decode_errors");
		tp_warn(ctx, "byte offset %llu: malformed packet (%s at packet "
			     "byte %zu); packet skipped",
			(unsigned long long)offset, pb_err_str(p.err),
			p.err_off);
		return;
	}
	pkt.raw_ts = (int64_t)p.ts;
	pkt.env = &p;
	pkt.machine = tp_packet_machine(ctx, p.machine_id,
					!p.sync_marker && !p.compressed);
	/* Every packet is on a sequence: 0 when it names none, as Perfetto's
	 * reader has it (interned data and track events work there too). */
	pkt.seq = tp_seq_get(ctx, pkt.machine, p.seq_id);
	pkt.queue = pkt.seq->queue;
	bool valid = sequence_state(ctx, &pkt, &p);
	if (early_kinds(ctx, &pkt, &p))
		return;
	if (!valid) {
		/* Perfetto logs the skip under its own stat. */
		tp_stat_add(ctx, "packet_skipped_seq_needs_"
				 "incremental_state_invalid",
			    pkt.machine, -1, 1);
		return;
	}
	if (p.has_ts && !packet_time(ctx, &pkt, &p, false))
		return;
	packet_latest(ctx, &pkt);
	dispatch_payload(ctx, &pkt, &p);
}

/* A packet without a timestamp takes the later of its machine's latest
 * packet time and the latest time pushed to the sorter, as Perfetto's
 * reader gives it; every packet moves its machine's latest time. */
static void packet_latest(struct tp_ctx *ctx, struct tp_packet *pkt)
{
	struct tp_load_state *ls = L(ctx);

	if (pkt->machine >= ls->nlatest) {
		uint32_t n = pkt->machine + 1;
		ls->latest = vp_xreallocarray(ls->latest, n, sizeof(*ls->latest));
		memset(ls->latest + ls->nlatest, 0,
		       (n - ls->nlatest) * sizeof(*ls->latest));
		ls->nlatest = n;
	}
	int64_t *latest = &ls->latest[pkt->machine];
	if (!pkt->has_ts) {
		int64_t pushed = tp_sort_max_pushed(ctx->sorter);
		pkt->ts = *latest > pushed ? *latest : pushed;
		pkt->has_ts = true;
		pkt->ts_implied = true;
	}
	if (pkt->ts > *latest)
		*latest = pkt->ts;
}

/* The packet's timestamp in trace time.  A clock no snapshot links to the
 * trace clock yet may be linked by a later one: as Perfetto does, the
 * packet is then kept for the end of the file (which makes the sorter
 * sort the whole trace there), unless the sorter handed on events
 * already; it is lost then (clock_sync_failure_undeferrable_packet_loss).
 * at_eof: this is that second try, and its failure is counted by its
 * reason too. */
static bool packet_time(struct tp_ctx *ctx, struct tp_packet *pkt,
			const struct vp_packet *p, bool at_eof)
{
	struct tp_load_state *ls = L(ctx);

	pkt->clock_id = vp_seq_packet_clock(&pkt->seq->st, p,
					    BUILTIN_CLOCK_BOOTTIME);
	if (!tp_seq_packet_time(ctx, pkt, at_eof)) {
		if (!at_eof && tp_sort_try_full_sort(ctx->sorter)) {
			defer_packet(ls, pkt);
			return false;
		}
		/* the file's import log: machine 0 (tp_to_trace_time) */
		tp_stat_add(ctx, "clock_sync_failure_undeferrable_packet_loss",
			    0, -1, 1);
		return false;
	}
	if (!ctx->have_ts || pkt->ts < ctx->first_ts)
		ctx->first_ts = pkt->ts;
	if (!ctx->have_ts || pkt->ts > ctx->last_ts)
		ctx->last_ts = pkt->ts;
	ctx->have_ts = true;
	return true;
}

/* The payload, each field to the module that knows it. */
static void dispatch_payload(struct tp_ctx *ctx, struct tp_packet *pkt,
			     const struct vp_packet *p)
{
	struct pb_reader r;
	struct pb_field spare;
	const struct pb_field *f;
	for (size_t i = 0; vp_packet_field(p, &i, &r, &spare, &f);)
		if (!vp_packet_is_envelope(f->num) &&
		    f->num != TP_TRACE_STATS) /* read by early_kinds() */
			dispatch_field(ctx, pkt, f);
}

static void defer_packet(struct tp_load_state *ls,
			 const struct tp_packet *pkt)
{
	if (ls->ndeferred == ls->capdeferred) {
		ls->capdeferred = ls->capdeferred ? ls->capdeferred * 2 : 16;
		ls->deferred = vp_xreallocarray(ls->deferred, ls->capdeferred,
						sizeof(*ls->deferred));
	}
	struct deferred *d = &ls->deferred[ls->ndeferred++];
	d->data = vp_xmalloc(pkt->len ? pkt->len : 1);
	memcpy(d->data, pkt->data, pkt->len);
	d->len = pkt->len;
	d->offset = pkt->offset;
	d->machine = pkt->machine;
	d->seq = pkt->seq;
}

/* The end of the file: the deferred packets again, with every clock
 * snapshot known now; their sequences' state is what it is at the end,
 * as in Perfetto. */
static void load_deferred(struct tp_ctx *ctx)
{
	struct tp_load_state *ls = L(ctx);

	for (size_t k = 0; k < ls->ndeferred; k++) {
		struct deferred *d = &ls->deferred[k];
		struct vp_packet p;
		struct tp_packet pkt = { 0 };
		if (vp_packet_decode(&p, d->data, d->len)) {
			pkt.data = d->data;
			pkt.len = d->len;
			pkt.offset = d->offset;
			pkt.env = &p;
			pkt.raw_ts = (int64_t)p.ts;
			pkt.machine = d->machine;
			pkt.seq = d->seq;
			pkt.queue = d->seq->queue;
			pkt.gen = d->seq->gen;
			if (packet_time(ctx, &pkt, &p, true)) {
				packet_latest(ctx, &pkt);
				dispatch_payload(ctx, &pkt, &p);
			}
		}
		free(d->data);
	}
	free(ls->deferred);
	ls->deferred = NULL;
	ls->ndeferred = ls->capdeferred = 0;
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

static void sort_mode_init(struct tp_ctx *ctx, const struct tp_load_opts *opts)
{
	tp_sort_set_full_sort(ctx->sorter, opts && opts->full_sort);
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
	load_deferred(ctx);
	progress_draw(ctx, "parsing", 0.0);
	tp_sort_drain(ctx->sorter, ctx, progress_sort);
	ctx->sorting_done = true;
	uint64_t late = tp_sort_dropped_out_of_order(ctx->sorter);
	uint64_t negative = tp_sort_dropped_negative(ctx->sorter);
	if (late)
		tp_stat_add(ctx, "sorter_push_event_out_of_order", 0, -1,
			    (int64_t)late);
	if (negative)
		tp_stat_add(ctx, "trace_sorter_negative_timestamp_dropped", 0,
			    -1, (int64_t)negative);
	tp_te_finish(ctx);
	tp_ftrace_finish(ctx);
	tp_system_finish(ctx);
	tp_vcpu_build(ctx, L(ctx)->opts ? L(ctx)->opts->vcpu_assign : NULL);
	tp_diag_finish(ctx);
	/* An empty file is no trace at all to Perfetto: it has no machine,
	 * so no idle process or thread, and no stats of a machine either. */
	if (ctx->file_size == 0) {
		tp_tab(ctx, TP_T_MACHINE)->nrows = 0;
		tp_tab(ctx, TP_T_PROCESS)->nrows = 0;
		tp_tab(ctx, TP_T_THREAD)->nrows = 0;
	}
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
	sort_mode_init(ctx, opts);
	ctx->path = path;
	ctx->quiet = opts && opts->quiet;
	int fd;
	struct vp_error gz;
	if (tp_input_open(path, opts ? opts->max_inflate : 0, &fd,
			  &ctx->head_hash, &gz, err) < 0 ||
	    trace_reader_open_fd(&rd, fd, path, err) < 0)
		return -1;
	ctx->have_head_hash = true;
	if (gz.msg[0] && !(opts && opts->quiet))
		vp_log_warn("%s", gz.msg);
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
		/* Keep what was read: a truncated trace is still a trace, and
		 * what was not read is counted (trace_truncated, a stat of
		 * ours: Perfetto's reader counts none for it). */
		tp_stat_inc(ctx, "trace_truncated");
		if (!(opts && opts->quiet))
			vp_log_warn("%s; loading what came before", rerr.msg);
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
	sort_mode_init(ctx, opts);
	ctx->quiet = opts && opts->quiet;
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
