/*
 * tp_query.c - runs SQL over a loaded trace: opens the SQLite connection
 * with the trace's tables and Perfetto's views, registers EXTRACT_ARG(),
 * prints result sets as CSV the way trace_processor_shell -q does, and
 * exports everything to an SQLite file (-e).
 */
#include "tp_query.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "out_file.h"
#include "tp_schema.h"
#include "tp_slicefn.h"
#include "tp_slicelayout.h"
#include "tp_stdlib.h"
#include "tp_metafn.h"
#include "tp_toftrace.h"
#include "vp_alloc.h"

/* What the SQL functions of one connection need; owned by the connection
 * (freed by the destructor of EXTRACT_ARG). */
struct tp_query_state {
	struct tp_ctx *ctx;
	bool have_bounds;
	int64_t start_ts, end_ts; /* trace_start(), trace_end() */
};

/* ---- trace bounds ------------------------------------------------------ */

static void bounds_add(struct tp_table *t, unsigned ts_col, int dur_col,
		       int64_t *start, int64_t *end)
{
	for (uint32_t r = 0; r < t->nrows; r++) {
		if (tp_is_null(t, ts_col, r))
			continue;
		int64_t ts = tp_get_int(t, ts_col, r);
		int64_t e = ts;
		if (dur_col >= 0 && !tp_is_null(t, (unsigned)dur_col, r)) {
			int64_t d = tp_get_int(t, (unsigned)dur_col, r);
			if (d > 0)
				e = ts + d;
		}
		if (ts < *start)
			*start = ts;
		if (e > *end)
			*end = e;
	}
}

/* As Perfetto: the smallest timestamp and the largest end (ts + dur for
 * tables with a duration, negative durations counting as 0) over the
 * event tables (ftrace_event, sched, counter, slice, thread_state, state,
 * logs); (0, 0) without events; end is start + 1 when the two meet. */
static void compute_bounds(struct tp_query_state *st)
{
	struct tp_ctx *c = st->ctx;
	int64_t start = INT64_MAX, end = 0;

	if (st->have_bounds)
		return;
	bounds_add(tp_tab(c, TP_T_FTRACE_EVENT), TP_FTRACE_EVENT_ts, -1,
		   &start, &end);
	bounds_add(tp_tab(c, TP_T_SCHED), TP_SCHED_ts, TP_SCHED_dur, &start,
		   &end);
	bounds_add(tp_tab(c, TP_T_COUNTER), TP_COUNTER_ts, -1, &start, &end);
	bounds_add(tp_tab(c, TP_T_SLICE), TP_SLICE_ts, TP_SLICE_dur, &start,
		   &end);
	bounds_add(tp_tab(c, TP_T_THREAD_STATE), TP_THREAD_STATE_ts,
		   TP_THREAD_STATE_dur, &start, &end);
	bounds_add(tp_tab(c, TP_T_STATE), TP_STATE_ts, TP_STATE_dur, &start,
		   &end);
	bounds_add(tp_tab(c, TP_T_LOGS), TP_LOGS_ts, -1, &start, &end);
	if (start == INT64_MAX) {
		start = 0;
		end = 0;
	} else if (start == end) {
		end++;
	}
	st->start_ts = start;
	st->end_ts = end;
	st->have_bounds = true;
}

/* trace_start(), trace_end(), trace_dur(): which is in the user data's
 * low bits is chosen by the registration below. */
static void bounds_fn(sqlite3_context *fn, int argc, sqlite3_value **argv,
		      int which)
{
	struct tp_query_state *st = sqlite3_user_data(fn);
	(void)argc;
	(void)argv;
	compute_bounds(st);
	sqlite3_result_int64(fn, which == 0   ? st->start_ts
				 : which == 1 ? st->end_ts
					      : st->end_ts - st->start_ts);
}

static void trace_start_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	bounds_fn(fn, argc, argv, 0);
}

static void trace_end_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	bounds_fn(fn, argc, argv, 1);
}

static void trace_dur_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	bounds_fn(fn, argc, argv, 2);
}

/* ---- EXTRACT_ARG ------------------------------------------------------- */

