/*
 * tp_stdlib.h - Perfetto's standard library in vperfetto_tp: the
 * `INCLUDE PERFETTO MODULE name;` statement, the modules it creates and
 * the SPAN_JOIN virtual tables (tp_stdlib.c lists the modules).
 */
#ifndef VP_TP_STDLIB_H
#define VP_TP_STDLIB_H

#include <stddef.h>

struct sqlite3;

/* Registers what every connection has (the SPAN_JOIN modules); an SQLite
 * status. */
int tp_stdlib_register(struct sqlite3 *db);

/* Runs the statement at sql if it is an INCLUDE PERFETTO MODULE: returns
 * 1 with *tail past it (and its ';') once the module is included, 0 when
 * the statement is not an INCLUDE (nothing done), -1 with msg filled when
 * the statement is malformed or the module unknown or failing. */
int tp_stdlib_statement(struct sqlite3 *db, const char *sql,
			const char **tail, char *msg, size_t msgsz);

/* The name of the i-th module, NULL past the end. */
const char *tp_stdlib_module_name(size_t i);

#endif
