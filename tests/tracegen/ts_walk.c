/*
 * ts_walk.c - independent timestamp resolver (the rules are in ts_walk.h).
 *
 * Each packet is scanned once to find its parts, its sequence's state is
 * updated (clear, defaults, clock snapshot, thread reference), and its
 * timestamps are queued in the canonical order; ts_walker_next() hands the
 * queue out one item at a time and reads the next packet when it runs dry.
 */
#include "ts_walk.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "trace_io.h"
#include "u64map.h"

/* Clock ids (Perfetto's BuiltinClock; 64..127 are sequence-scoped). */
enum {
	WK_CLOCK_MONOTONIC = 3,
	WK_CLOCK_BOOTTIME = 6,
	WK_CLOCK_SEQUENCE_SCOPED_FIRST = 64,
	WK_CLOCK_SEQUENCE_SCOPED_LAST = 127,
};

#define MAX_SCOPED 8 /* scoped clocks remembered per sequence */

/* A sequence-scoped clock as anchored by the last ClockSnapshot. */
struct scoped_clock {
	uint32_t id;
	bool valid;           /* the snapshot had an anchor (BOOTTIME/MONO) */
	bool incremental;
	uint32_t anchor_clock;
	uint64_t anchor;      /* the anchor clock's value in the snapshot */
	uint64_t x;           /* this clock's value in the snapshot */
	uint64_t unit;        /* unit_multiplier_ns */
	uint64_t acc;         /* incremental: the current value */
};

struct seq_state {
	bool has_default_clock;
	uint32_t default_clock;
	int nscoped;
	struct scoped_clock sc[MAX_SCOPED];
	bool has_ref;         /* legacy microsecond base known */
	uint64_t last_us;     /* int64 on the wire; kept modulo 2^64 */
};

struct ts_walker {
	struct trace_reader *rd;
	int filter;
	uint32_t trace_clock;
	struct u64map seqmap; /* sequence id -> index in seqs */
	struct seq_state *seqs;
	size_t nseq, capseq;
	struct ts_item *q;    /* timestamps of the current packet */
	size_t qlen, qcap, qpos;
	uint64_t packets;
	/* the packet being resolved */
	bool report;
	uint32_t cur_seq;
	uint64_t cur_off;
};

static const char *const kind_names[TS_KIND_COUNT] = {
	[TS_PACKET] = "packet",
	[TS_PACKET_MONOTONIC] = "packet_monotonic",
	[TS_PACKET_INCREMENTAL] = "packet_scoped_clock",
	[TS_PACKET_OTHER] = "packet_other_clock",
	[TS_LEGACY_US] = "legacy_us",
	[TS_FTRACE] = "ftrace",
	[TS_COMPACT_SWITCH] = "compact_switch",
	[TS_COMPACT_WAKING] = "compact_waking",
	[TS_SNAPSHOT_BOOTTIME] = "snapshot_boottime",
	[TS_UNRESOLVED] = "unresolved",
};

