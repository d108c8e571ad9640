/*
 * tp_te_legacy.h - what a legacy event's phase changes: async events
 * (b / e / n, S / T / p / F) go on compressed tracks of their id,
 * instants of a process or global scope on their scope's track, and
 * metadata events (M) name threads and processes.
 */
#ifndef VP_TP_TE_LEGACY_H
#define VP_TP_TE_LEGACY_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_te_event.h"

struct tp_te_legacy *tp_te_legacy_new(void);
void tp_te_legacy_free(struct tp_te_legacy *l);

/* Moves the event to the track its legacy phase asks for, if any
 * (*track: UINT32_MAX for its thread's); false when it cannot. */
bool tp_te_legacy_track(struct tp_ctx *ctx, struct ev *e, uint32_t *track);
/* A metadata event: thread_name or process_name. */
void tp_te_metadata_event(struct tp_ctx *ctx, const struct ev *e);

#endif
