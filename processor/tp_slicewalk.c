/*
 * tp_slicewalk.c - the common part of the table functions over the slice
 * table (see tp_slicewalk.h).
 */
#include <stdlib.h>
#include <string.h>

#include "tp_schema.h"
#include "tp_slicewalk.h"
#include "vp_alloc.h"

bool tp_slicewalk_parent(const struct tp_table *s, uint32_t row,
			 uint32_t *parent)
{
	if (tp_is_null(s, TP_SLICE_parent_id, row))
		return false;
	int64_t p = tp_get_int(s, TP_SLICE_parent_id, row);
	if (p < 0 || p >= (int64_t)s->nrows)
		return false;
	*parent = (uint32_t)p;
	return true;
}

void tp_slicewalk_push(struct tp_slicewalk_cursor *c, uint32_t row)
{
	if (c->n == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 16;
		uint32_t *r = vp_xrealloc(c->rows, cap * sizeof *r);
		c->rows = r;
		c->cap = cap;
	}
	c->rows[c->n++] = row;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

void tp_slicewalk_sort(struct tp_slicewalk_cursor *c)
{
	if (c->n > 1) /* c->rows is NULL when empty: not for qsort */
		qsort(c->rows, c->n, sizeof *c->rows, cmp_u32);
}

void tp_slicewalk_clear(struct tp_slicewalk_cursor *c)
{
	c->n = 0;
	c->pos = 0;
}

int tp_slicewalk_best_index(sqlite3_vtab *vt, sqlite3_index_info *info,
			    int arg_col, const char *missing)
{
	int arg = -1;
	for (int i = 0; i < info->nConstraint; i++) {
		const struct sqlite3_index_constraint *c = &info->aConstraint[i];
		if (c->iColumn != arg_col)
			continue;
		if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ)
			return SQLITE_CONSTRAINT;
		arg = i;
	}
	if (arg < 0) {
		sqlite3_free(vt->zErrMsg);
		vt->zErrMsg = sqlite3_mprintf("%s", missing);
		return SQLITE_ERROR;
	}
	info->aConstraintUsage[arg].argvIndex = 1;
	info->aConstraintUsage[arg].omit = 1;
	if (info->nOrderBy == 1 && info->aOrderBy[0].iColumn == 0 &&
	    !info->aOrderBy[0].desc)
		info->orderByConsumed = 1;
	return SQLITE_OK;
}

int tp_slicewalk_disconnect(sqlite3_vtab *vt)
{
	sqlite3_free(vt);
	return SQLITE_OK;
}

int tp_slicewalk_open(size_t size, sqlite3_vtab_cursor **out)
{
	sqlite3_vtab_cursor *c = sqlite3_malloc64(size);
	if (!c)
		return SQLITE_NOMEM;
	memset(c, 0, size);
	*out = c;
	return SQLITE_OK;
}

int tp_slicewalk_close(sqlite3_vtab_cursor *cur)
{
	free(((struct tp_slicewalk_cursor *)cur)->rows);
	sqlite3_free(cur);
	return SQLITE_OK;
}

int tp_slicewalk_next(sqlite3_vtab_cursor *cur)
{
	((struct tp_slicewalk_cursor *)cur)->pos++;
	return SQLITE_OK;
}

int tp_slicewalk_eof(sqlite3_vtab_cursor *cur)
{
	struct tp_slicewalk_cursor *c = (struct tp_slicewalk_cursor *)cur;
	return c->pos >= c->n;
}

int tp_slicewalk_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out)
{
	struct tp_slicewalk_cursor *c = (struct tp_slicewalk_cursor *)cur;
	*out = c->rows[c->pos];
	return SQLITE_OK;
}
