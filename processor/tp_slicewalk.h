/*
 * tp_slicewalk.h - what the table functions over the slice table share
 * (ancestor_slice and descendant_slice in tp_slicefn.c,
 * experimental_slice_layout in tp_slicelayout.c): a slice's parent, and
 * the cursor that gives their rows, a list of slice ids, with their one
 * argument a hidden column.
 */
#ifndef VP_TP_SLICEWALK_H
#define VP_TP_SLICEWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "tp_db.h"

/* The parent of slice `row` in *parent; false for a root, or a parent_id
 * that names no slice. */
bool tp_slicewalk_parent(const struct tp_table *s, uint32_t row,
			 uint32_t *parent);

/* The first member of every such function's cursor: the slice ids it
 * gives, rows[pos] the current one. */
struct tp_slicewalk_cursor {
	sqlite3_vtab_cursor base;
	uint32_t *rows;
	uint32_t n, cap, pos;
};

void tp_slicewalk_push(struct tp_slicewalk_cursor *c, uint32_t row);
/* Puts the rows in id order. */
void tp_slicewalk_sort(struct tp_slicewalk_cursor *c);
/* Empties the list (for the next xFilter), keeping its memory. */
void tp_slicewalk_clear(struct tp_slicewalk_cursor *c);

/* xBestIndex: the argument, hidden column arg_col, must be given by a
 * usable = constraint (SQLITE_CONSTRAINT for any other use of it) and is
 * passed to xFilter as argv[0]; without it, SQLITE_ERROR with `missing`
 * as the message.  Rows come in id order.  The caller adds its costs. */
int tp_slicewalk_best_index(sqlite3_vtab *vt, sqlite3_index_info *info,
			    int arg_col, const char *missing);

/* The module methods that are the same for all of them; open makes a
 * zeroed cursor of `size` bytes, whose first member is a
 * struct tp_slicewalk_cursor. */
int tp_slicewalk_disconnect(sqlite3_vtab *vt);
int tp_slicewalk_open(size_t size, sqlite3_vtab_cursor **out);
int tp_slicewalk_close(sqlite3_vtab_cursor *cur);
int tp_slicewalk_next(sqlite3_vtab_cursor *cur);
int tp_slicewalk_eof(sqlite3_vtab_cursor *cur);
int tp_slicewalk_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out);

#endif