const char *ts_kind_name(enum ts_kind k)
{
	return (unsigned)k < TS_KIND_COUNT ? kind_names[k] : "?";
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void push(struct ts_walker *w, enum ts_kind kind, uint64_t abs,
		 uint32_t clock)
{
	if (!w->report)
		return;
	if (w->qlen == w->qcap) {
		size_t cap = w->qcap ? w->qcap * 2 : 64;
		struct ts_item *q = realloc(w->q, cap * sizeof(*q));
		if (!q)
			abort(); /* as pb_buf does */
		w->q = q;
		w->qcap = cap;
	}
	struct ts_item *it = &w->q[w->qlen++];
	it->kind = kind;
	it->abs_ns = abs;
	it->clock_id = clock;
	it->seq_id = w->cur_seq;
	it->packet_index = w->packets - 1;
	it->packet_offset = w->cur_off;
}

static struct seq_state *seq_get(struct ts_walker *w, uint32_t seq)
{
	uint64_t idx;

	if (u64map_get(&w->seqmap, seq, &idx))
		return &w->seqs[idx];
	if (w->nseq == w->capseq) {
		size_t cap = w->capseq ? w->capseq * 2 : 16;
		struct seq_state *s = realloc(w->seqs, cap * sizeof(*s));
		if (!s)
			abort();
		w->seqs = s;
		w->capseq = cap;
	}
	memset(&w->seqs[w->nseq], 0, sizeof(w->seqs[0]));
	u64map_put(&w->seqmap, seq, w->nseq);
	return &w->seqs[w->nseq++];
}

static struct scoped_clock *scoped_find(struct seq_state *s, uint32_t id,
					bool create)
{
	for (int i = 0; i < s->nscoped; i++)
		if (s->sc[i].id == id)
			return &s->sc[i];
	if (!create)
		return NULL;
	if (s->nscoped == MAX_SCOPED) { /* forget the oldest */
		memmove(&s->sc[0], &s->sc[1], sizeof(s->sc[0]) * (MAX_SCOPED - 1));
		s->nscoped--;
	}
	struct scoped_clock *c = &s->sc[s->nscoped++];
	memset(c, 0, sizeof(*c));
	c->id = id;
	return c;
}

/* ---- message parts ------------------------------------------------------ */

/* Failure while reading one packet: a message naming where. */
struct ctx {
	struct ts_walker *w;
	char *err;
	size_t errlen;
	const char *what;     /* set when malformed */
};

static bool bad(struct ctx *c, const char *what)
{
	c->what = what;
	return false;
}

/* TracePacketDefaults */
static bool read_defaults(struct ctx *c, struct seq_state *s,
			  const uint8_t *d, size_t n)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num == TPD_TIMESTAMP_CLOCK_ID) {
			if (f.wt != PB_WT_VARINT)
				return bad(c, "trace_packet_defaults.timestamp_clock_id");
			s->has_default_clock = true;
			s->default_clock = (uint32_t)f.val;
		}
	}
	return r.err == PB_OK || bad(c, "trace_packet_defaults");
}

struct clock_entry {
	uint32_t id;
	uint64_t ts;
	bool incremental;
	uint64_t unit;
};

static bool read_clock(struct ctx *c, const uint8_t *d, size_t n,
		       struct clock_entry *e)
{
	struct pb_reader r;
	struct pb_field f;

	memset(e, 0, sizeof(*e));
	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num < 1 || f.num > 4)
			continue;
		if (f.wt != PB_WT_VARINT)
			return bad(c, "clock_snapshot.clocks");
		switch (f.num) {
		case CLK_CLOCK_ID: e->id = (uint32_t)f.val; break;
		case CLK_TIMESTAMP: e->ts = f.val; break;
		case CLK_IS_INCREMENTAL: e->incremental = f.val != 0; break;
		case CLK_UNIT_MULTIPLIER_NS: e->unit = f.val; break;
		}
	}
	return r.err == PB_OK || bad(c, "clock_snapshot.clocks");
}

/* ClockSnapshot: (re)anchors the sequence's scoped clocks. */
static bool read_snapshot(struct ctx *c, struct seq_state *s,
			  const uint8_t *d, size_t n)
{
	struct pb_reader r;
	struct pb_field f;
	struct clock_entry e;
	bool have_boot = false, have_mono = false;
	uint64_t boot = 0, mono = 0;

	/* first the anchors */
	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num == CS_PRIMARY_TRACE_CLOCK && f.wt == PB_WT_VARINT)
			c->w->trace_clock = (uint32_t)f.val;
		if (f.num != CS_CLOCKS)
			continue;
		if (f.wt != PB_WT_LEN || !read_clock(c, f.data, f.len, &e))
			return bad(c, "clock_snapshot.clocks");
		if (e.id == WK_CLOCK_BOOTTIME && !have_boot)
			have_boot = true, boot = e.ts;
		if (e.id == WK_CLOCK_MONOTONIC && !have_mono)
			have_mono = true, mono = e.ts;
	}
	if (r.err != PB_OK)
		return bad(c, "clock_snapshot");
	/* then the scoped clocks */
	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num != CS_CLOCKS)
			continue;
		read_clock(c, f.data, f.len, &e);
		if (e.id < WK_CLOCK_SEQUENCE_SCOPED_FIRST ||
		    e.id > WK_CLOCK_SEQUENCE_SCOPED_LAST)
			continue;
		struct scoped_clock *sc = scoped_find(s, e.id, true);
		sc->valid = have_boot || have_mono;
		sc->anchor_clock = have_boot ? WK_CLOCK_BOOTTIME : WK_CLOCK_MONOTONIC;
		sc->anchor = have_boot ? boot : mono;
		sc->x = e.ts;
		sc->acc = e.ts;
		sc->unit = e.unit ? e.unit : 1;
		sc->incremental = e.incremental;
	}
	return true;
}

