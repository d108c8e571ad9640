/*
 * tp_spanjoin.c - the SPAN_JOIN, SPAN_LEFT_JOIN and SPAN_OUTER_JOIN virtual
 * table modules, with the rules of Perfetto's span join operator:
 *
 *   CREATE VIRTUAL TABLE x USING SPAN_JOIN(t1 [PARTITIONED col],
 *                                          t2 [PARTITIONED col]);
 *
 *  - each side is a table or view with a ts column and (in at least one of
 *    the two) a dur column; a side without dur has spans of length 0;
 *  - the output columns are ts, dur, the partition column (when either side
 *    is partitioned), then the other columns of t1 and of t2 in their
 *    order; a name other than ts, dur and the partition in both sides is an
 *    error, as are partitions of two different names;
 *  - rows with a NULL partition are skipped; a partition that is not an
 *    integer is an error;
 *  - a row is output for every overlap of a t1 span with a t2 span of the
 *    same partition (when only one side is partitioned, the other side's
 *    spans meet every partition); spans are [ts, ts + dur), a span of dur
 *    -1 (unfinished) only meets spans at its ts, and dur of the output is
 *    min(end) - max(ts), so -1 shows through;
 *  - LEFT also outputs the parts of t1's spans that meet no t2 span, OUTER
 *    those of both sides, with NULL for the columns of the missing side
 *    (when a side is partitioned and the other is not, gaps are filled
 *    only within the partitions that have rows; an empty partitioned right
 *    side of LEFT, or either of OUTER, gives no rows at all);
 *  - spans of one side in one partition must not overlap: as in Perfetto,
 *    this is not checked and such input gives rows that mean little.
 *
 * Rows come out ordered by partition, then ts.  Perfetto computes them
 * with a cursor per side walking the side's rows (ordered by partition and
 * ts) through "real" spans and the "shadow" spans between them; this file
 * reads both sides into memory when a scan starts and walks them the same
 * way, so its rows and their order are Perfetto's, quirks included.
 */
#include "tp_spanjoin.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sqlite3.h>

enum sj_kind { SJ_INNER, SJ_LEFT, SJ_OUTER };
enum sj_partitioning { SJ_PART_NONE, SJ_PART_SAME, SJ_PART_MIXED };
/* Which shadow spans a side shows: none (inner), only within partitions it
 * has rows in, or also for partitions it lacks. */
enum sj_shadows { SJ_SHADOW_NONE, SJ_SHADOW_PRESENT, SJ_SHADOW_ALL };
enum sj_state { SJ_REAL, SJ_PRESENT_SHADOW, SJ_MISSING_SHADOW, SJ_EOF };

/* One side: a table or view. */
struct sj_side {
	char *name;
	char *part_col; /* NULL: not partitioned */
	int ncols;
	char **cols;
	char **types; /* declared type for the output, "" when none */
	int ts_idx, dur_idx, part_idx; /* -1 when absent */
	enum sj_shadows shadows;
};

struct sj_vtab {
	sqlite3_vtab base;
	sqlite3 *db;
	enum sj_kind kind;
	enum sj_partitioning partitioning;
	struct sj_side side[2];
	int first_data; /* output index of the first passed-through column */
	int nout;	/* passed-through columns */
	int *out_side, *out_col;
};

/* A side's rows, read when a scan starts, ordered by (partition, ts). */
struct sj_rows {
	size_t n, cap;
	int64_t *ts, *dur, *part;
	sqlite3_value **vals; /* n * ncols */
};

/* A walk over one side's rows: the span it stands on. */
struct sj_walk {
	const struct sj_side *side;
	const struct sj_rows *rows;
	size_t row; /* the cursor row; == rows->n at the end */
	bool started;
	enum sj_state state;
	int64_t ts, ts_end;
	int64_t part;		      /* real and present shadows */
	int64_t miss_first, miss_end; /* missing shadows: [first, end) */
};

struct sj_cursor {
	sqlite3_vtab_cursor base;
	bool loaded;
	struct sj_rows rows[2];
	struct sj_walk w[2];
	struct sj_walk *next; /* the walk to step at xNext */
	int64_t mixed_part;   /* the partition of the walk in a mixed join */
	sqlite3_int64 rowid;
};

