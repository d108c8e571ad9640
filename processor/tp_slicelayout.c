/*
 * tp_slicelayout.c - experimental_slice_layout(filter_track_ids), with
 * Perfetto's columns (id, layout_depth) and rules.
 *
 * The argument is a string of track ids joined by commas (anything else
 * is an error; tokens that are not ids are skipped).  The slices of those
 * tracks are laid out as one: each root slice with its descendants is a
 * box (its time span, its deepest depth); boxes are placed tallest first
 * (then by start, then by order), each at the lowest run of rows free
 * over its whole span; a slice's layout_depth is its depth plus its box's
 * row.  Rows come in slice id order.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "tp_ctx.h"
#include "tp_slicelayout.h"
#include "tp_slicewalk.h"
#include "u64map.h"
#include "vp_alloc.h"

#define ARG_COL 2 /* id, layout_depth, then filter_track_ids */

struct box {
	int64_t start, end;
	uint32_t max_depth, layout_depth, order;
};

/* A layout row: the [start, end) spans taken on it, sorted, disjoint. */
struct lrow {
	int64_t (*spans)[2];
	size_t n, cap;
};

struct lay_vtab {
	sqlite3_vtab base;
	struct tp_ctx *ctx;
};

struct lay_cursor {
	struct tp_slicewalk_cursor w; /* first: the slice ids it gives */
	uint32_t *depths;             /* the layout_depth of each */
	char *arg;
};

/* First span of r starting at or after ts. */
static size_t lower_bound(const struct lrow *r, int64_t ts)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->spans[mid][0] < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool row_free(const struct lrow *r, int64_t start, int64_t end)
{
	if (!r->n || start >= r->spans[r->n - 1][1])
		return true;
	size_t i = lower_bound(r, start);
	if (i < r->n && r->spans[i][0] < end)
		return false;
	if (i > 0 && r->spans[i - 1][1] > start)
		return false;
	return true;
}

static void row_mark(struct lrow *r, int64_t start, int64_t end)
{
	VP_XGROW(r->spans, r->cap, r->n + 1);
	size_t i = r->n && start < r->spans[r->n - 1][0] ? lower_bound(r, start)
							  : r->n;
	memmove(&r->spans[i + 1], &r->spans[i],
		(r->n - i) * sizeof *r->spans);
	r->spans[i][0] = start;
	r->spans[i][1] = end;
	r->n++;
}

static int cmp_box(const void *a, const void *b)
{
	const struct box *x = *(const struct box *const *)a;
	const struct box *y = *(const struct box *const *)b;
	if (x->max_depth != y->max_depth)
		return x->max_depth > y->max_depth ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Places the boxes: each at the lowest run of max_depth + 1 rows free
 * over its span. */
static void place(struct box **order, size_t n)
{
	struct lrow *rows = NULL;
	size_t nrows = 0;

	for (size_t k = 0; k < n; k++) {
		struct box *g = order[k];
		uint32_t depth = 0, run = 0;
		for (uint32_t r = 0;; r++) {
			if (r >= nrows || row_free(&rows[r], g->start, g->end)) {
				if (run == 0)
					depth = r;
				if (++run == g->max_depth + 1)
					break;
			} else {
				run = 0;
			}
		}
		g->layout_depth = depth;
		size_t top = (size_t)depth + g->max_depth;
		if (top >= nrows) {
			rows = vp_xrealloc(rows, (top + 1) * sizeof *rows);
			memset(&rows[nrows], 0, (top + 1 - nrows) * sizeof *rows);
			nrows = top + 1;
		}
		for (size_t r = depth; r <= top; r++)
			row_mark(&rows[r], g->start, g->end);
	}
	for (size_t r = 0; r < nrows; r++)
		free(rows[r].spans);
	free(rows);
}

/* The track ids of the argument, as a set. */
static void parse_tracks(const char *s, struct u64map *tracks)
{
	while (*s) {
		char *end;
		const char *tok = s;
		size_t len = strcspn(s, ",");
		unsigned long long v = strtoull(tok, &end, 10);
		if (len && end == tok + len && *tok >= '0' && *tok <= '9' &&
		    v <= UINT32_MAX)
			u64map_put(tracks, v, 1);
		s += len;
		if (*s == ',')
			s++;
	}
}

static void layout(struct tp_ctx *ctx, struct lay_cursor *c,
		   const char *filter)
{
	struct tp_table *t = tp_tab(ctx, TP_T_SLICE);
	struct u64map tracks, group_of;
	struct box *boxes = NULL;
	uint32_t *group = NULL;
	size_t nboxes = 0, capboxes = 0, capgroup = 0;
	uint64_t v;
	uint32_t parent;

	u64map_init(&tracks);
	u64map_init(&group_of);
	parse_tracks(filter, &tracks);
	/* Slices come in id order, so a parent is seen before its children. */
	for (uint32_t row = 0; row < t->nrows; row++) {
		if (!u64map_get(&tracks,
				(uint64_t)tp_get_int(t, TP_SLICE_track_id, row),
				&v))
			continue;
		uint32_t depth = (uint32_t)tp_get_int(t, TP_SLICE_depth, row);
		int64_t start = tp_get_int(t, TP_SLICE_ts, row);
		int64_t dur = tp_get_int(t, TP_SLICE_dur, row);
		int64_t end = dur == -1 ? INT64_MAX : start + dur;
		uint32_t g;
		if (tp_slicewalk_parent(t, row, &parent) &&
		    u64map_get(&group_of, parent, &v)) {
			g = (uint32_t)v;
			if (depth > boxes[g].max_depth)
				boxes[g].max_depth = depth;
			if (end > boxes[g].end)
				boxes[g].end = end;
		} else {
			VP_XGROW(boxes, capboxes, nboxes + 1);
			g = (uint32_t)nboxes;
			boxes[nboxes++] = (struct box){ start, end, depth, 0, g };
		}
		u64map_put(&group_of, row, g);
		VP_XGROW(group, capgroup, (size_t)c->w.n + 1);
		group[c->w.n] = g;
		tp_slicewalk_push(&c->w, row);
	}
	if (nboxes) {
		struct box **order = vp_xmalloc(nboxes * sizeof *order);
		for (size_t i = 0; i < nboxes; i++)
			order[i] = &boxes[i];
		qsort(order, nboxes, sizeof *order, cmp_box);
		place(order, nboxes);
		free(order);
	}
	c->depths = c->w.n ? vp_xreallocarray(NULL, c->w.n, sizeof *c->depths)
			   : NULL;
	for (uint32_t i = 0; i < c->w.n; i++)
		c->depths[i] = (uint32_t)tp_get_int(t, TP_SLICE_depth,
						    c->w.rows[i]) +
			       boxes[group[i]].layout_depth;
	free(boxes);
	free(group);
	u64map_free(&tracks);
	u64map_free(&group_of);
}

static int lay_connect(sqlite3 *db, void *aux, int argc,
		       const char *const *argv, sqlite3_vtab **out, char **err)
{
	(void)argc;
	(void)argv;
	(void)err;
	int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(id INTEGER,"
					  " layout_depth INTEGER,"
					  " filter_track_ids HIDDEN)");
	if (rc != SQLITE_OK)
		return rc;
	struct lay_vtab *v = sqlite3_malloc(sizeof *v);
	if (!v)
		return SQLITE_NOMEM;
	memset(v, 0, sizeof *v);
	v->ctx = aux;
	*out = &v->base;
	return SQLITE_OK;
}

static int lay_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
	int rc = tp_slicewalk_best_index(vt, info, ARG_COL,
					 "experimental_slice_layout: the "
					 "track id list is missing");
	if (rc != SQLITE_OK)
		return rc;
	info->estimatedCost = 1000;
	return SQLITE_OK;
}

