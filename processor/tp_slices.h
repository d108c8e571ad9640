/*
 * tp_slices.h - builds slices from begin / end / instant / complete events
 * on a track, keeping a stack per track (depth, parent_id), as Perfetto's
 * SliceTracker does.  Events must arrive in timestamp order (the parse
 * stage).  An end with no open slice is ignored (no stat, as Perfetto);
 * slices still open at the end of the trace keep dur -1.
 */
#ifndef VP_TP_SLICES_H
#define VP_TP_SLICES_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

struct tp_slices *tp_slices_new(void);
void tp_slices_free(struct tp_slices *s);

/* Opens a slice; returns its id, or -1 when the track has 512 open
 * already (Perfetto's limit: the slice is dropped and counted in
 * slice_max_depth_exceeded). */
int64_t tp_slice_begin(struct tp_ctx *ctx, uint32_t track, int64_t ts,
		       tp_str category, tp_str name, int64_t arg_set_id);
/* Opens a slice on a legacy unnestable track (atrace's S, as Perfetto's
 * BeginLegacyUnnestable): none while another is open, but every begin
 * counts, and each slice the track ends carries the count and the last
 * begin's time as args.  Returns the slice id or -1. */
int64_t tp_slice_begin_unnestable(struct tp_ctx *ctx, uint32_t track,
				  int64_t ts, tp_str name, int64_t arg_set_id);
/* Closes the innermost open slice of the track.  category / name, when
 * not 0, must match it (Perfetto's rule for ftrace and legacy events) or
 * the end is dropped.  end_args (may be -1) are merged into the slice's
 * arg set.  Returns the slice id or -1. */
int64_t tp_slice_end(struct tp_ctx *ctx, uint32_t track, int64_t ts,
		     tp_str category, tp_str name, int64_t end_args);
/* A slice with a known duration (0 for an instant); its id or -1, as
 * tp_slice_begin. */
int64_t tp_slice_complete(struct tp_ctx *ctx, uint32_t track, int64_t ts,
			  int64_t dur, tp_str category, tp_str name,
			  int64_t arg_set_id);
/* Merges args (an arg set) into the innermost open slice of the track
 * with this category and name (Perfetto's SliceTracker::AddArgs);
 * returns its id, or -1 when none is open. */
int64_t tp_slice_add_args(struct tp_ctx *ctx, uint32_t track,
			  tp_str category, tp_str name, int64_t args);
/* The innermost open slice of a track, or -1. */
int64_t tp_slice_top(struct tp_ctx *ctx, uint32_t track);
/* Sets thread_ts / thread_dur of an open slice at begin / end. */
void tp_slice_set_thread_ts(struct tp_ctx *ctx, uint32_t slice, int64_t thread_ts);
void tp_slice_end_thread_ts(struct tp_ctx *ctx, uint32_t slice, int64_t thread_ts);

#endif