/* Wrapping arithmetic: the walk's sentinels sit at the ends of int64. */
static int64_t wadd(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wsub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* ---- the walk over one side -------------------------------------------- */

static bool cursor_eof(const struct sj_walk *w)
{
	return w->row >= w->rows->n;
}

static int64_t cursor_ts(const struct sj_walk *w)
{
	return w->rows->ts[w->row];
}

static int64_t cursor_dur(const struct sj_walk *w)
{
	return w->rows->dur[w->row];
}

static int64_t cursor_part(const struct sj_walk *w)
{
	return w->rows->part[w->row];
}

static void cursor_next(struct sj_walk *w)
{
	if (!w->started) {
		w->started = true;
		w->row = 0;
	} else if (w->row < w->rows->n) {
		w->row++;
	}
}

/* The end of the span; ts itself for a span of dur -1. */
static int64_t adj_end(const struct sj_walk *w)
{
	return wsub(w->ts_end, w->ts) == -1 ? w->ts : w->ts_end;
}

/* The partitions the span covers, [first, last]. */
static int64_t first_part(const struct sj_walk *w)
{
	return w->state == SJ_MISSING_SHADOW ? w->miss_first : w->part;
}

static int64_t last_part(const struct sj_walk *w)
{
	return w->state == SJ_MISSING_SHADOW ? wsub(w->miss_end, 1) : w->part;
}

static bool valid_span(const struct sj_walk *w)
{
	enum sj_shadows s = w->side->shadows;

	if (w->state == SJ_PRESENT_SHADOW && s == SJ_SHADOW_NONE)
		return false;
	if (w->state == SJ_MISSING_SHADOW && s != SJ_SHADOW_ALL)
		return false;
	if (w->state != SJ_REAL && w->ts == w->ts_end)
		return false;
	if (w->state == SJ_MISSING_SHADOW && w->miss_first == w->miss_end)
		return false;
	return true;
}

/* One step through every span, shadows included. */
static void step_span(struct sj_walk *w)
{
	bool partitioned = w->side->part_col != NULL;

	switch (w->state) {
	case SJ_REAL: {
		cursor_next(w);
		bool to_end =
		    cursor_eof(w) || (partitioned && w->part != cursor_part(w));
		w->state = SJ_PRESENT_SHADOW;
		w->ts = adj_end(w);
		w->ts_end = to_end ? INT64_MAX : cursor_ts(w);
		break;
	}
	case SJ_PRESENT_SHADOW:
		if (w->ts_end == INT64_MAX) {
			/* the partitions between this one and the next */
			w->state = SJ_MISSING_SHADOW;
			w->ts = 0;
			w->ts_end = INT64_MAX;
			w->miss_first = wadd(w->part, 1);
			w->miss_end =
			    cursor_eof(w) ? INT64_MAX : cursor_part(w);
		} else {
			w->state = SJ_REAL;
			w->ts = cursor_ts(w);
			w->ts_end = wadd(w->ts, cursor_dur(w));
		}
		break;
	case SJ_MISSING_SHADOW:
		if (w->miss_end == INT64_MAX) {
			w->state = SJ_EOF;
		} else {
			w->state = SJ_PRESENT_SHADOW;
			w->ts = 0;
			w->ts_end = cursor_ts(w);
			w->part = w->miss_end;
		}
		break;
	case SJ_EOF:
		break;
	}
}

static void find_valid(struct sj_walk *w)
{
	while (w->state != SJ_EOF && !valid_span(w))
		step_span(w);
}

static void walk_next(struct sj_walk *w)
{
	step_span(w);
	find_valid(w);
}

static void walk_rewind(struct sj_walk *w)
{
	w->started = false;
	cursor_next(w);
	/* a missing shadow from the lowest partition up to the first row's */
	w->state = SJ_MISSING_SHADOW;
	w->ts = 0;
	w->ts_end = INT64_MAX;
	w->part = INT64_MIN;
	w->miss_first = INT64_MIN;
	if (cursor_eof(w))
		w->miss_end = INT64_MAX;
	else if (w->side->part_col)
		w->miss_end = cursor_part(w);
	else
		w->miss_end = INT64_MIN;
	find_valid(w);
}

/* empty_is_shadow: an empty side stands on one shadow over everything
 * (the outer sides of LEFT and OUTER joins that show shadows). */
static void walk_init(struct sj_walk *w, const struct sj_side *side,
		      const struct sj_rows *rows, bool empty_is_shadow)
{
	memset(w, 0, sizeof(*w));
	w->side = side;
	w->rows = rows;
	walk_rewind(w);
	if (empty_is_shadow && w->state == SJ_EOF)
		w->state = SJ_MISSING_SHADOW;
}

/* ---- the join --------------------------------------------------------- */

static bool overlapping(const struct sj_cursor *c, const struct sj_vtab *v)
{
	const struct sj_walk *a = &c->w[0], *b = &c->w[1];

	if (a->state == SJ_EOF || b->state == SJ_EOF)
		return false;
	if (a->state != SJ_REAL && b->state != SJ_REAL)
		return false;
	if (v->partitioning == SJ_PART_SAME) {
		bool meet = (first_part(a) >= first_part(b) &&
			     first_part(a) <= last_part(b)) ||
			    (first_part(b) >= first_part(a) &&
			     first_part(b) <= last_part(a));
		if (!meet)
			return false;
	}
	return (a->ts == b->ts && a->state == SJ_REAL && b->state == SJ_REAL) ||
	       (a->ts >= b->ts && a->ts < adj_end(b)) ||
	       (b->ts >= a->ts && b->ts < adj_end(a));
}

/* The walk whose span ends first: by partition, end, then shadow before
 * real. */
static struct sj_walk *earliest(struct sj_cursor *c, const struct sj_vtab *v)
{
	struct sj_walk *a = &c->w[0], *b = &c->w[1];
	int64_t pa = 0, pb = 0;

	if (v->partitioning == SJ_PART_MIXED) {
		if (a->state == SJ_EOF)
			return b;
		if (b->state == SJ_EOF)
			return a;
	} else if (v->partitioning == SJ_PART_SAME) {
		pa = last_part(a);
		pb = last_part(b);
	}
	if (pa != pb)
		return pa < pb ? a : b;
	if (adj_end(a) != adj_end(b))
		return adj_end(a) < adj_end(b) ? a : b;
	return (a->state == SJ_REAL) < (b->state == SJ_REAL) ? a : b;
}

static void find_overlap(struct sj_cursor *c, const struct sj_vtab *v)
{
	for (;;) {
		if (v->partitioning == SJ_PART_MIXED) {
			int p = v->side[0].part_col ? 0 : 1;
			struct sj_walk *pw = &c->w[p], *uw = &c->w[1 - p];
			if (pw->state == SJ_EOF)
				break;
			/* the unpartitioned side starts over in each
			 * partition */
			if (c->mixed_part != pw->part) {
				walk_rewind(uw);
				c->mixed_part = pw->part;
			}
		} else if (c->w[0].state == SJ_EOF || c->w[1].state == SJ_EOF) {
			break;
		}
		c->next = earliest(c, v);
		if (overlapping(c, v))
			break;
		walk_next(c->next);
	}
}

/* ---- reading a side ---------------------------------------------------- */

static void rows_free(struct sj_rows *r, int ncols)
{
	for (size_t i = 0; i < r->n * (size_t)ncols; i++)
		sqlite3_value_free(r->vals[i]);
	free(r->ts);
	free(r->dur);
	free(r->part);
	free(r->vals);
	memset(r, 0, sizeof(*r));
}

static int rows_grow(struct sj_rows *r, int ncols)
{
	size_t cap = r->cap ? 2 * r->cap : 256;
	int64_t *ts = realloc(r->ts, cap * sizeof(*ts));
	if (ts)
		r->ts = ts;
	int64_t *dur = realloc(r->dur, cap * sizeof(*dur));
	if (dur)
		r->dur = dur;
	int64_t *part = realloc(r->part, cap * sizeof(*part));
	if (part)
		r->part = part;
	sqlite3_value **vals =
	    realloc(r->vals, cap * (size_t)ncols * sizeof(*vals));
	if (vals)
		r->vals = vals;
	if (!ts || !dur || !part || !vals)
		return SQLITE_NOMEM;
	r->cap = cap;
	return SQLITE_OK;
}

/* Reads every row of a side, ordered by (partition, ts). */
static int rows_load(struct sj_vtab *v, const struct sj_side *s,
		     struct sj_rows *r)
{
	sqlite3_str *q = sqlite3_str_new(v->db);
	sqlite3_stmt *stmt = NULL;
	char *sql;
	int rc;

	sqlite3_str_appendall(q, "SELECT ");
	for (int i = 0; i < s->ncols; i++)
		sqlite3_str_appendf(q, "%s\"%w\"", i ? ", " : "", s->cols[i]);
	sqlite3_str_appendf(q, " FROM %s ORDER BY ", s->name);
	if (s->part_col)
		sqlite3_str_appendf(q, "\"%w\", ", s->part_col);
	sqlite3_str_appendall(q, "ts");
	sql = sqlite3_str_finish(q);
	if (!sql)
		return SQLITE_NOMEM;
	rc = sqlite3_prepare_v2(v->db, sql, -1, &stmt, NULL);
	sqlite3_free(sql);
	if (rc != SQLITE_OK) {
		v->base.zErrMsg =
		    sqlite3_mprintf("SPAN_JOIN: reading %s: %s", s->name,
				    sqlite3_errmsg(v->db));
		return SQLITE_ERROR;
	}
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		int64_t part = 0;
		if (s->part_idx >= 0) {
			int t = sqlite3_column_type(stmt, s->part_idx);
			if (t == SQLITE_NULL)
				continue;
			if (t != SQLITE_INTEGER) {
				v->base.zErrMsg = sqlite3_mprintf(
				    "SPAN_JOIN: partition is not an INT "
				    "column");
				sqlite3_finalize(stmt);
				return SQLITE_ERROR;
			}
			part = sqlite3_column_int64(stmt, s->part_idx);
		}
		if (r->n == r->cap && rows_grow(r, s->ncols) != SQLITE_OK) {
			sqlite3_finalize(stmt);
			return SQLITE_NOMEM;
		}
		r->ts[r->n] = sqlite3_column_int64(stmt, s->ts_idx);
		r->dur[r->n] = s->dur_idx >= 0
				   ? sqlite3_column_int64(stmt, s->dur_idx)
				   : 0;
		r->part[r->n] = part;
		for (int i = 0; i < s->ncols; i++) {
			sqlite3_value *val =
			    sqlite3_value_dup(sqlite3_column_value(stmt, i));
			if (!val) {
				for (int j = 0; j < i; j++)
					sqlite3_value_free(
					    r->vals[r->n * (size_t)s->ncols +
						    (size_t)j]);
				sqlite3_finalize(stmt);
				return SQLITE_NOMEM;
			}
			r->vals[r->n * (size_t)s->ncols + (size_t)i] = val;
		}
		r->n++;
	}
	if (rc != SQLITE_DONE) {
		v->base.zErrMsg =
		    sqlite3_mprintf("SPAN_JOIN: reading %s: %s", s->name,
				    sqlite3_errmsg(v->db));
		sqlite3_finalize(stmt);
		return SQLITE_ERROR;
	}
	sqlite3_finalize(stmt);
	return SQLITE_OK;
}

