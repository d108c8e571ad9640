/*
 * tp_db.c - string pool, columnar tables and the SQLite virtual-table module
 * that exposes them (see tp_db.h).
 */
#include "tp_db.h"
#include "vp_alloc.h"
#include "vp_log.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>


/* ---- string pool ------------------------------------------------------ */

#define POOL_CHUNK (1u << 20)

struct pool_chunk {
	struct pool_chunk *next;
	size_t used, cap;
	char data[];
};

struct tp_strpool {
	char **str;       /* id -> text (NUL-terminated) */
	uint32_t *len;    /* id -> length */
	uint32_t n, cap;  /* ids in use (id 0 reserved) */
	uint32_t *slots;  /* open addressing: ids, 0 = empty */
	uint32_t *hashes; /* hash of the string in each slot */
	uint32_t nslots;  /* power of two */
	struct pool_chunk *chunks;
	size_t bytes;
};

static uint32_t str_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)s[i];
		h *= 0x100000001b3ull;
	}
	return (uint32_t)(h ^ (h >> 32));
}

struct tp_strpool *tp_strpool_new(void)
{
	struct tp_strpool *p = vp_xcalloc(1, sizeof(*p));
	p->n = 1;
	return p;
}

void tp_strpool_free(struct tp_strpool *p)
{
	if (!p)
		return;
	while (p->chunks) {
		struct pool_chunk *c = p->chunks;
		p->chunks = c->next;
		free(c);
	}
	free(p->str);
	free(p->len);
	free(p->slots);
	free(p->hashes);
	free(p);
}

static char *pool_copy(struct tp_strpool *p, const char *s, size_t len)
{
	struct pool_chunk *c = p->chunks;
	if (!c || c->cap - c->used < len + 1) {
		size_t cap = len + 1 > POOL_CHUNK / 4 ? len + 1 : POOL_CHUNK;
		c = vp_xrealloc(NULL, sizeof(*c) + cap);
		c->used = 0;
		c->cap = cap;
		if (cap == POOL_CHUNK || !p->chunks) {
			c->next = p->chunks;
			p->chunks = c;
		} else { /* a big string: keep the current chunk in front */
			c->next = p->chunks->next;
			p->chunks->next = c;
		}
		p->bytes += sizeof(*c) + cap;
	}
	char *d = c->data + c->used;
	memcpy(d, s, len);
	d[len] = '\0';
	c->used += len + 1;
	return d;
}

static void pool_rehash(struct tp_strpool *p)
{
	uint32_t n = p->nslots ? p->nslots * 2 : 1024;
	uint32_t *slots = vp_xcalloc(n, sizeof(*slots));
	uint32_t *hashes = vp_xcalloc(n, sizeof(*hashes));
	for (uint32_t i = 0; i < p->nslots; i++) {
		if (!p->slots[i])
			continue;
		uint32_t j = p->hashes[i] & (n - 1);
		while (slots[j])
			j = (j + 1) & (n - 1);
		slots[j] = p->slots[i];
		hashes[j] = p->hashes[i];
	}
	free(p->slots);
	free(p->hashes);
	p->slots = slots;
	p->hashes = hashes;
	p->nslots = n;
}

tp_str tp_intern(struct tp_strpool *p, const char *s, size_t len)
{
	if (!s)
		return 0;
	if (len > UINT32_MAX - 1)
		len = UINT32_MAX - 1;
	if ((uint64_t)(p->n + 1) * 4 >= (uint64_t)p->nslots * 3)
		pool_rehash(p);
	uint32_t h = str_hash(s, len);
	uint32_t j = h & (p->nslots - 1);
	while (p->slots[j]) {
		uint32_t id = p->slots[j];
		if (p->hashes[j] == h && p->len[id] == len &&
		    memcmp(p->str[id], s, len) == 0)
			return id;
		j = (j + 1) & (p->nslots - 1);
	}
	if (p->n >= p->cap) {
		p->cap = p->cap ? p->cap * 2 : 1024;
		p->str = vp_xrealloc(p->str, p->cap * sizeof(*p->str));
		p->len = vp_xrealloc(p->len, p->cap * sizeof(*p->len));
	}
	uint32_t id = p->n++;
	p->str[id] = pool_copy(p, s, len);
	p->len[id] = (uint32_t)len;
	p->slots[j] = id;
	p->hashes[j] = h;
	return id;
}

