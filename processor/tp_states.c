/*
 * tp_states.c - the state table (see tp_states.h): one open state per
 * track, closed by the next different value or by an event without one.
 */
#include <stdlib.h>

#include "tp_ctx.h"
#include "tp_states.h"
#include "u64map.h"
#include "vp_alloc.h"

struct tp_states {
	struct u64map open; /* track -> row of its open state */
};

struct tp_states *tp_states_new(void)
{
	struct tp_states *s = vp_xcalloc(1, sizeof *s);
	u64map_init(&s->open);
	return s;
}

void tp_states_free(struct tp_states *s)
{
	if (!s)
		return;
	u64map_free(&s->open);
	free(s);
}

/* A map without erase: a closed track maps to this. */
#define NO_STATE UINT64_MAX

int64_t tp_state_update(struct tp_ctx *ctx, uint32_t track, int64_t ts,
			tp_str value, tp_str category, bool *repeated)
{
	struct tp_states *s = ctx->states;
	struct tp_table *t = tp_tab(ctx, TP_T_STATE);
	uint64_t row;

	*repeated = false;
	if (u64map_get(&s->open, track, &row) && row != NO_STATE) {
		if (tp_get_str(t, TP_STATE_value, (uint32_t)row) == value &&
		    value) {
			*repeated = true;
			return (int64_t)row;
		}
		tp_set_int(t, TP_STATE_dur, (uint32_t)row,
			   ts - tp_get_int(t, TP_STATE_ts, (uint32_t)row));
		u64map_put(&s->open, track, NO_STATE);
	}
	if (!value)
		return -1;
	uint32_t r = tp_table_add_row(t);
	tp_set_int(t, TP_STATE_ts, r, ts);
	tp_set_int(t, TP_STATE_dur, r, -1);
	tp_set_int(t, TP_STATE_track_id, r, track);
	if (category)
		tp_set_str(t, TP_STATE_category, r, category);
	tp_set_str(t, TP_STATE_value, r, value);
	u64map_put(&s->open, track, r);
	return r;
}
