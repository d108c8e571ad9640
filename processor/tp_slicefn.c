/*
 * tp_slicefn.c - the slice table functions ancestor_slice(id) and
 * descendant_slice(id), with Perfetto's columns and rules:
 *
 *  - both give the slice columns id .. thread_instruction_delta, in id
 *    order;
 *  - a NULL id gives no rows; an id that is not an integer, or names no
 *    slice, is an error ("start id should be an integer.", "no row with id
 *    N");
 *  - ancestor_slice: the parent chain of the slice, root first;
 *  - descendant_slice: the slices on the same track, deeper than it, that
 *    start within [ts, ts + dur] (to the end of the trace for an unfinished
 *    slice); one starting exactly at either end counts only if the slice
 *    is on its parent chain.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "tp_ctx.h"
#include "tp_slicefn.h"
#include "tp_slicewalk.h"
#include "vp_alloc.h"

enum { FN_ANCESTOR, FN_DESCENDANT };

/* Output columns: the slice table's, in order, then the hidden argument. */
static const unsigned out_cols[] = {
	TP_SLICE_ts, TP_SLICE_dur, TP_SLICE_track_id, TP_SLICE_category,
	TP_SLICE_name, TP_SLICE_depth, TP_SLICE_parent_id, TP_SLICE_arg_set_id,
	TP_SLICE_thread_ts, TP_SLICE_thread_dur,
	TP_SLICE_thread_instruction_count, TP_SLICE_thread_instruction_delta,
};
#define NOUT (sizeof out_cols / sizeof out_cols[0])
#define ARG_COL (1 + (int)NOUT) /* id, the slice columns, then start_id */

struct fn_vtab {
	sqlite3_vtab base;
	struct tp_ctx *ctx;
	int kind;
};

struct fn_cursor {
	struct tp_slicewalk_cursor w; /* first: the slice ids it gives */
	int64_t arg;
};

struct fn_aux {
	struct tp_ctx *ctx;
	int kind;
};

static int fn_connect(sqlite3 *db, void *aux, int argc,
		      const char *const *argv, sqlite3_vtab **out, char **err)
{
	(void)argc;
	(void)argv;
	(void)err;
	struct fn_aux *a = aux;
	int rc = sqlite3_declare_vtab(
		db, "CREATE TABLE x(id INTEGER, ts INTEGER, dur INTEGER,"
		    " track_id INTEGER, category TEXT, name TEXT,"
		    " depth INTEGER, parent_id INTEGER, arg_set_id INTEGER,"
		    " thread_ts INTEGER, thread_dur INTEGER,"
		    " thread_instruction_count INTEGER,"
		    " thread_instruction_delta INTEGER, start_id HIDDEN)");
	if (rc != SQLITE_OK)
		return rc;
	struct fn_vtab *v = sqlite3_malloc(sizeof *v);
	if (!v)
		return SQLITE_NOMEM;
	memset(v, 0, sizeof *v);
	v->ctx = a->ctx;
	v->kind = a->kind;
	*out = &v->base;
	return SQLITE_OK;
}

static int fn_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
	int rc = tp_slicewalk_best_index(
		vt, info, ARG_COL,
		((struct fn_vtab *)vt)->kind == FN_ANCESTOR
			? "ancestor_slice: the slice id argument is missing"
			: "descendant_slice: the slice id argument is missing");
	if (rc != SQLITE_OK)
		return rc;
	info->estimatedCost = 10;
	info->estimatedRows = 10;
	return SQLITE_OK;
}

static int fn_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
	(void)vt;
	return tp_slicewalk_open(sizeof(struct fn_cursor), out);
}

/* Whether `anc` is on the parent chain of `row`, looking no higher than
 * depth `anc_depth`. */
static bool has_ancestor(struct tp_table *s, uint32_t row, uint32_t anc,
			 int64_t anc_depth)
{
	uint32_t p;

	while (tp_slicewalk_parent(s, row, &p)) {
		if (p == anc)
			return true;
		if (tp_get_int(s, TP_SLICE_depth, p) <= anc_depth)
			return false;
		row = p;
	}
	return false;
}

static void ancestors(struct tp_table *s, struct tp_slicewalk_cursor *c,
		      uint32_t id)
{
	uint32_t row = id, p;
	unsigned guard = 0;

	while (guard++ < 100000 && tp_slicewalk_parent(s, row, &p)) {
		tp_slicewalk_push(c, p);
		row = p;
	}
	tp_slicewalk_sort(c);
}