void tp_sql_result_str(struct sqlite3_context *fn, const struct tp_strpool *p,
		       tp_str id)
{
	if (!id) {
		sqlite3_result_null(fn);
		return;
	}
	sqlite3_result_text(fn, tp_str_get(p, id), -1, SQLITE_STATIC);
}

tp_str tp_intern_cstr(struct tp_strpool *p, const char *s)
{
	return s ? tp_intern(p, s, strlen(s)) : 0;
}

tp_str tp_intern_fmt(struct tp_strpool *p, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	return tp_intern(p, buf, (size_t)n);
}

const char *tp_str_get(const struct tp_strpool *p, tp_str id)
{
	return id && id < p->n ? p->str[id] : NULL;
}

size_t tp_str_len(const struct tp_strpool *p, tp_str id)
{
	return id && id < p->n ? p->len[id] : 0;
}

size_t tp_strpool_bytes(const struct tp_strpool *p)
{
	return p->bytes + (size_t)p->cap * 12 + (size_t)p->nslots * 8;
}

/* ---- tables ----------------------------------------------------------- */

static size_t type_size(enum tp_coltype t, bool wide)
{
	switch (t) {
	case TP_COL_INT:
		return wide ? sizeof(int64_t) : sizeof(int32_t);
	case TP_COL_REAL:
		return sizeof(double);
	case TP_COL_STR:
		return sizeof(tp_str);
	case TP_COL_ALIAS:
		return 0;
	}
	return 0;
}

void tp_table_init(struct tp_table *t, const char *name,
		   const struct tp_coldef *defs, unsigned ncols,
		   struct tp_strpool *pool)
{
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->defs = defs;
	t->ncols = ncols;
	t->pool = pool;
	t->cols = vp_xcalloc(ncols ? ncols : 1, sizeof(*t->cols));
}

void tp_table_free(struct tp_table *t)
{
	for (unsigned i = 0; i < t->ncols; i++) {
		free(t->cols[i].data);
		free(t->cols[i].present);
		free(t->cols[i].index);
	}
	free(t->cols);
	memset(t, 0, sizeof(*t));
}

static size_t bitmap_words(uint32_t rows)
{
	return ((size_t)rows + 63) / 64;
}

/* Resizes the allocated arrays of column c to cap rows. */
static void column_resize(struct tp_table *t, unsigned c, uint32_t old_cap,
			  uint32_t cap)
{
	struct tp_column *col = &t->cols[c];
	if (!col->present)
		return;
	col->data = vp_xrealloc(col->data,
			     (size_t)cap * type_size(t->defs[c].type, col->wide));
	col->present = vp_xrealloc(col->present, bitmap_words(cap) * 8);
	size_t ow = bitmap_words(old_cap), nw = bitmap_words(cap);
	if (nw > ow)
		memset(col->present + ow, 0, (nw - ow) * 8);
}

uint32_t tp_table_add_row(struct tp_table *t)
{
	if (t->nrows == t->cap) {
		if (t->cap >= UINT32_MAX - 1) {
			vp_log_error("table %s is full", t->name);
			abort();
		}
		uint64_t cap = t->cap ? (uint64_t)t->cap + t->cap / 2 : 256;
		if (cap > UINT32_MAX - 1)
			cap = UINT32_MAX - 1;
		for (unsigned i = 0; i < t->ncols; i++)
			column_resize(t, i, t->cap, (uint32_t)cap);
		t->cap = (uint32_t)cap;
	}
	return t->nrows++;
}

