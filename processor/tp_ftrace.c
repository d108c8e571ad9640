/*
 * tp_ftrace.c - ftrace event bundles (TracePacket.ftrace_events), as
 * Perfetto's FtraceTokenizer / FtraceParser handle them.
 *
 * Tokenize (file order): each bundle's events, and the sched_switch /
 * sched_waking columns of its compact_sched, are converted to trace time
 * (the bundle's ftrace clock, BOOTTIME by default) and pushed one by one to
 * the sorter queue of their (machine, cpu).  The first bundle of each cpu
 * tells from when that cpu's data is valid; the latest such start over all
 * cpus is ftrace_latest_data_start_ns.
 *
 * Parse (timestamp order): events before that start only go to the
 * ftrace_event table.  Others also build sched slices and thread states
 * (sched_switch, sched_waking), threads and processes (task_newtask,
 * task_rename, sched_process_free), atrace slices and counters (print and
 * the kernel *_tracing_mark_write events) and cpu counters (cpu_frequency,
 * cpu_idle, cpu_frequency_limits, sched_cpu_util_cfs).
 *
 * process_tree and process_stats packets are tp_process.c's; they come
 * through tp_ftrace_tokenize as the module's entry point.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftrace_event_table.h"
#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_atrace.h"
#include "tp_clock.h"
#include "tp_memory.h"
#include "tp_seq.h"
#include "tp_modules.h"
#include "tp_process.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "tp_syscalls.h"
#include "tp_binder.h"
#include "tp_ftrace_msg.h"
#include "tp_print.h"
#include "tp_kslices.h"
#include "tp_memevents.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

/* Field numbers and enum values (TracePacket, FtraceEventBundle,
 * CompactSched, FtraceEvent and the payloads this module parses, the
 * generic_kernel_* packets) are perfetto_fields.h's, from protos/. */

enum { CSCHED_NCOLS = CSCHED_WAKING_COMMON_FLAGS + 1 };

#define MAX_CPUS 1024
#define MAX_CPUS_PER_MACHINE 4096 /* ucpu = machine * this + cpu */
#define NONE32 0xffffffffu
#define CLONE_THREAD 0x00010000u

/* ---- state ------------------------------------------------------------ */

/* The sched_switch state of one cpu (Perfetto's PendingSchedInfo). */
struct cpu_sched {
	uint32_t last_utid; /* NONE32: no switch seen yet */
	int64_t last_pid;
	int32_t last_prio;
	uint32_t pending_row; /* open sched row, NONE32 if none */
};

/* A cpu's sorter streams, as Perfetto has them: typed events, and the
 * compact_sched switches and wakings, each a stream of its own. */
enum ft_stream { FT_STREAM_EVENTS, FT_STREAM_SWITCH, FT_STREAM_WAKING,
		 FT_NSTREAMS };

struct ftrace_machine {
	bool has_start;          /* ftrace_latest_data_start_ns known */
	int64_t latest_start;
	bool soft_drop_known;    /* computed at the first parsed event */
	int64_t soft_drop_before;
	int64_t drop_before;     /* events before: not even ftrace_event */
	bool preserve_buffer;    /* FtraceStats.preserve_ftrace_buffer */
	uint8_t seen_first[MAX_CPUS / 8];
	struct cpu_sched *cpus;
	uint32_t ncpus;
	uint32_t nstreams[FT_NSTREAMS]; /* sorter lanes made, per kind */
};

/* Thread state rows of a thread (Perfetto's ThreadStateTracker). */
struct ts_rows {
	uint32_t last; /* NONE32: none */
};

/* Payload headers. */
struct ev_hdr {
	uint32_t cpu;
	uint32_t machine;
	uint32_t gen; /* the packet's interning generation */
};

struct cswitch {
	uint32_t cpu, machine;
	int64_t prev_state;
	int64_t next_pid;
	int32_t next_prio;
	tp_str next_comm;
};

struct cwaking {
	uint32_t cpu, machine;
	int64_t pid;
	int32_t target_cpu, prio;
	tp_str comm;
	uint32_t common_flags;
	bool has_flags;
};

static struct tp_ftrace_state *st(struct tp_ctx *ctx)
{
	return ctx->ftrace;
}

/* Counts one more of a stat on the machine whose events raised it: Perfetto
 * keeps a machine's stats apart from the other machines'. */
static void mstat(struct tp_ctx *ctx, uint32_t machine, const char *name)
{
	tp_stat_add(ctx, name, machine, -1, 1);
}

static struct ftrace_machine *fmach(struct tp_ctx *ctx, uint32_t machine)
{
	struct tp_ftrace_state *s = st(ctx);

	if (machine >= s->nmachines) {
		uint32_t n = machine + 1;
		s->machines = vp_xrealloc(s->machines, n * sizeof *s->machines);
		memset(s->machines + s->nmachines, 0,
		       (n - s->nmachines) * sizeof *s->machines);
		s->nmachines = n;
	}
	return &s->machines[machine];
}

static uint64_t stream_key(uint32_t machine, enum ft_stream k, uint32_t cpu)
{
	return TP_QUEUE_FTRACE | (uint64_t)k << 56 | (uint64_t)machine << 32 |
	       cpu;
}

/* The sorter queue of a cpu's stream.  Perfetto makes a kind's stream for
 * a cpu, and for every lower cpu that has none yet, in cpu order, the
 * first time the cpu has an event of that kind; the order streams were
 * made in breaks timestamp ties, so it is kept here. */
static uint32_t stream_queue(struct tp_ctx *ctx, uint32_t machine,
			     enum ft_stream k, uint32_t cpu)
{
	struct ftrace_machine *m = fmach(ctx, machine);

	while (cpu < MAX_CPUS && m->nstreams[k] <= cpu)
		tp_sort_lane(ctx->sorter,
			     stream_key(machine, k, m->nstreams[k]++));
	return tp_sort_lane(ctx->sorter, stream_key(machine, k, cpu));
}

static struct cpu_sched *cpu_sched(struct tp_ctx *ctx, uint32_t machine,
				   uint32_t cpu)
{
	struct ftrace_machine *m = fmach(ctx, machine);

	if (cpu >= m->ncpus) {
		uint32_t n = cpu + 1;
		m->cpus = vp_xrealloc(m->cpus, n * sizeof *m->cpus);
		for (uint32_t i = m->ncpus; i < n; i++)
			m->cpus[i] = (struct cpu_sched){ NONE32, 0, 0, NONE32 };
		m->ncpus = n;
	}
	return &m->cpus[cpu];
}

static int64_t ucpu_of(struct tp_ctx *ctx, uint32_t machine, uint32_t cpu)
{
	return tp_cpu_ucpu(ctx, machine, cpu);
}

/* ---- tokenize --------------------------------------------------------- */

static uint64_t bundle_clock(struct tp_ctx *ctx, const struct tp_packet *pkt,
			     const struct msg *b, bool *ok)
{
	struct tp_ftrace_state *s = st(ctx);
	uint64_t clock = BUILTIN_CLOCK_BOOTTIME;

	*ok = true;
	if (!has(b, FB_FTRACE_CLOCK))
		return clock;
	switch (u64(b, FB_FTRACE_CLOCK)) {
	case FTRACE_CLOCK_UNSPECIFIED:
		return clock;
	case FTRACE_CLOCK_MONO_RAW:
		clock = BUILTIN_CLOCK_MONOTONIC_RAW;
		break;
	case FTRACE_CLOCK_GLOBAL:
	case FTRACE_CLOCK_LOCAL:
		if (!tp_pkt_scoped_ok(pkt)) {
			*ok = false;
			return clock;
		}
		clock = SCOPED_CLOCK_FIRST;
		break;
	default:
		*ok = false;
		return clock;
	}
	if (has(b, FB_FTRACE_TIMESTAMP) && has(b, FB_BOOT_TIMESTAMP) &&
	    (!s->have_snapshot ||
	     s->last_snapshot_ts != i64(b, FB_FTRACE_TIMESTAMP))) {
		struct tp_clock_reading rd[2];
		rd[0].clock_id = clock == SCOPED_CLOCK_FIRST
					 ? tp_clock_seq_scoped(pkt->seq->id,
							       SCOPED_CLOCK_FIRST)
					 : clock;
		rd[0].ts_ns = i64(b, FB_FTRACE_TIMESTAMP);
		rd[1].clock_id = BUILTIN_CLOCK_BOOTTIME;
		rd[1].ts_ns = i64(b, FB_BOOT_TIMESTAMP);
		tp_clock_add_snapshot(ctx->clocks, pkt->machine, rd, 2);
		s->have_snapshot = true;
		s->last_snapshot_ts = i64(b, FB_FTRACE_TIMESTAMP);
	}
	return clock;
}

static void push_event(struct tp_ctx *ctx, const struct tp_packet *pkt,
		       uint32_t cpu, uint32_t clock, const uint8_t *data,
		       size_t len)
{
	struct tp_ftrace_state *s = st(ctx);
	struct pb_reader r;
	struct pb_field f;
	bool has_ts = false, has_id = false;
	uint64_t raw_ts = 0;
	int64_t ts;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == FE_TIMESTAMP && f.wt == PB_WT_VARINT) {
			raw_ts = f.val;
			has_ts = true;
		} else if (f.wt == PB_WT_LEN) {
			has_id = true;
		}
	}
	if (!has_ts) {
		mstat(ctx, pkt->machine, "ftrace_bundle_tokenizer_errors");
		return;
	}
	if (!has_id) {
		mstat(ctx, pkt->machine, "ftrace_missing_event_id");
		return;
	}
	if (!tp_to_trace_time(ctx, pkt, clock, (int64_t)raw_ts, &ts))
		return;

	size_t need = sizeof(struct ev_hdr) + len;
	if (need > s->scratch_cap) {
		s->scratch_cap = need * 2;
		s->scratch = vp_xrealloc(s->scratch, s->scratch_cap);
	}
	struct ev_hdr h = { cpu, pkt->machine, pkt->gen };
	memcpy(s->scratch, &h, sizeof h);
	memcpy(s->scratch + sizeof h, data, len);
	uint32_t q = stream_queue(ctx, pkt->machine, FT_STREAM_EVENTS, cpu);
	tp_sort_push(ctx->sorter, q, ts, s->kind_event, s->scratch, need);
}