/* Sets the result to the value of args row `row`, following value_type. */
static void extract_arg_result(sqlite3_context *fn, struct tp_table *args,
			       uint32_t row)
{
	const char *vt = tp_str_get(args->pool,
				    tp_get_str(args, TP_ARGS_value_type, row));
	unsigned col;

	if (!vt || strcmp(vt, "null") == 0) {
		sqlite3_result_null(fn);
		return;
	}
	if (strcmp(vt, "string") == 0 || strcmp(vt, "json") == 0)
		col = TP_ARGS_string_value;
	else if (strcmp(vt, "real") == 0)
		col = TP_ARGS_real_value;
	else
		col = TP_ARGS_int_value;
	if (tp_is_null(args, col, row)) {
		sqlite3_result_null(fn);
		return;
	}
	if (col == TP_ARGS_string_value) {
		tp_sql_result_str(fn, args->pool,
				  tp_get_str(args, col, row));
	} else if (col == TP_ARGS_real_value) {
		sqlite3_result_double(fn, tp_get_real(args, col, row));
	} else {
		sqlite3_result_int64(fn, tp_get_int(args, col, row));
	}
}

/* EXTRACT_ARG(arg_set_id, key): the value stored under key in the set,
 * NULL when the set or the key is absent. */
static void extract_arg_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	struct tp_query_state *st = sqlite3_user_data(fn);
	struct tp_table *args = tp_tab(st->ctx, TP_T_ARGS);
	const uint32_t *rows;
	const char *key;
	uint32_t n;
	int key_len;

	(void)argc;
	if (sqlite3_value_type(argv[0]) == SQLITE_NULL ||
	    sqlite3_value_type(argv[1]) == SQLITE_NULL) {
		sqlite3_result_null(fn);
		return;
	}
	key = (const char *)sqlite3_value_text(argv[1]);
	key_len = sqlite3_value_bytes(argv[1]);
	if (!key) {
		sqlite3_result_null(fn);
		return;
	}
	n = tp_table_lookup(args, TP_ARGS_arg_set_id,
			    sqlite3_value_int64(argv[0]), &rows);
	for (uint32_t i = 0; i < n; i++) {
		tp_str k = tp_get_str(args, TP_ARGS_key, rows[i]);
		if (k && tp_str_len(args->pool, k) == (size_t)key_len &&
		    memcmp(tp_str_get(args->pool, k), key, (size_t)key_len) == 0) {
			extract_arg_result(fn, args, rows[i]);
			return;
		}
	}
	sqlite3_result_null(fn);
}

/* __vp_table_name(i): the SQL name of the trace's i-th table, NULL past
 * the end.  Lets tp_query_export() find the eponymous virtual tables,
 * which sqlite_schema does not list. */
static void table_name_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	struct tp_query_state *st = sqlite3_user_data(fn);
	sqlite3_int64 i = sqlite3_value_int64(argv[0]);

	(void)argc;
	if (i < 0 || i >= TP_T_COUNT || !st->ctx->tables[i].name) {
		sqlite3_result_null(fn);
		return;
	}
	sqlite3_result_text(fn, st->ctx->tables[i].name, -1, SQLITE_STATIC);
}

