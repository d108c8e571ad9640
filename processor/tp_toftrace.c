/*
 * tp_toftrace.c - the SQL function to_ftrace(id): an ftrace_event row as
 * the line the kernel's trace file would show for it, as Perfetto's
 * to_ftrace gives it.
 *
 * A line is the task (comm-tid, padded as ftrace pads it), its process's
 * pid, the cpu, the time in seconds with microseconds, the event's name
 * and its fields.  Fields are " name=value" in the order the event had
 * them, except for the events ftrace prints in a format of their own
 * (sched_switch, print, sched_blocked_reason, irqs, workqueues ...), whose
 * formats are reproduced here.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_process.h"
#include "tp_toftrace.h"
#include "vp_alloc.h"

/* ---- the line being written ------------------------------------------- */

struct line {
	char *buf;
	size_t len, cap;
};

static void put(struct line *l, const char *s, size_t n)
{
	if (l->len + n + 1 > l->cap) {
		size_t cap = l->cap ? l->cap : 256;
		while (cap < l->len + n + 1)
			cap *= 2;
		char *p = vp_xrealloc(l->buf, cap);
		l->buf = p;
		l->cap = cap;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
	l->buf[l->len] = 0;
}

static void puts_(struct line *l, const char *s)
{
	put(l, s, strlen(s));
}

static void putf(struct line *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void putf(struct line *l, const char *fmt, ...)
{
	char buf[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n > 0)
		put(l, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* ---- one event's args ------------------------------------------------- */

struct event {
	struct tp_ctx *ctx;
	struct tp_args_builder args; /* the row's arg set, in order */
	uint32_t machine;
	struct line *out;
};

static const struct tp_arg *arg(const struct event *e, const char *key)
{
	for (size_t i = 0; i < e->args.n; i++) {
		const char *k = tp_str_get(e->ctx->pool, e->args.v[i].key);
		if (k && !strcmp(k, key))
			return &e->args.v[i];
	}
	return NULL;
}

/* A value as ftrace prints it by default. */
static void put_value(const struct event *e, const struct tp_arg *a)
{
	const char *s;

	switch (a->type) {
	case TP_ARG_INT:
		putf(e->out, "%" PRId64, a->i);
		break;
	case TP_ARG_UINT:
	case TP_ARG_POINTER:
		putf(e->out, "%" PRIu64, (uint64_t)a->i);
		break;
	case TP_ARG_REAL:
		putf(e->out, "%.16g", a->d);
		break;
	case TP_ARG_BOOL:
		puts_(e->out, a->i ? "true" : "false");
		break;
	case TP_ARG_STRING:
	case TP_ARG_JSON:
		s = tp_str_get(e->ctx->pool, a->s);
		puts_(e->out, s ? s : "");
		break;
	case TP_ARG_NULL:
		puts_(e->out, "[NULL]");
		break;
	}
}

/* A kernel function: its symbol when the trace had it, else its address
 * in hex. */
static void put_kernel_fn(const struct event *e, const struct tp_arg *a)
{
	if (a->type == TP_ARG_UINT || a->type == TP_ARG_INT)
		putf(e->out, "%" PRIx64, (uint64_t)a->i);
	else
		put_value(e, a);
}

/* The gfp_t flags of an allocation.  Only "no flags" is named here; other
 * values are shown in hex. */
static void put_gfp(const struct event *e, const struct tp_arg *a)
{
	if (a->i == 0)
		puts_(e->out, "GFP_NOWAIT");
	else
		putf(e->out, "0x%" PRIx64, (uint64_t)a->i);
}

typedef void (*writer_fn)(const struct event *, const struct tp_arg *);

/* " name=value" for field `field` if the event has it (name defaults to
 * the field's). */
static void field_as(const struct event *e, const char *field,
		     const char *name, writer_fn w)
{
	const struct tp_arg *a = arg(e, field);
	if (!a)
		return;
	putf(e->out, " %s=", name ? name : field);
	if (!strcmp(name ? name : field, "gfp_flags"))
		put_gfp(e, a);
	else
		(w ? w : put_value)(e, a);
}

static void field(const struct event *e, const char *name)
{
	field_as(e, name, NULL, NULL);
}

/* The value of field `field` alone. */
static void value(const struct event *e, const char *field, writer_fn w)
{
	const struct tp_arg *a = arg(e, field);
	if (a)
		(w ? w : put_value)(e, a);
}

static void put_prev_state(const struct event *e, const struct tp_arg *a)
{
	char buf[TP_TASK_STATE_MAX];
	size_t n = tp_task_state_text(e->ctx, e->machine, a->i, '|', buf);
	if (n)
		put(e->out, buf, n);
	else
		puts_(e->out, "?");
}

static void put_cpu3(const struct event *e, const struct tp_arg *a)
{
	putf(e->out, "%03" PRId64, a->i);
}

static void put_hex(const struct event *e, const struct tp_arg *a)
{
	putf(e->out, "%" PRIx64, (uint64_t)a->i);
}

static void put_irq_ret(const struct event *e, const struct tp_arg *a)
{
	puts_(e->out, a->i ? "handled" : "unhandled");
}

static void put_softirq_action(const struct event *e, const struct tp_arg *a)
{
	/* The kernel's softirq_to_name. */
	static const char *const names[] = {
		"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "BLOCK_IOPOLL",
		"TASKLET", "SCHED", "HRTIMER", "RCU",
	};
	if ((uint64_t)a->i < sizeof names / sizeof names[0])
		puts_(e->out, names[a->i]);
	else
		putf(e->out, "%" PRIu64, (uint64_t)a->i);
}

static void put_begin_end(const struct event *e, const struct tp_arg *a)
{
	puts_(e->out, a->i ? "B" : "E");
}

static void put_char(const struct event *e, const struct tp_arg *a)
{
	char c = (char)a->i;
	put(e->out, &c, 1);
}

/* print: the buffer, without its trailing newline. */
static void put_buf(const struct event *e, const struct tp_arg *a)
{
	const char *s = tp_str_get(e->ctx->pool, a->s);
	size_t n = s ? strlen(s) : 0;
	if (n && s[n - 1] == '\n')
		n--;
	put(e->out, s, n);
}

static void put_u32(const struct event *e, const struct tp_arg *a)
{
	putf(e->out, "%" PRIu32, (uint32_t)a->i);
}

static void put_hex3(const struct event *e, const struct tp_arg *a)
{
	putf(e->out, "%03" PRIx64, (uint64_t)a->i);
}

static void put_hex4(const struct event *e, const struct tp_arg *a)
{
	putf(e->out, "%04" PRIx64, (uint64_t)a->i);
}

/* An i2c message's bytes, " [0a-1b-...]", at most 64 as the kernel's
 * printf prints them. */
static void put_i2c_buf(const struct event *e, const struct tp_arg *a)
{
	const char *s = tp_str_get(e->ctx->pool, a->s);
	size_t n = s ? tp_str_len(e->ctx->pool, a->s) : 0;

	puts_(e->out, " [");
	for (size_t i = 0; i < n && i < 64; i++)
		putf(e->out, i ? "-%02x" : "%02x", (unsigned char)s[i]);
	puts_(e->out, "]");
}

/* i2c-ADAPTER #MSG a=ADDR f=FLAGS l=LEN of the i2c message events. */
static void i2c_msg(const struct event *e)
{
	puts_(e->out, " i2c-");
	value(e, "adapter_nr", NULL);
	puts_(e->out, " #");
	value(e, "msg_nr", NULL);
	field_as(e, "addr", "a", put_hex3);
	field_as(e, "flags", "f", put_hex4);
	field_as(e, "len", "l", NULL);
}

/* type|pid|name|value of the *_tracing_mark_write events. */
static void mark_write(const struct event *e, const char *type,
		       const char *name)
{
	value(e, type, put_char);
	puts_(e->out, "|");
	value(e, "pid", NULL);
	puts_(e->out, "|");
	value(e, name, NULL);
	puts_(e->out, "|");
	value(e, "value", NULL);
}

/* Events ftrace prints in a format of their own; false for the others. */
static bool special(const struct event *e, const char *name)
{
	struct line *l = e->out;

	if (!strcmp(name, "sched_switch")) {
		field(e, "prev_comm");
		field(e, "prev_pid");
		field(e, "prev_prio");
		field_as(e, "prev_state", NULL, put_prev_state);
		puts_(l, " ==>");
		field(e, "next_comm");
		field(e, "next_pid");
		field(e, "next_prio");
	} else if (!strcmp(name, "sched_wakeup")) {
		field(e, "comm");
		field(e, "pid");
		field(e, "prio");
		field_as(e, "target_cpu", NULL, put_cpu3);
	} else if (!strcmp(name, "clock_set_rate")) {
		puts_(l, " ");
		value(e, "name", NULL);
		field(e, "state");
		field(e, "cpu_id");
	} else if (!strcmp(name, "clock_enable") ||
		   !strcmp(name, "clock_disable")) {
		value(e, "name", NULL);
		field(e, "state");
		field(e, "cpu_id");
	} else if (!strcmp(name, "print")) {
		puts_(l, " ");
		value(e, "buf", put_buf);
	} else if (!strcmp(name, "sched_blocked_reason")) {
		field(e, "pid");
		field_as(e, "io_wait", "iowait", NULL);
		field_as(e, "caller", NULL, put_kernel_fn);
	} else if (!strcmp(name, "workqueue_activate_work") ||
		   !strcmp(name, "workqueue_execute_end")) {
		puts_(l, " work struct ");
		value(e, "work", put_hex);
	} else if (!strcmp(name, "workqueue_execute_start")) {
		puts_(l, " work struct ");
		value(e, "work", put_hex);
		puts_(l, ": function ");
		value(e, "function", put_kernel_fn);
	} else if (!strcmp(name, "workqueue_queue_work")) {
		puts_(l, " work struct=");
		value(e, "work", put_hex);
		field_as(e, "function", NULL, put_kernel_fn);
		field_as(e, "workqueue", NULL, put_hex);
		value(e, "req_cpu", NULL);
		value(e, "cpu", NULL);
	} else if (!strcmp(name, "irq_handler_entry")) {
		field(e, "irq");
		field(e, "name");
	} else if (!strcmp(name, "irq_handler_exit")) {
		field(e, "irq");
		puts_(l, " ret=");
		value(e, "ret", put_irq_ret);
	} else if (!strcmp(name, "softirq_entry") ||
		   !strcmp(name, "softirq_exit")) {
		field(e, "vec");
		puts_(l, " [action=");
		value(e, "vec", put_softirq_action);
		puts_(l, "]");
	} else if (!strcmp(name, "tracing_mark_write")) {
		value(e, "trace_begin", put_begin_end);
		puts_(l, "|");
		value(e, "pid", NULL);
		puts_(l, "|");
		value(e, "trace_name", NULL);
	} else if (!strcmp(name, "dpu_tracing_mark_write") ||
		   !strcmp(name, "g2d_tracing_mark_write")) {
		mark_write(e, "type", "name");
	} else if (!strcmp(name, "cgroup_attach_task")) {
		field(e, "dst_root");
		field(e, "dst_id");
		field_as(e, "cname", "cgroup", NULL);
		field(e, "dst_level");
		field(e, "dst_path");
		field(e, "pid");
		field(e, "comm");
	} else if (!strcmp(name, "hrtimer_expire_entry")) {
		field_as(e, "function", NULL, put_kernel_fn);
	} else if (!strcmp(name, "binder_transaction")) {
		puts_(l, " transaction=");
		value(e, "debug_id", put_u32);
		puts_(l, " dest_node=");
		value(e, "target_node", put_u32);
		puts_(l, " dest_proc=");
		value(e, "to_proc", NULL);
		puts_(l, " dest_thread=");
		value(e, "to_thread", NULL);
		puts_(l, " reply=");
		value(e, "reply", NULL);
		puts_(l, " flags=0x");
		value(e, "flags", put_hex);
		puts_(l, " code=0x");
		value(e, "code", put_hex);
	} else if (!strcmp(name, "binder_transaction_received")) {
		puts_(l, " transaction=");
		value(e, "debug_id", put_u32);
	} else if (!strcmp(name, "i2c_read")) {
		i2c_msg(e);
	} else if (!strcmp(name, "i2c_write") || !strcmp(name, "i2c_reply")) {
		i2c_msg(e);
		value(e, "buf", put_i2c_buf);
	} else if (!strcmp(name, "i2c_result")) {
		puts_(l, " i2c-");
		value(e, "adapter_nr", NULL);
		field_as(e, "nr_msgs", "n", NULL);
		field_as(e, "ret", "ret", NULL);
	} else {
		return false;
	}
	return true;
}

/* ---- the line --------------------------------------------------------- */

/* "          comm-tid   (  pid) [cpu] .... secs.micros:" */
static void prefix(struct tp_ctx *ctx, uint32_t row, struct line *l)
{
	struct tp_table *ft = tp_tab(ctx, TP_T_FTRACE_EVENT);
	struct tp_table *tt = tp_tab(ctx, TP_T_THREAD);
	struct tp_table *pt = tp_tab(ctx, TP_T_PROCESS);
	int64_t ts = tp_get_int(ft, TP_FTRACE_EVENT_ts, row);
	uint32_t utid = (uint32_t)tp_get_int(ft, TP_FTRACE_EVENT_utid, row);
	int64_t tid = 0, tgid = 0;
	const char *name = NULL;
	char tmp[32];

	if (utid < tt->nrows) {
		tid = tp_get_int(tt, TP_THREAD_tid, utid);
		name = tp_str_get(ctx->pool, tp_get_str(tt, TP_THREAD_name, utid));
		if (!tp_is_null(tt, TP_THREAD_upid, utid))
			tgid = tp_get_int(pt, TP_PROCESS_pid,
					  (uint32_t)tp_get_int(tt, TP_THREAD_upid,
							       utid));
	}
	if (tid == 0)
		name = "<idle>";
	else if (!name || !*name)
		name = "<unknown>";
	for (size_t n = strlen(name); n < 16; n++)
		puts_(l, " ");
	/* A '-' in the name would split it from the tid. */
	for (const char *c = name; *c; c++)
		put(l, *c == '-' ? "_" : c, 1);
	int n = snprintf(tmp, sizeof tmp, "-%" PRId64, tid);
	puts_(l, tmp);
	for (; n - 1 < 5; n++)
		puts_(l, " ");
	if (tgid == 0)
		puts_(l, " (-----)");
	else
		putf(l, " (%5" PRId64 ")", tgid);
	putf(l, " [%03" PRId64 "] .... ",
	     tp_is_null(ft, TP_FTRACE_EVENT_cpu, row)
		     ? 0
		     : tp_get_int(ft, TP_FTRACE_EVENT_cpu, row));
	int64_t secs = ts / 1000000000;
	putf(l, "%" PRId64 ".%06" PRId64 ":", secs,
	     (ts - secs * 1000000000) / 1000);
}

/* The line of ftrace_event row `row`; false when it has none (not an
 * ftrace event, or no such row). */
static bool serialize(struct tp_ctx *ctx, uint32_t row, struct line *l,
		      struct tp_args_builder *args)
{
	struct tp_table *ft = tp_tab(ctx, TP_T_FTRACE_EVENT);

	if (row >= ft->nrows)
		return false;
	const char *name =
		tp_str_get(ctx->pool, tp_get_str(ft, TP_FTRACE_EVENT_name, row));
	if (!name || !strncmp(name, "chrome_event.", 13) ||
	    !strncmp(name, "track_event.", 12))
		return false;
	l->len = 0;
	prefix(ctx, row, l);
	puts_(l, " ");
	if (!strcmp(name, "print") || !strcmp(name, "g2d_tracing_mark_write") ||
	    !strcmp(name, "dpu_tracing_mark_write"))
		puts_(l, "tracing_mark_write");
	else
		puts_(l, name);
	puts_(l, ":");

	struct event e = { .ctx = ctx, .out = l };
	e.machine = (uint32_t)tp_get_int(ft, TP_FTRACE_EVENT_machine_id, row);
	tp_args_builder_reset(args);
	if (!tp_is_null(ft, TP_FTRACE_EVENT_arg_set_id, row))
		tp_args_load(ctx, tp_get_int(ft, TP_FTRACE_EVENT_arg_set_id, row),
			     args);
	e.args = *args;
	if (!e.args.n || special(&e, name))
		return true;
	for (size_t i = 0; i < e.args.n; i++) {
		const struct tp_arg *a = &e.args.v[i];
		const char *k = tp_str_get(ctx->pool, a->key);
		putf(l, " %s=", k ? k : "");
		if (k && !strcmp(k, "gfp_flags"))
			put_gfp(&e, a);
		else
			put_value(&e, a);
	}
	return true;
}

/* ---- SQL -------------------------------------------------------------- */

struct toftrace {
	struct tp_ctx *ctx;
	struct line line;
	struct tp_args_builder args;
};

static void toftrace_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	struct toftrace *t = sqlite3_user_data(fn);
	char msg[64];

	(void)argc;
	if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER) {
		sqlite3_result_error(fn, "Usage: to_ftrace(id)", -1);
		return;
	}
	sqlite3_int64 id = sqlite3_value_int64(argv[0]);
	if (id < 0 || id > UINT32_MAX ||
	    !serialize(t->ctx, (uint32_t)id, &t->line, &t->args)) {
		snprintf(msg, sizeof msg, "to_ftrace: Cannot serialize row id %lld",
			 (long long)id);
		sqlite3_result_error(fn, msg, -1);
		return;
	}
	sqlite3_result_text(fn, t->line.buf, (int)t->line.len,
			    SQLITE_TRANSIENT);
}

static void toftrace_free(void *p)
{
	struct toftrace *t = p;
	free(t->line.buf);
	tp_args_builder_free(&t->args);
	free(t);
}

int tp_toftrace_register(struct sqlite3 *db, struct tp_ctx *ctx)
{
	struct toftrace *t = vp_xcalloc(1, sizeof *t);

	t->ctx = ctx;
	tp_args_builder_init(&t->args);
	return sqlite3_create_function_v2(db, "to_ftrace", 1, SQLITE_UTF8, t,
					  toftrace_fn, NULL, NULL,
					  toftrace_free);
}
