/*
 * tp_slicelayout.h - the table function experimental_slice_layout(tracks):
 * a depth for every slice of a list of tracks drawn as one.
 */
#ifndef VP_TP_SLICELAYOUT_H
#define VP_TP_SLICELAYOUT_H

struct sqlite3;
struct tp_ctx;

/* Registers the table function with a connection; an SQLite status. */
int tp_slicelayout_register(struct sqlite3 *db, struct tp_ctx *ctx);

#endif