/* ---- creating the table ------------------------------------------------ */

static void side_free(struct sj_side *s)
{
	for (int i = 0; i < s->ncols; i++) {
		sqlite3_free(s->cols[i]);
		sqlite3_free(s->types[i]);
	}
	sqlite3_free(s->cols);
	sqlite3_free(s->types);
	sqlite3_free(s->name);
	sqlite3_free(s->part_col);
	memset(s, 0, sizeof(*s));
}

static void vtab_free(struct sj_vtab *v)
{
	if (!v)
		return;
	side_free(&v->side[0]);
	side_free(&v->side[1]);
	sqlite3_free(v->out_side);
	sqlite3_free(v->out_col);
	sqlite3_free(v);
}

/* "name [PARTITIONED col]" */
static int parse_side(const char *arg, struct sj_side *s, char **err)
{
	const char *ws = " \t\r\n";
	char *copy = sqlite3_mprintf("%s", arg), *save = NULL, *tok;

	if (!copy)
		return SQLITE_NOMEM;
	tok = strtok_r(copy, ws, &save);
	if (!tok) {
		sqlite3_free(copy);
		*err = sqlite3_mprintf("SPAN_JOIN: Missing table name");
		return SQLITE_ERROR;
	}
	s->name = sqlite3_mprintf("%s", tok);
	tok = strtok_r(NULL, ws, &save);
	if (tok) {
		if (strcasecmp(tok, "PARTITIONED") != 0) {
			sqlite3_free(copy);
			*err = sqlite3_mprintf("SPAN_JOIN: Invalid token");
			return SQLITE_ERROR;
		}
		tok = strtok_r(NULL, ws, &save);
		if (!tok) {
			sqlite3_free(copy);
			*err = sqlite3_mprintf(
			    "SPAN_JOIN: Missing partitioning column");
			return SQLITE_ERROR;
		}
		s->part_col = sqlite3_mprintf("%s", tok);
	}
	sqlite3_free(copy);
	return SQLITE_OK;
}

