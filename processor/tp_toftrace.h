/*
 * tp_toftrace.h - the SQL function to_ftrace(id): an ftrace_event row as
 * a line of the kernel's textual trace, as Perfetto's to_ftrace writes it.
 */
#ifndef VP_TP_TOFTRACE_H
#define VP_TP_TOFTRACE_H

struct sqlite3;
struct tp_ctx;

/* Registers to_ftrace() on db, over ctx's tables; an SQLite error code. */
int tp_toftrace_register(struct sqlite3 *db, struct tp_ctx *ctx);

#endif