/* A packed column of compact_sched, possibly split over several fields. */
struct column {
	uint64_t *v;
	size_t n, cap;
	bool bad;
};

static void column_add_packed(struct column *c, const struct pb_field *f)
{
	if (f->wt == PB_WT_VARINT) {
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 64;
			c->v = vp_xrealloc(c->v, c->cap * sizeof *c->v);
		}
		c->v[c->n++] = f->val;
		return;
	}
	if (f->wt != PB_WT_LEN) {
		c->bad = true;
		return;
	}
	struct pb_packed_iter it;
	uint64_t x;
	pb_packed_init(&it, f->data, f->len);
	while (pb_packed_next(&it, &x)) {
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 64;
			c->v = vp_xrealloc(c->v, c->cap * sizeof *c->v);
		}
		c->v[c->n++] = x;
	}
	if (it.bad)
		c->bad = true;
}

static void compact_sched(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  uint32_t cpu, uint32_t clock, const uint8_t *data,
			  size_t len)
{
	struct tp_ftrace_state *s = st(ctx);
	struct column cols[CSCHED_NCOLS];
	tp_str *strs = NULL;
	size_t nstrs = 0, capstrs = 0;
	struct pb_reader r;
	struct pb_field f;
	bool bad = false;

	memset(cols, 0, sizeof cols);
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == CSCHED_INTERN_TABLE) {
			if (f.wt != PB_WT_LEN) {
				bad = true;
				continue;
			}
			if (nstrs == capstrs) {
				capstrs = capstrs ? capstrs * 2 : 64;
				strs = vp_xrealloc(strs, capstrs * sizeof *strs);
			}
			strs[nstrs++] = tp_intern(ctx->pool,
						  (const char *)f.data, f.len);
		} else if (f.num < CSCHED_NCOLS) {
			column_add_packed(&cols[f.num], &f);
		}
	}
	if (r.err != PB_OK)
		bad = true;
	for (unsigned i = 0; i < CSCHED_NCOLS; i++)
		bad |= cols[i].bad;

	/* Each kind's stream is made by its first event. */
	uint32_t qs = NONE32, qw = NONE32;

	/* sched_switch columns */
	size_t n = cols[CSCHED_SWITCH_TIMESTAMP].n;
	if (cols[CSCHED_SWITCH_PREV_STATE].n != n ||
	    cols[CSCHED_SWITCH_NEXT_PID].n != n ||
	    cols[CSCHED_SWITCH_NEXT_PRIO].n != n ||
	    cols[CSCHED_SWITCH_NEXT_COMM_INDEX].n != n) {
		bad = true;
		size_t m = cols[CSCHED_SWITCH_PREV_STATE].n;
		if (cols[CSCHED_SWITCH_NEXT_PID].n < m)
			m = cols[CSCHED_SWITCH_NEXT_PID].n;
		if (cols[CSCHED_SWITCH_NEXT_PRIO].n < m)
			m = cols[CSCHED_SWITCH_NEXT_PRIO].n;
		if (cols[CSCHED_SWITCH_NEXT_COMM_INDEX].n < m)
			m = cols[CSCHED_SWITCH_NEXT_COMM_INDEX].n;
		if (m < n)
			n = m;
	}
	int64_t acc = 0;
	for (size_t i = 0; i < n; i++) {
		struct cswitch e;
		int64_t ts;
		uint64_t ci = cols[CSCHED_SWITCH_NEXT_COMM_INDEX].v[i];
		acc += (int64_t)cols[CSCHED_SWITCH_TIMESTAMP].v[i];
		if (ci >= nstrs) {
			bad = true;
			break;
		}
		memset(&e, 0, sizeof e);
		e.cpu = cpu;
		e.machine = pkt->machine;
		e.prev_state = (int64_t)cols[CSCHED_SWITCH_PREV_STATE].v[i];
		e.next_pid = (int32_t)(uint32_t)cols[CSCHED_SWITCH_NEXT_PID].v[i];
		e.next_prio = (int32_t)(uint32_t)cols[CSCHED_SWITCH_NEXT_PRIO].v[i];
		e.next_comm = strs[ci];
		if (!tp_to_trace_time(ctx, pkt, clock, acc, &ts))
			break;
		if (qs == NONE32)
			qs = stream_queue(ctx, pkt->machine, FT_STREAM_SWITCH,
					  cpu);
		tp_sort_push(ctx->sorter, qs, ts, s->kind_cswitch, &e, sizeof e);
	}

	/* sched_waking columns */
	n = cols[CSCHED_WAKING_TIMESTAMP].n;
	if (cols[CSCHED_WAKING_PID].n != n || cols[CSCHED_WAKING_TARGET_CPU].n != n ||
	    cols[CSCHED_WAKING_PRIO].n != n || cols[CSCHED_WAKING_COMM_INDEX].n != n) {
		bad = true;
		size_t m = cols[CSCHED_WAKING_PID].n;
		if (cols[CSCHED_WAKING_TARGET_CPU].n < m)
			m = cols[CSCHED_WAKING_TARGET_CPU].n;
		if (cols[CSCHED_WAKING_PRIO].n < m)
			m = cols[CSCHED_WAKING_PRIO].n;
		if (cols[CSCHED_WAKING_COMM_INDEX].n < m)
			m = cols[CSCHED_WAKING_COMM_INDEX].n;
		if (m < n)
			n = m;
	}
	acc = 0;
	for (size_t i = 0; i < n; i++) {
		struct cwaking e;
		int64_t ts;
		uint64_t ci = cols[CSCHED_WAKING_COMM_INDEX].v[i];
		acc += (int64_t)cols[CSCHED_WAKING_TIMESTAMP].v[i];
		if (ci >= nstrs) {
			bad = true;
			break;
		}
		memset(&e, 0, sizeof e);
		e.cpu = cpu;
		e.machine = pkt->machine;
		e.pid = (int32_t)(uint32_t)cols[CSCHED_WAKING_PID].v[i];
		e.target_cpu = (int32_t)(uint32_t)cols[CSCHED_WAKING_TARGET_CPU].v[i];
		e.prio = (int32_t)(uint32_t)cols[CSCHED_WAKING_PRIO].v[i];
		e.comm = strs[ci];
		if (i < cols[CSCHED_WAKING_COMMON_FLAGS].n) {
			e.common_flags =
				(uint32_t)cols[CSCHED_WAKING_COMMON_FLAGS].v[i];
			e.has_flags = true;
		}
		if (!tp_to_trace_time(ctx, pkt, clock, acc, &ts))
			break;
		if (qw == NONE32)
			qw = stream_queue(ctx, pkt->machine, FT_STREAM_WAKING,
					  cpu);
		tp_sort_push(ctx->sorter, qw, ts, s->kind_cwaking, &e, sizeof e);
	}

	if (bad)
		mstat(ctx, pkt->machine, "compact_sched_has_parse_errors");
	for (unsigned i = 0; i < CSCHED_NCOLS; i++)
		free(cols[i].v);
	free(strs);
}

/* The first bundle of a cpu: from when its data is valid. */
static void first_bundle(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 uint32_t cpu, uint32_t clock, const struct msg *b)
{
	struct ftrace_machine *m = fmach(ctx, pkt->machine);
	uint64_t raw;
	int64_t ts;

	if (m->seen_first[cpu / 8] >> (cpu % 8) & 1)
		return;
	m->seen_first[cpu / 8] |= (uint8_t)(1u << (cpu % 8));
	if (has(b, FB_PREVIOUS_BUNDLE_END_TIMESTAMP))
		raw = u64(b, FB_PREVIOUS_BUNDLE_END_TIMESTAMP);
	else if (has(b, FB_LAST_READ_EVENT_TIMESTAMP))
		raw = u64(b, FB_LAST_READ_EVENT_TIMESTAMP);
	else
		return;
	if (!tp_to_trace_time(ctx, pkt, clock, (int64_t)raw, &ts))
		return;
	if (!m->has_start || ts > m->latest_start) {
		m->has_start = true;
		m->latest_start = ts;
		tp_meta_set_int(ctx, "ftrace_latest_data_start_ns", pkt->machine,
				ts);
	}
}

static void tokenize_bundle(struct tp_ctx *ctx, const struct tp_packet *pkt,
			    const uint8_t *data, size_t len)
{
	struct msg b;
	struct pb_reader r;
	struct pb_field f;
	bool ok;

	msg_decode(&b, data, len);
	if (!has(&b, FB_CPU)) {
		mstat(ctx, pkt->machine, "ftrace_bundle_tokenizer_errors");
		return;
	}
	uint64_t cpu64 = u64(&b, FB_CPU);
	if (cpu64 >= MAX_CPUS) {
		mstat(ctx, pkt->machine, "ftrace_bundle_tokenizer_errors");
		return;
	}
	uint32_t cpu = (uint32_t)cpu64;
	if (u64(&b, FB_LOST_EVENTS))
		tp_stat_set(ctx, "ftrace_cpu_has_data_loss", pkt->machine, cpu,
			    1);
	uint32_t clock = (uint32_t)bundle_clock(ctx, pkt, &b, &ok);
	if (!ok) {
		mstat(ctx, pkt->machine, "ftrace_bundle_tokenizer_errors");
		return;
	}

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_LEN)
			continue;
		if (f.num == FB_COMPACT_SCHED)
			compact_sched(ctx, pkt, cpu, clock, f.data, f.len);
	}
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.wt == PB_WT_LEN && f.num == FB_EVENT)
			push_event(ctx, pkt, cpu, clock, f.data, f.len);
	}
	if (r.err != PB_OK)
		mstat(ctx, pkt->machine, "ftrace_bundle_tokenizer_errors");
	first_bundle(ctx, pkt, cpu, clock, &b);
}

