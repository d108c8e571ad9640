/*
 * tp_te_flows.h - the flows track events draw between slices: a
 * TrackEvent's flow ids and terminating flow ids, a legacy event's v2
 * bind id, and the legacy v1 flow events (phases s / t / f).
 */
#ifndef VP_TP_TE_FLOWS_H
#define VP_TP_TE_FLOWS_H

#include <stdint.h>

#include "tp_te_event.h"

/* The flows of the event that made slice `slice`. */
void tp_te_flows(struct tp_ctx *ctx, const struct ev *e, int64_t slice);
/* A v1 flow event (phase s, t or f) on track. */
void tp_te_flow_v1(struct tp_ctx *ctx, const struct ev *e, uint32_t track);

#endif
