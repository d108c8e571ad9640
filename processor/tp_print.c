/*
 * tp_print.c - ftrace's print and tracing_mark_write events (and the
 * kernel's look-alikes: sde, dpu, g2d, mali, zero), as atrace's text
 * protocol has them: B|pid|name and E begin and end slices, C a counter,
 * S/F and G/H async slices, N and I instants, as Perfetto's
 * SystraceParser reads them.
 */
#include "tp_print.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftrace_event_table.h"
#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_atrace.h"
#include "tp_process.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_stats.h"
#include "tp_tracks.h"

/* global_counter_track's answer for a name that has no global track */
#define NO_TRACK UINT32_MAX

static void mstat(struct tp_ctx *ctx, uint32_t machine, const char *name)
{
	tp_stat_add(ctx, name, machine, -1, 1);
}

struct sys_point {
	char phase;
	int64_t tgid;
	const char *name;
	size_t name_len;
	int64_t value;
	const char *track;  /* G, H, N: the track's name */
	size_t track_len;
};

static bool parse_i64(const char *s, size_t n, int64_t *out)
{
	char buf[32];
	char *end;

	if (n == 0 || n >= sizeof buf)
		return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	long long v = strtoll(buf, &end, 10);
	if (*end)
		return false;
	*out = v;
	return true;
}

/* Next '|'-separated field of s[*off .. len). */
static const char *next_field(const char *s, size_t len, size_t *off,
			      size_t *flen)
{
	size_t start = *off, i = *off;

	while (i < len && s[i] != '|')
		i++;
	*flen = i > start ? i - start : 0;
	*off = i + 1;
	return s + (start < len ? start : len);
}

/* The rest of a G, H or N marker, from s[off]: G|tgid|track|name|cookie,
 * H|tgid|track|cookie (or H|tgid|track|name|cookie), N|tgid|track|name. */
static bool parse_track_point(const char *s, size_t len, size_t off,
			      bool has_tgid, struct sys_point *p)
{
	size_t tn, nn, cn;
	const char *t = next_field(s, len, &off, &tn);
	const char *n = next_field(s, len, &off, &nn);
	if (!has_tgid || tn == 0)
		return false;
	p->track = t;
	p->track_len = tn;
	if (p->phase == 'N') {
		p->name = n;
		p->name_len = nn;
		return nn > 0;
	}
	const char *c = next_field(s, len, &off, &cn);
	if (p->phase == 'H') {
		/* the name is optional: the cookie is the last field */
		if (cn == 0) {
			c = n;
			cn = nn;
		}
		return parse_i64(c, cn, &p->value);
	}
	p->name = n;
	p->name_len = nn;
	return nn > 0 && parse_i64(c, cn, &p->value);
}

/* Parses an atrace marker: B|tgid|name, E[|tgid], C|tgid|name|value,
 * S|tgid|name|cookie, F|tgid|name|cookie, I|tgid|name,
 * G|tgid|track|name|cookie, H|tgid|track[|name]|cookie, N|tgid|track|name.
 * 0: not one. */
static bool parse_sys_point(const char *s, size_t len, struct sys_point *p)
{
	size_t off = 0, n;
	const char *f;
	int64_t v;

	memset(p, 0, sizeof *p);
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\0'))
		len--;
	f = next_field(s, len, &off, &n);
	if (n == 0)
		return false;
	p->phase = f[0];
	f = next_field(s, len, &off, &n);
	bool has_tgid = parse_i64(f, n, &v) && v >= 0 && v <= UINT32_MAX;
	p->tgid = has_tgid ? v : 0;
	switch (p->phase) {
	case 'B':
		if (!has_tgid)
			return false;
		if (off < len) {
			p->name = s + off;
			p->name_len = len - off;
		} else {
			p->name = "[empty slice name]";
			p->name_len = strlen(p->name);
		}
		return true;
	case 'E':
		return true;
	case 'S':
	case 'F':
	case 'C': {
		size_t vn;
		f = next_field(s, len, &off, &n);
		const char *vf = next_field(s, len, &off, &vn);
		if (!has_tgid || n == 0 || !parse_i64(vf, vn, &p->value))
			return false;
		p->name = f;
		p->name_len = n;
		return true;
	}
	case 'I':
		f = next_field(s, len, &off, &n);
		if (!has_tgid || n == 0)
			return false;
		p->name = f;
		p->name_len = n;
		return true;
	case 'G':
	case 'H':
	case 'N':
		return parse_track_point(s, len, off, has_tgid, p);
	default:
		return false;
	}
}

/* A process's atrace counter: Perfetto's track has the process and the
 * counter's name as its dimensions. */
