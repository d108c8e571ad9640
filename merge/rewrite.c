/*
 * rewrite.c - wire-level re-encoding of one trace's packets onto another
 * machine's time axis (see rewrite.h).
 *
 * Each message handler walks its fields once.  Fields it leaves alone stay
 * in a pending "run" of input bytes that is copied with one memcpy when the
 * next changed field (or the end of the message) comes; a changed field is
 * written fresh.  So an untouched message costs one scan and one copy.
 */
#include "rewrite.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftrace_event_table.h"
#include "partition.h"
#include "perfetto_fields.h"
#include "u64map.h"
#include "seq_table.h"
#include "trace_model.h"
#include "vp_alloc.h"

#define MAX_SCOPED_CLOCKS 8

/* A sequence-scoped clock (ids 64..127) as its last ClockSnapshot defined
 * it.  Values are in the clock's own units (unit_multiplier_ns each). */
struct scoped_clock {
	uint32_t id;
	bool incremental;
	uint64_t unit;     /* ns per unit, at least 1 */
	uint64_t snap;     /* the clock's value in the snapshot */
	uint64_t last_in;  /* incremental: running value of the input */
	uint64_t last_out; /* incremental: running value of the output */
};

struct rw_seq {
	struct vp_seq_state st; /* clears, defaults (trace_model.h) */
	struct scoped_clock clk[MAX_SCOPED_CLOCKS];
	size_t n_clk;
	/* target-clock entry of the sequence's last snapshot, in and out */
	bool have_anchor;
	uint64_t anchor_in, anchor_out;
	/* legacy microsecond timestamps (ThreadDescriptor reference) */
	bool have_legacy;
	int64_t legacy_in_us, legacy_out_us;
	/* last mapped packet time, for the "went backwards" check */
	bool have_last;
	uint64_t last_in_ts, last_out_ts;
};

struct rewriter {
	struct rewrite_cfg cfg;
	struct seq_table seqs; /* of struct rw_seq */
	struct rewrite_stats st;
	/* the packet being rewritten, for error offsets */
	const uint8_t *pkt;
	uint64_t pkt_off;
	struct vp_error *err;
};

struct rewriter *rewriter_new(const struct rewrite_cfg *cfg)
{
	/* Cache-line aligned: two rewriters may run side by side on two
	 * threads, each writing its own state on every packet. */
	size_t size = (sizeof(struct rewriter) + 127) & ~(size_t)127;
	struct rewriter *rw = vp_xaligned_alloc(128, size);
	memset(rw, 0, size);
	rw->cfg = *cfg;
	rw->st.first_boot_ts = UINT64_MAX;
	seq_table_init(&rw->seqs, sizeof(struct rw_seq));
	return rw;
}

void rewriter_free(struct rewriter *rw)
{
	if (!rw)
		return;
	seq_table_free(&rw->seqs);
	free(rw);
}

const struct rewrite_stats *rewriter_stats(const struct rewriter *rw)
{
	return &rw->st;
}

void rewrite_stats_add(struct rewrite_stats *dst,
		       const struct rewrite_stats *src)
{
	dst->packets += src->packets;
	dst->ts_packet += src->ts_packet;
	dst->ts_scoped += src->ts_scoped;
	dst->ts_legacy_us += src->ts_legacy_us;
	dst->ts_ftrace += src->ts_ftrace;
	dst->ts_compact += src->ts_compact;
	dst->ts_snapshot += src->ts_snapshot;
	dst->ts_log += src->ts_log;
	dst->ts_unmapped += src->ts_unmapped;
	dst->backwards += src->backwards;
	dst->clamped += src->clamped;
	dst->overflow += src->overflow;
	dst->relabelled += src->relabelled;
	if (src->first_boot_ts < dst->first_boot_ts)
		dst->first_boot_ts = src->first_boot_ts;
	if (src->last_boot_ts > dst->last_boot_ts)
		dst->last_boot_ts = src->last_boot_ts;
	if (src->snapshot_last > dst->snapshot_last)
		dst->snapshot_last = src->snapshot_last;
}

static struct rw_seq *get_seq(struct rewriter *rw, uint32_t id)
{
	return seq_table_get(&rw->seqs, id, NULL);
}

static int bad(struct rewriter *rw, const struct pb_reader *r, const char *what)
{
	uint64_t at = rw->pkt_off + (uint64_t)(r->base - rw->pkt) + r->err_off;
	return vp_errorf(rw->err, "%s: byte offset %llu: malformed %s: %s",
			 rw->cfg.path, (unsigned long long)at, what,
			 pb_err_str(r->err));
}

/* ---- helpers ------------------------------------------------------------ */

/* Copies the pending run of unchanged input up to `upto`. */
static void flush_run(struct pb_buf *out, const uint8_t **run,
		      const uint8_t *upto)
{
	if (upto > *run)
		pb_put_raw(out, *run, (size_t)(upto - *run));
	*run = upto;
}

/* An edit of one nested message.  Fields stay in a pending run of input
 * bytes; edit_replace() writes the run out and skips the field, whose
 * replacement the caller writes next; edit_end() writes the rest and
 * back-patches the message's length. */
struct msg_edit {
	struct pb_reader r;
	struct pb_buf *out;
	const uint8_t *run, *end;
	struct pb_sized mark; /* the edit is about as long as the input */
};

static void edit_begin(struct msg_edit *e, struct pb_buf *out,
		       const struct pb_field *outer)
{
	e->out = out;
	e->mark = pb_begin_sized(out, outer->num, outer->len);
	e->run = outer->data;
	e->end = outer->data + outer->len;
	pb_reader_init(&e->r, outer->data, outer->len);
}

static void edit_replace(struct msg_edit *e, const struct pb_field *f)
{
	flush_run(e->out, &e->run, f->start);
	e->run = f->end;
}

static int edit_end(struct rewriter *rw, struct msg_edit *e, const char *what)
{
	if (e->r.err)
		return bad(rw, &e->r, what);
	flush_run(e->out, &e->run, e->end);
	pb_end_sized(e->out, e->mark);
	return 0;
}

/* A NULL map keeps every time as it is: nothing is mapped, and nothing
 * counts as left unmapped either. */
static bool map_clock(struct rewriter *rw, uint32_t clock, uint64_t in,
		      uint64_t *out)
{
	return rw->cfg.map && rw->cfg.map(rw->cfg.map_ctx, clock, in, out);
}

static void count_unmapped(struct rewriter *rw)
{
	if (rw->cfg.map)
		rw->st.ts_unmapped++;
}