static void descendants(struct tp_table *s, struct tp_slicewalk_cursor *c,
			uint32_t id)
{
	int64_t ts = tp_get_int(s, TP_SLICE_ts, id);
	int64_t dur = tp_get_int(s, TP_SLICE_dur, id);
	int64_t depth = tp_get_int(s, TP_SLICE_depth, id);
	int64_t end = dur >= 0 ? ts + dur : INT64_MAX;
	const uint32_t *rows;
	uint32_t n = tp_table_lookup(s, TP_SLICE_track_id,
				     tp_get_int(s, TP_SLICE_track_id, id), &rows);

	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = rows[i];
		int64_t rts = tp_get_int(s, TP_SLICE_ts, r);
		if (tp_get_int(s, TP_SLICE_depth, r) <= depth || rts < ts ||
		    rts > end)
			continue;
		if ((rts == ts || rts == end) && !has_ancestor(s, r, id, depth))
			continue;
		tp_slicewalk_push(c, r);
	}
	tp_slicewalk_sort(c);
}

static int fn_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxstr,
		     int argc, sqlite3_value **argv)
{
	(void)idx;
	(void)idxstr;
	struct fn_cursor *c = (struct fn_cursor *)cur;
	struct fn_vtab *v = (struct fn_vtab *)cur->pVtab;
	struct tp_table *s = tp_tab(v->ctx, TP_T_SLICE);

	tp_slicewalk_clear(&c->w);
	if (argc < 1 || sqlite3_value_type(argv[0]) == SQLITE_NULL)
		return SQLITE_OK;
	if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER) {
		sqlite3_free(v->base.zErrMsg);
		v->base.zErrMsg =
			sqlite3_mprintf("start id should be an integer.");
		return SQLITE_ERROR;
	}
	int64_t id = sqlite3_value_int64(argv[0]);
	c->arg = id;
	if (id < 0 || id >= (int64_t)s->nrows) {
		sqlite3_free(v->base.zErrMsg);
		v->base.zErrMsg = sqlite3_mprintf("no row with id %lld",
						  (long long)id);
		return SQLITE_ERROR;
	}
	if (v->kind == FN_ANCESTOR)
		ancestors(s, &c->w, (uint32_t)id);
	else
		descendants(s, &c->w, (uint32_t)id);
	return SQLITE_OK;
}

static int fn_column(sqlite3_vtab_cursor *cur, sqlite3_context *fc, int i)
{
	struct fn_cursor *c = (struct fn_cursor *)cur;
	struct fn_vtab *v = (struct fn_vtab *)cur->pVtab;
	struct tp_table *s = tp_tab(v->ctx, TP_T_SLICE);
	uint32_t row = c->w.rows[c->w.pos];

	if (i == 0) {
		sqlite3_result_int64(fc, row);
		return SQLITE_OK;
	}
	if (i == ARG_COL) {
		sqlite3_result_int64(fc, c->arg);
		return SQLITE_OK;
	}
	unsigned col = out_cols[i - 1];
	if (tp_is_null(s, col, row)) {
		sqlite3_result_null(fc);
	} else if (s->defs[col].type == TP_COL_STR) {
		tp_sql_result_str(fc, s->pool, tp_get_str(s, col, row));
	} else {
		sqlite3_result_int64(fc, tp_get_int(s, col, row));
	}
	return SQLITE_OK;
}

static const sqlite3_module fn_module = {
	.iVersion = 1,
	.xCreate = NULL,
	.xConnect = fn_connect,
	.xBestIndex = fn_best_index,
	.xDisconnect = tp_slicewalk_disconnect,
	.xDestroy = tp_slicewalk_disconnect,
	.xOpen = fn_open,
	.xClose = tp_slicewalk_close,
	.xFilter = fn_filter,
	.xNext = tp_slicewalk_next,
	.xEof = tp_slicewalk_eof,
	.xColumn = fn_column,
	.xRowid = tp_slicewalk_rowid,
};

int tp_slicefn_register(struct sqlite3 *db, struct tp_ctx *ctx)
{
	static const char *const names[] = { "ancestor_slice",
					     "descendant_slice" };
	for (int k = 0; k < 2; k++) {
		struct fn_aux *a = vp_xmalloc(sizeof *a);
		*a = (struct fn_aux){ ctx, k == 0 ? FN_ANCESTOR : FN_DESCENDANT };
		/* on failure SQLite calls the destructor itself */
		int rc = sqlite3_create_module_v2(db, names[k], &fn_module, a,
						  free);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}
