/*
 * tp_slicefn.h - slice table functions: ancestor_slice(id),
 * descendant_slice(id).
 */
#ifndef VP_TP_SLICEFN_H
#define VP_TP_SLICEFN_H

struct sqlite3;
struct tp_ctx;

/* Registers the table functions with a connection; an SQLite status. */
int tp_slicefn_register(struct sqlite3 *db, struct tp_ctx *ctx);

#endif