/* map_clock for n times of one clock (no map: none is mapped). */
static void map_clock_many(struct rewriter *rw, uint32_t clock,
			   const uint64_t *in, uint64_t *out, bool *ok,
			   size_t n)
{
	if (rw->cfg.map && rw->cfg.map_many) {
		rw->cfg.map_many(rw->cfg.map_ctx, clock, in, out, ok, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		ok[i] = map_clock(rw, clock, in[i], &out[i]);
}

/* An ftrace time, BOOTTIME by the convention of ftrace data (it carries
 * no clock id): onto the output's BOOTTIME through boot_map when the axis
 * is another clock, since a trace processor reads it as BOOTTIME there
 * too; else onto the axis. */
static bool map_ftrace(struct rewriter *rw, uint64_t in, uint64_t *out)
{
	if (rw->cfg.map && rw->cfg.boot_map)
		return rw->cfg.boot_map(rw->cfg.map_ctx, BUILTIN_CLOCK_BOOTTIME,
					in, out);
	return map_clock(rw, BUILTIN_CLOCK_BOOTTIME, in, out);
}

static void map_ftrace_many(struct rewriter *rw, const uint64_t *in,
			    uint64_t *out, bool *ok, size_t n)
{
	if (!rw->cfg.map || !rw->cfg.boot_map) {
		map_clock_many(rw, BUILTIN_CLOCK_BOOTTIME, in, out, ok, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		ok[i] = map_ftrace(rw, in[i], &out[i]);
}

/* a / u rounded to nearest, for signed a and u >= 1 */
static __int128 div_round(__int128 a, uint64_t u)
{
	__int128 h = (__int128)(u / 2);
	return a >= 0 ? (a + h) / (__int128)u : -((-a + h) / (__int128)u);
}

static uint32_t map_pid(const struct rewriter *rw, uint64_t v)
{
	int32_t pid = (int32_t)v;
	if (pid <= 0)
		return (uint32_t)pid; /* idle/swapper and invalid stay */
	return (uint32_t)pid + rw->cfg.pid_offset;
}

uint64_t rewrite_remap_uuid(uint64_t u, uint64_t key)
{
	/* Each step is a bijection on 64-bit values that keeps 0 at 0:
	 * multiplication by an odd number and xor-shifts. */
	u *= key | 1;
	u ^= u >> 31;
	u *= 0x9e3779b97f4a7c15ull;
	u ^= u >> 29;
	return u;
}

/* Writes a pid/tid field (int32, as a sign-extended varint). */
static void put_pid(struct pb_buf *out, uint32_t num, uint32_t pid)
{
	pb_put_varint(out, num, (uint64_t)(int64_t)(int32_t)pid);
}

/* Rewrites repeated uint64 uuids, packed or not. */
static void put_uuids(struct rewriter *rw, struct pb_buf *out,
		      const struct pb_field *f)
{
	uint64_t key = rw->cfg.uuid_key;

	if (f->wt == PB_WT_VARINT) {
		pb_put_varint(out, f->num, rewrite_remap_uuid(f->val, key));
		return;
	}
	struct pb_packed_iter it;
	uint64_t v;
	size_t mark = pb_begin_nested(out, f->num);
	pb_packed_init(&it, f->data, f->len);
	while (pb_packed_next(&it, &v))
		pb_put_raw_varint(out, rewrite_remap_uuid(v, key));
	pb_end_nested(out, mark);
}

/* Rewrites pid/tid fields of a small message: `pid_fields` lists the field
 * numbers that hold pids (0-terminated). */
static bool in_list(const uint32_t *list, uint32_t num)
{
	for (; list && *list; list++)
		if (*list == num)
			return true;
	return false;
}

/* A cpu number moved clear of the other traces' (remap_ids). */
static uint32_t map_cpu(const struct rewriter *rw, uint64_t v)
{
	return (uint32_t)v + rw->cfg.cpu_offset;
}

/* Rewrites the pid fields and the cpu fields (either list may be NULL)
 * of a message. */
static int remap_ids_msg(struct rewriter *rw, struct pb_buf *out,
			 const struct pb_field *outer, const uint32_t *pid_fields,
			 const uint32_t *cpu_fields, const char *what)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (in_list(pid_fields, f.num)) {
			edit_replace(&e, &f);
			put_pid(out, f.num, map_pid(rw, f.val));
		} else if (in_list(cpu_fields, f.num)) {
			edit_replace(&e, &f);
			put_pid(out, f.num, map_cpu(rw, f.val));
		}
	}
	return edit_end(rw, &e, what);
}

static int remap_pid_msg(struct rewriter *rw, struct pb_buf *out,
			 const struct pb_field *outer, const uint32_t *pid_fields,
			 const char *what)
{
	return remap_ids_msg(rw, out, outer, pid_fields, NULL, what);
}

/* Applies remap_pid_msg to each entry of a repeated submessage field
 * `list_field` inside `outer`; `lists` pairs list fields with pid fields. */
struct pid_list {
	uint32_t list_field;
	const uint32_t *pid_fields;
};

/* The pid lists of a process tree and of process stats. */
static const uint32_t tree_procs[] = {PT_PROC_PID, PT_PROC_PPID, 0};
static const uint32_t tree_threads[] = {PT_THREAD_TID, PT_THREAD_TGID, 0};
static const struct pid_list tree_lists[] = {
	{PT_PROCESSES, tree_procs}, {PT_THREADS, tree_threads}};
static const uint32_t stats_procs[] = {PS_PROC_PID, 0};
static const struct pid_list stats_lists[] = {{PS_PROCESSES, stats_procs}};

/* The pid fields of f when it is an entry of one of the lists, else
 * NULL. */
static const uint32_t *entry_pids(const struct pb_field *f,
				  const struct pid_list *lists, size_t n_lists)
{
	for (size_t i = 0; f->wt == PB_WT_LEN && i < n_lists; i++)
		if (f->num == lists[i].list_field)
			return lists[i].pid_fields;
	return NULL;
}

static int remap_pid_lists(struct rewriter *rw, struct pb_buf *out,
			   const struct pb_field *outer,
			   const struct pid_list *lists, size_t n_lists,
			   const char *what)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		const uint32_t *pids = entry_pids(&f, lists, n_lists);
		if (!pids)
			continue; /* not an entry: stays in the run */
		edit_replace(&e, &f);
		if (remap_pid_msg(rw, out, &f, pids, what) < 0)
			return -1;
	}
	return edit_end(rw, &e, what);
}

/* ---- sequence-scoped clocks and ClockSnapshot ---------------------------- */

static struct scoped_clock *find_scoped(struct rw_seq *q, uint32_t id)
{
	for (size_t i = 0; i < q->n_clk; i++)
		if (q->clk[i].id == id)
			return &q->clk[i];
	return NULL;
}

