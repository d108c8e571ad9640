/*
 * tp_metafn.c - SQL functions over the metadata and clock_snapshot
 * tables, as Perfetto's trace processor has them:
 *
 *   extract_metadata(name)                        the first row named name
 *   extract_metadata_for_machine(machine, name)   ... of that machine
 *   extract_metadata_for_trace(trace, name)       ... of that trace
 *   extract_exact_metadata(machine, trace, name)  ... of both
 *     each gives the row's str_value, else its int_value, else NULL;
 *   to_realtime(ts), to_monotonic(ts)   trace time in REALTIME / MONOTONIC
 *   abs_time_str(ts)                    to_realtime as ISO 8601 (UTC)
 *   to_timecode(ts)                     "HH:MM:SS mmm uuu nnn"
 *
 * The clock conversions read the clock snapshots (of every machine) of the
 * target clock: a timestamp before the first takes the first's value; one
 * between two takes the earlier's value plus the time since it, but never
 * more than the later's (the clock need not tick as the trace clock does);
 * one past the last, the last's value plus the time since it.  NULL when
 * the trace has no snapshot of that clock.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "tp_ctx.h"
#include "tp_metafn.h"
#include "vp_alloc.h"

/* ---- metadata --------------------------------------------------------- */

struct meta_fn {
	struct tp_ctx *ctx;
	bool by_machine, by_trace;
};

static bool value_is(const struct tp_table *t, unsigned col, uint32_t row,
		     sqlite3_value *v)
{
	return !tp_is_null(t, col, row) &&
	       tp_get_int(t, col, row) == sqlite3_value_int64(v);
}

static void meta_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	const struct meta_fn *m = sqlite3_user_data(fn);
	struct tp_table *t = tp_tab(m->ctx, TP_T_METADATA);

	for (int i = 0; i < argc; i++)
		if (sqlite3_value_type(argv[i]) == SQLITE_NULL)
			return;
	const char *name = (const char *)sqlite3_value_text(argv[argc - 1]);
	if (!name)
		return;
	for (uint32_t r = 0; r < t->nrows; r++) {
		const char *n = tp_str_get(m->ctx->pool,
					   tp_get_str(t, TP_METADATA_name, r));
		if (!n || strcmp(n, name))
			continue;
		if (m->by_machine &&
		    !value_is(t, TP_METADATA_machine_id, r, argv[0]))
			continue;
		if (m->by_trace &&
		    !value_is(t, TP_METADATA_trace_id, r,
			      argv[m->by_machine ? 1 : 0]))
			continue;
		if (!tp_is_null(t, TP_METADATA_str_value, r))
			sqlite3_result_text(
				fn,
				tp_str_get(m->ctx->pool,
					   tp_get_str(t, TP_METADATA_str_value,
						      r)),
				-1, SQLITE_TRANSIENT);
		else if (!tp_is_null(t, TP_METADATA_int_value, r))
			sqlite3_result_int64(
				fn, tp_get_int(t, TP_METADATA_int_value, r));
		return;
	}
}

/* ---- clocks ----------------------------------------------------------- */

/* BuiltinClock ids of the clock_snapshot rows read. */
enum { SNAP_REALTIME = 1, SNAP_MONOTONIC = 3 };

struct point {
	int64_t ts, value;
};

/* A clock's snapshots, by trace time (the first of equal times kept). */
struct timeline {
	struct point *v;
	size_t n;
	bool built;
};

struct clock_fns {
	struct tp_ctx *ctx;
	struct timeline real, mono;
};

