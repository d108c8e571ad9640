/*
 * tp_stdlib.h - Perfetto's SQL in vperfetto_tp: the `INCLUDE PERFETTO
 * MODULE name;` statement and the modules it creates, CREATE PERFETTO
 * TABLE/VIEW/FUNCTION, and the SPAN_JOIN virtual tables (tp_stdlib.c
 * lists the modules).
 */
#ifndef VP_TP_STDLIB_H
#define VP_TP_STDLIB_H

#include <stddef.h>

struct sqlite3;

/* Registers what every connection has (the SPAN_JOIN modules); an SQLite
 * status. */
int tp_stdlib_register(struct sqlite3 *db);

/* Runs the statement at sql if it is one of Perfetto's own (INCLUDE
 * PERFETTO MODULE, CREATE PERFETTO TABLE|VIEW|FUNCTION|INDEX, DROP
 * PERFETTO INDEX): returns 1 with *tail past it (and its ';') once done,
 * 0 when the statement is SQLite's (nothing done), -1 with msg filled
 * when the statement is malformed or fails (an unknown module ...). */
int tp_stdlib_statement(struct sqlite3 *db, const char *sql, const char **tail,
			char *msg, size_t msgsz);

/* sql with Perfetto's macros (cast_int!(x), counter_leading_intervals!(t)
 * ...) expanded in place, on the same lines; NULL when it has none.  To
 * free with sqlite3_free(). */
char *tp_stdlib_expand(const char *sql);

#endif
