/*
 * tp_spanjoin.h - Perfetto's span join virtual tables: SPAN_JOIN,
 * SPAN_LEFT_JOIN and SPAN_OUTER_JOIN (rules in tp_spanjoin.c).
 */
#ifndef VP_TP_SPANJOIN_H
#define VP_TP_SPANJOIN_H

struct sqlite3;

/* Registers the three modules with a connection; an SQLite status. */
int tp_spanjoin_register(struct sqlite3 *db);

#endif