/* ---- parse: common pieces -------------------------------------------- */

/* Events before the latest start of valid data go to ftrace_event only. */
/* The drop thresholds, fixed at the first parsed event (of any cpu), as
 * Perfetto does: events before tracing started (tracing_started_ns; none
 * when the kernel buffer was preserved from before) are dropped, counted
 * in ftrace_packet_before_tracing_start; events before every cpu's data
 * is valid (ftrace_latest_data_start_ns, at least the first) only go to
 * ftrace_event. */
static void drop_thresholds(struct tp_ctx *ctx, struct ftrace_machine *m,
			    uint32_t machine)
{
	int64_t started = 0;

	if (m->soft_drop_known)
		return;
	m->soft_drop_known = true;
	if (!m->preserve_buffer &&
	    tp_meta_get_int(ctx, "tracing_started_ns", machine, &started))
		m->drop_before = started;
	m->soft_drop_before = m->has_start ? m->latest_start : 0;
	if (m->soft_drop_before < m->drop_before)
		m->soft_drop_before = m->drop_before;
}

/* True (counting it) if the event at ts predates the start of tracing. */
static bool hard_dropped(struct tp_ctx *ctx, uint32_t machine, int64_t ts)
{
	struct ftrace_machine *m = fmach(ctx, machine);

	drop_thresholds(ctx, m, machine);
	if (ts >= m->drop_before)
		return false;
	mstat(ctx, machine, "ftrace_packet_before_tracing_start");
	return true;
}

static bool soft_dropped(struct tp_ctx *ctx, uint32_t machine, int64_t ts)
{
	struct ftrace_machine *m = fmach(ctx, machine);

	drop_thresholds(ctx, m, machine);
	return ts < m->soft_drop_before;
}

void tp_ftrace_preserve_buffer(struct tp_ctx *ctx, uint32_t machine)
{
	fmach(ctx, machine)->preserve_buffer = true;
}

static uint32_t raw_row(struct tp_ctx *ctx, int64_t ts, tp_str name,
			uint32_t cpu, uint32_t machine, uint32_t utid)
{
	struct tp_table *t = tp_tab(ctx, TP_T_FTRACE_EVENT);
	uint32_t row = tp_table_add_row(t);

	tp_set_int(t, TP_FTRACE_EVENT_ts, row, ts);
	tp_set_str(t, TP_FTRACE_EVENT_name, row, name);
	tp_set_int(t, TP_FTRACE_EVENT_cpu, row, cpu);
	tp_set_int(t, TP_FTRACE_EVENT_utid, row, utid);
	/* Perfetto's column is never NULL: 0 until the event has flags. */
	tp_set_int(t, TP_FTRACE_EVENT_common_flags, row, 0);
	tp_set_int(t, TP_FTRACE_EVENT_ucpu, row, ucpu_of(ctx, machine, cpu));
	tp_set_machine(t, TP_FTRACE_EVENT_machine_id, row, machine);
	return row;
}

static void raw_args_commit(struct tp_ctx *ctx, uint32_t row,
			    struct tp_args_builder *b)
{
	int64_t id = tp_args_commit(ctx, b);

	if (id >= 0)
		tp_set_int(tp_tab(ctx, TP_T_FTRACE_EVENT),
			   TP_FTRACE_EVENT_arg_set_id, row, id);
}

/* The event's fields as args, named by the ftrace event table. */
/* Whether field `field` of event `event` holds a kernel function's
 * address, which the trace may symbolize through interned kernel_symbols
 * (Perfetto's list of such fields). */
static bool kernel_fn_field(const char *event, const char *field)
{
	static const char *const fields[][2] = {
		{ "sched_blocked_reason", "caller" },
		{ "workqueue_queue_work", "function" },
		{ "workqueue_activate_work", "function" },
		{ "workqueue_execute_start", "function" },
		{ "workqueue_execute_end", "function" },
		{ "funcgraph_entry", "func" },
		{ "funcgraph_exit", "func" },
		{ "mm_shrink_slab_start", "shrink" },
		{ "hrtimer_expire_entry", "function" },
	};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (!strcmp(field, fields[i][1]) && !strcmp(event, fields[i][0]))
			return true;
	return false;
}

static void raw_typed(struct tp_ctx *ctx, const struct ft_event_desc *d,
		      int64_t ts, uint32_t cpu, uint32_t machine, uint32_t utid,
		      uint32_t gen, const uint8_t *data, size_t len,
		      bool has_flags, uint32_t flags)
{
	struct tp_args_builder *b = &st(ctx)->args;
	struct pb_reader r;
	struct pb_field f;
	uint32_t row = raw_row(ctx, ts, tp_s(ctx, d->name), cpu, machine, utid);

	if (has_flags)
		tp_set_int(tp_tab(ctx, TP_T_FTRACE_EVENT),
			   TP_FTRACE_EVENT_common_flags, row, flags);
	tp_args_builder_reset(b);
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		const struct ft_event_field *ef = ft_event_field(d, f.num);
		if (!ef)
			continue;
		tp_str key = tp_s(ctx, ef->name);
		if (f.wt == PB_WT_VARINT && kernel_fn_field(d->event, ef->name)) {
			/* The symbol's name when the trace has it. */
			tp_str sym = tp_kernel_symbol(ctx, gen, f.val);
			if (sym) {
				tp_args_add_str(b, key, key, sym);
				continue;
			}
		}
		if (ef->type == FT_FIELD_STR && f.wt == PB_WT_LEN)
			tp_args_add_str(b, key, key,
					tp_intern(ctx->pool,
						  (const char *)f.data, f.len));
		else if (ef->type == FT_FIELD_UINT && f.wt != PB_WT_LEN)
			tp_args_add_uint(b, key, key, f.val);
		else if (ef->type == FT_FIELD_INT && f.wt != PB_WT_LEN)
			tp_args_add_int(b, key, key, (int64_t)f.val);
	}
	raw_args_commit(ctx, row, b);
}

/* A GenericFtraceEvent, which names itself and each of its fields: a row
 * named by event_name, each field an arg (uint_value as an int arg, as
 * Perfetto stores it). */
static void raw_generic(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
			uint32_t machine, uint32_t utid, const uint8_t *data,
			size_t len)
{
	struct tp_args_builder *b = &st(ctx)->args;
	struct pb_reader r, fr;
	struct pb_field f, g;
	tp_str name = 0;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == GEN_EVENT_NAME && f.wt == PB_WT_LEN)
			name = tp_intern(ctx->pool, (const char *)f.data, f.len);
	uint32_t row = raw_row(ctx, ts, name, cpu, machine, utid);
	tp_args_builder_reset(b);
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num != GEN_FIELD || f.wt != PB_WT_LEN)
			continue;
		tp_str key = 0, str = 0;
		bool has_int = false, has_uint = false, has_str = false;
		uint64_t iv = 0, uv = 0;
		pb_reader_init(&fr, f.data, f.len);
		while (pb_next(&fr, &g)) {
			if (g.num == GENF_NAME && g.wt == PB_WT_LEN) {
				key = tp_intern(ctx->pool, (const char *)g.data,
						g.len);
			} else if (g.num == GENF_INT && g.wt == PB_WT_VARINT) {
				has_int = true;
				iv = g.val;
			} else if (g.num == GENF_UINT && g.wt == PB_WT_VARINT) {
				has_uint = true;
				uv = g.val;
			} else if (g.num == GENF_STR && g.wt == PB_WT_LEN) {
				has_str = true;
				str = tp_intern(ctx->pool, (const char *)g.data,
						g.len);
			}
		}
		/* the first of the value fields set, in Perfetto's order */
		if (has_int)
			tp_args_add_int(b, key, key, (int64_t)iv);
		else if (has_uint)
			tp_args_add_int(b, key, key, (int64_t)uv);
		else if (has_str)
			tp_args_add_str(b, key, key, str);
	}
	raw_args_commit(ctx, row, b);
}

/* ---- thread states ---------------------------------------------------- */

static uint32_t *ts_last(struct tp_ctx *ctx, uint32_t utid)
{
	struct tp_ftrace_state *s = st(ctx);

	if (utid >= s->nts) {
		uint32_t n = s->nts ? s->nts : 64;
		while (n <= utid)
			n *= 2;
		s->ts_last = vp_xrealloc(s->ts_last, n * sizeof *s->ts_last);
		s->ts_blocked = vp_xrealloc(s->ts_blocked,
					 n * sizeof *s->ts_blocked);
		for (uint32_t i = s->nts; i < n; i++)
			s->ts_last[i] = s->ts_blocked[i] = NONE32;
		s->nts = n;
	}
	return &s->ts_last[utid];
}

static bool state_running(struct tp_ctx *ctx, tp_str s)
{
	return s == st(ctx)->s_running;
}

/* As Perfetto's ThreadStateTracker: anything but "Running" and "R" counts
 * as blocked, "R+" (preempted) included, so a sched_waking of a preempted
 * thread closes its row and opens a new "R" one. */
