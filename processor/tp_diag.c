/*
 * tp_diag.c - trace diagnostics: the __intrinsic_trace_diagnostics table.
 *
 * Perfetto's processor (v58) keeps the last TracePacket.trace_config of each
 * machine and, once the trace is loaded, runs a fixed list of rules over
 * it; each rule that finds a known-bad setting writes one row: a stable key
 * (the part users match on), a title, a description, a suggested fix and a
 * confidence in [0, 1].  The rules, in Perfetto's order (rows come out in
 * this order, a rule's rows in data source order):
 *
 *   preserve_ftrace_buffer_late_start   preserve_ftrace_buffer, tracing
 *                                       started over 5 min after boot
 *   tiny_ftrace_buffer                  0 < buffer_size_kb < 1024
 *   low_ftrace_drain_bandwidth          buffer / drain period < 5 MB/s
 *   extreme_ftrace_drain_period         drain_period_ms set, outside
 *                                       [100, 60000]
 *   syscalls_without_filter             raw_syscalls events without any
 *                                       syscall_events
 *   function_graph_requires_symbolize_ksyms, events_require_symbolize_ksyms
 *                                       kernel-address payloads without
 *                                       symbolize_ksyms
 *   discard_buffer_for_streaming        ftrace / track_event on a DISCARD
 *                                       buffer of a periodic write_into_file
 *   heapprofd_sampling_interval_too_low 0 < sampling_interval_bytes < 100 KiB
 *   display_video_not_enabled           android.display.video on a `user`
 *                                       build, no frame, no producer error
 *
 * Recorded data loss (the ftrace cpu loss stats, heapprofd's error stats)
 * raises the confidence of the rules it confirms.  The texts are ours; the
 * keys, conditions and confidences are Perfetto's.
 */
#include "tp_diag.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_clock.h"
#include "tp_ctx.h"
#include "tp_stats.h"
#include "vp_alloc.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* One machine's config (a copy: the packet's bytes do not outlive the
 * tokenizer). */
struct diag_config {
	uint32_t machine;
	uint8_t *data;
	size_t len;
};

struct tp_diag {
	struct diag_config *cfgs;
	uint32_t n, cap;
};

struct tp_diag *tp_diag_new(void)
{
	struct tp_diag *d = vp_xcalloc(1, sizeof(*d));
	return d;
}

void tp_diag_free(struct tp_diag *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; i < d->n; i++)
		free(d->cfgs[i].data);
	free(d->cfgs);
	free(d);
}

void tp_diag_set_config(struct tp_ctx *ctx, uint32_t machine,
			const uint8_t *data, size_t len)
{
	struct tp_diag *d = ctx->diag;
	if (!d)
		return;
	struct diag_config *c = NULL;
	for (uint32_t i = 0; i < d->n; i++)
		if (d->cfgs[i].machine == machine)
			c = &d->cfgs[i];
	if (!c) {
		if (d->n == d->cap) {
			d->cap = d->cap ? d->cap * 2 : 2;
			void *p = vp_xrealloc(d->cfgs, d->cap * sizeof(*d->cfgs));
			d->cfgs = p;
		}
		c = &d->cfgs[d->n++];
		c->machine = machine;
		c->data = NULL;
	}
	free(c->data);
	/* +1: malloc(0) may return NULL, and an empty config is a config */
	c->data = vp_xmalloc(len + 1);
	memcpy(c->data, data, len);
	c->len = len;
}

/* ---- the config, decoded as the rules need it -------------------------- */

/* What the rules read of one FtraceConfig.  Scalars: the last occurrence
 * wins, as protobuf says. */
struct ftrace_cfg {
	bool has_kb, has_period;
	uint32_t kb, period_ms;
	bool preserve, symbolize, function_graph;
	bool raw_syscalls;      /* raw_syscalls/sys_enter or sys_exit */
	bool syscall_filter;    /* any syscall_events */
	char ksym_event[128];   /* first event needing ksyms, "" if none */
};

/* What the rules read of one DataSourceConfig. */
struct ds_cfg {
	const uint8_t *name;
	size_t name_len;
	uint32_t target_buffer;
	bool has_ftrace;
	struct ftrace_cfg ftrace;
	bool has_heapprofd, has_interval;
	uint64_t interval;
};