void tp_table_shrink(struct tp_table *t)
{
	uint32_t cap = t->nrows ? t->nrows : 1;
	/* Round up to a whole bitmap word so the last word stays owned. */
	cap = (uint32_t)(bitmap_words(cap) * 64 > UINT32_MAX - 1
				 ? UINT32_MAX - 1
				 : bitmap_words(cap) * 64);
	if (cap >= t->cap)
		return;
	for (unsigned i = 0; i < t->ncols; i++)
		column_resize(t, i, t->cap, cap);
	t->cap = cap;
}

size_t tp_table_bytes(const struct tp_table *t)
{
	size_t b = 0;
	for (unsigned i = 0; i < t->ncols; i++) {
		if (t->cols[i].present)
			b += (size_t)t->cap * type_size(t->defs[i].type,
							t->cols[i].wide) +
			     bitmap_words(t->cap) * 8;
		if (t->cols[i].index)
			b += (size_t)t->cols[i].index_rows * 4;
	}
	return b;
}

/* Makes column c ready to store row `row`; returns its data array. */
static void *column_slot(struct tp_table *t, unsigned c, uint32_t row)
{
	struct tp_column *col = &t->cols[c];
	if (!col->present) {
		col->present = vp_xcalloc(bitmap_words(t->cap), 8);
		col->data = vp_xmalloc((size_t)t->cap *
				   type_size(t->defs[c].type, col->wide));
	}
	col->present[row >> 6] |= 1ull << (row & 63);
	return col->data;
}

/* Moves an INT column from 32-bit to 64-bit storage. */
static void column_widen(struct tp_table *t, unsigned c)
{
	struct tp_column *col = &t->cols[c];
	int64_t *w = vp_xrealloc(NULL, (size_t)(t->cap ? t->cap : 1) * 8);
	const int32_t *n = col->data;
	for (uint32_t r = 0; r < t->nrows && n; r++)
		w[r] = n[r];
	free(col->data);
	col->data = w;
	col->wide = true;
}

void tp_set_int_slow(struct tp_table *t, unsigned col, uint32_t row,
		     int64_t v)
{
	struct tp_column *c = &t->cols[col];
	if (t->defs[col].type != TP_COL_INT)
		return;
	if (c->wide) {
		((int64_t *)column_slot(t, col, row))[row] = v;
		return;
	}
	if (v != (int32_t)v) {
		if (!c->present) {
			c->wide = true; /* allocate it wide from the start */
			((int64_t *)column_slot(t, col, row))[row] = v;
			return;
		}
		column_widen(t, col);
		((int64_t *)column_slot(t, col, row))[row] = v;
		return;
	}
	((int32_t *)column_slot(t, col, row))[row] = (int32_t)v;
}

void tp_set_real(struct tp_table *t, unsigned col, uint32_t row, double v)
{
	if (t->defs[col].type != TP_COL_REAL)
		return;
	((double *)column_slot(t, col, row))[row] = v;
}

void tp_set_str_slow(struct tp_table *t, unsigned col, uint32_t row,
		     tp_str v)
{
	if (t->defs[col].type != TP_COL_STR)
		return;
	if (!v) {
		tp_set_null(t, col, row);
		return;
	}
	((tp_str *)column_slot(t, col, row))[row] = v;
}

void tp_set_null(struct tp_table *t, unsigned col, uint32_t row)
{
	struct tp_column *c = &t->cols[col];
	if (c->present)
		c->present[row >> 6] &= ~(1ull << (row & 63));
}

/* ---- sorted indexes --------------------------------------------------- */

/* qsort_r has no portable context argument; sort with our own merge sort
 * (stable, so equal values stay in row order). */
/* The value of row r of an INT column, whatever its width. */
static inline int64_t col_val(const struct tp_column *c, uint32_t r)
{
	return c->wide ? ((const int64_t *)c->data)[r]
		       : ((const int32_t *)c->data)[r];
}

