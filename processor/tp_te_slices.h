/*
 * tp_te_slices.h - what a track event becomes on its track: a slice
 * begun, ended, complete (legacy X) or instant, with its args, or the
 * value of a state track.  A begun slice's args wait for its end, whose
 * args merge into the same set, as Perfetto does.
 */
#ifndef VP_TP_TE_SLICES_H
#define VP_TP_TE_SLICES_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_te_event.h"
#include "tp_te_tracks.h"

struct tp_te_slices *tp_te_slices_new(void);
void tp_te_slices_free(struct tp_te_slices *s);

/* Each gives the slice (-1: none); async: the event is a legacy async
 * one. */
int64_t tp_te_slice_begin(struct tp_ctx *ctx, const struct ev *e,
			  uint32_t track, int64_t ts, bool async);
/* -1 when no slice was open to end. */
int64_t tp_te_slice_end(struct tp_ctx *ctx, const struct ev *e,
			uint32_t track, int64_t ts, bool async);
/* -1 when its duration is not valid; -2 when the track has too many
 * slices open (dropped, counted: tp_slice_begin). */
int64_t tp_te_slice_complete(struct tp_ctx *ctx, const struct ev *e,
			     uint32_t track, int64_t ts, bool async);
int64_t tp_te_slice_instant(struct tp_ctx *ctx, const struct ev *e,
			    uint32_t track, int64_t ts, bool async);

/* A TYPE_STATE event on the state track of reservation r. */
void tp_te_state_event(struct tp_ctx *ctx, const struct ev *e,
		       const struct res *r, uint32_t track, int64_t ts);

/* After the parse: slices still open (or closed by nesting repair) get
 * their args. */
void tp_te_slices_finish(struct tp_ctx *ctx);

#endif