/* Reads a ClockSnapshot into the sequence's clock state (input values). */
static int parse_snapshot(struct rewriter *rw, struct rw_seq *q,
			  const uint8_t *p, size_t len)
{
	struct vp_snapshot_iter it;
	struct vp_clock_reading c;
	bool have_target = false;
	uint64_t target_in = 0;
	size_t n = 0;
	struct scoped_clock clk[MAX_SCOPED_CLOCKS];

	vp_snapshot_begin(&it, p, len);
	while (vp_snapshot_next(&it, &c)) {
		if (c.id == rw->cfg.target_clock) {
			have_target = true;
			target_in = c.ts;
		} else if (c.id >= SCOPED_CLOCK_FIRST &&
			   c.id <= SCOPED_CLOCK_LAST &&
			   n < MAX_SCOPED_CLOCKS) {
			clk[n++] = (struct scoped_clock){
				.id = (uint32_t)c.id,
				.incremental = c.incremental,
				.unit = c.unit_ns ? c.unit_ns : 1,
				.snap = c.ts,
				.last_in = c.ts,
				.last_out = c.ts,
			};
		}
	}
	if (it.bad)
		return bad(rw, it.bad, it.bad_what);

	/* Scoped clocks are defined relative to the snapshot's target-clock
	 * entry; without one they can't be mapped and are forgotten. */
	if (n && !have_target)
		n = 0;
	uint64_t out;
	if (have_target && map_clock(rw, rw->cfg.target_clock, target_in, &out)) {
		q->have_anchor = true;
		q->anchor_in = target_in;
		q->anchor_out = out;
		memcpy(q->clk, clk, n * sizeof(clk[0]));
		q->n_clk = n;
	} else if (n) {
		q->have_anchor = false;
		q->n_clk = 0;
	}
	return 0;
}

/* Whether a clock id is a sequence-scoped one (64..127). */
static bool is_scoped(uint64_t id)
{
	return id >= SCOPED_CLOCK_FIRST && id <= SCOPED_CLOCK_LAST;
}

/* own_clocks_only: whether the snapshot is written.  Without machine_id
 * a trace processor takes a guest's global clocks for the host machine's,
 * and Perfetto's clock tracker keeps, per clock, one series of values for
 * each set of clocks snapshotted together: a second guest's snapshots
 * going back against the first's there are dropped as invalid (the trace
 * clock's, clock_synchronizer.cc) or make the clock non-monotonic (the
 * others').  So only what is on the output axis is written: the target
 * clock and MONOTONIC (the guest's legacy microseconds are on it, and a
 * trace processor takes those on MONOTONIC), and the guest's own
 * sequence-scoped clocks.  A snapshot with one of those is a series of
 * its sequence's own; one of global clocks only is written when it goes
 * on from the previous guests' (*ts: its target time). */
static bool own_snapshot_kept(struct rewriter *rw,
			      const struct pb_field *outer, uint64_t *ts)
{
	struct vp_snapshot_iter it;
	struct vp_clock_reading c;
	bool target = false, mono = false, scoped = false, boot = false;
	uint64_t m;

	vp_snapshot_begin(&it, outer->data, outer->len);
	while (vp_snapshot_next(&it, &c)) {
		if (c.id == rw->cfg.target_clock)
			target = map_clock(rw, rw->cfg.target_clock, c.ts, ts);
		else if (c.id == BUILTIN_CLOCK_MONOTONIC)
			mono = map_clock(rw, BUILTIN_CLOCK_MONOTONIC, c.ts,
					 &m);
		else if (c.id == BUILTIN_CLOCK_BOOTTIME && rw->cfg.boot_map)
			boot = rw->cfg.boot_map(rw->cfg.map_ctx, (uint32_t)c.id,
						c.ts, &m);
		else if (is_scoped(c.id))
			scoped = true;
	}
	if (it.bad)
		return false;
	/* sequence-scoped clocks defined on BOOTTIME alone (an axis of
	 * another clock): a processor places them through that BOOTTIME,
	 * moved onto the host's */
	if (!target)
		return scoped && boot;
	return scoped || (mono && *ts >= rw->cfg.snapshot_floor);
}

/* Writes the snapshot with its target-clock and MONOTONIC entries mapped. */
static int rewrite_snapshot(struct rewriter *rw, struct pb_buf *out,
			    const struct pb_field *outer)
{
	struct pb_reader cr;
	struct pb_field f, cf;
	struct msg_edit e;
	bool own = rw->cfg.own_clocks_only, global = true;
	uint64_t own_ts = 0;

	if (own && !own_snapshot_kept(rw, outer, &own_ts))
		return 0; /* dropped */
	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if (f.num != CS_CLOCKS || f.wt != PB_WT_LEN)
			continue;
		uint64_t id = 0;
		const struct pb_field *tsf = NULL;
		struct pb_field ts_field;
		pb_reader_init(&cr, f.data, f.len);
		while (pb_next(&cr, &cf)) {
			if (cf.num == CLK_CLOCK_ID && cf.wt == PB_WT_VARINT)
				id = cf.val;
			else if (cf.num == CLK_TIMESTAMP && cf.wt == PB_WT_VARINT) {
				ts_field = cf;
				tsf = &ts_field;
			}
		}
		if (cr.err)
			return bad(rw, &cr, "clock snapshot entry");
		uint64_t mapped;
		/* MONOTONIC is mapped too: packet timestamps on it are
		 * relabelled and legacy microsecond timestamps (MONOTONIC by
		 * definition) are written on the target axis, so a processor
		 * that converts MONOTONIC through this snapshot must find it
		 * on that axis as well.  own_clocks_only: a global clock not
		 * on the target axis would be the host's; left out. */
		if (is_scoped(id))
			global = false;
		/* BOOTTIME when the axis is another clock: onto the output's
		 * BOOTTIME, so that the machine's BOOTTIME and its target
		 * clock keep the host's step between them (own_clocks_only
		 * too: it is then on the host's BOOTTIME, as the target
		 * entry is on the host's axis) */
		bool to_boot = id == BUILTIN_CLOCK_BOOTTIME &&
			       id != rw->cfg.target_clock && rw->cfg.boot_map;
		if ((id != rw->cfg.target_clock &&
		     id != BUILTIN_CLOCK_MONOTONIC && !to_boot) || !tsf) {
			if (own && !is_scoped(id))
				edit_replace(&e, &f);
			continue;
		}
		bool ok = to_boot ? rw->cfg.boot_map(rw->cfg.map_ctx,
						     (uint32_t)id, tsf->val,
						     &mapped)
				  : map_clock(rw, (uint32_t)id, tsf->val,
					      &mapped);
		/* on the host's machine, MONOTONIC is the host's */
		if (ok && id == BUILTIN_CLOCK_MONOTONIC &&
		    id != rw->cfg.target_clock && rw->cfg.axis_to_mono)
			ok = rw->cfg.axis_to_mono(rw->cfg.map_ctx, mapped,
						  &mapped);
		if (!ok) {
			count_unmapped(rw);
			if (own)
				edit_replace(&e, &f);
			continue;
		}
		/* Re-encode this Clock: copy around its timestamp field. */
		edit_replace(&e, &f);
		size_t m2 = pb_begin_nested(out, CS_CLOCKS);
		pb_put_raw(out, f.data, (size_t)(tsf->start - f.data));
		pb_put_varint(out, CLK_TIMESTAMP, mapped);
		pb_put_raw(out, tsf->end, (size_t)(f.data + f.len - tsf->end));
		pb_end_nested(out, m2);
		rw->st.ts_snapshot++;
	}
	if (own && global && own_ts > rw->st.snapshot_last)
		rw->st.snapshot_last = own_ts;
	return edit_end(rw, &e, "clock_snapshot");
}

/* Maps a value of a scoped clock; for incremental clocks `v` is a delta and
 * the returned value is the new delta. */
