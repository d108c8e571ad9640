/*
 * test_tp_core.c - unit tests of the trace processor's core: string pool,
 * columnar tables and their SQLite view, the sorter, the clock graph,
 * arg sets and the track compressor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tp_args.h"
#include "tp_clock.h"
#include "tp_compress.h"
#include "tp_ctx.h"
#include "tp_db.h"
#include "tp_load.h"
#include "tp_sort.h"

/* ---- string pool and tables ------------------------------------------- */

static void test_strpool(void **state)
{
	(void)state;
	struct tp_strpool *p = tp_strpool_new();
	tp_str a = tp_intern_cstr(p, "alpha");
	tp_str b = tp_intern(p, "alphabet", 5);
	assert_int_not_equal(a, 0);
	assert_int_equal(a, b);
	assert_string_equal(tp_str_get(p, a), "alpha");
	assert_null(tp_str_get(p, 0));
	/* Many strings: ids stay distinct and stable across rehashing. */
	char buf[32];
	tp_str ids[5000];
	for (int i = 0; i < 5000; i++) {
		snprintf(buf, sizeof(buf), "s%d", i);
		ids[i] = tp_intern_cstr(p, buf);
	}
	for (int i = 0; i < 5000; i++) {
		snprintf(buf, sizeof(buf), "s%d", i);
		assert_int_equal(tp_intern_cstr(p, buf), ids[i]);
		assert_string_equal(tp_str_get(p, ids[i]), buf);
	}
	assert_int_equal(tp_intern_cstr(p, "alpha"), a);
	tp_strpool_free(p);
}

static const struct tp_coldef test_cols[] = {
	{"v", TP_COL_INT}, {"r", TP_COL_REAL}, {"s", TP_COL_STR},
	{"alias_id", TP_COL_ALIAS},
};

static void test_table_lookup(void **state)
{
	(void)state;
	struct tp_strpool *p = tp_strpool_new();
	struct tp_table t;
	tp_table_init(&t, "t", test_cols, 4, p);
	for (int i = 0; i < 1000; i++) {
		uint32_t r = tp_table_add_row(&t);
		assert_int_equal(r, i);
		if (i % 10 != 0) /* every tenth row stays NULL */
			tp_set_int(&t, 0, r, (i * 7) % 13);
	}
	assert_true(tp_is_null(&t, 0, 0));
	assert_true(tp_is_null(&t, 1, 5)); /* never set: no storage */
	assert_int_equal(tp_get_int(&t, 3, 42), 42);
	const uint32_t *rows;
	uint32_t n = tp_table_lookup(&t, 0, 5, &rows);
	uint32_t expect = 0;
	for (int i = 0; i < 1000; i++)
		if (i % 10 && (i * 7) % 13 == 5)
			expect++;
	assert_int_equal(n, expect);
	for (uint32_t k = 0; k < n; k++) {
		assert_int_equal(tp_get_int(&t, 0, rows[k]), 5);
		if (k)
			assert_true(rows[k] > rows[k - 1]); /* id order */
	}
	assert_int_equal(tp_table_lookup(&t, 0, 99, &rows), 0);
	/* The index follows rows added after it was built. */
	uint32_t r = tp_table_add_row(&t);
	tp_set_int(&t, 0, r, 99);
	assert_int_equal(tp_table_lookup(&t, 0, 99, &rows), 1);
	assert_int_equal(rows[0], r);
	/* A value past 32 bits widens the column; old values survive. */
	r = tp_table_add_row(&t);
	tp_set_int(&t, 0, r, -(1ll << 40));
	assert_true(tp_get_int(&t, 0, r) == -(1ll << 40));
	assert_int_equal(tp_get_int(&t, 0, 1), 7);
	assert_int_equal(tp_table_lookup(&t, 0, -(1ll << 40), &rows), 1);
	assert_int_equal(tp_table_lookup(&t, 0, 99, &rows), 1);
	tp_table_shrink(&t);
	assert_int_equal(tp_get_int(&t, 0, r - 1), 99);
	tp_table_free(&t);
	tp_strpool_free(p);
}

