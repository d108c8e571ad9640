/*
 * tp_db.h - the trace processor's storage: a string pool and columnar tables
 * that SQLite reads through virtual tables.
 *
 * Loading a trace appends rows to tables held as plain C arrays (one array
 * per column, plus a presence bitmap, so a column nobody sets costs nothing;
 * an integer column is stored in 32 bits until a value needs 64).
 * After loading, tp_db_attach() registers every table with an SQLite
 * connection as an eponymous virtual table, so queries read the arrays
 * directly: no INSERT, no copy.  Equality constraints on the id column are
 * answered by row index; on any other integer column by a sorted index built
 * the first time a query asks for it.
 *
 * Every table's first SQL column is `id`, the row index.
 */
#ifndef VP_TP_DB_H
#define VP_TP_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sqlite3;
struct sqlite3_context;

/* ---- string pool ------------------------------------------------------ */

/* An interned string: 0 is NULL, anything else an index into the pool.
 * Equal strings always get the same id. */
typedef uint32_t tp_str;

struct tp_strpool;

struct tp_strpool *tp_strpool_new(void);
void tp_strpool_free(struct tp_strpool *p);
/* Interns len bytes (need not be NUL-terminated).  A NUL inside is kept,
 * as Perfetto's StringPool keeps it, but SQL sees the text only up to it
 * (tp_sql_result_str). */
tp_str tp_intern(struct tp_strpool *p, const char *s, size_t len);
tp_str tp_intern_cstr(struct tp_strpool *p, const char *s);
/* A printf-formatted string, interned (cut at 1023 bytes). */
tp_str tp_intern_fmt(struct tp_strpool *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* NUL-terminated text of id, or NULL for id 0. */
const char *tp_str_get(const struct tp_strpool *p, tp_str id);
size_t tp_str_len(const struct tp_strpool *p, tp_str id);
size_t tp_strpool_bytes(const struct tp_strpool *p);
/* id as the result of an SQL function or column: NULL for id 0, else its
 * text up to the first NUL, since Perfetto hands SQLite its pool's strings
 * as C strings (a NUL in a cmdline or a print's buffer cuts it there). */
void tp_sql_result_str(struct sqlite3_context *fn, const struct tp_strpool *p,
		       tp_str id);

/* ---- tables ----------------------------------------------------------- */

enum tp_coltype {
	TP_COL_INT,   /* int64 */
	TP_COL_REAL,  /* double */
	TP_COL_STR,   /* tp_str; 0 reads as NULL */
	TP_COL_ALIAS, /* another name for id (utid, upid): never stored */
};

struct tp_coldef {
	const char *name;
	enum tp_coltype type;
};

struct tp_column {
	/* int32_t[] (INT until a value needs more), int64_t[] (INT, wide),
	 * double[] or tp_str[]; NULL until set */
	void *data;
	bool wide;         /* INT: data is int64_t[] */
	uint64_t *present; /* bitmap of non-NULL rows; NULL until set */
	uint32_t *index;   /* rows sorted by value, built on demand */
	uint32_t index_len;  /* entries in index (non-NULL rows) */
	uint32_t index_rows; /* table rows when the index was built */
};

struct tp_table {
	const char *name; /* SQL name */
	const struct tp_coldef *defs;
	unsigned ncols;
	uint32_t nrows;
	uint32_t cap;
	struct tp_column *cols;
	struct tp_strpool *pool;
};

void tp_table_init(struct tp_table *t, const char *name,
		   const struct tp_coldef *defs, unsigned ncols,
		   struct tp_strpool *pool);
void tp_table_free(struct tp_table *t);
/* Appends a row with every column NULL; returns its id. */
uint32_t tp_table_add_row(struct tp_table *t);
/* Frees the arrays' unused tail once loading is over. */
void tp_table_shrink(struct tp_table *t);
size_t tp_table_bytes(const struct tp_table *t);

/* The general cases of tp_set_int / tp_set_str (first value of a column,
 * widening, wrong type). */
void tp_set_int_slow(struct tp_table *t, unsigned col, uint32_t row, int64_t v);
void tp_set_str_slow(struct tp_table *t, unsigned col, uint32_t row, tp_str v);
void tp_set_real(struct tp_table *t, unsigned col, uint32_t row, double v);
void tp_set_null(struct tp_table *t, unsigned col, uint32_t row);

/* Sets a value; inline when the column already has storage. */
static inline void tp_set_int(struct tp_table *t, unsigned col, uint32_t row,
			      int64_t v)
{
	struct tp_column *c = &t->cols[col];
	if (c->present && t->defs[col].type == TP_COL_INT &&
	    (c->wide || v == (int32_t)v)) {
		c->present[row >> 6] |= 1ull << (row & 63);
		if (c->wide)
			((int64_t *)c->data)[row] = v;
		else
			((int32_t *)c->data)[row] = (int32_t)v;
		return;
	}
	tp_set_int_slow(t, col, row, v);
}

/* A machine_id column of a table whose rows belong to a machine (track,
 * process, thread, cpu, clock_snapshot ...): the machine table id, 0 for
 * the tracing host, as Perfetto (v58) writes it.  Tables Perfetto gives no
 * machine_id (sched, thread_state, ftrace_event) keep one internally, for
 * joins, and show ucpu instead. */
#define tp_set_machine(t, col, row, machine)                                 \
	tp_set_int((t), (col), (row), (int64_t)(machine))


static inline void tp_set_str(struct tp_table *t, unsigned col, uint32_t row,
			      tp_str v)
{
	struct tp_column *c = &t->cols[col];
	if (c->present && v && t->defs[col].type == TP_COL_STR) {
		c->present[row >> 6] |= 1ull << (row & 63);
		((tp_str *)c->data)[row] = v;
		return;
	}
	tp_set_str_slow(t, col, row, v);
}

static inline bool tp_is_null(const struct tp_table *t, unsigned col,
			      uint32_t row)
{
	const struct tp_column *c = &t->cols[col];
	if (t->defs[col].type == TP_COL_ALIAS)
		return false;
	return !c->present || !(c->present[row >> 6] >> (row & 63) & 1);
}

static inline int64_t tp_get_int(const struct tp_table *t, unsigned col,
				 uint32_t row)
{
	const struct tp_column *c = &t->cols[col];
	if (t->defs[col].type == TP_COL_ALIAS)
		return row;
	if (tp_is_null(t, col, row))
		return 0;
	return c->wide ? ((const int64_t *)c->data)[row]
		       : ((const int32_t *)c->data)[row];
}

static inline double tp_get_real(const struct tp_table *t, unsigned col,
				 uint32_t row)
{
	return tp_is_null(t, col, row) ? 0.0
				       : ((const double *)t->cols[col].data)[row];
}

static inline tp_str tp_get_str(const struct tp_table *t, unsigned col,
				uint32_t row)
{
	return tp_is_null(t, col, row) ? 0
				       : ((const tp_str *)t->cols[col].data)[row];
}

/* Rows whose integer column `col` equals v: *first is the position of the
 * first match in the column's sorted index, the return value the number of
 * matches; the row ids are index[first .. first+n).  Builds the index on
 * first use (and again if rows were added since). */
uint32_t tp_table_lookup(struct tp_table *t, unsigned col, int64_t v,
			 const uint32_t **rows);

/* ---- SQLite ----------------------------------------------------------- */

/* Registers each table as an eponymous virtual table of db. */
int tp_db_attach(struct sqlite3 *db, struct tp_table *const *tables,
		 unsigned ntables);

#endif