static int point_cmp(const void *a, const void *b)
{
	const struct point *x = a, *y = b;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static struct timeline *timeline(struct clock_fns *c, int clock)
{
	struct timeline *tl = clock == SNAP_REALTIME ? &c->real : &c->mono;
	struct tp_table *t = tp_tab(c->ctx, TP_T_CLOCK_SNAPSHOT);

	if (tl->built)
		return tl;
	tl->built = true;
	tl->v = vp_xcalloc(t->nrows ? t->nrows : 1, sizeof *tl->v);
	for (uint32_t r = 0; r < t->nrows; r++) {
		if (tp_get_int(t, TP_CLOCK_SNAPSHOT_clock_id, r) != clock)
			continue;
		tl->v[tl->n++] = (struct point){
			tp_get_int(t, TP_CLOCK_SNAPSHOT_ts, r),
			tp_get_int(t, TP_CLOCK_SNAPSHOT_clock_value, r),
		};
	}
	/* By time, rows of equal times in table order (an insertion sort:
	 * stable, and snapshots come mostly in order), then the first of
	 * each time kept, as inserting into a map does. */
	for (size_t i = 1; i < tl->n; i++) {
		struct point p = tl->v[i];
		size_t j = i;
		while (j > 0 && point_cmp(&tl->v[j - 1], &p) > 0) {
			tl->v[j] = tl->v[j - 1];
			j--;
		}
		tl->v[j] = p;
	}
	size_t k = 0;
	for (size_t i = 0; i < tl->n; i++)
		if (!k || tl->v[k - 1].ts != tl->v[i].ts)
			tl->v[k++] = tl->v[i];
	tl->n = k;
	return tl;
}

static bool from_trace_time(struct clock_fns *c, int clock, int64_t ts,
			    int64_t *out)
{
	const struct timeline *tl = timeline(c, clock);
	size_t lo = 0, hi = tl->n;

	if (!tl->n)
		return false;
	while (lo < hi) { /* the first snapshot at or after ts */
		size_t mid = lo + (hi - lo) / 2;
		if (tl->v[mid].ts < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == tl->n) {
		*out = tl->v[lo - 1].value + ts - tl->v[lo - 1].ts;
	} else if (lo == 0 || tl->v[lo].ts == ts) {
		*out = tl->v[lo].value;
	} else {
		int64_t v = tl->v[lo - 1].value + ts - tl->v[lo - 1].ts;
		*out = v < tl->v[lo].value ? v : tl->v[lo].value;
	}
	return true;
}

/* The argument as a timestamp; false (with the result set: NULL, or an
 * error for a non-integer) when there is none. */
static bool ts_arg(sqlite3_context *fn, sqlite3_value *v, const char *name,
		   int64_t *ts)
{
	char msg[96];

	if (sqlite3_value_type(v) == SQLITE_NULL)
		return false;
	if (sqlite3_value_type(v) != SQLITE_INTEGER) {
		snprintf(msg, sizeof msg,
			 "%s: first argument should be timestamp", name);
		sqlite3_result_error(fn, msg, -1);
		return false;
	}
	*ts = sqlite3_value_int64(v);
	return true;
}

static void to_realtime_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	int64_t ts, v;

	(void)argc;
	if (ts_arg(fn, argv[0], "TO_REALTIME", &ts) &&
	    from_trace_time(sqlite3_user_data(fn), SNAP_REALTIME, ts, &v))
		sqlite3_result_int64(fn, v);
}

static void to_monotonic_fn(sqlite3_context *fn, int argc,
			    sqlite3_value **argv)
{
	int64_t ts, v;

	(void)argc;
	if (ts_arg(fn, argv[0], "TO_MONOTONIC", &ts) &&
	    from_trace_time(sqlite3_user_data(fn), SNAP_MONOTONIC, ts, &v))
		sqlite3_result_int64(fn, v);
}

static void abs_time_str_fn(sqlite3_context *fn, int argc,
			    sqlite3_value **argv)
{
	int64_t ts, v;
	char buf[64];
	struct tm tm;

	(void)argc;
	if (!ts_arg(fn, argv[0], "ABS_TIME_STR", &ts) ||
	    !from_trace_time(sqlite3_user_data(fn), SNAP_REALTIME, ts, &v))
		return;
	time_t s = (time_t)(v / 1000000000);
	if (!gmtime_r(&s, &tm))
		return;
	snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09" PRId64,
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, v % 1000000000);
	sqlite3_result_text(fn, buf, -1, SQLITE_TRANSIENT);
}

static void to_timecode_fn(sqlite3_context *fn, int argc,
			   sqlite3_value **argv)
{
	int64_t ns;
	char buf[64];

	(void)argc;
	if (!ts_arg(fn, argv[0], "TO_TIMECODE", &ns))
		return;
	int64_t us = ns / 1000, ms = us / 1000, ss = ms / 1000;
	int64_t mm = ss / 60, hh = mm / 60;
	snprintf(buf, sizeof buf,
		 "%02" PRId64 ":%02" PRId64 ":%02" PRId64 " %03" PRId64
		 " %03" PRId64 " %03" PRId64,
		 hh, mm % 60, ss % 60, ms % 1000, us % 1000, ns % 1000);
	sqlite3_result_text(fn, buf, -1, SQLITE_TRANSIENT);
}

static void clock_fns_free(void *p)
{
	struct clock_fns *c = p;
	free(c->real.v);
	free(c->mono.v);
	free(c);
}

/* ---- registration ----------------------------------------------------- */

int tp_metafn_register(struct sqlite3 *db, struct tp_ctx *ctx)
{
	static const struct {
		const char *name;
		int nargs;
		bool by_machine, by_trace;
	} metas[] = {
		{ "extract_metadata", 1, false, false },
		{ "extract_metadata_for_machine", 2, true, false },
		{ "extract_metadata_for_trace", 2, false, true },
		{ "extract_exact_metadata", 3, true, true },
	};
	static const struct {
		const char *name;
		void (*fn)(sqlite3_context *, int, sqlite3_value **);
	} clocks[] = {
		{ "to_realtime", to_realtime_fn },
		{ "to_monotonic", to_monotonic_fn },
		{ "abs_time_str", abs_time_str_fn },
		{ "to_timecode", to_timecode_fn },
	};
	int rc = SQLITE_OK;

	for (size_t i = 0; i < sizeof metas / sizeof metas[0] && !rc; i++) {
		struct meta_fn *m = vp_xcalloc(1, sizeof *m);
		*m = (struct meta_fn){ ctx, metas[i].by_machine,
				       metas[i].by_trace };
		rc = sqlite3_create_function_v2(db, metas[i].name,
						metas[i].nargs, SQLITE_UTF8, m,
						meta_fn, NULL, NULL, free);
	}
	struct clock_fns *c = vp_xcalloc(1, sizeof *c);
	c->ctx = ctx;
	for (size_t i = 0; i < sizeof clocks / sizeof clocks[0] && !rc; i++)
		/* the first registration owns c */
		rc = sqlite3_create_function_v2(db, clocks[i].name, 1,
						SQLITE_UTF8, c, clocks[i].fn,
						NULL, NULL,
						i == 0 ? clock_fns_free : NULL);
	return rc;
}