static void test_sqlite_view(void **state)
{
	(void)state;
	struct tp_strpool *p = tp_strpool_new();
	struct tp_table t;
	struct tp_table *tabs[] = {&t};
	tp_table_init(&t, "t", test_cols, 4, p);
	for (int i = 0; i < 100; i++) {
		uint32_t r = tp_table_add_row(&t);
		tp_set_int(&t, 0, r, i % 4);
		if (i == 7) {
			tp_set_real(&t, 1, r, 2.5);
			tp_set_str(&t, 2, r, tp_intern_cstr(p, "seven"));
		}
	}
	sqlite3 *db;
	assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
	assert_int_equal(tp_db_attach(db, tabs, 1), 0);
	sqlite3_stmt *st;
	const char *q = "select count(*), sum(v), max(r), "
			"(select s from t where id = 7), "
			"(select count(*) from t where v = 3), "
			"(select alias_id from t where id = 99), "
			"(select count(*) from t where s is null) from t";
	assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(st, 0), 100);
	assert_int_equal(sqlite3_column_int64(st, 1), 150);
	assert_true(sqlite3_column_double(st, 2) == 2.5);
	assert_string_equal((const char *)sqlite3_column_text(st, 3), "seven");
	assert_int_equal(sqlite3_column_int64(st, 4), 25);
	assert_int_equal(sqlite3_column_int64(st, 5), 99);
	assert_int_equal(sqlite3_column_int64(st, 6), 99);
	sqlite3_finalize(st);
	/* A join through the index on v. */
	q = "select count(*) from t a join t b on a.v = b.id where a.id < 10";
	assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(st, 0), 10);
	sqlite3_finalize(st);
	sqlite3_close(db);
	tp_table_free(&t);
	tp_strpool_free(p);
}

/* ---- sorter ----------------------------------------------------------- */

struct seen {
	int64_t ts[64];
	int tag[64];
	int n;
};
static struct seen *g_seen;

static void record(struct tp_ctx *ctx, int64_t ts, const uint8_t *p, size_t len)
{
	(void)ctx;
	assert_int_equal(len, sizeof(int));
	int tag;
	memcpy(&tag, p, sizeof(tag));
	g_seen->ts[g_seen->n] = ts;
	g_seen->tag[g_seen->n++] = tag;
}

static void test_sorter(void **state)
{
	(void)state;
	struct seen seen = {0};
	g_seen = &seen;
	struct tp_sorter *s = tp_sorter_new();
	uint8_t k = tp_sort_register(s, record);
	uint32_t st = tp_sort_stream(s);
	uint32_t q1 = tp_sort_queue(s, 1, st), q2 = tp_sort_queue(s, 2, st);
	assert_int_equal(tp_sort_queue(s, 1, st), q1);
	/* Two queues of one stream: q1 in order, q2 out of order; equal
	 * timestamps keep push order. */
	const int64_t ts1[] = {10, 20, 20, 40};
	const int64_t ts2[] = {30, 5, 20, -7};
	int tag = 0;
	for (int i = 0; i < 4; i++) {
		tag = i;
		tp_sort_push(s, q1, ts1[i], k, &tag, sizeof(tag));
		tag = 100 + i;
		tp_sort_push(s, q2, ts2[i], k, &tag, sizeof(tag));
	}
	/* the negative timestamp is dropped as it comes, as Perfetto does */
	assert_int_equal(tp_sort_events(s), 7);
	assert_int_equal(tp_sort_dropped_negative(s), 1);
	tp_sort_drain(s, NULL, NULL);
	const int64_t want_ts[] = {5, 10, 20, 20, 20, 30, 40};
	const int want_tag[] = {101, 0, 1, 2, 102, 100, 3};
	assert_int_equal(seen.n, 7);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(seen.ts[i], want_ts[i]);
		assert_int_equal(seen.tag[i], want_tag[i]);
	}
	assert_int_equal(tp_sort_events(s), 0);
	tp_sorter_free(s);
}

/* A queue of many runs, overlapping, with ties: out in (ts, push order),
 * as a stable sort of the pushes gives it. */