static bool map_scoped(struct rewriter *rw, struct rw_seq *q,
		       struct scoped_clock *c, uint64_t v, uint64_t *res)
{
	uint64_t abs_in = c->incremental ? c->last_in + v : v;
	__int128 in_ns = (__int128)q->anchor_in +
			 ((__int128)abs_in - (__int128)c->snap) * c->unit;
	uint64_t mapped;

	if (in_ns < 0 || in_ns > (__int128)UINT64_MAX ||
	    !map_clock(rw, rw->cfg.target_clock, (uint64_t)in_ns, &mapped))
		return false;
	__int128 units = (__int128)c->snap +
			 div_round((__int128)mapped - (__int128)q->anchor_out,
				   c->unit);
	if (units < 0 || units > (__int128)UINT64_MAX) {
		rw->st.overflow++;
		units = units < 0 ? 0 : (__int128)UINT64_MAX;
	}
	if (!c->incremental) {
		*res = (uint64_t)units;
		return true;
	}
	c->last_in = abs_in;
	if (units < (__int128)c->last_out) {
		rw->st.clamped++;
		units = c->last_out;
	}
	*res = (uint64_t)(units - (__int128)c->last_out);
	c->last_out = (uint64_t)units;
	return true;
}

/* ---- legacy microsecond timestamps ---------------------------------------- */

/* Legacy TrackEvent and ThreadDescriptor microseconds are on MONOTONIC
 * (as Perfetto's trace processor reads them), whatever the trace clock;
 * an input without a MONOTONIC model falls back on the trace clock's. */
static bool map_us(struct rewriter *rw, int64_t in_us, int64_t *out_us)
{
	uint64_t out;
	if (in_us < 0 || in_us > (int64_t)(UINT64_MAX / 1000))
		return false;
	if (!map_clock(rw, BUILTIN_CLOCK_MONOTONIC, (uint64_t)in_us * 1000,
		       &out) &&
	    !map_clock(rw, rw->cfg.trace_clock, (uint64_t)in_us * 1000, &out))
		return false;
	if (rw->cfg.axis_to_mono &&
	    !rw->cfg.axis_to_mono(rw->cfg.map_ctx, out, &out))
		return false;
	*out_us = (int64_t)((out + 500) / 1000);
	return true;
}

static int rewrite_thread_descriptor(struct rewriter *rw, struct rw_seq *q,
				     struct pb_buf *out,
				     const struct pb_field *outer)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (f.num == THD_REFERENCE_TIMESTAMP_US) {
			int64_t in = (int64_t)f.val, o;
			if (!map_us(rw, in, &o)) {
				count_unmapped(rw);
				continue;
			}
			edit_replace(&e, &f);
			pb_put_varint(out, f.num, (uint64_t)o);
			q->have_legacy = true;
			q->legacy_in_us = in;
			q->legacy_out_us = o;
			rw->st.ts_legacy_us++;
		} else if (rw->cfg.remap_ids &&
			   (f.num == THD_PID || f.num == THD_TID)) {
			edit_replace(&e, &f);
			put_pid(out, f.num, map_pid(rw, f.val));
		}
	}
	return edit_end(rw, &e, "thread_descriptor");
}

/* ---- TrackEvent ------------------------------------------------------------ */

static int rewrite_track_event(struct rewriter *rw, struct rw_seq *q,
			       struct pb_buf *out, const struct pb_field *outer)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		switch (f.num) {
		case TE_TIMESTAMP_DELTA_US:
		case TE_TIMESTAMP_ABSOLUTE_US: {
			if (f.wt != PB_WT_VARINT)
				break;
			bool delta = f.num == TE_TIMESTAMP_DELTA_US;
			if (delta && !q->have_legacy) {
				count_unmapped(rw);
				break;
			}
			int64_t in = delta ? q->legacy_in_us + (int64_t)f.val
					   : (int64_t)f.val;
			int64_t o;
			if (!map_us(rw, in, &o)) {
				count_unmapped(rw);
				break;
			}
			edit_replace(&e, &f);
			pb_put_varint(out, f.num,
				      (uint64_t)(delta ? o - q->legacy_out_us : o));
			/* An absolute timestamp does not move the base that
			 * later deltas count from (Perfetto's reading). */
			if (delta) {
				q->legacy_in_us = in;
				q->legacy_out_us = o;
			}
			rw->st.ts_legacy_us++;
			break;
		}
		case TE_TRACK_UUID:
			if (!rw->cfg.remap_ids || f.wt != PB_WT_VARINT)
				break;
			edit_replace(&e, &f);
			pb_put_varint(out, f.num,
				      rewrite_remap_uuid(f.val, rw->cfg.uuid_key));
			break;
		case TE_EXTRA_COUNTER_TRACK_UUIDS:
		case TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS:
			if (!rw->cfg.remap_ids)
				break;
			edit_replace(&e, &f);
			put_uuids(rw, out, &f);
			break;
		}
	}
	return edit_end(rw, &e, "track_event");
}

/* Whether a TrackEvent holds anything rewrite_track_event() changes; most
 * do not, and stay in the packet's pending run of bytes.  Malformed ones
 * answer true so that rewrite_track_event() reports them. */
static bool track_event_changes(const struct rewriter *rw,
				const struct pb_field *outer)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, outer->data, outer->len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TE_TIMESTAMP_DELTA_US:
		case TE_TIMESTAMP_ABSOLUTE_US:
			return true;
		case TE_TRACK_UUID:
		case TE_EXTRA_COUNTER_TRACK_UUIDS:
		case TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS:
			if (rw->cfg.remap_ids)
				return true;
			break;
		}
	}
	return r.err != PB_OK;
}

/* TrackDescriptor (remap_ids only): uuid, parent_uuid, process and thread. */
static const uint32_t process_pid_fields[] = {PD_PID, 0};
static const uint32_t thread_pid_fields[] = {THD_PID, THD_TID, 0};

static int rewrite_track_descriptor(struct rewriter *rw, struct pb_buf *out,
				    const struct pb_field *outer)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if ((f.num == TD_UUID || f.num == TD_PARENT_UUID) &&
		    f.wt == PB_WT_VARINT) {
			edit_replace(&e, &f);
			pb_put_varint(out, f.num,
				      rewrite_remap_uuid(f.val, rw->cfg.uuid_key));
		} else if ((f.num == TD_PROCESS || f.num == TD_THREAD) &&
			   f.wt == PB_WT_LEN) {
			edit_replace(&e, &f);
			if (remap_pid_msg(rw, out, &f,
					  f.num == TD_PROCESS ? process_pid_fields
							      : thread_pid_fields,
					  "track_descriptor") < 0)
				return -1;
		}
	}
	return edit_end(rw, &e, "track_descriptor");
}

