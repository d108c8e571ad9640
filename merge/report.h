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
struct vp_out;

/* Writes the JSON report into out (opened by the caller before the merge,
 * so that a report that cannot be written stops the merge before it
 * starts).  The caller commits it together with the merged trace
 * (vp_out_commit_all), or aborts both. */
int report_write_json(struct vp_out *out, const struct merge_opts *o,
		      const struct merge_result *res, struct vp_error *err);

#endif