static bool state_blocked(struct tp_ctx *ctx, tp_str s)
{
	struct tp_ftrace_state *fs = st(ctx);
	return s != fs->s_running && s != fs->s_runnable;
}

/* The idle (swapper) thread of its machine: Perfetto never gives it
 * thread_state rows, on the host (utid 0) or on any other machine. */
static bool is_idle_thread(struct tp_ctx *ctx, uint32_t utid)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD);
	return utid == 0 ||
	       (utid < t->nrows && !tp_is_null(t, TP_THREAD_is_idle, utid) &&
		tp_get_int(t, TP_THREAD_is_idle, utid) == 1);
}

static void ts_close(struct tp_ctx *ctx, int64_t ts, uint32_t utid,
		     bool data_loss)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD_STATE);
	uint32_t row = *ts_last(ctx, utid);

	if (row == NONE32 || data_loss)
		return;
	tp_set_int(t, TP_THREAD_STATE_dur, row,
		   ts - tp_get_int(t, TP_THREAD_STATE_ts, row));
}

/* irq_context: -1 leaves it NULL, else the common_flags of the event
 * (hard or soft irq: 1). */
static void ts_open(struct tp_ctx *ctx, int64_t ts, uint32_t utid,
		    tp_str state, int64_t cpu, uint32_t machine,
		    int64_t waker_utid, int64_t common_flags)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD_STATE);
	uint32_t row;

	if (is_idle_thread(ctx, utid))
		return;
	row = tp_table_add_row(t);
	tp_set_int(t, TP_THREAD_STATE_ts, row, ts);
	tp_set_int(t, TP_THREAD_STATE_dur, row, -1);
	tp_set_int(t, TP_THREAD_STATE_utid, row, utid);
	tp_set_str(t, TP_THREAD_STATE_state, row, state);
	tp_set_machine(t, TP_THREAD_STATE_machine_id, row, machine);
	if (common_flags >= 0)
		tp_set_int(t, TP_THREAD_STATE_irq_context, row,
			   (common_flags & (0x08 | 0x10)) ? 1 : 0);
	if (cpu >= 0) {
		tp_set_int(t, TP_THREAD_STATE_cpu, row, cpu);
		tp_set_int(t, TP_THREAD_STATE_ucpu, row,
			   ucpu_of(ctx, machine, (uint32_t)cpu));
	}
	if (waker_utid >= 0) {
		tp_set_int(t, TP_THREAD_STATE_waker_utid, row, waker_utid);
		uint32_t wrow = *ts_last(ctx, (uint32_t)waker_utid);
		if (wrow != NONE32 &&
		    state_running(ctx, tp_get_str(t, TP_THREAD_STATE_state,
						  wrow)))
			tp_set_int(t, TP_THREAD_STATE_waker_id, row, wrow);
	}
	*ts_last(ctx, utid) = row;
	/* Running forgets the blocked row; runnable keeps it. */
	if (state_running(ctx, state))
		st(ctx)->ts_blocked[utid] = NONE32;
	else if (state_blocked(ctx, state))
		st(ctx)->ts_blocked[utid] = row;
}

/* sched_blocked_reason: why the thread's latest blocked state blocked
 * (io_wait, and the kernel function, an interned kernel symbol). */
static void parse_blocked_reason(struct tp_ctx *ctx, uint32_t machine,
				 uint32_t gen, const uint8_t *data, size_t len)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD_STATE);
	struct pb_reader r;
	struct pb_field f;
	int64_t pid = 0;
	uint64_t caller = 0;
	bool io_wait = false;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (f.num == SBR_PID)
			pid = (int32_t)f.val;
		else if (f.num == SBR_CALLER)
			caller = f.val;
		else if (f.num == SBR_IO_WAIT)
			io_wait = f.val != 0;
	}
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	uint32_t row = *ts_last(ctx, utid) == NONE32 ? NONE32
						      : st(ctx)->ts_blocked[utid];
	if (row == NONE32)
		return;
	/* io_wait is set even when absent (false), as Perfetto reads it. */
	tp_set_int(t, TP_THREAD_STATE_io_wait, row, io_wait);
	tp_str fn = tp_kernel_symbol(ctx, gen, (uint32_t)caller);
	if (fn)
		tp_set_str(t, TP_THREAD_STATE_blocked_function, row, fn);
}

static void ts_switch(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
		      uint32_t machine, uint32_t prev_utid, tp_str prev_state,
		      uint32_t next_utid)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD_STATE);
	uint32_t last = *ts_last(ctx, prev_utid);
	bool loss = last != NONE32 &&
		    !state_running(ctx, tp_get_str(t, TP_THREAD_STATE_state,
						   last));

	ts_close(ctx, ts, prev_utid, loss);
	ts_open(ctx, ts, prev_utid, prev_state, -1, machine, -1, -1);
	ts_close(ctx, ts, next_utid, false);
	ts_open(ctx, ts, next_utid, st(ctx)->s_running, cpu, machine, -1, -1);
}

static void ts_waking(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      uint32_t utid, uint32_t waker, int64_t common_flags)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD_STATE);
	uint32_t last = *ts_last(ctx, utid);

	if (last != NONE32) {
		if (!state_blocked(ctx, tp_get_str(t, TP_THREAD_STATE_state,
						   last)))
			return;
		ts_close(ctx, ts, utid, false);
	}
	ts_open(ctx, ts, utid, st(ctx)->s_runnable, -1, machine, waker,
		common_flags);
}

/* ---- sched ------------------------------------------------------------ */

/* The machine's kernel version (major * 1000 + minor) from the release
 * string system_info wrote to the machine table; 4.4 when unknown, as
 * Perfetto assumes for traces that do not record it. */
static int kernel_version(struct tp_ctx *ctx, uint32_t machine)
{
	struct tp_table *mt = tp_tab(ctx, TP_T_MACHINE);
	const char *rel;
	int major = 0, minor = 0;

	if (machine >= mt->nrows)
		return 4004;
	rel = tp_str_get(ctx->pool, tp_get_str(mt, TP_MACHINE_release, machine));
	if (!rel || sscanf(rel, "%d.%d", &major, &minor) != 2 || major < 0 ||
	    minor < 0 || major > 1000 || minor > 999)
		return 4004;
	return major * 1000 + minor;
}

size_t tp_task_state_text(struct tp_ctx *ctx, uint32_t machine,
			  int64_t raw64, char sep, char *buf)
{
	enum {
		S = 1, D = 2, T = 4, t = 8, X = 16, Z = 32, P = 64, x = 128,
		K = 256, W = 512, N = 1024, I = 2048, PREEMPT = 4096,
		INVALID = 8192,
	};
	static const struct {
		uint32_t flag;
		char c;
	} atoms[] = {
		{ S, 'S' }, { D, 'D' }, { T, 'T' }, { t, 't' }, { X, 'X' },
		{ Z, 'Z' }, { P, 'P' }, { x, 'x' }, { K, 'K' }, { W, 'W' },
		{ N, 'N' }, { I, 'I' },
	};
	uint32_t raw = (uint16_t)raw64;
	uint32_t parsed = raw & 0x3f;
	int ver = kernel_version(ctx, machine);
	size_t n = 0;

	if (ver >= 4014) {
		if (raw & 0x40)
			parsed |= P;
		if (raw & 0x80)
			parsed |= I;
		if (raw & 0x100)
			parsed |= PREEMPT;
		if (raw & 0xfe00)
			parsed = INVALID;
	} else {
		if (raw & 0x40)
			parsed |= x;
		if (raw & 0x80)
			parsed |= K;
		if (raw & 0x100)
			parsed |= W;
		if (raw & 0x200)
			parsed |= P;
		if (raw & 0x400)
			parsed |= N;
		if (parsed == (D | N))
			parsed = I;
		if (raw & (ver >= 4008 ? 0x1000u : 0x800u))
			parsed |= PREEMPT;
	}
	if (parsed & INVALID)
		return 0;
	if ((parsed & ~(uint32_t)PREEMPT) == 0) {
		buf[n++] = 'R';
		if (parsed & PREEMPT)
			buf[n++] = '+';
	} else {
		for (size_t i = 0; i < sizeof atoms / sizeof atoms[0]; i++) {
			if (!(parsed & atoms[i].flag))
				continue;
			if (sep && n)
				buf[n++] = sep;
			buf[n++] = atoms[i].c;
		}
	}
	return n;
}

/* Perfetto's TaskState text for a raw prev_state, 0 (counted in
 * task_state_invalid) when the bits make no state. */
static tp_str task_state(struct tp_ctx *ctx, uint32_t machine, int64_t raw64)
{
	struct tp_ftrace_state *s = st(ctx);
	/* the text depends on the low 16 bits and the machine's kernel */
	uint32_t raw = (uint16_t)raw64;
	size_t slot = (raw ^ machine * 31u) % (sizeof s->state_cache / sizeof s->state_cache[0]);
	char buf[TP_TASK_STATE_MAX];

	if (s->state_cache[slot].raw == raw &&
	    s->state_cache[slot].machine == machine)
		return s->state_cache[slot].text;
	size_t n = tp_task_state_text(ctx, machine, raw64, 0, buf);
	if (!n) {
		mstat(ctx, machine, "task_state_invalid");
		return 0;
	}
	tp_str text = tp_intern(ctx->pool, buf, n);
	s->state_cache[slot].machine = machine;
	s->state_cache[slot].raw = raw;
	s->state_cache[slot].text = text;
	return text;
}

