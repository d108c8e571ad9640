/*
 * tp_states.h - the state table: what a state track is in, over time, as
 * Perfetto's StateTracker records it.
 *
 * A state track (a TrackDescriptor with `state`) gets a value from each
 * TYPE_STATE event.  A new value closes the open state (its dur becomes
 * the time to the new one) and opens a row; the same value again
 * continues the open state (no row, its args merge into the open one's);
 * no value closes the open state.  A state still open at the end keeps
 * dur -1.
 */
#ifndef VP_TP_STATES_H
#define VP_TP_STATES_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

struct tp_states *tp_states_new(void);
void tp_states_free(struct tp_states *s);

/* Sets the state of track at ts (value 0: none) and returns the row of
 * the state open after it, or -1; *repeated is true when value continued
 * the state already open. */
int64_t tp_state_update(struct tp_ctx *ctx, uint32_t track, int64_t ts,
			tp_str value, tp_str category, bool *repeated);

#endif
