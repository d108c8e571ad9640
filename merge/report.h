/*
 * report.h - what a merge tells its user: a short summary on stderr and,
 * with --report, the whole clock model as JSON.
 */
#ifndef VP_REPORT_H
#define VP_REPORT_H

#include <stdio.h>

#include "merge.h"

void report_summary(FILE *f, const struct merge_opts *o,
		    const struct merge_result *res);
struct trace_writer;

/* Writes the JSON report into w (opened by the caller before the merge, so
 * that a report that cannot be written stops the merge before it starts)
 * and commits it; w is freed in all cases. */
int report_write_json(struct trace_writer *w, const struct merge_opts *o,
		      const struct merge_result *res, struct vp_error *err);

#endif