static uint32_t sched_start(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
			    uint32_t machine, uint32_t utid, int32_t prio)
{
	struct tp_table *t = tp_tab(ctx, TP_T_SCHED);
	uint32_t row = tp_table_add_row(t);

	tp_set_int(t, TP_SCHED_ts, row, ts);
	tp_set_int(t, TP_SCHED_dur, row, -1);
	tp_set_int(t, TP_SCHED_cpu, row, cpu);
	tp_set_int(t, TP_SCHED_utid, row, utid);
	tp_set_int(t, TP_SCHED_priority, row, prio);
	tp_set_int(t, TP_SCHED_ucpu, row, ucpu_of(ctx, machine, cpu));
	tp_set_machine(t, TP_SCHED_machine_id, row, machine);
	return row;
}

static void sched_close(struct tp_ctx *ctx, uint32_t row, int64_t ts,
			tp_str end_state)
{
	struct tp_table *t = tp_tab(ctx, TP_T_SCHED);

	tp_set_int(t, TP_SCHED_dur, row, ts - tp_get_int(t, TP_SCHED_ts, row));
	if (end_state)
		tp_set_str(t, TP_SCHED_end_state, row, end_state);
}

static uint32_t thread_named(struct tp_ctx *ctx, uint32_t machine,
			     int64_t tid, tp_str comm)
{
	uint32_t utid = tp_thread_get(ctx, machine, tid);

	tp_thread_set_name_prio(ctx, utid, comm, TP_NAME_PRIO_FTRACE);
	return utid;
}

static void raw_sched_switch(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
			     uint32_t machine, uint32_t prev_utid,
			     int64_t prev_pid, tp_str prev_comm,
			     int32_t prev_prio, int64_t prev_state,
			     int64_t next_pid, tp_str next_comm,
			     int32_t next_prio)
{
	struct tp_ftrace_state *s = st(ctx);
	struct tp_args_builder *b = &s->args;
	uint32_t row = raw_row(ctx, ts, s->k_sched_switch, cpu, machine,
			       prev_utid);

	tp_args_builder_reset(b);
	tp_args_add_str(b, s->k_prev_comm, s->k_prev_comm, prev_comm);
	tp_args_add_int(b, s->k_prev_pid, s->k_prev_pid, prev_pid);
	tp_args_add_int(b, s->k_prev_prio, s->k_prev_prio, prev_prio);
	tp_args_add_int(b, s->k_prev_state, s->k_prev_state, prev_state);
	tp_args_add_str(b, s->k_next_comm, s->k_next_comm, next_comm);
	tp_args_add_int(b, s->k_next_pid, s->k_next_pid, next_pid);
	tp_args_add_int(b, s->k_next_prio, s->k_next_prio, next_prio);
	raw_args_commit(ctx, row, b);
}

static void parse_sched_switch(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
			       uint32_t machine, const struct msg *m,
			       bool raw_only)
{
	struct cpu_sched *cs;
	int64_t prev_pid = i32(m, SS_PREV_PID), next_pid = i32(m, SS_NEXT_PID);
	int64_t prev_state = i64(m, SS_PREV_STATE);
	int32_t next_prio = i32(m, SS_NEXT_PRIO);
	tp_str next_comm = str(ctx, m, SS_NEXT_COMM);
	tp_str prev_comm = str(ctx, m, SS_PREV_COMM);
	uint32_t next_utid, prev_utid;
	tp_str state;

	/* Before the crop point a full sched_switch leaves no trace at all
	 * (it writes its own ftrace_event row, after this check). */
	if (raw_only)
		return;
	cs = cpu_sched(ctx, machine, cpu);
	next_utid = thread_named(ctx, machine, next_pid, next_comm);
	state = task_state(ctx, machine, prev_state);

	if (cs->pending_row != NONE32) {
		if (prev_pid == cs->last_pid)
			sched_close(ctx, cs->pending_row, ts, state);
		else
			mstat(ctx, machine, "mismatched_sched_switch_tids");
	}
	prev_utid = thread_named(ctx, machine, prev_pid, prev_comm);
	raw_sched_switch(ctx, ts, cpu, machine, prev_utid, prev_pid, prev_comm,
			 i32(m, SS_PREV_PRIO), prev_state, next_pid, next_comm,
			 next_prio);
	cs->pending_row = sched_start(ctx, ts, cpu, machine, next_utid,
				      next_prio);
	cs->last_pid = next_pid;
	cs->last_utid = next_utid;
	cs->last_prio = next_prio;
	ts_switch(ctx, ts, cpu, machine, prev_utid, state, next_utid);
}

static void parse_cswitch(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			  size_t len)
{
	struct cswitch e;

	if (len != sizeof e)
		return;
	memcpy(&e, p, sizeof e);
	if (hard_dropped(ctx, e.machine, ts))
		return;
	bool raw_only = soft_dropped(ctx, e.machine, ts);
	struct cpu_sched *cs = cpu_sched(ctx, e.machine, e.cpu);
	uint32_t next_utid = thread_named(ctx, e.machine, e.next_pid,
					  e.next_comm);

	if (cs->last_utid == NONE32) {
		tp_stat_add(ctx, "compact_sched_switch_skipped", e.machine, -1,
			    1);
		cs->last_pid = e.next_pid;
		cs->last_utid = next_utid;
		cs->last_prio = e.next_prio;
		return;
	}
	tp_str state = task_state(ctx, e.machine, e.prev_state);
	if (cs->pending_row != NONE32)
		sched_close(ctx, cs->pending_row, ts, state);
	cs->pending_row = NONE32;

	uint32_t prev_utid = cs->last_utid;
	tp_str prev_comm = tp_get_str(tp_tab(ctx, TP_T_THREAD), TP_THREAD_name,
				      prev_utid);
	raw_sched_switch(ctx, ts, e.cpu, e.machine, prev_utid, cs->last_pid,
			 prev_comm, cs->last_prio, e.prev_state, e.next_pid,
			 e.next_comm, e.next_prio);
	cs->last_pid = e.next_pid;
	cs->last_utid = next_utid;
	cs->last_prio = e.next_prio;
	if (raw_only)
		return;
	cs->pending_row = sched_start(ctx, ts, e.cpu, e.machine, next_utid,
				      e.next_prio);
	ts_switch(ctx, ts, e.cpu, e.machine, prev_utid, state, next_utid);
}

static void parse_cwaking(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			  size_t len)
{
	struct tp_ftrace_state *s = st(ctx);
	struct tp_args_builder *b = &s->args;
	struct cwaking e;

	if (len != sizeof e)
		return;
	memcpy(&e, p, sizeof e);
	if (hard_dropped(ctx, e.machine, ts))
		return;
	bool raw_only = soft_dropped(ctx, e.machine, ts);
	struct cpu_sched *cs = cpu_sched(ctx, e.machine, e.cpu);
	if (cs->last_utid == NONE32) {
		tp_stat_add(ctx, "compact_sched_waking_skipped", e.machine, -1,
			    1);
		return;
	}
	uint32_t row = raw_row(ctx, ts, s->k_sched_waking, e.cpu, e.machine,
			       cs->last_utid);
	if (e.has_flags)
		tp_set_int(tp_tab(ctx, TP_T_FTRACE_EVENT),
			   TP_FTRACE_EVENT_common_flags, row, e.common_flags);
	tp_args_builder_reset(b);
	tp_args_add_str(b, s->k_comm, s->k_comm, e.comm);
	tp_args_add_int(b, s->k_pid, s->k_pid, e.pid);
	tp_args_add_int(b, s->k_prio, s->k_prio, e.prio);
	tp_args_add_int(b, s->k_target_cpu, s->k_target_cpu, e.target_cpu);
	raw_args_commit(ctx, row, b);
	if (raw_only)
		return;
	uint32_t wakee = tp_thread_get(ctx, e.machine, e.pid);
	/* compact wakings always carry flags for thread_state (0 when
	 * the bundle has none), as in Perfetto */
	ts_waking(ctx, ts, e.machine, wakee, cs->last_utid,
		  e.has_flags ? (int64_t)e.common_flags : 0);
}

static void parse_waking(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			 int64_t pid, const struct msg *m)
{
	uint32_t wakee = thread_named(ctx, machine, i32(m, SW_PID),
				      str(ctx, m, SW_COMM));
	uint32_t waker = tp_thread_get(ctx, machine, pid);

	ts_waking(ctx, ts, machine, wakee, waker, -1);
}

/* ---- processes -------------------------------------------------------- */

static void parse_newtask(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			  int64_t source_tid, const struct msg *m)
{
	int64_t new_tid = i32(m, TN_PID);
	tp_str comm = str(ctx, m, TN_COMM);
	uint64_t flags = u64(m, TN_CLONE_FLAGS);
	uint32_t source_utid, new_utid;

	/* Boot-time traces show init creating the swapper tasks. */
	if (new_tid == 0)
		return;
	if (!(flags & CLONE_THREAD)) {
		/* A fork: a new process with comm as its name. */
		uint32_t upid = tp_process_new(ctx, machine, new_tid, ts, true);
		uint32_t main_utid;
		if (tp_thread_find(ctx, machine, new_tid, &main_utid))
			tp_thread_set_name_prio(ctx, main_utid, comm,
						TP_NAME_PRIO_FTRACE);
		tp_process_set_name_prio(ctx, upid, comm, TP_PNAME_SYSTEM);
		source_utid = tp_thread_get(ctx, machine, source_tid);
		new_utid = tp_thread_get(ctx, machine, new_tid);
		/* The forking thread's process, when it is known. */
		tp_process_parent_thread(ctx, upid, source_utid);
		ts_open(ctx, ts, new_utid, st(ctx)->s_runnable, -1, machine,
			source_utid, 0);
		return;
	}
	/* A new thread of the source's process. */
	source_utid = tp_thread_get(ctx, machine, source_tid);
	new_utid = tp_thread_new(ctx, machine, new_tid, ts, true);
	tp_thread_set_name_prio(ctx, new_utid, comm, TP_NAME_PRIO_FTRACE);
	tp_threads_associate(ctx, source_utid, new_utid);
	ts_open(ctx, ts, new_utid, st(ctx)->s_runnable, -1, machine,
		source_utid, 0);
}