static bool str_is(const uint8_t *p, size_t n, const char *s)
{
	return p && strlen(s) == n && memcmp(p, s, n) == 0;
}

/* ftrace events whose useful fields are kernel addresses, unreadable
 * without symbolize_ksyms (Perfetto's list). */
static const char *const ksym_events[] = {
	"workqueue/workqueue_execute_start",
	"sched/sched_blocked_reason",
};

static void ftrace_event(struct ftrace_cfg *fc, const struct pb_field *g)
{
	if (str_is(g->data, g->len, "raw_syscalls/sys_enter") ||
	    str_is(g->data, g->len, "raw_syscalls/sys_exit"))
		fc->raw_syscalls = true;
	if (fc->ksym_event[0])
		return;
	for (size_t i = 0; i < NELEM(ksym_events); i++)
		if (str_is(g->data, g->len, ksym_events[i]))
			snprintf(fc->ksym_event, sizeof(fc->ksym_event), "%s",
				 ksym_events[i]);
}

static void decode_ftrace(struct ftrace_cfg *fc, const uint8_t *p, size_t n)
{
	struct pb_reader r;
	struct pb_field g;
	memset(fc, 0, sizeof(*fc));
	pb_reader_init(&r, p, n);
	while (pb_next(&r, &g)) {
		bool vi = g.wt == PB_WT_VARINT, len = g.wt == PB_WT_LEN;
		if (g.num == FC_BUFFER_SIZE_KB && vi) {
			fc->has_kb = true;
			fc->kb = (uint32_t)g.val;
		} else if (g.num == FC_DRAIN_PERIOD_MS && vi) {
			fc->has_period = true;
			fc->period_ms = (uint32_t)g.val;
		} else if (g.num == FC_PRESERVE_FTRACE_BUFFER && vi) {
			fc->preserve = g.val != 0;
		} else if (g.num == FC_SYMBOLIZE_KSYMS && vi) {
			fc->symbolize = g.val != 0;
		} else if (g.num == FC_ENABLE_FUNCTION_GRAPH && vi) {
			fc->function_graph = g.val != 0;
		} else if (g.num == FC_SYSCALL_EVENTS && len) {
			fc->syscall_filter = true;
		} else if (g.num == FC_FTRACE_EVENTS && len) {
			ftrace_event(fc, &g);
		}
	}
}

static void decode_heapprofd(struct ds_cfg *ds, const uint8_t *p, size_t n)
{
	struct pb_reader r;
	struct pb_field g;
	ds->has_heapprofd = true;
	ds->has_interval = false;
	pb_reader_init(&r, p, n);
	while (pb_next(&r, &g))
		if (g.num == HPC_SAMPLING_INTERVAL_BYTES &&
		    g.wt == PB_WT_VARINT) {
			ds->has_interval = true;
			ds->interval = g.val;
		}
}

static void decode_ds(struct ds_cfg *ds, const uint8_t *p, size_t n)
{
	struct pb_reader r;
	struct pb_field g;
	memset(ds, 0, sizeof(*ds));
	pb_reader_init(&r, p, n);
	while (pb_next(&r, &g)) {
		bool vi = g.wt == PB_WT_VARINT, len = g.wt == PB_WT_LEN;
		if (g.num == DSC_NAME && len) {
			ds->name = g.data;
			ds->name_len = g.len;
		} else if (g.num == DSC_TARGET_BUFFER && vi) {
			ds->target_buffer = (uint32_t)g.val;
		} else if (g.num == DSC_FTRACE_CONFIG && len) {
			ds->has_ftrace = true;
			decode_ftrace(&ds->ftrace, g.data, g.len);
		} else if (g.num == DSC_HEAPPROFD_CONFIG && len) {
			decode_heapprofd(ds, g.data, g.len);
		}
	}
}

/* Calls fn for the config of each TraceConfig.data_sources that has one
 * (the last `config` of an entry, as a decoder reads it). */
typedef void (*ds_fn)(struct tp_ctx *ctx, uint32_t machine,
		      const struct ds_cfg *ds, void *arg);