static struct {
	int64_t ts[4000];
	int tag[4000];
	int n;
} g_many;

static void record_many(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len)
{
	(void)ctx;
	assert_int_equal(len, sizeof(int));
	memcpy(&g_many.tag[g_many.n], p, sizeof(int));
	g_many.ts[g_many.n++] = ts;
}

static void test_sorter_runs(void **state)
{
	(void)state;
	enum { N = 4000 };
	static int64_t ts[N];
	struct tp_sorter *s = tp_sorter_new();
	uint8_t k = tp_sort_register(s, record_many);
	uint32_t q = tp_sort_queue(s, 1, tp_sort_stream(s));
	uint32_t x = 12345;

	/* runs of 1..64 ascending events, each starting a little back */
	int64_t t = 1000000;
	for (int i = 0; i < N;) {
		x = x * 1103515245u + 12345u;
		int len = 1 + (int)(x >> 16) % 64;
		t -= (int64_t)((x >> 8) % 50);
		for (int j = 0; j < len && i < N; j++, i++) {
			x = x * 1103515245u + 12345u;
			t += (int64_t)((x >> 16) % 3); /* ties are common */
			ts[i] = t;
			tp_sort_push(s, q, t, k, &i, sizeof(i));
		}
	}
	g_many.n = 0;
	tp_sort_drain(s, NULL, NULL);
	assert_int_equal(g_many.n, N);
	for (int i = 1; i < N; i++) {
		assert_true(g_many.ts[i - 1] <= g_many.ts[i]);
		if (g_many.ts[i - 1] == g_many.ts[i])
			assert_true(g_many.tag[i - 1] < g_many.tag[i]);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(g_many.ts[i], ts[g_many.tag[i]]);
	tp_sorter_free(s);
}

/* Windows as Perfetto's sorter has them: a buffer read after two flushes
 * hands on what was pushed before the previous such read, stopping at the
 * first event in order that came later; an event older than one handed on
 * is dropped and counted. */
static void test_sorter_windows(void **state)
{
	(void)state;
	struct seen seen = {0};
	g_seen = &seen;
	struct tp_sorter *s = tp_sorter_new();
	uint8_t k = tp_sort_register(s, record);
	uint32_t pq = tp_sort_queue(s, 1, tp_sort_stream(s));
	uint32_t lane = tp_sort_lane(s, 2);
	int tag;
#define PUSH(q, ts, t) (tag = (t), tp_sort_push(s, (q), (ts), k, &tag, sizeof(tag)))
	PUSH(pq, 10, 0);
	PUSH(pq, 20, 1);
	tp_sort_read_buffer_event(s, NULL); /* no flush yet: nothing */
	tp_sort_flush_event(s);
	tp_sort_flush_event(s);
	tp_sort_read_buffer_event(s, NULL); /* the first window is empty */
	assert_int_equal(seen.n, 0);
	PUSH(pq, 30, 2);
	PUSH(lane, 25, 3);
	PUSH(lane, 15, 4); /* the lane goes out of order */
	tp_sort_flush_event(s);
	tp_sort_flush_event(s);
	tp_sort_read_buffer_event(s, NULL);
	/* 10 goes; then the lane's 15 is first, pushed after the window */
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.tag[0], 0);
	PUSH(pq, 12, 5);
	PUSH(pq, 5, 6); /* older than 10, handed on already: dropped */
	tp_sort_drain(s, NULL, NULL);
#undef PUSH
	const int want_tag[] = {0, 5, 4, 1, 3, 2};
	const int64_t want_ts[] = {10, 12, 15, 20, 25, 30};
	assert_int_equal(seen.n, 6);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(seen.tag[i], want_tag[i]);
		assert_int_equal(seen.ts[i], want_ts[i]);
	}
	assert_int_equal(tp_sort_dropped_out_of_order(s), 1);
	assert_int_equal(tp_sort_events(s), 0);
	tp_sorter_free(s);
}

/* ---- clocks ----------------------------------------------------------- */

