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
/* Writes the JSON report atomically (temp file + rename). */
int report_write_json(const char *path, const struct merge_opts *o,
		      const struct merge_result *res, struct vp_error *err);

#endif