static uint32_t process_counter_track(struct tp_ctx *ctx, uint32_t machine,
				      uint32_t upid, tp_str name)
{
	struct tp_args_builder dims;
	struct tp_track_spec s;
	tp_str k;

	tp_args_builder_init(&dims);
	k = tp_s(ctx, "upid");
	tp_args_add_int(&dims, k, k, upid);
	k = tp_s(ctx, "name");
	tp_args_add_str(&dims, k, k, name);
	tp_track_spec_init(&s, machine);
	s.name = name;
	s.type = tp_s(ctx, "atrace_counter");
	s.event_type = tp_s(ctx, "counter");
	s.upid = upid;
	s.dimension_arg_set_id = tp_args_commit(ctx, &dims);
	uint32_t track = tp_track_intern(ctx, &s);
	tp_args_builder_free(&dims);
	return track;
}

/* A counter value's args: the writing thread (utid), if it is known
 * already; as Perfetto, the counter does not create it. */
static int64_t counter_thread_arg(struct tp_ctx *ctx, uint32_t machine,
				  int64_t pid)
{
	struct tp_args_builder b;
	uint32_t utid;

	if (!tp_thread_find(ctx, machine, pid, &utid))
		return -1;
	tp_str k = tp_s(ctx, "utid");
	tp_args_builder_init(&b);
	tp_args_add_uint(&b, k, k, utid);
	int64_t id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return id;
}

/* The global counter track Perfetto promotes an atrace counter to, or
 * NO_TRACK: ScreenState goes to the screen's own track (the one
 * initial_display_state feeds), battery_stats.* to a battery_stats track
 * keyed by the counter's name; neither belongs to the writer's process. */
static uint32_t global_counter_track(struct tp_ctx *ctx, uint32_t machine,
				     tp_str name)
{
	const char *n = tp_str_get(ctx->pool, name);
	struct tp_args_builder dims;
	struct tp_track_spec s;
	uint32_t track;

	if (!strcmp(n, "ScreenState"))
		return tp_track_counter(ctx, machine, tp_s(ctx, "screen_state"),
					name, -1, 0);
	if (strncmp(n, "battery_stats.", strlen("battery_stats.")))
		return NO_TRACK;
	tp_args_builder_init(&dims);
	tp_args_add_str(&dims, tp_s(ctx, "counter_key"),
			tp_s(ctx, "counter_key"), name);
	tp_track_spec_init(&s, machine);
	s.name = name;
	s.type = tp_s(ctx, "battery_stats");
	s.event_type = tp_s(ctx, "counter");
	s.dimension_arg_set_id = tp_args_commit(ctx, &dims);
	track = tp_track_intern(ctx, &s);
	tp_args_builder_free(&dims);
	return track;
}

/* The thread of a B or I marker.  tgid 0 is what kernel markers (from
 * interrupts) carry, and no process: as Perfetto, the thread is only got
 * or created by its tid then, never moved to pid 0. */
static uint32_t marker_thread(struct tp_ctx *ctx, uint32_t machine,
			      int64_t pid, int64_t tgid)
{
	if (tgid == 0)
		return tp_thread_get(ctx, machine, pid);
	return tp_thread_update(ctx, machine, pid, tgid);
}

static void sys_point(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t pid, const struct sys_point *p)
{
	tp_str name = p->name ? tp_intern(ctx->pool, p->name, p->name_len) : 0;
	uint32_t utid;

	switch (p->phase) {
	case 'B':
		utid = marker_thread(ctx, machine, pid, p->tgid);
		tp_slice_begin(ctx, tp_track_thread(ctx, utid), ts, 0, name,
			       -1);
		break;
	case 'E':
		if (p->tgid == 0) {
			if (!tp_thread_find(ctx, machine, pid, &utid))
				break;
		} else {
			utid = tp_thread_update(ctx, machine, pid, p->tgid);
		}
		tp_slice_end(ctx, tp_track_thread(ctx, utid), ts, 0, 0, -1);
		break;
	case 'I':
		utid = marker_thread(ctx, machine, pid, p->tgid);
		tp_slice_complete(ctx, tp_track_thread(ctx, utid), ts, 0, 0,
				  name, -1);
		break;
	case 'S':
	case 'F':
		tp_atrace_async(ctx, ts, machine, p->tgid, name, p->value,
				p->phase == 'S');
		break;
	case 'G':
	case 'H':
	case 'N': {
		tp_str track = tp_intern(ctx->pool, p->track, p->track_len);
		if (p->phase == 'G')
			tp_atrace_track_begin(ctx, ts, machine, pid, p->tgid,
					      track, name, p->value);
		else if (p->phase == 'H')
			tp_atrace_track_end(ctx, ts, machine, pid, p->tgid,
					    track, p->value);
		else
			tp_atrace_track_instant(ctx, ts, machine, pid,
						p->tgid, track, name);
		break;
	}
	case 'C': {
		uint32_t global = name ? global_counter_track(ctx, machine, name)
				       : NO_TRACK;
		if (global != NO_TRACK) {
			tp_counter_add(ctx, global, ts, (double)p->value, -1);
			break;
		}
		/* per process on purpose, tgid 0 too (Perfetto's upid of pid
		 * 0): counters are pushed from any thread of it */
		uint32_t u = tp_process_get(ctx, machine, p->tgid);
		int64_t args = counter_thread_arg(ctx, machine, pid);
		uint32_t track = process_counter_track(ctx, machine, u, name);
		tp_counter_add(ctx, track, ts, (double)p->value, args);
		break;
	}
	default:
		break;
	}
}

