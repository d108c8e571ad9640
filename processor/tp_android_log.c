/*
 * tp_android_log.c - Android's logcat (TracePacket.android_log): the rows
 * of __intrinsic_logs, which the logs and android_logs views show, and the
 * data source's own counts in the android_log_* stats.
 *
 * As in Perfetto, each entry has its own time: its CLOCK_REALTIME
 * timestamp, converted to trace time through the packet's machine's clock
 * snapshots when the packet is read (an entry that cannot be converted is
 * dropped, counted as a failed conversion), and pushed to the sorter on
 * its own; the row is made when the sorter hands it on.  A binary
 * (LID_EVENTS) entry's args are written after its message as
 * " name=value" pairs, a string quoted.
 *
 * Perfetto writes each entry anew for its sorter with every field set
 * (tag, message, each arg's name, an arg's value the first of int, float,
 * string it has), and parses that copy: so a tag or message not given
 * reads "" (not NULL), the args follow the message even when there is
 * none (a leading space then), and an arg without a name reads " =value".
 * The rows here are what that gives.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_android_log.h"
#include "tp_procs.h"
#include "tp_schema.h"
#include "tp_seq.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "vp_alloc.h"

/* Perfetto's bound on the text an entry's args make (its buffer, with the
 * terminating NUL): the rest is cut off. */
#define ARGS_TEXT_MAX 4096

struct tp_alog_state {
	uint8_t kind;      /* the sorter's callback for an entry */
	tp_str logcat;     /* "android_logcat", the rows' log_source */
};

static void parse_entry(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len);

void tp_alog_init(struct tp_ctx *ctx)
{
	struct tp_alog_state *s = vp_xcalloc(1, sizeof(*s));
	s->kind = tp_sort_register(ctx->sorter, parse_entry);
	s->logcat = tp_s(ctx, "android_logcat");
	ctx->alog = s;
}

void tp_alog_free(struct tp_ctx *ctx)
{
	free(ctx->alog);
	ctx->alog = NULL;
}

/* The data source's counts: set, not added, as each packet says all. */
static void parse_stats(struct tp_ctx *ctx, uint32_t machine,
			const uint8_t *p, size_t len)
{
	static const char *const names[] = {
		[ALS_NUM_TOTAL] = "android_log_num_total",
		[ALS_NUM_FAILED] = "android_log_num_failed",
		[ALS_NUM_SKIPPED] = "android_log_num_skipped",
	};
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.wt == PB_WT_VARINT &&
		    (f.num == ALS_NUM_TOTAL || f.num == ALS_NUM_FAILED ||
		     f.num == ALS_NUM_SKIPPED))
			tp_stat_set(ctx, names[f.num], machine, -1,
				    (int64_t)f.val);
}

/* One entry: its REALTIME timestamp (0 when absent, as a default value
 * reads) in trace time, pushed with the machine in front of its bytes. */
static void push_entry(struct tp_ctx *ctx, const struct tp_packet *pkt,
		       const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t realtime = 0;
	int64_t ts;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == ALE_TIMESTAMP && f.wt == PB_WT_VARINT)
			realtime = f.val;
	if (!tp_to_trace_time(ctx, pkt, BUILTIN_CLOCK_REALTIME,
			      (int64_t)realtime, &ts))
		return;
	uint8_t *buf = vp_xmalloc(4 + len);
	memcpy(buf, &pkt->machine, 4);
	memcpy(buf + 4, p, len);
	tp_sort_push(ctx->sorter, pkt->queue, ts, ctx->alog->kind, buf,
		     4 + len);
	free(buf);
}

bool tp_alog_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
		      const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g, stats = {0};
	bool have_stats = false;

	if (f->num != TP_ANDROID_LOG || f->wt != PB_WT_LEN || !ctx->alog)
		return false;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.wt != PB_WT_LEN)
			continue;
		if (g.num == ALP_EVENTS)
			push_entry(ctx, pkt, g.data, g.len);
		else if (g.num == ALP_STATS) {
			stats = g; /* the last one, as a decoder keeps it */
			have_stats = true;
		}
	}
	if (have_stats)
		parse_stats(ctx, pkt->machine, stats.data, stats.len);
	return true;
}

/* Appends to t (n used of ARGS_TEXT_MAX) what fits, as snprintf into the
 * rest of the buffer would. */