static void index_sort(uint32_t *rows, uint32_t *tmp, uint32_t n,
		       const struct tp_column *vals)
{
	for (uint32_t w = 1; w < n; w *= 2) {
		for (uint32_t lo = 0; lo < n; lo += 2 * w) {
			uint32_t mid = lo + w < n ? lo + w : n;
			uint32_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			uint32_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = col_val(vals, rows[j]) < col_val(vals, rows[i]) ? rows[j++]
									 : rows[i++];
			while (i < mid)
				tmp[k++] = rows[i++];
			while (j < hi)
				tmp[k++] = rows[j++];
		}
		memcpy(rows, tmp, (size_t)n * sizeof(*rows));
	}
}

static void index_build(struct tp_table *t, unsigned c)
{
	struct tp_column *col = &t->cols[c];
	free(col->index);
	col->index = NULL;
	col->index_rows = t->nrows;
	if (!col->present)
		return;
	uint32_t n = 0;
	bool sorted = true;
	uint32_t *rows = vp_xrealloc(NULL, (size_t)t->nrows * sizeof(*rows) + 4);
	for (uint32_t r = 0; r < t->nrows; r++) {
		if (!(col->present[r >> 6] >> (r & 63) & 1))
			continue;
		if (n && col_val(col, r) < col_val(col, rows[n - 1]))
			sorted = false;
		rows[n++] = r;
	}
	if (!sorted) {
		uint32_t *tmp = vp_xrealloc(NULL, (size_t)n * sizeof(*tmp) + 4);
		index_sort(rows, tmp, n, col);
		free(tmp);
	}
	col->index = rows;
	col->index_len = n;
	col->index_rows = t->nrows;
}