/* The packet timestamp, on clock `clk`. */
static void resolve_packet_ts(struct ts_walker *w, struct seq_state *s,
			      uint32_t clk, uint64_t ts)
{
	if (clk == WK_CLOCK_BOOTTIME) {
		push(w, TS_PACKET, ts, clk);
	} else if (clk == WK_CLOCK_MONOTONIC) {
		push(w, TS_PACKET_MONOTONIC, ts, clk);
	} else if (clk >= WK_CLOCK_SEQUENCE_SCOPED_FIRST &&
		   clk <= WK_CLOCK_SEQUENCE_SCOPED_LAST) {
		struct scoped_clock *sc = scoped_find(s, clk, false);
		uint64_t v;

		if (!sc || !sc->valid) {
			push(w, TS_UNRESOLVED, ts, clk);
			return;
		}
		if (sc->incremental) {
			sc->acc += ts;
			v = sc->acc;
		} else {
			v = ts;
		}
		/* modular arithmetic: (v - x) may be negative */
		uint64_t abs = sc->anchor + (v - sc->x) * sc->unit;
		push(w, sc->anchor_clock == WK_CLOCK_BOOTTIME
				? TS_PACKET_INCREMENTAL
				: TS_PACKET_MONOTONIC,
		     abs, sc->anchor_clock);
	} else {
		push(w, TS_PACKET_OTHER, ts, clk);
	}
}

/* ThreadDescriptor.reference_timestamp_us */
static bool read_thread_descriptor(struct ctx *c, struct seq_state *s,
				   const uint8_t *d, size_t n)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num != THD_REFERENCE_TIMESTAMP_US)
			continue;
		if (f.wt != PB_WT_VARINT)
			return bad(c, "thread_descriptor.reference_timestamp_us");
		s->has_ref = true;
		s->last_us = f.val;
		push(c->w, TS_LEGACY_US, s->last_us * 1000, WK_CLOCK_BOOTTIME);
	}
	return r.err == PB_OK || bad(c, "thread_descriptor");
}

/* TrackEvent timestamp_delta_us / timestamp_absolute_us */
static bool read_track_event(struct ctx *c, struct seq_state *s,
			     const uint8_t *d, size_t n)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num != TE_TIMESTAMP_DELTA_US &&
		    f.num != TE_TIMESTAMP_ABSOLUTE_US)
			continue;
		if (f.wt != PB_WT_VARINT)
			return bad(c, "track_event.timestamp_*_us");
		if (f.num == TE_TIMESTAMP_ABSOLUTE_US) {
			push(c->w, TS_LEGACY_US, f.val * 1000, WK_CLOCK_BOOTTIME);
		} else if (!s->has_ref) {
			push(c->w, TS_UNRESOLVED, f.val, 0);
		} else {
			s->last_us += f.val;
			push(c->w, TS_LEGACY_US, s->last_us * 1000,
			     WK_CLOCK_BOOTTIME);
		}
	}
	return r.err == PB_OK || bad(c, "track_event");
}

/* One field of packed (or unpacked) deltas, accumulated into *acc. */
static bool read_deltas(struct ctx *c, const struct pb_field *f,
			enum ts_kind kind, uint64_t *acc)
{
	if (f->wt == PB_WT_VARINT) {
		*acc += f->val;
		push(c->w, kind, *acc, WK_CLOCK_BOOTTIME);
		return true;
	}
	if (f->wt != PB_WT_LEN)
		return bad(c, "compact_sched timestamps");
	struct pb_packed_iter it;
	uint64_t v;
	pb_packed_init(&it, f->data, f->len);
	while (pb_packed_next(&it, &v)) {
		*acc += v;
		push(c->w, kind, *acc, WK_CLOCK_BOOTTIME);
	}
	return !it.bad || bad(c, "compact_sched packed timestamps");
}

static bool read_compact(struct ctx *c, const uint8_t *d, size_t n)
{
	static const uint32_t fields[2] = { CSCHED_SWITCH_TIMESTAMP,
					    CSCHED_WAKING_TIMESTAMP };
	static const enum ts_kind kinds[2] = { TS_COMPACT_SWITCH,
					       TS_COMPACT_WAKING };
	struct pb_reader r;
	struct pb_field f;

	for (int pass = 0; pass < 2; pass++) {
		uint64_t acc = 0;

		pb_reader_init(&r, d, n);
		while (pb_next(&r, &f))
			if (f.num == fields[pass] &&
			    !read_deltas(c, &f, kinds[pass], &acc))
				return false;
		if (r.err != PB_OK)
			return bad(c, "compact_sched");
	}
	return true;
}