/* The output type for a declared type (Perfetto's mapping). */
static const char *out_type(const char *t)
{
	if (!strcasecmp(t, "STRING") || !strcasecmp(t, "TEXT"))
		return "TEXT";
	if (!strcasecmp(t, "DOUBLE") || !strcasecmp(t, "REAL") ||
	    !strcasecmp(t, "FLOAT"))
		return "DOUBLE";
	if (!strcasecmp(t, "BIG INT") || !strcasecmp(t, "BIGINT") ||
	    !strcasecmp(t, "UNSIGNED INT") || !strcasecmp(t, "INT") ||
	    !strcasecmp(t, "BOOLEAN") || !strcasecmp(t, "INTEGER"))
		return "BIGINT";
	if (!strcasecmp(t, "BLOB"))
		return "BLOB";
	return "";
}

/* Reads the side's columns and finds ts, dur and the partition. */
static int side_columns(sqlite3 *db, struct sj_side *s, char **err)
{
	sqlite3_stmt *stmt;
	int rc, nts = 0, cap = 0;

	if (s->part_col &&
	    (!strcmp(s->part_col, "ts") || !strcmp(s->part_col, "dur"))) {
		*err = sqlite3_mprintf("SPAN_JOIN: partition column cannot be "
				       "any of {ts, dur} for table %s",
				       s->name);
		return SQLITE_ERROR;
	}
	rc = sqlite3_prepare_v2(db,
				"SELECT name, type FROM pragma_table_info(?1)",
				-1, &stmt, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(stmt, 1, s->name, -1, SQLITE_STATIC);
	s->ts_idx = s->dur_idx = s->part_idx = -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(stmt, 0);
		const char *type = (const char *)sqlite3_column_text(stmt, 1);
		if (!name)
			continue;
		if (strchr(name, ',') || strchr(name, ':')) {
			*err = sqlite3_mprintf("SPAN_JOIN: column '%s' cannot "
					       "contain any '%c'",
					       name,
					       strchr(name, ',') ? ',' : ':');
			sqlite3_finalize(stmt);
			return SQLITE_ERROR;
		}
		if (s->ncols == cap) {
			cap = cap ? 2 * cap : 16;
			char **c = sqlite3_realloc64(s->cols,
						     (size_t)cap * sizeof(*c));
			if (c)
				s->cols = c;
			char **t = sqlite3_realloc64(s->types,
						     (size_t)cap * sizeof(*t));
			if (t)
				s->types = t;
			if (!c || !t) {
				sqlite3_finalize(stmt);
				return SQLITE_NOMEM;
			}
		}
		s->cols[s->ncols] = sqlite3_mprintf("%s", name);
		s->types[s->ncols] =
		    sqlite3_mprintf("%s", out_type(type ? type : ""));
		if (!strcmp(name, "ts")) {
			s->ts_idx = s->ncols;
			nts++;
		} else if (!strcmp(name, "dur")) {
			s->dur_idx = s->ncols;
		} else if (s->part_col && !strcmp(name, s->part_col)) {
			s->part_idx = s->ncols;
		}
		s->ncols++;
	}
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE)
		return rc;
	if (nts != 1) {
		*err = sqlite3_mprintf(
		    "SPAN_JOIN: Missing ts column in table %s", s->name);
		return SQLITE_ERROR;
	}
	if (s->part_col && s->part_idx < 0) {
		*err = sqlite3_mprintf("SPAN_JOIN: Missing partition column "
				       "'%s' in table '%s'",
				       s->part_col, s->name);
		return SQLITE_ERROR;
	}
	return SQLITE_OK;
}