/* TracePacketDefaults (remap_ids only): the default track uuids. */
static int rewrite_defaults(struct rewriter *rw, struct pb_buf *out,
			    const struct pb_field *outer)
{
	struct pb_field f, ef;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if (f.num != TPD_TRACK_EVENT_DEFAULTS || f.wt != PB_WT_LEN)
			continue;
		struct msg_edit d;
		edit_replace(&e, &f);
		edit_begin(&d, out, &f);
		while (pb_next(&d.r, &ef)) {
			if (ef.num == TED_TRACK_UUID && ef.wt == PB_WT_VARINT) {
				edit_replace(&d, &ef);
				pb_put_varint(out, ef.num,
					      rewrite_remap_uuid(ef.val,
								 rw->cfg.uuid_key));
			} else if (ef.num == TED_EXTRA_COUNTER_TRACK_UUIDS ||
				   ef.num == TED_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS) {
				edit_replace(&d, &ef);
				put_uuids(rw, out, &ef);
			}
		}
		if (edit_end(rw, &d, "track_event_defaults") < 0)
			return -1;
	}
	return edit_end(rw, &e, "trace_packet_defaults");
}

/* ---- ftrace ---------------------------------------------------------------- */

/* An atrace line written through trace_marker ("B|pid|name", "E|pid",
 * "C|pid|name|value", "S|pid|name|cookie", ...): its pid moved like the
 * others.  Anything else is copied as it is. */
static void put_print_buf(struct rewriter *rw, struct pb_buf *out,
			  const struct pb_field *f)
{
	const char *s = (const char *)f->data;
	size_t n = f->len, i = 2;
	uint64_t pid = 0;

	if (n < 3 || s[1] != '|' || s[0] < 'A' || s[0] > 'Z')
		goto as_is;
	while (i < n && s[i] >= '0' && s[i] <= '9' && i < 12)
		pid = pid * 10 + (uint64_t)(s[i++] - '0');
	if (i == 2 || (i < n && s[i] != '|' && s[i] != '\n') ||
	    pid == 0 || pid > INT32_MAX)
		goto as_is;
	char num[16];
	int len = snprintf(num, sizeof(num), "%u", map_pid(rw, pid));
	size_t mark = pb_begin_nested(out, f->num);
	pb_put_raw(out, s, 2);
	pb_put_raw(out, num, (size_t)len);
	pb_put_raw(out, s + i, n - i);
	pb_end_nested(out, mark);
	return;
as_is:
	pb_put_bytes(out, f->num, f->data, f->len);
}

static int rewrite_print(struct rewriter *rw, struct pb_buf *out,
			 const struct pb_field *outer)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if (f.num != PRINT_BUF || f.wt != PB_WT_LEN)
			continue;
		edit_replace(&e, &f);
		put_print_buf(rw, out, &f);
	}
	return edit_end(rw, &e, "ftrace print");
}

static int rewrite_ftrace_event(struct rewriter *rw, struct pb_buf *out,
				const struct pb_field *outer, bool map_ts)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		uint64_t o;
		if (f.num == FE_TIMESTAMP && f.wt == PB_WT_VARINT && map_ts) {
			if (!map_ftrace(rw, f.val, &o)) {
				count_unmapped(rw);
				continue;
			}
			edit_replace(&e, &f);
			pb_put_varint(out, f.num, o);
			rw->st.ts_ftrace++;
		} else if (!rw->cfg.remap_ids) {
			continue;
		} else if (f.num == FE_PID && f.wt == PB_WT_VARINT) {
			edit_replace(&e, &f);
			put_pid(out, f.num, map_pid(rw, f.val));
		} else if (f.num == FE_PRINT && f.wt == PB_WT_LEN) {
			edit_replace(&e, &f);
			if (rewrite_print(rw, out, &f) < 0)
				return -1;
		} else if (f.wt == PB_WT_LEN) {
			/* The payload's pid fields, as the ftrace event table
			 * marks them. */
			const struct ft_event_desc *d = ft_event_by_id(f.num);
			if (!d || (!d->pid_fields &&
				   (!d->cpu_fields || !rw->cfg.cpu_offset)))
				continue;
			edit_replace(&e, &f);
			if (remap_ids_msg(rw, out, &f, d->pid_fields,
					  rw->cfg.cpu_offset ? d->cpu_fields
							     : NULL,
					  "ftrace event") < 0)
				return -1;
		}
	}
	return edit_end(rw, &e, "ftrace event");
}

/* Delta-encoded timestamp lists in compact_sched: the first value is
 * absolute, each next one a delta from the previous.  `in`/`out` carry the
 * running absolute values across unpacked elements. */
struct delta_list {
	uint64_t in, out;
};

static void map_delta_value(struct rewriter *rw, struct delta_list *d,
			    uint64_t v, struct pb_buf *out, bool map_ts)
{
	uint64_t abs_in = d->in + v, o;

	d->in = abs_in;
	if (!map_ts || !map_ftrace(rw, abs_in, &o)) {
		if (map_ts)
			count_unmapped(rw);
		o = abs_in; /* keep relative spacing of an unmapped list */
	} else {
		rw->st.ts_compact++;
	}
	if (o < d->out) {
		rw->st.clamped++;
		o = d->out;
	}
	pb_put_raw_varint(out, o - d->out);
	d->out = o;
}

/* Times of a packed delta list mapped per batch, so that a list of
 * thousands costs a call per DELTA_BATCH of them. */
#define DELTA_BATCH 64

/* map_delta_value for each element of a packed list (as a LEN payload);
 * returns false on a malformed element, after the ones before it. */
static bool map_delta_packed(struct rewriter *rw, struct delta_list *d,
			     const uint8_t *data, size_t len,
			     struct pb_buf *out)
{
	struct pb_packed_iter it;
	uint64_t in[DELTA_BATCH], mapped[DELTA_BATCH], v;
	bool ok[DELTA_BATCH];
	size_t n;

	/* The running values and counts live in locals: the bytes written
	 * through out->data might alias them, which would make the compiler
	 * store and reload them for every byte. */
	uint64_t acc = d->in, prev = d->out;
	uint64_t n_mapped = 0, n_unmapped = 0, n_clamped = 0;

	pb_packed_init(&it, data, len);
	do {
		for (n = 0; n < DELTA_BATCH && pb_packed_next(&it, &v); n++)
			in[n] = acc += v;
		map_ftrace_many(rw, in, mapped, ok, n);
		/* at most ten bytes per delta */
		pb_buf_reserve(out, n * PB_MAX_VARINT_LEN);
		uint8_t *p = out->data + out->len;
		for (size_t i = 0; i < n; i++) {
			uint64_t o = mapped[i];
			if (!ok[i]) {
				n_unmapped++;
				o = in[i]; /* keep the list's relative spacing */
			} else {
				n_mapped++;
			}
			if (o < prev) {
				n_clamped++;
				o = prev;
			}
			p += pb_encode_varint(p, o - prev);
			prev = o;
		}
		out->len = (size_t)(p - out->data);
	} while (n == DELTA_BATCH);
	d->in = acc;
	d->out = prev;
	rw->st.ts_compact += n_mapped;
	if (rw->cfg.map) /* count_unmapped's rule */
		rw->st.ts_unmapped += n_unmapped;
	rw->st.clamped += n_clamped;
	return !it.bad;
}