uint32_t tp_table_lookup(struct tp_table *t, unsigned col, int64_t v,
			 const uint32_t **rows)
{
	struct tp_column *c = &t->cols[col];
	*rows = NULL;
	if (t->defs[col].type != TP_COL_INT)
		return 0;
	if (!c->index || c->index_rows != t->nrows)
		index_build(t, col);
	if (!c->index)
		return 0;
	uint32_t lo = 0, hi = c->index_len;
	while (lo < hi) { /* first position with value >= v */
		uint32_t mid = lo + (hi - lo) / 2;
		if (col_val(c, c->index[mid]) < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint32_t first = lo;
	hi = c->index_len;
	while (lo < hi) { /* first position with value > v */
		uint32_t mid = lo + (hi - lo) / 2;
		if (col_val(c, c->index[mid]) <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	*rows = c->index + first;
	return lo - first;
}

/* ---- SQLite virtual tables -------------------------------------------- */

/*
 * One eponymous virtual-table module per table.  idxNum in xBestIndex:
 *   0      full scan in id order
 *   1      id = ?            (row index)
 *   2 + c  column c = ?      (sorted index of an INT column)
 */
struct tp_vtab {
	sqlite3_vtab base;
	struct tp_table *t;
};

struct tp_cursor {
	sqlite3_vtab_cursor base;
	struct tp_table *t;
	const uint32_t *rows; /* NULL: rows pos..end themselves */
	uint32_t pos, end;
};

static const char *sql_type(enum tp_coltype t)
{
	switch (t) {
	case TP_COL_INT:
	case TP_COL_ALIAS:
		return "INTEGER";
	case TP_COL_REAL:
		return "DOUBLE";
	case TP_COL_STR:
		return "TEXT";
	}
	return "";
}

static int vt_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
		      sqlite3_vtab **out, char **errmsg)
{
	(void)argc;
	(void)argv;
	(void)errmsg;
	struct tp_table *t = aux;
	sqlite3_str *s = sqlite3_str_new(db);
	/* A table whose first column is an alias of id (thread's utid,
	 * process's upid) lists it before id, as Perfetto's does.  Both
	 * columns are the row number, so only their names trade places. */
	unsigned first = 0;
	if (t->ncols && t->defs[0].type == TP_COL_ALIAS) {
		sqlite3_str_appendf(s, "CREATE TABLE x(\"%w\" INTEGER, id INTEGER",
				    t->defs[0].name);
		first = 1;
	} else {
		sqlite3_str_appendf(s, "CREATE TABLE x(id INTEGER");
	}
	for (unsigned i = first; i < t->ncols; i++)
		sqlite3_str_appendf(s, ", \"%w\" %s", t->defs[i].name,
				    sql_type(t->defs[i].type));
	sqlite3_str_appendf(s, ")");
	char *sql = sqlite3_str_finish(s);
	if (!sql)
		return SQLITE_NOMEM;
	int rc = sqlite3_declare_vtab(db, sql);
	sqlite3_free(sql);
	if (rc != SQLITE_OK)
		return rc;
	struct tp_vtab *v = sqlite3_malloc(sizeof(*v));
	if (!v)
		return SQLITE_NOMEM;
	memset(v, 0, sizeof(*v));
	v->t = t;
	*out = &v->base;
	return SQLITE_OK;
}

static int vt_disconnect(sqlite3_vtab *vt)
{
	sqlite3_free(vt);
	return SQLITE_OK;
}

static int vt_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
	struct tp_table *t = ((struct tp_vtab *)vt)->t;
	double n = t->nrows ? (double)t->nrows : 1.0;
	int best = -1, best_kind = 0;

	for (int i = 0; i < info->nConstraint; i++) {
		const struct sqlite3_index_constraint *c = &info->aConstraint[i];
		if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ)
			continue;
		int col = c->iColumn;
		int kind = 0;
		if (col < 0 || col == 0 ||
		    t->defs[col - 1].type == TP_COL_ALIAS)
			kind = 1;
		else if (t->defs[col - 1].type == TP_COL_INT)
			kind = 2 + (col - 1);
		else
			continue;
		if (best < 0 || (kind == 1 && best_kind != 1)) {
			best = i;
			best_kind = kind;
		}
	}
	if (best >= 0) {
		info->aConstraintUsage[best].argvIndex = 1;
		info->aConstraintUsage[best].omit = 1;
		info->idxNum = best_kind;
		if (best_kind == 1) {
			info->estimatedCost = 1.0;
			info->estimatedRows = 1;
			info->idxFlags = SQLITE_INDEX_SCAN_UNIQUE;
		} else {
			/* binary search, then a few rows */
			double lg = 1.0;
			for (double m = n; m > 1.0; m /= 2.0)
				lg += 1.0;
			info->estimatedCost = lg + 10.0;
			info->estimatedRows = 10;
		}
	} else {
		info->idxNum = 0;
		info->estimatedCost = n;
		info->estimatedRows = (sqlite3_int64)n;
	}
	/* Every plan yields rows in id order (index lookups are stable). */
	int by = info->nOrderBy == 1 ? info->aOrderBy[0].iColumn : -2;
	bool by_row = by == -1 || by == 0 ||
		      (by == 1 && t->defs[0].type == TP_COL_ALIAS);
	if (info->nOrderBy == 1 && by_row && !info->aOrderBy[0].desc)
		info->orderByConsumed = 1;
	return SQLITE_OK;
}

static int vt_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
	struct tp_cursor *c = sqlite3_malloc(sizeof(*c));
	if (!c)
		return SQLITE_NOMEM;
	memset(c, 0, sizeof(*c));
	c->t = ((struct tp_vtab *)vt)->t;
	*out = &c->base;
	return SQLITE_OK;
}

static int vt_close(sqlite3_vtab_cursor *cur)
{
	sqlite3_free(cur);
	return SQLITE_OK;
}

