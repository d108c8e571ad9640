/*
 * tp_query.h - runs SQL over a loaded trace and prints results the way
 * Perfetto's trace_processor_shell does.
 *
 * tp_query_open() attaches the trace's tables to a new in-memory SQLite
 * connection, creates Perfetto's views and registers EXTRACT_ARG().
 * tp_query_run() executes every statement of a SQL text and prints each
 * result set as CSV: a quoted header ("col","col2"), strings quoted without
 * escaping, NULL as "[NULL]", integers as %lld, doubles as %f, one blank
 * line between result sets; statements without columns print nothing.
 */
#ifndef VP_TP_QUERY_H
#define VP_TP_QUERY_H

#include <stdio.h>

#include "tp_ctx.h"
#include "vp_error.h"

struct sqlite3;

struct sqlite3 *tp_query_open(struct tp_ctx *ctx, struct vp_error *err);
void tp_query_close(struct sqlite3 *db);

/* Runs all statements of sql; prints results to out.  On an SQL error,
 * stops and returns -1 with err naming the statement's line.  With
 * TP_QUERY_NEED_SQL in flags, SQL holding no statement at all (only
 * semicolons, blanks, comments) is an error too: "No valid SQL to run",
 * as Perfetto's shell says of a -Q or -q. */
#define TP_QUERY_NEED_SQL 1u
int tp_query_run_flags(struct sqlite3 *db, const char *sql, FILE *out,
		       unsigned flags, struct vp_error *err);
int tp_query_run(struct sqlite3 *db, const char *sql, FILE *out,
		 struct vp_error *err);

/* Copies every table and view into a new SQLite file at path (written
 * aside and renamed into place, out_file.h).  Refused when path names one
 * of the inputs (the trace, query files). */
int tp_query_export(struct sqlite3 *db, const char *path,
		    const char *const *inputs, size_t n_inputs,
		    struct vp_error *err);

#endif