static bool is_special(const char *name, const char *part)
{
	return !strcmp(name, "ts") || !strcmp(name, "dur") ||
	       (part && !strcmp(name, part));
}

static const char *join_part_col(const struct sj_vtab *v)
{
	return v->side[0].part_col ? v->side[0].part_col : v->side[1].part_col;
}

/* A column other than ts, dur and the partition that both sides have. */
static const char *duplicate_column(const struct sj_vtab *v)
{
	const char *part =
	    v->partitioning == SJ_PART_NONE ? NULL : join_part_col(v);

	for (int a = 0; a < 2; a++) {
		const struct sj_side *s = &v->side[a];
		for (int i = 0; i < s->ncols; i++) {
			if (is_special(s->cols[i], part))
				continue;
			for (int b = 0; b <= a; b++) {
				const struct sj_side *o = &v->side[b];
				int end = b == a ? i : o->ncols;
				for (int j = 0; j < end; j++)
					if (!is_special(o->cols[j], part) &&
					    !strcmp(o->cols[j], s->cols[i]))
						return s->cols[i];
			}
		}
	}
	return NULL;
}

/* The passed-through columns and the CREATE TABLE for the vtab. */
static int declare(sqlite3 *db, struct sj_vtab *v)
{
	sqlite3_str *q = sqlite3_str_new(db);
	char *sql;
	int n = 0, rc;

	v->first_data = v->partitioning == SJ_PART_NONE ? 2 : 3;
	v->out_side = sqlite3_malloc64(
	    (size_t)(v->side[0].ncols + v->side[1].ncols + 1) * sizeof(int));
	v->out_col = sqlite3_malloc64(
	    (size_t)(v->side[0].ncols + v->side[1].ncols + 1) * sizeof(int));
	if (!v->out_side || !v->out_col) {
		sqlite3_free(sqlite3_str_finish(q));
		return SQLITE_NOMEM;
	}
	sqlite3_str_appendall(q, "CREATE TABLE x(ts BIGINT, dur BIGINT");
	if (v->partitioning != SJ_PART_NONE)
		sqlite3_str_appendf(q, ", \"%w\" BIGINT", join_part_col(v));
	for (int s = 0; s < 2; s++) {
		const struct sj_side *d = &v->side[s];
		for (int i = 0; i < d->ncols; i++) {
			if (i == d->ts_idx || i == d->dur_idx ||
			    i == d->part_idx)
				continue;
			sqlite3_str_appendf(q, ", \"%w\" %s", d->cols[i],
					    d->types[i]);
			v->out_side[n] = s;
			v->out_col[n] = i;
			n++;
		}
	}
	sqlite3_str_appendall(q, ")");
	v->nout = n;
	sql = sqlite3_str_finish(q);
	if (!sql)
		return SQLITE_NOMEM;
	rc = sqlite3_declare_vtab(db, sql);
	sqlite3_free(sql);
	return rc;
}