static void test_clocks(void **state)
{
	(void)state;
	struct tp_clocks *c = tp_clocks_new();
	int64_t out;
	/* No snapshot: the trace clock (BOOTTIME) is itself, any other
	 * clock is not linked to it (Perfetto's converter fails too). */
	assert_true(tp_clock_to_trace(c, 0, 6, 1234, &out));
	assert_int_equal(out, 1234);
	assert_false(tp_clock_to_trace(c, 0, 3, 1234, &out));
	assert_string_equal(tp_clock_failure_stat(c, 0, 3),
			    "clock_sync_failure_unknown_source_clock");
	/* MONOTONIC(3) = BOOTTIME(6) - 1000; RAW(4) = MONOTONIC + 5. */
	struct tp_clock_reading a[] = {{6, 11000}, {3, 10000}};
	struct tp_clock_reading b[] = {{3, 20000}, {4, 20005}};
	tp_clock_add_snapshot(c, 0, a, 2);
	tp_clock_add_snapshot(c, 0, b, 2);
	assert_true(tp_clock_to_trace(c, 0, 3, 15000, &out));
	assert_int_equal(out, 16000);
	assert_true(tp_clock_to_trace(c, 0, 4, 20005, &out)); /* two hops */
	assert_int_equal(out, 21000);
	assert_false(tp_clock_to_trace(c, 0, 1, 5, &out)); /* unknown clock */
	/* A later snapshot with another offset applies from its time on. */
	struct tp_clock_reading d[] = {{6, 50000}, {3, 40000}};
	tp_clock_add_snapshot(c, 0, d, 2);
	assert_true(tp_clock_to_trace(c, 0, 3, 39999, &out));
	assert_int_equal(out, 40999);
	assert_true(tp_clock_to_trace(c, 0, 3, 40001, &out));
	assert_int_equal(out, 50001);
	/* Machines do not share graphs (machine 1 has no snapshot);
	 * sequence-scoped ids are distinct. */
	assert_false(tp_clock_to_trace(c, 1, 3, 7, &out));
	assert_true(tp_clock_to_trace(c, 1, 6, 7, &out));
	assert_int_equal(out, 7);
	assert_int_not_equal(tp_clock_seq_scoped(1, 64),
			     tp_clock_seq_scoped(2, 64));
	assert_int_equal(tp_clock_seq_scoped(1, 6), 6);
	/* The trace clock can be moved before any conversion only. */
	struct tp_clocks *c2 = tp_clocks_new();
	tp_clock_add_snapshot(c2, 0, a, 2);
	assert_true(tp_clock_set_trace_clock(c2, 0, 3));
	assert_true(tp_clock_to_trace(c2, 0, 6, 11500, &out));
	assert_int_equal(out, 10500);
	assert_false(tp_clock_set_trace_clock(c2, 0, 6));
	tp_clocks_free(c2);
	tp_clocks_free(c);
}

/* ---- args ------------------------------------------------------------- */

static void test_args(void **state)
{
	(void)state;
	struct tp_ctx *ctx = tp_ctx_new();
	struct tp_args_builder b;
	tp_str k1 = tp_s(ctx, "debug.a"), k2 = tp_s(ctx, "debug.b");
	tp_args_builder_init(&b);
	assert_int_equal(tp_args_commit(ctx, &b), -1);
	tp_args_add_int(&b, k1, k1, 5);
	tp_args_add_str(&b, k2, k2, tp_s(ctx, "x"));
	uint32_t before = tp_tab(ctx, TP_T_ARGS)->nrows;
	int64_t s1 = tp_args_commit(ctx, &b);
	assert_int_equal(s1, before); /* the id of the set's first row */
	assert_int_equal(tp_args_commit(ctx, &b), s1); /* deduplicated */
	assert_int_equal(tp_tab(ctx, TP_T_ARGS)->nrows, before + 2);
	/* Same key again replaces the value. */
	tp_args_add_int(&b, k1, k1, 6);
	assert_int_equal(b.n, 2);
	int64_t s2 = tp_args_commit(ctx, &b);
	assert_int_not_equal(s2, s1);
	struct tp_arg a;
	assert_true(tp_args_find(ctx, s2, k1, &a));
	assert_int_equal(a.i, 6);
	assert_int_equal(a.type, TP_ARG_INT);
	assert_true(tp_args_find(ctx, s1, k2, &a));
	assert_int_equal(a.type, TP_ARG_STRING);
	assert_string_equal(tp_str_get(ctx->pool, a.s), "x");
	/* Loading a set and adding to it makes the merged set. */
	struct tp_args_builder m;
	tp_args_builder_init(&m);
	tp_args_load(ctx, s1, &m);
	assert_int_equal(m.n, 2);
	tp_args_add_real(&m, tp_s(ctx, "c"), tp_s(ctx, "c"), 1.5);
	int64_t s3 = tp_args_commit(ctx, &m);
	assert_true(tp_args_find(ctx, s3, tp_s(ctx, "c"), &a));
	assert_true(a.d == 1.5);
	assert_true(tp_args_find(ctx, s3, k2, &a));
	tp_args_builder_free(&m);
	tp_args_builder_free(&b);
	tp_ctx_free(ctx);
}