static bool read_ftrace(struct ctx *c, const uint8_t *d, size_t n)
{
	struct pb_reader r, er;
	struct pb_field f, ef;

	/* the events, in order */
	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num != FB_EVENT)
			continue;
		if (f.wt != PB_WT_LEN)
			return bad(c, "ftrace_events.event");
		pb_reader_init(&er, f.data, f.len);
		while (pb_next(&er, &ef)) {
			if (ef.num != FE_TIMESTAMP)
				continue;
			if (ef.wt != PB_WT_VARINT)
				return bad(c, "ftrace_event.timestamp");
			push(c->w, TS_FTRACE, ef.val, WK_CLOCK_BOOTTIME);
		}
		if (er.err != PB_OK)
			return bad(c, "ftrace_event");
	}
	if (r.err != PB_OK)
		return bad(c, "ftrace_events");
	/* then compact_sched */
	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f)) {
		if (f.num != FB_COMPACT_SCHED)
			continue;
		if (f.wt != PB_WT_LEN || !read_compact(c, f.data, f.len))
			return bad(c, "ftrace_events.compact_sched");
	}
	return true;
}

/* The BOOTTIME entries of a snapshot, reported last. */
static void report_snapshot(struct ctx *c, const uint8_t *d, size_t n)
{
	struct pb_reader r;
	struct pb_field f;
	struct clock_entry e;

	pb_reader_init(&r, d, n);
	while (pb_next(&r, &f))
		if (f.num == CS_CLOCKS && read_clock(c, f.data, f.len, &e) &&
		    e.id == WK_CLOCK_BOOTTIME)
			push(c->w, TS_SNAPSHOT_BOOTTIME, e.ts, WK_CLOCK_BOOTTIME);
}

/* ---- one packet --------------------------------------------------------- */

struct span {
	const uint8_t *d;
	size_t n;
};

static int walk_packet(struct ts_walker *w, const uint8_t *d, size_t len,
		       uint64_t off, char *err, size_t errlen)
{
	struct ctx c = { w, err, errlen, NULL };
	struct pb_reader r;
	struct pb_field f;
	bool has_ts = false, has_clk = false, cleared = false, data = false;
	uint64_t ts = 0, mid = 0;
	uint32_t clk = 0, seq = 0;
	struct span defaults = { 0 }, snap = { 0 }, te = { 0 }, thd = { 0 },
		    ft = { 0 };

	w->packets++;
	w->cur_off = off;
	pb_reader_init(&r, d, len);
	while (pb_next(&r, &f)) {
		bool is_len = f.wt == PB_WT_LEN, is_var = f.wt == PB_WT_VARINT;
		bool ok = true;

		data |= f.num != TP_TIMESTAMP && f.num != TP_TIMESTAMP_CLOCK_ID &&
			f.num != TP_MACHINE_ID;
		switch (f.num) {
		case TP_TIMESTAMP:
			ok = is_var, has_ts = true, ts = f.val;
			break;
		case TP_TIMESTAMP_CLOCK_ID:
			ok = is_var, has_clk = true, clk = (uint32_t)f.val;
			break;
		case TP_TRUSTED_PACKET_SEQUENCE_ID:
			ok = is_var, seq = (uint32_t)f.val;
			break;
		case TP_SEQUENCE_FLAGS:
			ok = is_var;
			if (f.val & SEQ_INCREMENTAL_STATE_CLEARED)
				cleared = true;
			break;
		case TP_INCREMENTAL_STATE_CLEARED:
			ok = is_var;
			if (f.val)
				cleared = true;
			break;
		case TP_MACHINE_ID:
			ok = is_var, mid = f.val;
			break;
		case TP_TRACE_PACKET_DEFAULTS:
			ok = is_len, defaults = (struct span){ f.data, f.len };
			break;
		case TP_CLOCK_SNAPSHOT:
			ok = is_len, snap = (struct span){ f.data, f.len };
			break;
		case TP_TRACK_EVENT:
			ok = is_len, te = (struct span){ f.data, f.len };
			break;
		case TP_THREAD_DESCRIPTOR:
			ok = is_len, thd = (struct span){ f.data, f.len };
			break;
		case TP_FTRACE_EVENTS:
			ok = is_len, ft = (struct span){ f.data, f.len };
			break;
		}
		if (!ok) {
			set_err(err, errlen,
				"%s: packet %" PRIu64 " at offset %" PRIu64
				": field %u has wire type %u",
				trace_reader_path(w->rd), w->packets - 1, off,
				f.num, f.wt);
			return -1;
		}
	}
	if (r.err != PB_OK) {
		set_err(err, errlen,
			"%s: packet %" PRIu64 " at offset %" PRIu64 ": %s at +%zu",
			trace_reader_path(w->rd), w->packets - 1, off,
			pb_err_str(r.err), r.err_off);
		return -1;
	}

	w->report = w->filter < 0 || mid == (uint64_t)w->filter;
	w->cur_seq = seq;
	struct seq_state *s = seq_get(w, seq);

	/* state first: clear, defaults, snapshot */
	if (cleared)
		s->has_default_clock = false;
	if (defaults.d && !read_defaults(&c, s, defaults.d, defaults.n))
		goto malformed;
	if (snap.d && !read_snapshot(&c, s, snap.d, snap.n))
		goto malformed;

	/* 1. the packet timestamp; not of a packet of a time and a machine
	 * alone, which a merge writes first on each guest machine (merge.c's
	 * write_machine_anchor): it carries no event */
	if (has_ts && data) {
		uint32_t pc = has_clk ? clk
			      : s->has_default_clock ? s->default_clock
						     : w->trace_clock;
		resolve_packet_ts(w, s, pc, ts);
	}
	/* 2. legacy microseconds */
	if (thd.d && !read_thread_descriptor(&c, s, thd.d, thd.n))
		goto malformed;
	if (te.d && !read_track_event(&c, s, te.d, te.n))
		goto malformed;
	/* 3-5. ftrace */
	if (ft.d && !read_ftrace(&c, ft.d, ft.n))
		goto malformed;
	/* 6. snapshot BOOTTIME entries */
	if (snap.d)
		report_snapshot(&c, snap.d, snap.n);
	return 0;

malformed:
	set_err(err, errlen, "%s: packet %" PRIu64 " at offset %" PRIu64
		": malformed %s", trace_reader_path(w->rd), w->packets - 1, off,
		c.what ? c.what : "field");
	return -1;
}