static void parse_rename(struct tp_ctx *ctx, uint32_t machine,
			 const struct msg *m)
{
	int64_t tid = i32(m, TR_PID);
	tp_str comm = str(ctx, m, TR_NEWCOMM);
	uint32_t utid = thread_named(ctx, machine, tid, comm);
	struct tp_table *tt = tp_tab(ctx, TP_T_THREAD);

	if (!comm || tp_is_null(tt, TP_THREAD_upid, utid))
		return;
	uint32_t upid = (uint32_t)tp_get_int(tt, TP_THREAD_upid, utid);
	if (tp_get_int(tp_tab(ctx, TP_T_PROCESS), TP_PROCESS_pid, upid) == tid)
		tp_process_set_name_prio(ctx, upid, comm, TP_PNAME_SYSTEM);
}

/* ---- cpu counters ----------------------------------------------------- */

static void cpu_counter(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			const char *type, const char *name, int64_t cpu,
			double v)
{
	uint32_t track = tp_track_counter(ctx, machine, tp_s(ctx, type),
					  tp_s(ctx, name), cpu, 0);
	tp_counter_add(ctx, track, ts, v, -1);
}

static void cpu_named_counter(struct tp_ctx *ctx, int64_t ts,
			      uint32_t machine, const char *type,
			      const char *fmt, uint32_t cpu, double v)
{
	char name[64];

	snprintf(name, sizeof name, fmt, cpu);
	cpu_counter(ctx, ts, machine, type, name, cpu, v);
}

static void parse_cpu_event(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			    uint32_t id, const struct msg *m)
{
	uint32_t cpu;

	switch (id) {
	case FE_CPU_FREQUENCY:
		cpu_counter(ctx, ts, machine, "cpu_frequency", "cpufreq",
			    (uint32_t)u64(m, CF_CPU_ID),
			    (double)(uint32_t)u64(m, CF_STATE));
		break;
	case FE_CPU_IDLE:
		cpu_counter(ctx, ts, machine, "cpu_idle", "cpuidle",
			    (uint32_t)u64(m, CIDLE_CPU_ID),
			    (double)(uint32_t)u64(m, CIDLE_STATE));
		break;
	case FE_CPU_FREQUENCY_LIMITS:
		cpu = (uint32_t)u64(m, CFL_CPU_ID);
		cpu_named_counter(ctx, ts, machine, "cpu_max_frequency_limit",
				  "Cpu %u Max Freq Limit", cpu,
				  (double)(uint32_t)u64(m, CFL_MAX_FREQ));
		cpu_named_counter(ctx, ts, machine, "cpu_min_frequency_limit",
				  "Cpu %u Min Freq Limit", cpu,
				  (double)(uint32_t)u64(m, CFL_MIN_FREQ));
		break;
	case FE_SCHED_CPU_UTIL_CFS:
		cpu = (uint32_t)u64(m, CFS_CPU);
		cpu_named_counter(ctx, ts, machine, "cpu_utilization",
				  "Cpu %u Util", cpu,
				  (double)u64(m, CFS_CPU_UTIL));
		cpu_named_counter(ctx, ts, machine, "cpu_capacity",
				  "Cpu %u Cap", cpu,
				  (double)u64(m, CFS_CAPACITY));
		cpu_named_counter(ctx, ts, machine, "cpu_nr_running",
				  "Cpu %u Nr Running", cpu,
				  (double)u64(m, CFS_NR_RUNNING));
		break;
	default:
		break;
	}
}

/* ---- interrupts ------------------------------------------------------- */

/* The per-cpu slice track of hard ("cpu_irq", "Irq Cpu N") or soft
 * ("cpu_softirq", "SoftIrq Cpu N") interrupts, as Perfetto names them. */
static uint32_t irq_track(struct tp_ctx *ctx, uint32_t machine, bool soft,
			  uint32_t cpu)
{
	char name[64];

	snprintf(name, sizeof name, soft ? "SoftIrq Cpu %u" : "Irq Cpu %u",
		 cpu);
	return tp_track_cpu_slices(ctx, machine,
				   soft ? "cpu_softirq" : "cpu_irq", name, cpu);
}

static const char *const softirq_names[] = {
	"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "BLOCK_IOPOLL", "TASKLET",
	"SCHED", "HRTIMER", "RCU",
};

/* irq_handler_entry/exit, local_timer_entry/exit, softirq_entry/exit:
 * slices of category "irq" on the cpu's interrupt tracks; an exit adds
 * "ret" (handled / unhandled) or "vec" to its slice's args. */
static void parse_irq(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
		      uint32_t machine, uint32_t id, const struct msg *m)
{
	tp_str irq = tp_s(ctx, "irq");
	struct tp_args_builder b;
	char name[300];

	switch (id) {
	case FE_IRQ_HANDLER_ENTRY: {
		tp_str n = str(ctx, m, IRQ_ENTRY_NAME);
		const char *ns = n ? tp_str_get(ctx->pool, n) : "";
		snprintf(name, sizeof name, "IRQ (%.255s)", ns);
		tp_slice_begin(ctx, irq_track(ctx, machine, false, cpu), ts,
			       irq, tp_s(ctx, name), -1);
		break;
	}
	case FE_LOCAL_TIMER_ENTRY:
		tp_slice_begin(ctx, irq_track(ctx, machine, false, cpu), ts,
			       irq, tp_s(ctx, "IRQ (LocalTimer)"), -1);
		break;
	case FE_SOFTIRQ_ENTRY: {
		uint64_t vec = (uint32_t)u64(m, SOFTIRQ_ENTRY_VEC);
		if (vec >= sizeof softirq_names / sizeof softirq_names[0])
			return;
		tp_slice_begin(ctx, irq_track(ctx, machine, true, cpu), ts,
			       irq, tp_s(ctx, softirq_names[vec]), -1);
		break;
	}
	case FE_IRQ_HANDLER_EXIT: {
		uint32_t track = irq_track(ctx, machine, false, cpu);
		tp_str k = tp_s(ctx, "ret");
		/* An exit with no open slice writes no args either. */
		if (tp_slice_top(ctx, track) < 0)
			break;
		tp_args_builder_init(&b);
		tp_args_add_str(&b, k, k,
				tp_s(ctx, i32(m, IRQ_EXIT_RET) == 1 ? "handled"
							 : "unhandled"));
		tp_slice_end(ctx, track, ts, irq, 0, tp_args_commit(ctx, &b));
		tp_args_builder_free(&b);
		break;
	}
	case FE_LOCAL_TIMER_EXIT:
		tp_slice_end(ctx, irq_track(ctx, machine, false, cpu), ts, irq,
			     0, -1);
		break;
	case FE_SOFTIRQ_EXIT: {
		uint32_t track = irq_track(ctx, machine, true, cpu);
		tp_str k = tp_s(ctx, "vec");
		if (tp_slice_top(ctx, track) < 0)
			break;
		tp_args_builder_init(&b);
		tp_args_add_int(&b, k, k, (uint32_t)u64(m, SOFTIRQ_EXIT_VEC));
		tp_slice_end(ctx, track, ts, irq, 0, tp_args_commit(ctx, &b));
		tp_args_builder_free(&b);
		break;
	}
	default:
		break;
	}
}

/* ---- parse: one event ------------------------------------------------- */

static void parse_typed(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
			uint32_t machine, int64_t pid, uint32_t id,
			const uint8_t *data, size_t len, bool raw_only)
{
	struct msg m;

	msg_decode(&m, data, len);
	if (id == FE_SCHED_SWITCH) {
		parse_sched_switch(ctx, ts, cpu, machine, &m, raw_only);
		return;
	}
	if (raw_only)
		return;
	switch (id) {
	/* Only sched_waking feeds thread_state: Perfetto (v58) keeps
	 * sched_wakeup and sched_wakeup_new as ftrace_event rows alone. */
	case FE_SCHED_WAKING:
		parse_waking(ctx, ts, machine, pid, &m);
		break;
	case FE_SCHED_PROCESS_FREE:
		tp_thread_end(ctx, machine, ts, i32(&m, SPF_PID));
		break;
	case FE_TASK_NEWTASK:
		parse_newtask(ctx, ts, machine, pid, &m);
		break;
	case FE_TASK_RENAME:
		parse_rename(ctx, machine, &m);
		break;
	case FE_PRINT:
		/* The write(2) that printed this marker ends here. */
		tp_syscall_print(ctx, ts, machine, pid);
		tp_print_event(ctx, ts, machine, pid, &m);
		break;
	case FE_SYS_ENTER:
		tp_syscall_enter(ctx, ts, machine, pid, data, len);
		break;
	case FE_SYS_EXIT:
		tp_syscall_exit(ctx, ts, machine, pid, data, len);
		break;
	case FE_TRACING_MARK_WRITE:
	case FE_SDE_TRACING_MARK_WRITE:
	case FE_DPU_TRACING_MARK_WRITE:
	case FE_G2D_TRACING_MARK_WRITE:
	case FE_MALI_TRACING_MARK_WRITE:
	case FE_ZERO:
		tp_print_mark_write(ctx, ts, machine, pid, id, &m);
		break;
	case FE_CPU_FREQUENCY:
	case FE_CPU_IDLE:
	case FE_CPU_FREQUENCY_LIMITS:
	case FE_SCHED_CPU_UTIL_CFS:
		parse_cpu_event(ctx, ts, machine, id, &m);
		break;
	case FE_MARK_VICTIM: {
		/* the oom killer's victim: an instant on its thread track */
		uint32_t victim = tp_thread_get(ctx, machine, i32(&m, MV_PID));
		tp_slice_complete(ctx, tp_track_thread(ctx, victim), ts, 0, 0,
				  tp_s(ctx, "mem.oom_kill"), -1);
		break;
	}
	case FE_IRQ_HANDLER_ENTRY:
	case FE_IRQ_HANDLER_EXIT:
	case FE_LOCAL_TIMER_ENTRY:
	case FE_LOCAL_TIMER_EXIT:
	case FE_SOFTIRQ_ENTRY:
	case FE_SOFTIRQ_EXIT:
		parse_irq(ctx, ts, cpu, machine, id, &m);
		break;
	default:
		if (!tp_memory_ftrace(ctx, ts, machine, pid, id, data, len))
			tp_memevent_parse(ctx, ts, machine, pid, id, data,
					  len);
		break;
	}
}