static int register_functions(sqlite3 *db, struct tp_query_state *st)
{
	int rc;

	rc = sqlite3_create_function_v2(db, "EXTRACT_ARG", 2,
					SQLITE_UTF8 | SQLITE_DETERMINISTIC, st,
					extract_arg_fn, NULL, NULL, free);
	if (rc != SQLITE_OK) {
		free(st);
		return rc;
	}
	rc = sqlite3_create_function_v2(db, "trace_start", 0, SQLITE_UTF8, st,
					trace_start_fn, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function_v2(db, "trace_end", 0, SQLITE_UTF8,
						st, trace_end_fn, NULL, NULL,
						NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function_v2(db, "trace_dur", 0, SQLITE_UTF8,
						st, trace_dur_fn, NULL, NULL,
						NULL);
	if (rc == SQLITE_OK)
		rc = tp_toftrace_register(db, st->ctx);
	if (rc == SQLITE_OK)
		rc = tp_metafn_register(db, st->ctx);
	if (rc != SQLITE_OK)
		return rc;
	return sqlite3_create_function_v2(db, "__vp_table_name", 1,
					  SQLITE_UTF8, st, table_name_fn,
					  NULL, NULL, NULL);
}

/* ---- opening ----------------------------------------------------------- */

struct sqlite3 *tp_query_open(struct tp_ctx *ctx, struct vp_error *err)
{
	struct tp_table *tables[TP_T_COUNT];
	struct tp_query_state *st;
	char *msg = NULL;
	sqlite3 *db = NULL;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
		vp_errorf(err, "cannot open SQLite: %s",
			  db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	for (unsigned i = 0; i < TP_T_COUNT; i++)
		tables[i] = &ctx->tables[i];
	if (tp_db_attach(db, tables, TP_T_COUNT) != 0) {
		vp_errorf(err, "cannot attach the trace tables: %s",
			  sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	st = vp_xcalloc(1, sizeof(*st));
	st->ctx = ctx;
	if (register_functions(db, st) != SQLITE_OK) {
		vp_errorf(err, "cannot register SQL functions: %s",
			  sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	if (tp_slicefn_register(db, ctx) != SQLITE_OK ||
	    tp_slicelayout_register(db, ctx) != SQLITE_OK ||
	    tp_stdlib_register(db) != SQLITE_OK) {
		vp_errorf(err, "cannot register table functions: %s",
			  sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	if (sqlite3_exec(db, tp_schema_views_sql, NULL, NULL, &msg) !=
	    SQLITE_OK) {
		vp_errorf(err, "cannot create the views: %s",
			  msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

void tp_query_close(struct sqlite3 *db)
{
	sqlite3_close(db);
}

/* ---- running ----------------------------------------------------------- */

/* Skips whitespace and SQL comments: where the next statement starts. */
static const char *skip_blank(const char *p)
{
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ||
		       *p == '\f' || *p == '\v')
			p++;
		if (p[0] == '-' && p[1] == '-') {
			while (*p && *p != '\n')
				p++;
		} else if (p[0] == '/' && p[1] == '*') {
			const char *e = strstr(p + 2, "*/");
			p = e ? e + 2 : p + strlen(p);
		} else {
			return p;
		}
	}
}

/* 1-based line of position p in sql. */
static int line_of(const char *sql, const char *p)
{
	int line = 1;
	for (; sql < p; sql++)
		line += *sql == '\n';
	return line;
}

/* Formats the error of the statement starting at stmt (in sql) into err:
 * the line of the error and the first line of the statement. */
static int sql_error(sqlite3 *db, const char *sql, const char *stmt,
		     bool at_prepare, struct vp_error *err)
{
	const char *start = skip_blank(stmt);
	const char *at = start;
	int off = at_prepare ? sqlite3_error_offset(db) : -1;
	size_t n;

	if (off >= 0 && (size_t)off <= strlen(stmt))
		at = stmt + off;
	n = strcspn(start, "\n");
	if (n > 160)
		n = 160;
	return vp_errorf(err, "SQL error on line %d: %s\n  in: %.*s",
			 line_of(sql, at), sqlite3_errmsg(db), (int)n, start);
}

/* Formats the error of an INCLUDE statement as sql_error() does. */
static int include_error(const char *sql, const char *stmt, const char *msg,
			 struct vp_error *err)
{
	const char *start = skip_blank(stmt);
	size_t n = strcspn(start, "\n");

	if (n > 160)
		n = 160;
	return vp_errorf(err, "SQL error on line %d: %s\n  in: %.*s",
			 line_of(sql, start), msg, (int)n, start);
}

/* Writes v in decimal: faster than fprintf for millions of cells. */
static void put_int(FILE *out, sqlite3_int64 v)
{
	char buf[24], *p = buf + sizeof(buf);
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	fwrite_unlocked(p, 1, (size_t)(buf + sizeof(buf) - p), out);
}

static void put_quoted(FILE *out, const unsigned char *s, int len)
{
	putc_unlocked('"', out);
	if (s && len > 0)
		fwrite_unlocked(s, 1, (size_t)len, out);
	putc_unlocked('"', out);
}

static void print_header(sqlite3_stmt *stmt, int ncols, FILE *out)
{
	for (int c = 0; c < ncols; c++) {
		const char *name = sqlite3_column_name(stmt, c);
		if (c)
			putc_unlocked(',', out);
		put_quoted(out, (const unsigned char *)name,
			   name ? (int)strlen(name) : 0);
	}
	putc_unlocked('\n', out);
}

static void print_cell(sqlite3_stmt *stmt, int c, FILE *out)
{
	switch (sqlite3_column_type(stmt, c)) {
	case SQLITE_NULL:
		fputs_unlocked("\"[NULL]\"", out);
		break;
	case SQLITE_INTEGER:
		put_int(out, sqlite3_column_int64(stmt, c));
		break;
	case SQLITE_FLOAT:
		fprintf(out, "%f", sqlite3_column_double(stmt, c));
		break;
	case SQLITE_BLOB:
		fputs_unlocked("\"<raw bytes>\"", out);
		break;
	default: {
		const unsigned char *s = sqlite3_column_text(stmt, c);
		put_quoted(out, s, sqlite3_column_bytes(stmt, c));
		break;
	}
	}
}

/* Steps stmt to the end, printing its rows when it has columns.  *first
 * tracks whether a blank line must separate this result set.  The rows
 * are gathered first and printed only when the statement completes: one
 * that fails half-way prints nothing, as in Perfetto's shell (which also
 * holds a result whole). */
static int run_stmt(sqlite3_stmt *stmt, FILE *out, bool *first)
{
	int ncols = sqlite3_column_count(stmt);
	char *text = NULL;
	size_t len = 0;
	FILE *mem = ncols > 0 ? open_memstream(&text, &len) : NULL;
	FILE *w = mem ? mem : out;
	int rc;

	if (ncols > 0)
		print_header(stmt, ncols, w);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		for (int c = 0; c < ncols; c++) {
			if (c)
				putc_unlocked(',', w);
			print_cell(stmt, c, w);
		}
		if (ncols > 0)
			putc_unlocked('\n', w);
	}
	if (mem)
		fclose(mem);
	if (rc == SQLITE_DONE && ncols > 0) {
		if (!*first)
			putc_unlocked('\n', out);
		*first = false;
		fwrite_unlocked(text, 1, len, out);
	}
	free(text);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int tp_query_run(struct sqlite3 *db, const char *text, FILE *out,
		 struct vp_error *err)
{
	return tp_query_run_flags(db, text, out, 0, err);
}

int tp_query_run_flags(struct sqlite3 *db, const char *text, FILE *out,
		       unsigned flags, struct vp_error *err)
{
	size_t ran = 0;
	char *expanded = tp_stdlib_expand(text); /* Perfetto's macros */
	const char *sql = expanded ? expanded : text;
	const char *p = sql;
	bool first = true;
	int rc = 0;

	/* One lock for the whole output: the cells are written with the
	 * _unlocked stdio calls. */
	flockfile(out);
	while (*p) {
		sqlite3_stmt *stmt = NULL;
		const char *tail = NULL;

		char msg[VP_ERROR_MAX - 64];

		rc = tp_stdlib_statement(db, p, &tail, msg, sizeof(msg));
		if (rc < 0) {
			rc = include_error(sql, p, msg, err);
			break;
		}
		if (rc > 0) { /* INCLUDE PERFETTO MODULE */
			rc = 0;
			ran++;
			p = tail;
			continue;
		}
		rc = sqlite3_prepare_v2(db, p, -1, &stmt, &tail);
		if (rc != SQLITE_OK) {
			rc = sql_error(db, sql, p, true, err);
			break;
		}
		if (!stmt) { /* only whitespace or comments left */
			if (!tail || tail == p)
				break;
			p = tail;
			continue;
		}
		ran++;
		rc = run_stmt(stmt, out, &first);
		if (rc != SQLITE_OK) {
			rc = sql_error(db, sql, p, false, err);
			sqlite3_finalize(stmt);
			break;
		}
		sqlite3_finalize(stmt);
		p = tail;
	}
	funlockfile(out);
	fflush(out);
	sqlite3_free(expanded);
	if (rc == 0 && !ran && (flags & TP_QUERY_NEED_SQL))
		return vp_errorf(err, "No valid SQL to run");
	return rc;
}

/* ---- export ------------------------------------------------------------ */

static int exec_fmt(sqlite3 *db, struct vp_error *err, const char *fmt, ...)
{
	va_list ap;
	char *sql, *msg = NULL;
	int rc;

	va_start(ap, fmt);
	sql = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (!sql)
		abort();
	rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		vp_errorf(err, "export: %s (in: %.200s)",
			  msg ? msg : sqlite3_errmsg(db), sql);
	sqlite3_free(msg);
	sqlite3_free(sql);
	return rc == SQLITE_OK ? 0 : -1;
}

/* A growable list of names to copy. */
struct name_list {
	char **v;
	size_t n, cap;
};

static void names_add(struct name_list *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		char **v = vp_xrealloc(l->v, cap * sizeof(*v));
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n] = vp_xstrdup(s);
	l->n++;
}

static void names_free(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* Appends the names the rows of `sql` return in their first column. */
static int names_query(sqlite3 *db, const char *sql, struct name_list *l,
		       struct vp_error *err)
{
	sqlite3_stmt *stmt;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK)
		return vp_errorf(err, "export: %s", sqlite3_errmsg(db));
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(stmt, 0);
		if (s && strncmp(s, "sqlite_", 7) != 0)
			names_add(l, s);
	}
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE)
		return vp_errorf(err, "export: %s", sqlite3_errmsg(db));
	return 0;
}

/* Every table and view a query can see: the trace's eponymous tables,
 * then whatever sqlite_schema lists (views, tables the user created). */
static int collect_names(sqlite3 *db, struct name_list *l,
			 struct vp_error *err)
{
	char sql[128];

	for (int i = 0; i < TP_T_COUNT; i++) {
		snprintf(sql, sizeof(sql), "SELECT __vp_table_name(%d)", i);
		if (names_query(db, sql, l, err) != 0)
			return -1;
	}
	return names_query(db,
			   "SELECT name FROM main.sqlite_schema "
			   "WHERE type IN ('table', 'view') ORDER BY rowid",
			   l, err);
}

/* Copies every name into the attached vp_export database. */
static int copy_all(sqlite3 *db, const struct name_list *l,
		    struct vp_error *err)
{
	if (exec_fmt(db, err, "PRAGMA vp_export.journal_mode = OFF; "
			      "PRAGMA vp_export.synchronous = OFF; BEGIN") != 0)
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		if (exec_fmt(db, err,
			     "CREATE TABLE vp_export.\"%w\" AS "
			     "SELECT * FROM main.\"%w\"",
			     l->v[i], l->v[i]) != 0) {
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return -1;
		}
	}
	return exec_fmt(db, err, "COMMIT");
}

int tp_query_export(struct sqlite3 *db, const char *path,
		    const char *const *inputs, size_t n_inputs,
		    struct vp_error *err)
{
	struct name_list names = {0};
	struct vp_out *out = NULL;
	int rc = -1;

	if (vp_out_check_inputs("the export", path, inputs, n_inputs, err) < 0)
		return -1;
	if (vp_out_open(&out, path, 0, err) < 0)
		return -1;
	const char *tmp = vp_out_temp_path(out);
	if (collect_names(db, &names, err) != 0)
		goto out;
	if (exec_fmt(db, err, "ATTACH DATABASE %Q AS vp_export", tmp) != 0)
		goto out;
	rc = copy_all(db, &names, err);
	if (exec_fmt(db, rc ? NULL : err, "DETACH DATABASE vp_export") != 0)
		rc = -1;
out:
	names_free(&names);
	if (rc == 0) {
		rc = vp_out_commit(out, err);
		out = NULL;
	}
	vp_out_abort(out);
	return rc;
}