/* A list of pids (or, with cpus, of cpu numbers), packed or not. */
static void put_id_list(struct rewriter *rw, struct pb_buf *out,
			const struct pb_field *f, bool cpus)
{
	if (f->wt == PB_WT_VARINT) {
		put_pid(out, f->num, cpus ? map_cpu(rw, f->val)
					  : map_pid(rw, f->val));
		return;
	}
	struct pb_packed_iter it;
	uint64_t v;
	size_t mark = pb_begin_nested(out, f->num);
	pb_packed_init(&it, f->data, f->len);
	while (pb_packed_next(&it, &v))
		pb_put_raw_varint(out, (uint64_t)(int64_t)(int32_t)(
					       cpus ? map_cpu(rw, v)
						    : map_pid(rw, v)));
	pb_end_nested(out, mark);
}

static int rewrite_compact_sched(struct rewriter *rw, struct pb_buf *out,
				 const struct pb_field *outer, bool map_ts)
{
	struct pb_field f;
	struct delta_list sw = {0, 0}, wk = {0, 0};
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		struct delta_list *d = NULL;
		if (f.num == CSCHED_SWITCH_TIMESTAMP)
			d = &sw;
		else if (f.num == CSCHED_WAKING_TIMESTAMP)
			d = &wk;
		if (d && map_ts) {
			edit_replace(&e, &f);
			if (f.wt == PB_WT_VARINT) {
				pb_put_tag(out, f.num, PB_WT_VARINT);
				map_delta_value(rw, d, f.val, out, true);
			} else if (f.wt == PB_WT_LEN) {
				struct pb_sized m2 =
					pb_begin_sized(out, f.num, f.len);
				bool good = map_delta_packed(rw, d, f.data,
							     f.len, out);
				pb_end_sized(out, m2);
				if (!good) {
					e.r.err = PB_ERR_VARINT;
					e.r.err_off = (size_t)(f.data - e.r.base);
					return bad(rw, &e.r, "compact_sched timestamps");
				}
			}
		} else if (rw->cfg.remap_ids &&
			   (f.num == CSCHED_SWITCH_NEXT_PID ||
			    f.num == CSCHED_WAKING_PID)) {
			edit_replace(&e, &f);
			put_id_list(rw, out, &f, false);
		} else if (rw->cfg.remap_ids && rw->cfg.cpu_offset &&
			   f.num == CSCHED_WAKING_TARGET_CPU) {
			edit_replace(&e, &f);
			put_id_list(rw, out, &f, true);
		}
	}
	return edit_end(rw, &e, "compact_sched");
}

/* Whether a bundle's events are on BOOTTIME: unless the bundle names
 * another ftrace clock; then the processor places them through
 * boot_timestamp, which is the only thing to map.  r->err on a malformed
 * bundle. */
static bool bundle_on_boottime(struct pb_reader *r, const uint8_t *p,
			       size_t len)
{
	struct pb_field f;
	bool boot_clock = true;

	pb_reader_init(r, p, len);
	while (pb_next(r, &f))
		if (f.num == FB_FTRACE_CLOCK && f.wt == PB_WT_VARINT && f.val)
			boot_clock = false;
	return boot_clock;
}

static int rewrite_ftrace_bundle(struct rewriter *rw, struct pb_buf *out,
				 const struct pb_field *outer)
{
	struct pb_reader r;
	struct pb_field f;
	bool boot_clock = bundle_on_boottime(&r, outer->data, outer->len);

	if (r.err)
		return bad(rw, &r, "ftrace_events");
	/* Time kept as it is (no map): the events' timestamps and the
	 * compact_sched delta lists are left alone, byte for byte. */
	bool map_events = boot_clock && rw->cfg.map;

	struct msg_edit e;
	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		uint64_t o;
		switch (f.num) {
		case FB_EVENT:
			if (f.wt != PB_WT_LEN)
				break;
			edit_replace(&e, &f);
			if (rewrite_ftrace_event(rw, out, &f, map_events) < 0)
				return -1;
			break;
		case FB_COMPACT_SCHED:
			if (f.wt != PB_WT_LEN)
				break;
			edit_replace(&e, &f);
			if (rewrite_compact_sched(rw, out, &f, map_events) < 0)
				return -1;
			break;
		case FB_LAST_READ_EVENT_TIMESTAMP:
		case FB_PREVIOUS_BUNDLE_END_TIMESTAMP:
		case FB_BOOT_TIMESTAMP:
			if (f.wt != PB_WT_VARINT || f.val == 0 ||
			    (f.num != FB_BOOT_TIMESTAMP && !boot_clock))
				break;
			if (!map_ftrace(rw, f.val, &o)) {
				count_unmapped(rw);
				break;
			}
			edit_replace(&e, &f);
			pb_put_varint(out, f.num, o);
			rw->st.ts_ftrace++;
			break;
		case FB_CPU:
			/* Without machine_id, the guest's cpus are rows of
			 * their own, after the host's. */
			if (f.wt != PB_WT_VARINT || !rw->cfg.remap_ids ||
			    !rw->cfg.cpu_offset)
				break;
			edit_replace(&e, &f);
			pb_put_varint(out, f.num, map_cpu(rw, f.val));
			break;
		}
	}
	return edit_end(rw, &e, "ftrace_events");
}

/* ---- android_log ------------------------------------------------------------- */

/* One logcat entry on the host's machine (--no-machine-id): its pid and
 * tid moved clear of the host's, and its REALTIME timestamp onto the
 * output's REALTIME (cfg.log_map): the output keeps only the host's
 * REALTIME snapshots there, so the guest's own time could not be
 * converted. */
static int rewrite_log_event(struct rewriter *rw, struct pb_buf *out,
			     const struct pb_field *outer)
{
	struct pb_field f;
	struct msg_edit e;
	uint64_t t;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (f.num == ALE_PID || f.num == ALE_TID) {
			edit_replace(&e, &f);
			put_pid(out, f.num, map_pid(rw, f.val));
		} else if (f.num == ALE_TIMESTAMP && rw->cfg.log_map) {
			if (!rw->cfg.log_map(rw->cfg.map_ctx,
					     BUILTIN_CLOCK_REALTIME, f.val,
					     &t)) {
				count_unmapped(rw);
				continue;
			}
			edit_replace(&e, &f);
			pb_put_varint(out, f.num, t);
			rw->st.ts_log++;
		}
	}
	return edit_end(rw, &e, "android_log entry");
}

static int rewrite_android_log(struct rewriter *rw, struct pb_buf *out,
			       const struct pb_field *outer)
{
	struct pb_field f;
	struct msg_edit e;

	edit_begin(&e, out, outer);
	while (pb_next(&e.r, &f)) {
		if (f.num != ALP_EVENTS || f.wt != PB_WT_LEN)
			continue;
		edit_replace(&e, &f);
		if (rewrite_log_event(rw, out, &f) < 0)
			return -1;
	}
	return edit_end(rw, &e, "android_log");
}

/* ---- the packet -------------------------------------------------------------- */

/* Reports the first malformed byte of a message already known to be. */
static int bad_message(struct rewriter *rw, const struct vp_span *m,
		       const char *what)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, m->data, m->len);
	while (pb_next(&r, &f))
		;
	return bad(rw, &r, what);
}