static void parse_event(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len)
{
	struct ev_hdr h;
	struct pb_reader r;
	struct pb_field f;
	bool has_pid = false, has_flags = false;
	int64_t pid = 0;
	uint32_t flags = 0;

	if (len < sizeof h)
		return;
	memcpy(&h, p, sizeof h);
	p += sizeof h;
	len -= sizeof h;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == FE_PID && f.wt == PB_WT_VARINT) {
			pid = (uint32_t)f.val;
			has_pid = true;
		} else if (f.num == FE_COMMON_FLAGS && f.wt == PB_WT_VARINT) {
			flags = (uint32_t)f.val;
			has_flags = true;
		}
	}
	if (hard_dropped(ctx, h.machine, ts))
		return;
	bool raw_only = soft_dropped(ctx, h.machine, ts);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_LEN || f.num == FE_TIMESTAMP ||
		    f.num == FE_PID)
			continue;
		if (!has_pid) {
			mstat(ctx, h.machine, "ftrace_bundle_tokenizer_errors");
			return;
		}
		if (f.num == FE_GENERIC) {
			raw_generic(ctx, ts, h.cpu, h.machine,
				    tp_thread_get(ctx, h.machine, pid), f.data,
				    f.len);
		} else if (f.num != FE_SCHED_SWITCH) {
			const struct ft_event_desc *d = ft_event_by_id(f.num);
			if (d && (d->uses & FT_USE_PROCESSOR)) {
				uint32_t utid = tp_thread_get(ctx, h.machine,
							      pid);
				raw_typed(ctx, d, ts, h.cpu, h.machine, utid,
					  h.gen, f.data, f.len, has_flags,
					  flags);
			}
		}
		/* These need the interned kernel symbols of the packet. */
		if (f.num == FE_SCHED_BLOCKED_REASON && !raw_only)
			parse_blocked_reason(ctx, h.machine, h.gen, f.data,
					     f.len);
		if (!raw_only && tp_kslice_parse(ctx, ts, h.cpu, h.machine, pid,
						 h.gen, f.num, f.data, f.len))
			continue;
		if (!raw_only && tp_binder_parse(ctx, ts, h.machine, pid, f.num,
						 f.data, f.len))
			continue;
		parse_typed(ctx, ts, h.cpu, h.machine, pid, f.num, f.data,
			    f.len, raw_only);
	}
}

/* ---- generic kernel events ---------------------------------------------- */

/*
 * TracePacket.generic_kernel_* (task state, rename, process tree, cpu
 * frequency): scheduling from a kernel that is not Linux, one task's
 * state at a time, as Perfetto's GenericKernelParser reads it.  A task
 * becoming Running on a cpu starts a sched slice and ends the cpu's
 * previous one (with no end state: it comes with the other task's own
 * event, at the same timestamp, and is then filled in).  Events out of
 * order (a task created twice, a state after Z, Running twice) count as
 * generic_task_state_invalid_order and are dropped.
 */
struct gk_hdr {
	uint32_t machine;
	uint32_t field;
};

static void tokenize_generic(struct tp_ctx *ctx, const struct tp_packet *pkt,
			     const struct pb_field *f)
{
	struct tp_ftrace_state *s = st(ctx);
	struct gk_hdr h = { pkt->machine, f->num };
	size_t need = sizeof h + f->len;

	if (f->wt != PB_WT_LEN || !pkt->has_ts)
		return;
	if (need > s->scratch_cap) {
		s->scratch = vp_xrealloc(s->scratch, need);
		s->scratch_cap = need;
	}
	memcpy(s->scratch, &h, sizeof h);
	memcpy(s->scratch + sizeof h, f->data, f->len);
	tp_sort_push(ctx->sorter, pkt->queue, pkt->ts, s->kind_generic,
		     s->scratch, need);
}

static tp_str gk_state_str(struct tp_ctx *ctx, uint64_t state)
{
	static const char *const names[] = { "Unknown", "Created", "R",
					     "Running", "S", "D", "T", "Z",
					     "X" };
	return state < 9 ? tp_s(ctx, names[state]) : 0;
}

/* The thread of a task state event, or NONE32 when the event is dropped. */
static uint32_t gk_utid(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			int64_t tid, tp_str comm, uint64_t state)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD_STATE);
	uint32_t utid;

	switch (state) {
	case GK_CREATED:
		if (tp_thread_find(ctx, machine, tid, &utid)) {
			mstat(ctx, machine, "generic_task_state_invalid_order");
			return NONE32;
		}
		utid = tp_thread_new(ctx, machine, tid, ts, true);
		tp_thread_set_name_prio(ctx, utid, comm, TP_NAME_PRIO_FTRACE);
		return utid;
	case GK_DESTROYED:
		if (!tp_thread_find(ctx, machine, tid, &utid)) {
			utid = tp_thread_get(ctx, machine, tid);
			tp_thread_set_name_prio(ctx, utid, comm,
						TP_NAME_PRIO_FTRACE);
		}
		tp_thread_end(ctx, machine, ts, tid);
		return utid;
	case GK_RUNNABLE:
	case GK_RUNNING:
	case GK_SLEEP:
	case GK_UNINTERRUPTIBLE:
	case GK_STOPPED:
	case GK_DEAD:
		if (tp_thread_find(ctx, machine, tid, &utid)) {
			uint32_t last = *ts_last(ctx, utid);
			tp_str prev = last == NONE32 ? 0
				      : tp_get_str(t, TP_THREAD_STATE_state,
						   last);
			if ((prev && prev == tp_s(ctx, "Z")) ||
			    (state == GK_RUNNING &&
			     prev == st(ctx)->s_running && prev)) {
				mstat(ctx, machine,
				      "generic_task_state_invalid_order");
				return NONE32;
			}
		} else {
			utid = tp_thread_get(ctx, machine, tid);
		}
		tp_thread_set_name_prio(ctx, utid, comm, TP_NAME_PRIO_FTRACE);
		return utid;
	default:
		mstat(ctx, machine, "task_state_invalid");
		return NONE32;
	}
}

static struct cpu_sched *gk_hanging(struct tp_ctx *ctx, uint32_t utid)
{
	struct tp_ftrace_state *s = st(ctx);
	if (utid >= s->ngk_hanging) {
		uint32_t n = s->ngk_hanging ? s->ngk_hanging : 64;
		while (n <= utid)
			n *= 2;
		s->gk_hanging = vp_xrealloc(s->gk_hanging, n * sizeof *s->gk_hanging);
		for (uint32_t i = s->ngk_hanging; i < n; i++)
			s->gk_hanging[i] = (struct cpu_sched){ NONE32, 0, 0,
							       NONE32 };
		s->ngk_hanging = n;
	}
	return &s->gk_hanging[utid];
}

/* PushThreadState: close the thread's row, open one in the new state. */
static void gk_push_state(struct tp_ctx *ctx, int64_t ts, uint32_t utid,
			  tp_str state, int64_t cpu, uint32_t machine)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD_STATE);
	ts_close(ctx, ts, utid, false);
	uint32_t last = *ts_last(ctx, utid);
	if (last != NONE32 && tp_get_int(t, TP_THREAD_STATE_ts, last) == ts)
		mstat(ctx, machine, "generic_task_state_invalid_order");
	ts_open(ctx, ts, utid, state, cpu, machine, -1, -1);
}

static void gk_task_state(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			  const uint8_t *p, size_t len)
{
	struct msg m;
	msg_decode(&m, p, len);
	uint32_t cpu = (uint32_t)i32(&m, GKTS_CPU);
	tp_str comm = str(ctx, &m, GKTS_COMM);
	int64_t tid = i64(&m, GKTS_TID);
	uint64_t state = u64(&m, GKTS_STATE);
	int32_t prio = i32(&m, GKTS_PRIO);
	uint32_t utid = gk_utid(ctx, ts, machine, tid, comm, state);
	if (utid == NONE32)
		return;
	tp_str sstr = gk_state_str(ctx, state);
	struct cpu_sched *cs = cpu_sched(ctx, machine, cpu);
	struct cpu_sched prev = *cs;
	enum { K_START, K_START_PENDING, K_CLOSE, K_UPDATE, K_NONE } kind;

	if (state == GK_RUNNING) {
		kind = K_START;
		if (cs->pending_row != NONE32) {
			sched_close(ctx, cs->pending_row, ts, 0);
			*gk_hanging(ctx, cs->last_utid) = *cs;
			kind = K_START_PENDING;
		}
		cs->pending_row = sched_start(ctx, ts, cpu, machine, utid, prio);
		cs->last_pid = tid;
		cs->last_utid = utid;
		cs->last_prio = prio;
	} else if (cs->pending_row != NONE32 && tid == cs->last_pid) {
		sched_close(ctx, cs->pending_row, ts, sstr);
		*cs = (struct cpu_sched){ NONE32, 0, 0, NONE32 };
		kind = K_CLOSE;
	} else {
		kind = K_NONE;
		struct cpu_sched *h = gk_hanging(ctx, utid);
		if (h->pending_row != NONE32) {
			struct tp_table *sc = tp_tab(ctx, TP_T_SCHED);
			int64_t end = tp_get_int(sc, TP_SCHED_ts, h->pending_row) +
				      tp_get_int(sc, TP_SCHED_dur,
						 h->pending_row);
			if (ts == end) {
				tp_set_str(sc, TP_SCHED_end_state,
					   h->pending_row, sstr);
				h->pending_row = NONE32;
				kind = K_UPDATE;
			}
		}
	}
	if (kind == K_UPDATE) {
		uint32_t last = *ts_last(ctx, utid);
		if (last != NONE32)
			tp_set_str(tp_tab(ctx, TP_T_THREAD_STATE),
				   TP_THREAD_STATE_state, last, sstr);
		return;
	}
	if (kind == K_START_PENDING)
		gk_push_state(ctx, ts, prev.last_utid, 0, -1, machine);
	gk_push_state(ctx, ts, utid, sstr,
		      state == GK_RUNNING ? (int64_t)cpu : -1,
		      machine);
}