/* The integer an equality constraint compares against, if it is one. */
static bool value_as_int(sqlite3_value *v, int64_t *out)
{
	switch (sqlite3_value_numeric_type(v)) {
	case SQLITE_INTEGER:
		*out = sqlite3_value_int64(v);
		return true;
	case SQLITE_FLOAT: {
		double d = sqlite3_value_double(v);
		if (d >= -9.2e18 && d <= 9.2e18 && d == (double)(int64_t)d) {
			*out = (int64_t)d;
			return true;
		}
		return false;
	}
	default:
		return false;
	}
}

static int vt_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxstr,
		     int argc, sqlite3_value **argv)
{
	(void)idxstr;
	struct tp_cursor *c = (struct tp_cursor *)cur;
	struct tp_table *t = c->t;
	int64_t v;

	c->rows = NULL;
	c->pos = 0;
	c->end = t->nrows;
	if (idx == 0)
		return SQLITE_OK;
	if (argc < 1 || !value_as_int(argv[0], &v)) {
		c->end = 0;
		return SQLITE_OK;
	}
	if (idx == 1) {
		if (v >= 0 && v < (int64_t)t->nrows) {
			c->pos = (uint32_t)v;
			c->end = (uint32_t)v + 1;
		} else {
			c->end = 0;
		}
		return SQLITE_OK;
	}
	unsigned col = (unsigned)(idx - 2);
	if (col >= t->ncols) {
		c->end = 0;
		return SQLITE_OK;
	}
	c->end = tp_table_lookup(t, col, v, &c->rows);
	return SQLITE_OK;
}

static int vt_next(sqlite3_vtab_cursor *cur)
{
	((struct tp_cursor *)cur)->pos++;
	return SQLITE_OK;
}

static int vt_eof(sqlite3_vtab_cursor *cur)
{
	struct tp_cursor *c = (struct tp_cursor *)cur;
	return c->pos >= c->end;
}

static uint32_t cursor_row(const struct tp_cursor *c)
{
	return c->rows ? c->rows[c->pos] : c->pos;
}

static int vt_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int i)
{
	struct tp_cursor *c = (struct tp_cursor *)cur;
	struct tp_table *t = c->t;
	uint32_t row = cursor_row(c);

	if (i == 0) {
		sqlite3_result_int64(ctx, row);
		return SQLITE_OK;
	}
	unsigned col = (unsigned)(i - 1);
	if (tp_is_null(t, col, row)) {
		sqlite3_result_null(ctx);
		return SQLITE_OK;
	}
	switch (t->defs[col].type) {
	case TP_COL_ALIAS:
		sqlite3_result_int64(ctx, row);
		break;
	case TP_COL_INT:
		sqlite3_result_int64(ctx, tp_get_int(t, col, row));
		break;
	case TP_COL_REAL:
		sqlite3_result_double(ctx, tp_get_real(t, col, row));
		break;
	case TP_COL_STR: {
		tp_sql_result_str(ctx, t->pool, tp_get_str(t, col, row));
		break;
	}
	}
	return SQLITE_OK;
}

static int vt_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out)
{
	*out = cursor_row((struct tp_cursor *)cur);
	return SQLITE_OK;
}

static const sqlite3_module tp_module = {
	.iVersion = 1,
	.xCreate = NULL, /* eponymous only */
	.xConnect = vt_connect,
	.xBestIndex = vt_best_index,
	.xDisconnect = vt_disconnect,
	.xDestroy = vt_disconnect,
	.xOpen = vt_open,
	.xClose = vt_close,
	.xFilter = vt_filter,
	.xNext = vt_next,
	.xEof = vt_eof,
	.xColumn = vt_column,
	.xRowid = vt_rowid,
};

int tp_db_attach(sqlite3 *db, struct tp_table *const *tables, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int rc = sqlite3_create_module_v2(db, tables[i]->name,
						  &tp_module, tables[i], NULL);
		if (rc != SQLITE_OK)
			return -1;
	}
	return 0;
}