/* ---- timestamps ------------------------------------------------------------ */

/* Decides the packet's new timestamp; *relabel when the packet must say
 * timestamp_clock_id = target from now on. */
static bool map_packet_ts(struct rewriter *rw, struct rw_seq *q,
			  const struct vp_packet *pi, uint64_t *ts,
			  bool *relabel)
{
	uint32_t clock = vp_seq_packet_clock(&q->st, pi, rw->cfg.trace_clock);
	*relabel = false;
	if (clock >= SCOPED_CLOCK_FIRST &&
	    clock <= SCOPED_CLOCK_LAST) {
		struct scoped_clock *c = find_scoped(q, clock);
		if (!c || !q->have_anchor || !map_scoped(rw, q, c, pi->ts, ts))
			return false;
		rw->st.ts_scoped++;
		return true;
	}
	if (!map_clock(rw, clock, pi->ts, ts))
		return false;
	if (clock == BUILTIN_CLOCK_BOOTTIME) {
		if (pi->ts < rw->st.first_boot_ts)
			rw->st.first_boot_ts = pi->ts;
		if (pi->ts > rw->st.last_boot_ts)
			rw->st.last_boot_ts = pi->ts;
	}
	if (clock != rw->cfg.target_clock) {
		*relabel = true;
		rw->st.relabelled++;
	}
	if (q->have_last && pi->ts >= q->last_in_ts && *ts < q->last_out_ts)
		rw->st.backwards++;
	q->have_last = true;
	q->last_in_ts = pi->ts;
	q->last_out_ts = *ts;
	rw->st.ts_packet++;
	return true;
}

int rewrite_packet(struct rewriter *rw, const uint8_t *pkt, size_t len,
		   uint64_t off, struct pb_buf *out, struct vp_error *err)
{
	struct vp_packet pi;
	struct pb_reader r;
	struct pb_field spare;
	const struct pb_field *fp;
	const struct rewrite_cfg *cfg = &rw->cfg;

	rw->pkt = pkt;
	rw->pkt_off = off;
	rw->err = err;

	if (!vp_packet_decode(&pi, pkt, len)) {
		pb_reader_init(&r, pkt, len);
		r.err = pi.err;
		r.err_off = pi.err_off;
		return bad(rw, &r, "packet");
	}
	if (pi.compressed)
		return 1; /* the caller inflates it and rewrites what is inside */
	rw->st.packets++;
	struct rw_seq *q = get_seq(rw, pi.seq_id);
	/* The merge keeps every packet, so of the sequence's events only a
	 * clear matters here: it ends the legacy time reference too. */
	unsigned ev = vp_seq_update(&q->st, &pi);
	if (ev & VP_SEQ_CLEARED)
		q->have_legacy = false;
	if (ev & VP_SEQ_BAD_DEFAULTS)
		return bad_message(rw, &pi.defaults, "trace_packet_defaults");
	if (pi.snapshot.data &&
	    parse_snapshot(rw, q, pi.snapshot.data, pi.snapshot.len) < 0)
		return -1;

	uint64_t new_ts = pi.ts;
	bool relabel = false, ts_ok = false;
	if (pi.has_ts) {
		ts_ok = map_packet_ts(rw, q, &pi, &new_ts, &relabel);
		if (!ts_ok)
			count_unmapped(rw);
	}

	/* Every field number handled here is one rewrite_field_passes()
	 * says does not pass. */
	const uint8_t *run = pkt;
	for (size_t k = 0; vp_packet_field(&pi, &k, &r, &spare, &fp);) {
		bool v = fp->wt == PB_WT_VARINT, l = fp->wt == PB_WT_LEN;
		int rc = 0;
		switch (fp->num) {
		case TP_TIMESTAMP:
			if (!v || !ts_ok)
				continue;
			flush_run(out, &run, fp->start);
			pb_put_varint(out, fp->num, new_ts);
			break;
		case TP_TIMESTAMP_CLOCK_ID:
			if (!v || !relabel)
				continue;
			flush_run(out, &run, fp->start);
			pb_put_varint(out, fp->num, cfg->target_clock);
			relabel = false; /* done in place */
			break;
		case TP_TRUSTED_PACKET_SEQUENCE_ID:
			if (!v || !fp->val || !cfg->seq_offset)
				continue;
			flush_run(out, &run, fp->start);
			pb_put_varint(out, fp->num,
				      (uint32_t)fp->val + cfg->seq_offset);
			break;
		case TP_MACHINE_ID:
			if (!cfg->machine_id)
				continue;
			flush_run(out, &run, fp->start); /* replaced below */
			break;
		case TP_CLOCK_SNAPSHOT:
			if (!l)
				continue;
			flush_run(out, &run, fp->start);
			rc = rewrite_snapshot(rw, out, fp);
			break;
		case TP_TRACK_EVENT:
			if (!l || !track_event_changes(rw, fp))
				continue;
			flush_run(out, &run, fp->start);
			rc = rewrite_track_event(rw, q, out, fp);
			break;
		case TP_THREAD_DESCRIPTOR:
			if (!l)
				continue;
			flush_run(out, &run, fp->start);
			rc = rewrite_thread_descriptor(rw, q, out, fp);
			break;
		case TP_FTRACE_EVENTS:
			if (!l)
				continue;
			flush_run(out, &run, fp->start);
			rc = rewrite_ftrace_bundle(rw, out, fp);
			break;
		case TP_TRUSTED_PID:
			if (!cfg->remap_ids || !v)
				continue;
			flush_run(out, &run, fp->start);
			put_pid(out, fp->num, map_pid(rw, fp->val));
			break;
		case TP_PROCESS_DESCRIPTOR:
			if (!cfg->remap_ids || !l)
				continue;
			flush_run(out, &run, fp->start);
			rc = remap_pid_msg(rw, out, fp, process_pid_fields,
					   "process_descriptor");
			break;
		case TP_PROCESS_TREE:
			if (!cfg->remap_ids || !l)
				continue;
			flush_run(out, &run, fp->start);
			rc = remap_pid_lists(rw, out, fp, tree_lists, 2,
					     "process_tree");
			break;
		case TP_PROCESS_STATS:
			if (!cfg->remap_ids || !l)
				continue;
			flush_run(out, &run, fp->start);
			rc = remap_pid_lists(rw, out, fp, stats_lists, 1,
					     "process_stats");
			break;
		case TP_TRACK_DESCRIPTOR:
			if (!cfg->remap_ids || !l)
				continue;
			flush_run(out, &run, fp->start);
			rc = rewrite_track_descriptor(rw, out, fp);
			break;
		case TP_TRACE_PACKET_DEFAULTS:
			if (!cfg->remap_ids || !l)
				continue;
			flush_run(out, &run, fp->start);
			rc = rewrite_defaults(rw, out, fp);
			break;
		case TP_ANDROID_LOG:
			if (!cfg->remap_ids || !l)
				continue;
			flush_run(out, &run, fp->start);
			rc = rewrite_android_log(rw, out, fp);
			break;
		default:
			continue;
		}
		if (rc < 0)
			return -1;
		run = fp->end;
	}
	flush_run(out, &run, pkt + len);

	if (relabel) /* the packet had no timestamp_clock_id of its own */
		pb_put_varint(out, TP_TIMESTAMP_CLOCK_ID, cfg->target_clock);
	if (cfg->machine_id)
		pb_put_varint(out, TP_MACHINE_ID, cfg->machine_id);
	return 0;
}