static int sj_create(sqlite3 *db, void *aux, int argc, const char *const *argv,
		     sqlite3_vtab **out, char **err)
{
	struct sj_vtab *v;
	struct sj_side *a, *b;
	bool a_mixed, b_mixed;
	int rc;

	(void)aux;
	if (argc != 5) {
		*err = sqlite3_mprintf("SPAN_JOIN: expected exactly two "
				       "arguments");
		return SQLITE_ERROR;
	}
	v = sqlite3_malloc(sizeof(*v));
	if (!v)
		return SQLITE_NOMEM;
	memset(v, 0, sizeof(*v));
	v->db = db;
	if (!strcasecmp(argv[0], "span_left_join"))
		v->kind = SJ_LEFT;
	else if (!strcasecmp(argv[0], "span_outer_join"))
		v->kind = SJ_OUTER;
	else
		v->kind = SJ_INNER;
	a = &v->side[0];
	b = &v->side[1];
	if ((rc = parse_side(argv[3], a, err)) != SQLITE_OK ||
	    (rc = parse_side(argv[4], b, err)) != SQLITE_OK)
		goto fail;
	if ((a->part_col == NULL) == (b->part_col == NULL) &&
	    (!a->part_col || !strcmp(a->part_col, b->part_col))) {
		v->partitioning = a->part_col ? SJ_PART_SAME : SJ_PART_NONE;
	} else if (a->part_col && b->part_col) {
		*err = sqlite3_mprintf(
		    "SPAN_JOIN: mismatching partitions between the two "
		    "tables; (partition %s in table %s, partition %s in "
		    "table %s)",
		    a->part_col, a->name, b->part_col, b->name);
		rc = SQLITE_ERROR;
		goto fail;
	} else {
		v->partitioning = SJ_PART_MIXED;
	}
	a_mixed = a->part_col && v->partitioning == SJ_PART_MIXED;
	b_mixed = b->part_col && v->partitioning == SJ_PART_MIXED;
	/* shadows fill the gaps of the sides whose rows must all show */
	if (v->kind == SJ_OUTER)
		a->shadows = a_mixed || v->partitioning == SJ_PART_NONE
				 ? SJ_SHADOW_PRESENT
				 : SJ_SHADOW_ALL;
	if (v->kind != SJ_INNER)
		b->shadows = b_mixed || v->partitioning == SJ_PART_NONE
				 ? SJ_SHADOW_PRESENT
				 : SJ_SHADOW_ALL;
	if ((rc = side_columns(db, a, err)) != SQLITE_OK ||
	    (rc = side_columns(db, b, err)) != SQLITE_OK)
		goto fail;
	if (a->dur_idx < 0 && b->dur_idx < 0) {
		*err = sqlite3_mprintf("SPAN_JOIN: column dur must be present "
				       "in at least one of tables %s and %s",
				       a->name, b->name);
		rc = SQLITE_ERROR;
		goto fail;
	}
	const char *dup = duplicate_column(v);
	if (dup) {
		*err = sqlite3_mprintf("SPAN_JOIN: column %s present in both "
				       "tables %s and %s",
				       dup, a->name, b->name);
		rc = SQLITE_ERROR;
		goto fail;
	}
	if ((rc = declare(db, v)) != SQLITE_OK) {
		if (!*err)
			*err = sqlite3_mprintf("SPAN_JOIN: %s",
					       sqlite3_errmsg(db));
		goto fail;
	}
	*out = &v->base;
	return SQLITE_OK;
fail:
	vtab_free(v);
	return rc;
}