/* ---- public ------------------------------------------------------------- */

int ts_walker_open(struct ts_walker **out, const char *path,
		   int machine_filter, char *err, size_t errlen)
{
	struct vp_error e;
	struct ts_walker *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	if (trace_reader_open(&w->rd, path, &e)) {
		set_err(err, errlen, "%s", e.msg);
		free(w);
		return -1;
	}
	w->filter = machine_filter;
	w->trace_clock = WK_CLOCK_BOOTTIME;
	u64map_init(&w->seqmap);
	*out = w;
	return 0;
}

int ts_walker_next(struct ts_walker *w, struct ts_item *it, char *err,
		   size_t errlen)
{
	struct trace_record rec;
	struct vp_error e;

	while (w->qpos == w->qlen) {
		int rc = trace_reader_next(w->rd, &rec, &e);

		if (rc < 0) {
			set_err(err, errlen, "%s", e.msg);
			return -1;
		}
		if (rc == 0)
			return 0;
		if (rec.field != TRACE_PACKET_FIELD || rec.wt != PB_WT_LEN)
			continue;
		w->qlen = w->qpos = 0;
		if (walk_packet(w, rec.data, rec.len, rec.offset, err, errlen))
			return -1;
	}
	*it = w->q[w->qpos++];
	return 1;
}

uint64_t ts_walker_packets(const struct ts_walker *w)
{
	return w->packets;
}

void ts_walker_close(struct ts_walker *w)
{
	if (!w)
		return;
	trace_reader_close(w->rd);
	u64map_free(&w->seqmap);
	free(w->seqs);
	free(w->q);
	free(w);
}

int ts_walk_file(const char *path, int machine_filter,
		 void (*cb)(void *ctx, enum ts_kind kind, uint64_t abs_ns),
		 void *ctx, char *err, size_t errlen)
{
	struct ts_walker *w;
	struct ts_item it;
	int rc;

	if (ts_walker_open(&w, path, machine_filter, err, errlen))
		return -1;
	while ((rc = ts_walker_next(w, &it, err, errlen)) == 1)
		cb(ctx, it.kind, it.abs_ns);
	ts_walker_close(w);
	return rc < 0 ? -1 : 0;
}