static void gk_process_tree(struct tp_ctx *ctx, uint32_t machine,
			    const uint8_t *p, size_t len)
{
	struct pb_reader r, q;
	struct pb_field f, g;
	struct tp_table *tt = tp_tab(ctx, TP_T_THREAD);

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != GKPT_PROCESSES || f.wt != PB_WT_LEN)
			continue;
		int64_t pid = 0, ppid = 0;
		const uint8_t *cmd = NULL;
		size_t cmdlen = 0;
		pb_reader_init(&q, f.data, f.len);
		while (pb_next(&q, &g)) {
			if (g.num == GKPT_PROC_PID && g.wt == PB_WT_VARINT)
				pid = (int64_t)g.val;
			else if (g.num == GKPT_PROC_PPID &&
				 g.wt == PB_WT_VARINT)
				ppid = (int64_t)g.val;
			else if (g.num == GKPT_PROC_CMDLINE &&
				 g.wt == PB_WT_LEN) {
				cmd = g.data;
				cmdlen = g.len;
			}
		}
		if (!cmd)
			continue;
		size_t nlen = 0;
		while (nlen < cmdlen && cmd[nlen] != ' ')
			nlen++;
		uint32_t pupid = tp_process_get_no_thread(ctx, machine, ppid);
		uint32_t upid = tp_process_get_no_thread(ctx, machine, pid);
		tp_process_set_parent(ctx, upid, pupid);
		tp_process_set_name_prio(ctx, upid,
					 tp_intern(ctx->pool, (const char *)cmd,
						   nlen),
					 TP_PNAME_SYSTEM);
		tp_process_set_cmdline(ctx, upid,
				       tp_intern(ctx->pool, (const char *)cmd,
						 cmdlen));
	}
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != GKPT_THREADS || f.wt != PB_WT_LEN)
			continue;
		int64_t tid = 0, pid = 0;
		bool main_thread = false, idle = false;
		tp_str comm = 0;
		bool has_comm = false;
		pb_reader_init(&q, f.data, f.len);
		while (pb_next(&q, &g)) {
			if (g.num == GKPT_THREAD_TID && g.wt == PB_WT_VARINT)
				tid = (int64_t)g.val;
			else if (g.num == GKPT_THREAD_PID &&
				 g.wt == PB_WT_VARINT)
				pid = (int64_t)g.val;
			else if (g.num == GKPT_THREAD_COMM &&
				 g.wt == PB_WT_LEN) {
				comm = tp_intern(ctx->pool,
						 (const char *)g.data, g.len);
				has_comm = true;
			} else if (g.num == GKPT_THREAD_IS_MAIN_THREAD &&
				   g.wt == PB_WT_VARINT)
				main_thread = g.val != 0;
			else if (g.num == GKPT_THREAD_IS_IDLE &&
				 g.wt == PB_WT_VARINT)
				idle = g.val != 0;
		}
		uint32_t upid = tp_process_get_no_thread(ctx, machine, pid);
		uint32_t utid = tp_thread_get(ctx, machine, tid);
		tp_thread_set_process(ctx, utid, upid);
		tp_set_int(tt, TP_THREAD_is_main_thread, utid, main_thread);
		tp_set_int(tt, TP_THREAD_is_idle, utid, idle);
		if (has_comm)
			tp_thread_set_name_prio(ctx, utid, comm,
						TP_NAME_PRIO_PROCESS_TREE);
	}
}

static void parse_generic(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			  size_t len)
{
	struct gk_hdr h;
	struct msg m;

	if (len < sizeof h)
		return;
	memcpy(&h, p, sizeof h);
	p += sizeof h;
	len -= sizeof h;
	switch (h.field) {
	case TP_GENERIC_KERNEL_TASK_STATE_EVENT:
		gk_task_state(ctx, ts, h.machine, p, len);
		break;
	case TP_GENERIC_KERNEL_CPU_FREQ_EVENT:
		msg_decode(&m, p, len);
		cpu_counter(ctx, ts, h.machine, "cpu_frequency", "cpufreq",
			    (uint32_t)i32(&m, GKCF_CPU),
			    (double)i64(&m, GKCF_FREQ_HZ) / 1000.0);
		break;
	case TP_GENERIC_KERNEL_TASK_RENAME_EVENT: {
		msg_decode(&m, p, len);
		int64_t tid = i64(&m, GKTR_TID);
		tp_str comm = str(ctx, &m, GKTR_COMM);
		uint32_t utid = thread_named(ctx, h.machine, tid, comm);
		struct tp_table *tt = tp_tab(ctx, TP_T_THREAD);
		if (!comm || tp_is_null(tt, TP_THREAD_upid, utid))
			break;
		uint32_t upid = (uint32_t)tp_get_int(tt, TP_THREAD_upid, utid);
		if (tp_get_int(tp_tab(ctx, TP_T_PROCESS), TP_PROCESS_pid,
			       upid) == tid)
			tp_process_set_name_prio(ctx, upid, comm,
						 TP_PNAME_SYSTEM);
		break;
	}
	case TP_GENERIC_KERNEL_PROCESS_TREE:
		gk_process_tree(ctx, h.machine, p, len);
		break;
	default:
		break;
	}
}

/* ---- module entry points ---------------------------------------------- */

void tp_ftrace_init(struct tp_ctx *ctx)
{
	struct tp_ftrace_state *s = vp_xcalloc(1, sizeof *s);

	ctx->ftrace = s;
	s->kind_event = tp_sort_register(ctx->sorter, parse_event);
	s->kind_cswitch = tp_sort_register(ctx->sorter, parse_cswitch);
	s->kind_generic = tp_sort_register(ctx->sorter, parse_generic);
	s->kind_cwaking = tp_sort_register(ctx->sorter, parse_cwaking);
	s->s_running = tp_s(ctx, "Running");
	s->s_runnable = tp_s(ctx, "R");
	s->s_preempted = tp_s(ctx, "R+");
	s->k_sched_switch = tp_s(ctx, "sched_switch");
	s->k_sched_waking = tp_s(ctx, "sched_waking");
	s->k_prev_comm = tp_s(ctx, "prev_comm");
	s->k_prev_pid = tp_s(ctx, "prev_pid");
	s->k_prev_prio = tp_s(ctx, "prev_prio");
	s->k_prev_state = tp_s(ctx, "prev_state");
	s->k_next_comm = tp_s(ctx, "next_comm");
	s->k_next_pid = tp_s(ctx, "next_pid");
	s->k_next_prio = tp_s(ctx, "next_prio");
	s->k_comm = tp_s(ctx, "comm");
	s->k_pid = tp_s(ctx, "pid");
	s->k_prio = tp_s(ctx, "prio");
	s->k_target_cpu = tp_s(ctx, "target_cpu");
	for (size_t i = 0; i < (sizeof s->state_cache / sizeof s->state_cache[0]); i++)
		s->state_cache[i].raw = UINT32_MAX;
	tp_args_builder_init(&s->args);
	tp_process_init(ctx);
}

bool tp_ftrace_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f)
{
	if (f->num == TP_GENERIC_KERNEL_TASK_STATE_EVENT ||
	    f->num == TP_GENERIC_KERNEL_CPU_FREQ_EVENT ||
	    f->num == TP_GENERIC_KERNEL_TASK_RENAME_EVENT ||
	    f->num == TP_GENERIC_KERNEL_PROCESS_TREE) {
		tokenize_generic(ctx, pkt, f);
		return true;
	}
	if (f->num == TP_FTRACE_EVENTS) {
		if (f->wt == PB_WT_LEN)
			tokenize_bundle(ctx, pkt, f->data, f->len);
		else
			mstat(ctx, pkt->machine,
			      "ftrace_bundle_tokenizer_errors");
		return true;
	}
	return tp_process_tokenize(ctx, pkt, f);
}

void tp_ftrace_finish(struct tp_ctx *ctx)
{
	tp_memevents_finish(ctx);
}

void tp_ftrace_free(struct tp_ctx *ctx)
{
	struct tp_ftrace_state *s = ctx->ftrace;

	if (!s)
		return;
	for (uint32_t i = 0; i < s->nmachines; i++)
		free(s->machines[i].cpus);
	free(s->machines);
	free(s->ts_last);
	free(s->ts_blocked);
	free(s->gk_hanging);
	free(s->scratch);
	tp_args_builder_free(&s->args);
	free(s);
	ctx->ftrace = NULL;
}