/* ---- track compressor ------------------------------------------------- */

static void test_compress(void **state)
{
	(void)state;
	struct tp_compress *c = tp_compress_new();
	const uint64_t ka[4] = { 1, 2, 3, 4 }, kb[4] = { 1, 2, 3, 5 };
	uint32_t a = tp_compress_set(c, ka, 4);
	uint32_t b = tp_compress_set(c, kb, 4);
	assert_int_not_equal(a, b);
	assert_int_equal(tp_compress_set(c, ka, 4), a);
	/* A key that is a prefix of another names another set. */
	assert_int_not_equal(tp_compress_set(c, ka, 3), a);

	/* Overlapping cookies split; a lane idle again is taken over. */
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_BEGIN, 10), 0);
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_BEGIN, 11), 1);
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_BEGIN, 10), 0);
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_END, 10), 0);
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_END, 10), 0);
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_BEGIN, 12), 0);
	/* An instant takes a lane and leaves nothing open on it. */
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_INSTANT, 13), 2);
	assert_int_equal(tp_compress_lane(c, a, TP_COMPRESS_BEGIN, 14), 2);
	/* Begins of one cookie counted once: one end frees the lane. */
	assert_int_equal(tp_compress_lane(c, b, TP_COMPRESS_BEGIN_ONCE, 1), 0);
	assert_int_equal(tp_compress_lane(c, b, TP_COMPRESS_BEGIN_ONCE, 1), 0);
	assert_int_equal(tp_compress_lane(c, b, TP_COMPRESS_END, 1), 0);
	assert_int_equal(tp_compress_lane(c, b, TP_COMPRESS_BEGIN, 2), 0);
	/* An end with nothing open keeps the lane idle. */
	uint32_t e = tp_compress_set(c, kb, 2);
	assert_int_equal(tp_compress_lane(c, e, TP_COMPRESS_END, 7), 0);
	assert_int_equal(tp_compress_lane(c, e, TP_COMPRESS_BEGIN, 8), 0);

	/* The first lane is made for cookie 0 when the set has none. */
	uint32_t f = tp_compress_set(c, NULL, 0);
	assert_int_equal(tp_compress_lane_first(c, f), 0);
	assert_int_equal(tp_compress_lane(c, f, TP_COMPRESS_BEGIN, 0), 0);
	assert_int_equal(tp_compress_lane(c, f, TP_COMPRESS_BEGIN, 5), 1);

	int64_t *t = tp_compress_lane_track(c, a, 1);
	assert_int_equal(*t, -1);
	*t = 42;
	assert_int_equal(*tp_compress_lane_track(c, a, 1), 42);
	tp_compress_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strpool),
		cmocka_unit_test(test_table_lookup),
		cmocka_unit_test(test_sqlite_view),
		cmocka_unit_test(test_sorter),
		cmocka_unit_test(test_sorter_runs),
		cmocka_unit_test(test_sorter_windows),
		cmocka_unit_test(test_clocks),
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_compress),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