static void for_each_ds(struct tp_ctx *ctx, const struct diag_config *c,
			ds_fn fn, void *arg)
{
	struct pb_reader r, q;
	struct pb_field g, h;
	pb_reader_init(&r, c->data, c->len);
	while (pb_next(&r, &g)) {
		if (g.num != TC_DATA_SOURCES || g.wt != PB_WT_LEN)
			continue;
		const struct pb_field *cfg = NULL;
		struct pb_field last;
		pb_reader_init(&q, g.data, g.len);
		while (pb_next(&q, &h))
			if (h.num == TCDS_CONFIG && h.wt == PB_WT_LEN) {
				last = h;
				cfg = &last;
			}
		if (!cfg)
			continue;
		struct ds_cfg ds;
		decode_ds(&ds, cfg->data, cfg->len);
		fn(ctx, c->machine, &ds, arg);
	}
}

/* ---- what the rules know besides the config ---------------------------- */

static void add_row(struct tp_ctx *ctx, const char *key, const char *title,
		    const char *desc, const char *fix, double confidence)
{
	struct tp_table *t = tp_tab(ctx, TP_T_TRACE_DIAGNOSTICS);
	uint32_t r = tp_table_add_row(t);
	tp_set_str(t, TP_TRACE_DIAGNOSTICS_key, r, tp_s(ctx, key));
	tp_set_str(t, TP_TRACE_DIAGNOSTICS_title, r, tp_s(ctx, title));
	tp_set_str(t, TP_TRACE_DIAGNOSTICS_description, r, tp_s(ctx, desc));
	tp_set_str(t, TP_TRACE_DIAGNOSTICS_remediation, r, tp_s(ctx, fix));
	tp_set_real(t, TP_TRACE_DIAGNOSTICS_confidence, r, confidence);
	/* one trace per load: trace_file row 0 */
	tp_set_int(t, TP_TRACE_DIAGNOSTICS_trace_id, r, 0);
}

/* Which stats a question is about. */
enum stat_probe { PROBE_FTRACE_LOSS, PROBE_HEAPPROFD_ERR, PROBE_VIDEO_ERR };

struct stat_query {
	enum stat_probe probe;
	uint32_t machine;
	bool found;
};