uint32_t rewrite_piece_of(uint32_t num)
{
	switch (num) {
	case TP_FTRACE_EVENTS:
		/* an ftrace bundle's events: each rewritten on its own, with
		 * the bundle's clock for context (rewrite_ftrace_bundle) */
		return FB_EVENT;
	case TP_PROCESS_TREE:
	case TP_PROCESS_STATS:
		/* with ids remapped (else they pass), each process or thread
		 * on its own (remap_pid_lists) */
		return PARTITION_PIECE_ANY;
	default:
		return 0;
	}
}

/* rewrite_piece for the fields [p, p + len) of a process tree or of
 * process stats: what remap_pid_lists writes for them. */
static int remap_pieces(struct rewriter *rw, uint32_t num, const uint8_t *p,
			size_t len, struct pb_buf *out)
{
	bool tree = num == TP_PROCESS_TREE;
	const char *what = tree ? "process_tree" : "process_stats";
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		const uint32_t *pids = entry_pids(&f, tree ? tree_lists
							   : stats_lists,
						  tree ? 2 : 1);
		if (!pids || !rw->cfg.remap_ids)
			pb_put_raw(out, f.start, (size_t)(f.end - f.start));
		else if (remap_pid_msg(rw, out, &f, pids, what) < 0)
			return -1;
	}
	return r.err ? bad(rw, &r, what) : 0;
}

/* rewrite_piece for the events [p, p + len) of an ftrace bundle whose
 * other fields are msg. */
static int ftrace_pieces(struct rewriter *rw, const uint8_t *msg,
			 size_t msg_len, const uint8_t *p, size_t len,
			 uint64_t off, struct pb_buf *out, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	int rc = 0;
	bool map_events = bundle_on_boottime(&r, msg, msg_len) && rw->cfg.map;

	if (r.err)
		return vp_errorf(err, "%s: byte offset %llu: malformed "
				 "ftrace_events", rw->cfg.path,
				 (unsigned long long)off);
	pb_reader_init(&r, p, len);
	while (rc == 0 && pb_next(&r, &f)) {
		if (f.num != FB_EVENT || f.wt != PB_WT_LEN)
			rc = vp_errorf(err, "%s: internal error: field %u of "
				       "ftrace_events as an event",
				       rw->cfg.path, f.num);
		else
			rc = rewrite_ftrace_event(rw, out, &f, map_events);
	}
	if (rc == 0 && r.err)
		rc = bad(rw, &r, "ftrace_events");
	return rc;
}

int rewrite_piece(struct rewriter *rw, uint32_t num, const uint8_t *msg,
		  size_t msg_len, const uint8_t *p, size_t len, uint64_t off,
		  bool count, struct pb_buf *out, struct vp_error *err)
{
	struct rewrite_stats saved = rw->st;
	uint64_t saved_map[2] = {0, 0};
	int rc;

	for (int i = 0; i < 2; i++)
		if (rw->cfg.map_counts[i])
			saved_map[i] = *rw->cfg.map_counts[i];
	rw->pkt = p;
	rw->pkt_off = off;
	rw->err = err;
	if (num == TP_FTRACE_EVENTS)
		rc = ftrace_pieces(rw, msg, msg_len, p, len, off, out, err);
	else if (num == TP_PROCESS_TREE || num == TP_PROCESS_STATS)
		rc = remap_pieces(rw, num, p, len, out);
	else
		return vp_errorf(err, "%s: internal error: no pieces in a "
				 "packet's field %u", rw->cfg.path, num);
	if (!count) {
		rw->st = saved;
		for (int i = 0; i < 2; i++)
			if (rw->cfg.map_counts[i])
				*rw->cfg.map_counts[i] = saved_map[i];
	}
	return rc;
}

bool rewrite_field_passes(uint32_t num)
{
	/* the envelope (vp_packet_decode reads it; of the interned data only
	 * where it is, which the rewrite never looks at), compressed packets
	 * (the caller inflates them) and what rewrite_packet's switch
	 * handles */
	if (num == TP_INTERNED_DATA)
		return true;
	if (vp_packet_is_envelope(num))
		return false;
	switch (num) {
	case TP_COMPRESSED_PACKETS:
	case TP_SYNCHRONIZATION_MARKER:
	case TP_TRACK_EVENT:
	case TP_THREAD_DESCRIPTOR:
	case TP_FTRACE_EVENTS:
	case TP_PROCESS_DESCRIPTOR:
	case TP_PROCESS_TREE:
	case TP_PROCESS_STATS:
	case TP_TRACK_DESCRIPTOR:
	case TP_ANDROID_LOG:
		return false;
	default:
		return true;
	}
}

bool rewrite_field_passes_ids_kept(uint32_t num)
{
	/* rewrite_packet's switch reads these only to remap ids (and, of
	 * an android_log, to move its times where the ids are remapped) */
	switch (num) {
	case TP_ANDROID_LOG:
	case TP_PROCESS_DESCRIPTOR:
	case TP_PROCESS_TREE:
	case TP_PROCESS_STATS:
	case TP_TRACK_DESCRIPTOR:
		return true;
	default:
		return rewrite_field_passes(num);
	}
}

bool rewrite_field_passes_in(uint32_t num, uint32_t sub)
{
	if (num != TP_TRACK_EVENT)
		return false;
	switch (sub) {
	/* what rewrite_track_event and track_event_changes read */
	case TE_TIMESTAMP_DELTA_US:
	case TE_TIMESTAMP_ABSOLUTE_US:
	case TE_TRACK_UUID:
	case TE_EXTRA_COUNTER_TRACK_UUIDS:
	case TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS:
		return false;
	default: /* 0: a track event may have such fields */
		return true;
	}
}

bool rewrite_packet_stateless(const uint8_t *pkt, size_t len, uint32_t *seq_id)
{
	struct pb_reader r;
	struct pb_field f;
	bool stateless = true;

	*seq_id = 0;
	pb_reader_init(&r, pkt, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TP_TRUSTED_PACKET_SEQUENCE_ID:
			if (f.wt == PB_WT_VARINT)
				*seq_id = (uint32_t)f.val;
			break;
		/* what rewrite_packet reads or keeps per sequence */
		case TP_TIMESTAMP:
		case TP_TIMESTAMP_CLOCK_ID:
		case TP_CLOCK_SNAPSHOT:
		case TP_TRACK_EVENT:
		case TP_THREAD_DESCRIPTOR:
		case TP_TRACE_PACKET_DEFAULTS:
		case TP_SEQUENCE_FLAGS:
		case TP_INCREMENTAL_STATE_CLEARED:
		case TP_COMPRESSED_PACKETS:
			stateless = false;
			break;
		}
	}
	return stateless && !r.err;
}
