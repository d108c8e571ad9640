/*
 * tp_flows.h - the flow table: arrows between slices, as Perfetto's
 * FlowTracker draws them.
 *
 * One id space holds every flow: TrackEvent flow_ids, legacy v2 bind_ids
 * and the ids given to v1 flow events (0, 1, 2 ... in order of first use).
 * Perfetto does the same, so a v1 flow and a v2 flow of the same number
 * meet; we keep that.  Every row carries its flow id as trace_id; a row
 * whose id is a v1 flow's also gets that flow's name and cat as args.
 */
#ifndef VP_TP_FLOWS_H
#define VP_TP_FLOWS_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

struct tp_flows *tp_flows_new(void);
void tp_flows_free(struct tp_flows *f);

bool tp_flow_active(struct tp_ctx *ctx, uint64_t id);
/* A flow row between two slices, of no flow id (Perfetto's InsertFlow:
 * binder transactions). */
void tp_flow_link(struct tp_ctx *ctx, uint32_t out, uint32_t in);
/* slice < 0: no enclosing slice (counted as flow_no_enclosing_slice). */
void tp_flow_begin(struct tp_ctx *ctx, uint64_t id, int64_t slice);
/* A row from the flow's last slice to this one (the earlier slice is the
 * source), which becomes the last slice. */
void tp_flow_step(struct tp_ctx *ctx, uint64_t id, int64_t slice);
/* A row as for a step; close: the flow ends. */
void tp_flow_end(struct tp_ctx *ctx, uint64_t id, int64_t slice, bool close);
/* A v1 flow end not bound to its enclosing slice: it binds to the next
 * slice that begins on the track. */
void tp_flow_end_pending(struct tp_ctx *ctx, uint32_t track, uint64_t id);
/* The flow id of a v1 flow event (source id, category, name). */
uint64_t tp_flow_v1_id(struct tp_ctx *ctx, uint64_t source, tp_str cat,
		       tp_str name);
/* Called for every slice pushed on a track's stack. */
void tp_flows_slice_pushed(struct tp_ctx *ctx, uint32_t track, uint32_t slice);

#endif
