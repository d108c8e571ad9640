/*
 * tp_te_decode.h - a track event as the parser first sees it: its payload
 * header and bytes decoded into a struct ev (tp_te_event.h), its category
 * and name resolved, and what its phase makes of it.
 */
#ifndef VP_TP_TE_DECODE_H
#define VP_TP_TE_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_te_event.h"
#include "tp_te_tracks.h"

/* Fills e from a sorter payload; false when it is malformed. */
bool tp_te_decode(struct tp_ctx *ctx, const uint8_t *p, size_t len,
		  struct ev *e);

/* A state event's name, as Perfetto's state parse reads it: its
 * name_iid's (zero too) when it has one, else its name; 0 for none. */
tp_str tp_te_state_name(struct tp_ctx *ctx, const struct ev *e);

/* The event's phase, as a legacy JSON event's letter: its LegacyEvent's,
 * else its type's (B / E / i on a thread's track, b / e / n on another,
 * C for a counter); 0 for none.  Known once its thread is (has_utid). */
int32_t tp_te_phase(const struct ev *e);
/* Whether legacy phase ph is an async one (b / e / n, S / T / p / F). */
bool tp_te_async_phase(int32_t ph);
/* How the event uses its descriptor track (see enum use). */
enum use tp_te_event_use(const struct ev *e);

#endif