static int sj_disconnect(sqlite3_vtab *vt)
{
	vtab_free((struct sj_vtab *)vt);
	return SQLITE_OK;
}

static int sj_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
	struct sj_vtab *v = (struct sj_vtab *)vt;

	/* Constraints are left to SQLite: every scan reads both sides. */
	if (v->partitioning == SJ_PART_NONE) {
		info->orderByConsumed = info->nOrderBy == 1 &&
					info->aOrderBy[0].iColumn == 0 &&
					!info->aOrderBy[0].desc;
	} else {
		bool part_first = info->nOrderBy > 0 &&
				  info->aOrderBy[0].iColumn == 2 &&
				  !info->aOrderBy[0].desc;
		bool ts_second = info->nOrderBy >= 2 &&
				 info->aOrderBy[1].iColumn == 0 &&
				 !info->aOrderBy[1].desc;
		info->orderByConsumed =
		    (info->nOrderBy == 1 && part_first) ||
		    (info->nOrderBy == 2 && part_first && ts_second);
	}
	info->estimatedCost = 1e6;
	return SQLITE_OK;
}

/* ---- scanning ---------------------------------------------------------- */

static int sj_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
	struct sj_cursor *c = sqlite3_malloc(sizeof(*c));

	(void)vt;
	if (!c)
		return SQLITE_NOMEM;
	memset(c, 0, sizeof(*c));
	*out = &c->base;
	return SQLITE_OK;
}

static int sj_close(sqlite3_vtab_cursor *cur)
{
	struct sj_cursor *c = (struct sj_cursor *)cur;
	struct sj_vtab *v = (struct sj_vtab *)cur->pVtab;

	rows_free(&c->rows[0], v->side[0].ncols);
	rows_free(&c->rows[1], v->side[1].ncols);
	sqlite3_free(c);
	return SQLITE_OK;
}