static void add_text(char *t, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void add_text(char *t, size_t *n, const char *fmt, ...)
{
	va_list ap;
	size_t room = ARGS_TEXT_MAX - *n;

	if (room <= 1)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(t + *n, room, fmt, ap);
	va_end(ap);
	if (w > 0)
		*n += (size_t)w < room ? (size_t)w : room - 1;
}

/* One arg of a binary entry: " name=value" (an absent name or value
 * empty), the value the first of int, float, string the arg has. */
static void arg_text(const uint8_t *p, size_t len, char *t, size_t *n)
{
	struct pb_reader r;
	struct pb_field f, name = {0}, str = {0};
	bool has_name = false, has_str = false, has_int = false,
	     has_float = false;
	int64_t iv = 0;
	float fv = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == ALA_NAME && f.wt == PB_WT_LEN) {
			name = f;
			has_name = true;
		} else if (f.num == ALA_STRING_VALUE && f.wt == PB_WT_LEN) {
			str = f;
			has_str = true;
		} else if (f.num == ALA_INT_VALUE && f.wt == PB_WT_VARINT) {
			iv = (int64_t)f.val;
			has_int = true;
		} else if (f.num == ALA_FLOAT_VALUE &&
			   f.wt == PB_WT_FIXED32) {
			uint32_t bits = (uint32_t)f.val;
			memcpy(&fv, &bits, sizeof(fv));
			has_float = true;
		}
	}
	add_text(t, n, " %.*s=", (int)name.len,
		 has_name ? (const char *)name.data : "");
	if (has_int)
		add_text(t, n, "%" PRId64, iv);
	else if (has_float)
		add_text(t, n, "%f", (double)fv);
	else if (has_str)
		add_text(t, n, "\"%.*s\"", (int)str.len,
			 (const char *)str.data);
}

/* The row of an entry the sorter hands on (machine, then the LogEvent). */
static void parse_entry(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len)
{
	struct tp_table *t = tp_tab(ctx, TP_T_LOGS);
	struct pb_reader r;
	struct pb_field f, tag = {0}, msg = {0};
	bool has_tag = false, has_msg = false;
	uint64_t pid = 0, tid = 0, prio = 0;
	char args[ARGS_TEXT_MAX];
	size_t n = 0;
	uint32_t machine;

	if (len < 4)
		return;
	memcpy(&machine, p, 4);
	args[0] = '\0';
	pb_reader_init(&r, p + 4, len - 4);
	while (pb_next(&r, &f)) {
		bool v = f.wt == PB_WT_VARINT, l = f.wt == PB_WT_LEN;
		if (f.num == ALE_PID && v)
			pid = f.val;
		else if (f.num == ALE_TID && v)
			tid = f.val;
		else if (f.num == ALE_PRIO && v)
			prio = f.val;
		else if (f.num == ALE_TAG && l) {
			tag = f;
			has_tag = true;
		} else if (f.num == ALE_MESSAGE && l) {
			msg = f;
			has_msg = true;
		} else if (f.num == ALE_ARGS && l)
			arg_text(f.data, f.len, args, &n);
	}
	/* Perfetto reads them as 32-bit values, pid and tid unsigned and the
	 * priority a byte; no priority is INFO. */
	prio &= 0xff;
	if (prio == 0)
		prio = ALOG_PRIO_INFO;
	uint32_t utid = tp_thread_update(ctx, machine, (uint32_t)tid,
					 (uint32_t)pid);

	uint32_t row = tp_table_add_row(t);
	tp_set_int(t, TP_LOGS_ts, row, ts);
	tp_set_int(t, TP_LOGS_utid, row, utid);
	tp_set_int(t, TP_LOGS_prio, row, (int64_t)prio);
	tp_set_str(t, TP_LOGS_log_source, row, ctx->alog->logcat);
	tp_set_str(t, TP_LOGS_tag, row,
		   tp_intern(ctx->pool, has_tag ? (const char *)tag.data : "",
			     has_tag ? tag.len : 0));
	/* the message (or ""), then the args */
	size_t mlen = has_msg ? msg.len : 0, total = mlen + n;
	char *s = vp_xmalloc(total + 1);
	if (mlen)
		memcpy(s, msg.data, mlen);
	memcpy(s + mlen, args, n);
	tp_set_str(t, TP_LOGS_msg, row, tp_intern(ctx->pool, s, total));
	free(s);
}