void tp_print_event(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		    int64_t pid, const struct msg *m)
{
	struct sys_point p;

	if (!has(m, PRINT_BUF) || !m->data[PRINT_BUF])
		return;
	const char *s = (const char *)m->data[PRINT_BUF];
	size_t len = m->len[PRINT_BUF];
	if (!parse_sys_point(s, len, &p)) {
		if (!(len >= 23 && memcmp(s, "trace_event_clock_sync:", 23) == 0))
			mstat(ctx, machine, "systrace_parse_failure");
		return;
	}
	sys_point(ctx, ts, machine, pid, &p);
}

/* The kernel's tracing_mark_write look-alikes: either a B/E/C type or a
 * begin flag. */
static void kernel_mark(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			int64_t pid, char type, bool begin, tp_str name,
			int64_t tgid, int64_t value)
{
	struct sys_point p;
	const char *n = name ? tp_str_get(ctx->pool, name) : "";

	memset(&p, 0, sizeof p);
	p.tgid = tgid;
	p.name = n;
	p.name_len = n ? strlen(n) : 0;
	p.value = value;
	if (type == 0)
		p.phase = begin ? 'B' : 'E';
	else if (type == 'B' || type == 'E' || type == 'C')
		p.phase = type;
	else
		return;
	sys_point(ctx, ts, machine, pid, &p);
}

void tp_print_mark_write(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			 int64_t pid, uint32_t id, const struct msg *m)
{
	switch (id) {
	case FE_TRACING_MARK_WRITE:
		kernel_mark(ctx, ts, machine, pid, 0,
			    u64(m, MDSS_TRACE_BEGIN) != 0,
			    str(ctx, m, MDSS_TRACE_NAME), i32(m, MDSS_PID), 0);
		break;
	case FE_SDE_TRACING_MARK_WRITE:
		if (!has(m, SDE_TRACE_TYPE) && !has(m, SDE_TRACE_BEGIN)) {
			mstat(ctx, machine, "systrace_parse_failure");
			return;
		}
		kernel_mark(ctx, ts, machine, pid,
			    (char)u64(m, SDE_TRACE_TYPE),
			    u64(m, SDE_TRACE_BEGIN) != 0,
			    str(ctx, m, SDE_TRACE_NAME), i32(m, SDE_PID),
			    i32(m, SDE_VALUE));
		break;
	case FE_DPU_TRACING_MARK_WRITE:
	case FE_G2D_TRACING_MARK_WRITE:
		if (!u64(m, DPU_TYPE)) {
			mstat(ctx, machine, "systrace_parse_failure");
			return;
		}
		kernel_mark(ctx, ts, machine, pid, (char)u64(m, DPU_TYPE),
			    false, str(ctx, m, DPU_NAME), i32(m, DPU_PID),
			    i32(m, DPU_VALUE));
		break;
	case FE_MALI_TRACING_MARK_WRITE:
		if (!u64(m, MALI_TYPE)) {
			mstat(ctx, machine, "systrace_parse_failure");
			return;
		}
		kernel_mark(ctx, ts, machine, pid, (char)u64(m, MALI_TYPE),
			    false, str(ctx, m, MALI_NAME), i32(m, MALI_PID),
			    i32(m, MALI_VALUE));
		break;
	case FE_ZERO:
		kernel_mark(ctx, ts, machine, pid, (char)i32(m, ZERO_FLAG),
			    false, str(ctx, m, ZERO_NAME), i32(m, ZERO_PID),
			    i64(m, ZERO_VALUE));
		break;
	default:
		break;
	}
}