static int lay_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
	(void)vt;
	return tp_slicewalk_open(sizeof(struct lay_cursor), out);
}

static void reset(struct lay_cursor *c)
{
	free(c->depths);
	free(c->arg);
	c->depths = NULL;
	c->arg = NULL;
	tp_slicewalk_clear(&c->w);
}

static int lay_close(sqlite3_vtab_cursor *cur)
{
	reset((struct lay_cursor *)cur);
	return tp_slicewalk_close(cur);
}

static int lay_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxstr,
		      int argc, sqlite3_value **argv)
{
	(void)idx;
	(void)idxstr;
	struct lay_cursor *c = (struct lay_cursor *)cur;
	struct lay_vtab *v = (struct lay_vtab *)cur->pVtab;

	reset(c);
	if (argc < 1 || sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
		sqlite3_free(v->base.zErrMsg);
		v->base.zErrMsg = sqlite3_mprintf("invalid input track id list");
		return SQLITE_ERROR;
	}
	const char *s = (const char *)sqlite3_value_text(argv[0]);
	c->arg = vp_xstrdup(s ? s : "");
	layout(v->ctx, c, c->arg);
	return SQLITE_OK;
}

static int lay_column(sqlite3_vtab_cursor *cur, sqlite3_context *fc, int i)
{
	struct lay_cursor *c = (struct lay_cursor *)cur;

	if (i == 0)
		sqlite3_result_int64(fc, c->w.rows[c->w.pos]);
	else if (i == 1)
		sqlite3_result_int64(fc, c->depths[c->w.pos]);
	else
		sqlite3_result_text(fc, c->arg, -1, SQLITE_STATIC);
	return SQLITE_OK;
}

static const sqlite3_module lay_module = {
	.iVersion = 1,
	.xCreate = NULL,
	.xConnect = lay_connect,
	.xBestIndex = lay_best_index,
	.xDisconnect = tp_slicewalk_disconnect,
	.xDestroy = tp_slicewalk_disconnect,
	.xOpen = lay_open,
	.xClose = lay_close,
	.xFilter = lay_filter,
	.xNext = tp_slicewalk_next,
	.xEof = tp_slicewalk_eof,
	.xColumn = lay_column,
	.xRowid = tp_slicewalk_rowid,
};

int tp_slicelayout_register(struct sqlite3 *db, struct tp_ctx *ctx)
{
	return sqlite3_create_module(db, "experimental_slice_layout",
				     &lay_module, ctx);
}