static bool prefixed(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void stat_probe_visit(void *arg, const char *name, int64_t idx,
			     uint32_t machine, int64_t value,
			     const char *severity)
{
	struct stat_query *q = arg;
	(void)idx;
	if (value <= 0 || machine != q->machine)
		return;
	bool err = strcmp(severity, "error") == 0;
	bool loss = strcmp(severity, "data_loss") == 0;
	switch (q->probe) {
	case PROBE_FTRACE_LOSS:
		if (!strcmp(name, "ftrace_cpu_has_data_loss") ||
		    !strcmp(name, "ftrace_cpu_overrun_delta") ||
		    !strcmp(name, "ftrace_cpu_commit_overrun_delta"))
			q->found = true;
		break;
	case PROBE_HEAPPROFD_ERR:
		if (err && prefixed(name, "heapprofd"))
			q->found = true;
		break;
	case PROBE_VIDEO_ERR:
		if ((err || loss) && prefixed(name, "android_video_"))
			q->found = true;
		break;
	}
}

/* A stat of the probe's kind is above 0 on this machine. */
static bool any_stat(struct tp_ctx *ctx, uint32_t machine,
		     enum stat_probe probe)
{
	struct stat_query q = { probe, machine, false };
	tp_stats_visit(ctx, stat_probe_visit, &q);
	return q.found;
}

/* When tracing started, in ns since boot: tracing_started_ns is trace time;
 * converted to BOOTTIME where the clocks allow, else taken as it is (the
 * trace clock is BOOTTIME in most traces).  false without the metadata. */
static bool started_since_boot(struct tp_ctx *ctx, uint32_t machine,
			       int64_t *out)
{
	int64_t started;
	if (!tp_meta_get_int(ctx, "tracing_started_ns", machine, &started))
		return false;
	*out = started;
	if (tp_clock_trace_clock(ctx->clocks, machine) ==
	    BUILTIN_CLOCK_BOOTTIME)
		return true;
	/* The clock module converts only into trace time: find the BOOTTIME
	 * value that lands on `started`.  Each hop is an offset, so the
	 * correction settles in a step or two (three allow for crossing a
	 * snapshot). */
	int64_t b = started, t;
	for (int i = 0; i < 3; i++) {
		if (!tp_clock_to_trace(ctx->clocks, machine,
				       BUILTIN_CLOCK_BOOTTIME, b, &t))
			return true;
		if (t == started)
			break;
		b += started - t;
	}
	*out = b;
	return true;
}

/* The build type of an Android fingerprint
 * (brand/product/device:release/id/incremental:type/tags) is `user`. */
static bool android_user_build(struct tp_ctx *ctx, uint32_t machine)
{
	const char *fp;
	if (!tp_meta_get_str(ctx, "android_build_fingerprint", machine, &fp))
		return false;
	const char *type = strrchr(fp, ':');
	if (!type)
		return false;
	type++;
	size_t n = strcspn(type, "/");
	return n == 4 && strncmp(type, "user", 4) == 0;
}

/* ---- the rules ---------------------------------------------------------- */

#define FIVE_MIN_NS (5ll * 60 * 1000 * 1000 * 1000)

static void rule_preserve_late(struct tp_ctx *ctx, uint32_t machine,
			       const struct ds_cfg *ds, void *arg)
{
	(void)arg;
	int64_t boot_ns;
	if (!ds->has_ftrace || !ds->ftrace.preserve)
		return;
	if (!started_since_boot(ctx, machine, &boot_ns) ||
	    boot_ns <= FIVE_MIN_NS)
		return;
	add_row(ctx, "preserve_ftrace_buffer_late_start",
		"preserve_ftrace_buffer without an early start",
		"preserve_ftrace_buffer keeps what the kernel buffer held before "
		"tracing began, but tracing began more than five minutes after "
		"boot: those events may be old and misleading.",
		"Use preserve_ftrace_buffer only for traces started soon after "
		"boot.",
		0.7);
}

static void rule_tiny_buffer(struct tp_ctx *ctx, uint32_t machine,
			     const struct ds_cfg *ds, void *arg)
{
	(void)arg;
	const struct ftrace_cfg *fc = &ds->ftrace;
	/* 0 asks for the default size: not a small buffer */
	if (!ds->has_ftrace || !fc->has_kb || fc->kb == 0 || fc->kb >= 1024)
		return;
	/* 0.9 up to 64 KB, falling linearly to 0.2 at 1 MB */
	double conf = 0.9;
	if (fc->kb > 64)
		conf = 0.9 - 0.7 * (double)(fc->kb - 64) / (1024 - 64);
	if (any_stat(ctx, machine, PROBE_FTRACE_LOSS))
		conf = 0.9;
	char desc[256];
	snprintf(desc, sizeof(desc),
		 "The ftrace buffer_size_kb is %u KB, under 1 MB: the kernel "
		 "buffer can fill up and lose events when the system is busy.",
		 fc->kb);
	add_row(ctx, "tiny_ftrace_buffer", "Small ftrace buffer", desc,
		"Leave buffer_size_kb unset: the default suits most traces.",
		conf);
}

static void rule_drain_bandwidth(struct tp_ctx *ctx, uint32_t machine,
				 const struct ds_cfg *ds, void *arg)
{
	(void)arg;
	const struct ftrace_cfg *fc = &ds->ftrace;
	if (!ds->has_ftrace || !fc->has_kb || !fc->has_period || fc->kb == 0 ||
	    fc->period_ms == 0)
		return;
	/* what the reader can take out of the buffer, in MB/s */
	double mbps = ((double)fc->kb / 1024.0) / ((double)fc->period_ms / 1000.0);
	if (mbps >= 5.0)
		return;
	/* 0 at 5 MB/s, rising linearly to 0.9 at 1 MB/s and below */
	double conf = mbps <= 1.0 ? 0.9 : 0.9 * (5.0 - mbps) / 4.0;
	if (any_stat(ctx, machine, PROBE_FTRACE_LOSS))
		conf = 0.9;
	char desc[256];
	snprintf(desc, sizeof(desc),
		 "A buffer of %u KB read every %u ms drains under 5 MB/s: a "
		 "burst of events can fill the buffer between two reads.",
		 fc->kb, fc->period_ms);
	add_row(ctx, "low_ftrace_drain_bandwidth", "Slow ftrace draining", desc,
		"Leave buffer_size_kb and drain_period_ms unset, or make the "
		"buffer bigger or the period shorter (above 5 MB/s).",
		conf);
}

static void rule_drain_period(struct tp_ctx *ctx, uint32_t machine,
			      const struct ds_cfg *ds, void *arg)
{
	(void)machine;
	(void)arg;
	const struct ftrace_cfg *fc = &ds->ftrace;
	if (!ds->has_ftrace || !fc->has_period ||
	    (fc->period_ms >= 100 && fc->period_ms <= 60000))
		return;
	char desc[256];
	snprintf(desc, sizeof(desc),
		 "The ftrace drain_period_ms is %u, outside 100 to 60000 ms: "
		 "either the reader wakes the CPUs too often or the buffer "
		 "overruns between reads.",
		 fc->period_ms);
	add_row(ctx, "extreme_ftrace_drain_period",
		"Unreasonable ftrace drain period", desc,
		"Leave drain_period_ms unset, or keep it within 100 to 60000 "
		"ms.",
		0.6);
}

static void rule_syscalls(struct tp_ctx *ctx, uint32_t machine,
			  const struct ds_cfg *ds, void *arg)
{
	(void)arg;
	if (!ds->has_ftrace || !ds->ftrace.raw_syscalls ||
	    ds->ftrace.syscall_filter)
		return;
	double conf = any_stat(ctx, machine, PROBE_FTRACE_LOSS) ? 0.9 : 0.3;
	add_row(ctx, "syscalls_without_filter", "Syscalls traced unfiltered",
		"raw_syscalls/sys_enter or sys_exit is on with no "
		"syscall_events: every system call is recorded, which makes "
		"traces large and costly.",
		"List the system calls you need in syscall_events.", conf);
}

static void rule_ksyms(struct tp_ctx *ctx, uint32_t machine,
		       const struct ds_cfg *ds, void *arg)
{
	(void)machine;
	(void)arg;
	const struct ftrace_cfg *fc = &ds->ftrace;
	if (!ds->has_ftrace || fc->symbolize)
		return;
	if (fc->function_graph)
		add_row(ctx, "function_graph_requires_symbolize_ksyms",
			"Function graph without symbolize_ksyms",
			"enable_function_graph records kernel addresses, and "
			"without symbolize_ksyms they can never be turned into "
			"function names.",
			"Set symbolize_ksyms: true in the ftrace config.", 1.0);
	if (!fc->ksym_event[0])
		return;
	char desc[256];
	snprintf(desc, sizeof(desc),
		 "The ftrace event %s records kernel addresses; without "
		 "symbolize_ksyms they cannot be named later.",
		 fc->ksym_event);
	add_row(ctx, "events_require_symbolize_ksyms",
		"Events without symbolize_ksyms", desc,
		"Set symbolize_ksyms: true in the ftrace config.", 0.6);
}

/* The TraceConfig's streaming settings and which buffers discard. */
struct streaming {
	bool write_into_file;
	uint32_t period_ms;
	uint32_t nbuffers;
	uint64_t discard[4]; /* bit i: buffers[i] is DISCARD (first 256) */
};

static void decode_streaming(const struct diag_config *c, struct streaming *s)
{
	struct pb_reader r, q;
	struct pb_field g, h;
	memset(s, 0, sizeof(*s));
	pb_reader_init(&r, c->data, c->len);
	while (pb_next(&r, &g)) {
		if (g.num == TC_WRITE_INTO_FILE && g.wt == PB_WT_VARINT) {
			s->write_into_file = g.val != 0;
		} else if (g.num == TC_FILE_WRITE_PERIOD_MS &&
			   g.wt == PB_WT_VARINT) {
			s->period_ms = (uint32_t)g.val;
		} else if (g.num == TC_BUFFERS && g.wt == PB_WT_LEN) {
			uint64_t fill = 0;
			pb_reader_init(&q, g.data, g.len);
			while (pb_next(&q, &h))
				if (h.num == BC_FILL_POLICY &&
				    h.wt == PB_WT_VARINT)
					fill = h.val;
			uint32_t i = s->nbuffers++;
			if (fill == FILL_DISCARD && i < 256)
				s->discard[i / 64] |= 1ull << (i % 64);
		}
	}
}

static void rule_discard_ds(struct tp_ctx *ctx, uint32_t machine,
			    const struct ds_cfg *ds, void *arg)
{
	(void)machine;
	const struct streaming *s = arg;
	const char *name;
	if (str_is(ds->name, ds->name_len, "linux.ftrace"))
		name = "linux.ftrace";
	else if (str_is(ds->name, ds->name_len, "track_event"))
		name = "track_event";
	else
		return;
	uint32_t b = ds->target_buffer;
	if (b >= s->nbuffers || b >= 256 ||
	    !(s->discard[b / 64] >> (b % 64) & 1))
		return;
	char desc[256];
	snprintf(desc, sizeof(desc),
		 "The data source \"%s\" writes into a DISCARD buffer of a "
		 "trace streamed into a file: recording stops the first time "
		 "the buffer fills, cutting long traces short.",
		 name);
	add_row(ctx, "discard_buffer_for_streaming",
		"DISCARD buffer in a streaming trace", desc,
		"Give the buffers of ftrace and track_event the default "
		"RING_BUFFER fill_policy in long or streaming traces.",
		0.8);
}

/* A period of 7 days or more is Traceur's way of asking for one write at
 * the end: a ring buffer in effect, so not streaming.  Unset means the
 * default period, which streams. */
#define ONE_SHOT_WRITE_PERIOD_MS 604800000u

static void rule_discard_streaming(struct tp_ctx *ctx,
				   const struct diag_config *c)
{
	struct streaming s;
	decode_streaming(c, &s);
	if (!s.write_into_file || s.period_ms >= ONE_SHOT_WRITE_PERIOD_MS)
		return;
	for_each_ds(ctx, c, rule_discard_ds, &s);
}

static void rule_heapprofd(struct tp_ctx *ctx, uint32_t machine,
			   const struct ds_cfg *ds, void *arg)
{
	(void)arg;
	if (!ds->has_heapprofd || !ds->has_interval || ds->interval == 0 ||
	    ds->interval >= 100 * 1024)
		return;
	double conf = any_stat(ctx, machine, PROBE_HEAPPROFD_ERR) ? 0.9 : 0.3;
	char desc[256];
	snprintf(desc, sizeof(desc),
		 "heapprofd samples every %llu bytes, under 100 KB: this costs "
		 "more and is seldom more accurate.",
		 (unsigned long long)ds->interval);
	add_row(ctx, "heapprofd_sampling_interval_too_low",
		"heapprofd samples too often", desc,
		"Set sampling_interval_bytes to 100 KB or more.", conf);
}

static void has_video_ds(struct tp_ctx *ctx, uint32_t machine,
			 const struct ds_cfg *ds, void *arg)
{
	(void)ctx;
	(void)machine;
	if (str_is(ds->name, ds->name_len, "android.display.video"))
		*(bool *)arg = true;
}

static void rule_display_video(struct tp_ctx *ctx,
			       const struct diag_config *c)
{
	bool video = false;
	for_each_ds(ctx, c, has_video_ds, &video);
	/* userdebug and eng builds record video without the property.
	 * vperfetto_tp does not import video frames, so a trace that has
	 * some is told apart only by its producer's error stats. */
	if (!video || !android_user_build(ctx, c->machine) ||
	    any_stat(ctx, c->machine, PROBE_VIDEO_ERR))
		return;
	add_row(ctx, "display_video_not_enabled", "No display video recorded",
		"android.display.video was asked for, yet no frame was "
		"recorded and the producer reported no error. A user build "
		"records display video only while the system property "
		"debug.tracing_video_allowed is true, and a reboot clears it.",
		"Run `adb shell setprop debug.tracing_video_allowed true` "
		"before recording (again after each reboot).",
		0.7);
}

static void run_rules(struct tp_ctx *ctx, const struct diag_config *c)
{
	for_each_ds(ctx, c, rule_preserve_late, NULL);
	for_each_ds(ctx, c, rule_tiny_buffer, NULL);
	for_each_ds(ctx, c, rule_drain_bandwidth, NULL);
	for_each_ds(ctx, c, rule_drain_period, NULL);
	for_each_ds(ctx, c, rule_syscalls, NULL);
	for_each_ds(ctx, c, rule_ksyms, NULL);
	rule_discard_streaming(ctx, c);
	for_each_ds(ctx, c, rule_heapprofd, NULL);
	rule_display_video(ctx, c);
}

void tp_diag_finish(struct tp_ctx *ctx)
{
	struct tp_diag *d = ctx->diag;
	if (!d)
		return;
	/* Perfetto skips an empty config (it has nothing to check) */
	for (uint32_t i = 0; i < d->n; i++)
		if (d->cfgs[i].len)
			run_rules(ctx, &d->cfgs[i]);
}