static int sj_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str,
		     int argc, sqlite3_value **argv)
{
	struct sj_cursor *c = (struct sj_cursor *)cur;
	struct sj_vtab *v = (struct sj_vtab *)cur->pVtab;
	bool a_mixed, b_mixed;
	int rc;

	(void)idx_num;
	(void)idx_str;
	(void)argc;
	(void)argv;
	/* Read once per statement: a nested loop scans again and again. */
	if (!c->loaded) {
		for (int s = 0; s < 2; s++) {
			rc = rows_load(v, &v->side[s], &c->rows[s]);
			if (rc != SQLITE_OK) {
				rows_free(&c->rows[0], v->side[0].ncols);
				rows_free(&c->rows[1], v->side[1].ncols);
				return rc;
			}
		}
		c->loaded = true;
	}
	a_mixed = v->side[0].part_col && v->partitioning == SJ_PART_MIXED;
	b_mixed = v->side[1].part_col && v->partitioning == SJ_PART_MIXED;
	walk_init(&c->w[0], &v->side[0], &c->rows[0],
		  v->kind == SJ_OUTER && !a_mixed);
	walk_init(&c->w[1], &v->side[1], &c->rows[1],
		  v->kind != SJ_INNER && !b_mixed);
	c->mixed_part = INT64_MIN;
	c->next = NULL;
	c->rowid = 0;
	find_overlap(c, v);
	return SQLITE_OK;
}

static int sj_next(sqlite3_vtab_cursor *cur)
{
	struct sj_cursor *c = (struct sj_cursor *)cur;

	walk_next(c->next);
	find_overlap(c, (struct sj_vtab *)cur->pVtab);
	c->rowid++;
	return SQLITE_OK;
}

static int sj_eof(sqlite3_vtab_cursor *cur)
{
	struct sj_cursor *c = (struct sj_cursor *)cur;

	return c->w[0].state == SJ_EOF || c->w[1].state == SJ_EOF;
}

static int sj_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int n)
{
	struct sj_cursor *c = (struct sj_cursor *)cur;
	struct sj_vtab *v = (struct sj_vtab *)cur->pVtab;
	const struct sj_walk *a = &c->w[0], *b = &c->w[1];
	int64_t start = a->ts > b->ts ? a->ts : b->ts;

	if (n == 0) {
		sqlite3_result_int64(ctx, start);
	} else if (n == 1) {
		int64_t end = a->ts_end < b->ts_end ? a->ts_end : b->ts_end;
		sqlite3_result_int64(ctx, wsub(end, start));
	} else if (n == 2 && v->partitioning != SJ_PART_NONE) {
		if (v->partitioning == SJ_PART_MIXED)
			sqlite3_result_int64(ctx, c->mixed_part);
		else
			sqlite3_result_int64(
			    ctx, a->state == SJ_REAL ? a->part : b->part);
	} else if (n - v->first_data < v->nout) {
		int k = n - v->first_data;
		const struct sj_walk *w = &c->w[v->out_side[k]];
		int ncols = v->side[v->out_side[k]].ncols;
		if (w->state == SJ_REAL)
			sqlite3_result_value(
			    ctx, w->rows->vals[w->row * (size_t)ncols +
					       (size_t)v->out_col[k]]);
		else
			sqlite3_result_null(ctx);
	}
	return SQLITE_OK;
}

static int sj_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid)
{
	*rowid = ((struct sj_cursor *)cur)->rowid;
	return SQLITE_OK;
}

static const sqlite3_module sj_module = {
    .iVersion = 0,
    .xCreate = sj_create,
    .xConnect = sj_create,
    .xBestIndex = sj_best_index,
    .xDisconnect = sj_disconnect,
    .xDestroy = sj_disconnect,
    .xOpen = sj_open,
    .xClose = sj_close,
    .xFilter = sj_filter,
    .xNext = sj_next,
    .xEof = sj_eof,
    .xColumn = sj_column,
    .xRowid = sj_rowid,
};

int tp_spanjoin_register(struct sqlite3 *db)
{
	static const char *const names[] = {"span_join", "span_left_join",
					    "span_outer_join"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int rc = sqlite3_create_module(db, names[i], &sj_module, NULL);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}
