/*
 * tp_te_flows.c - the flows of track events (see tp_te_flows.h).
 *
 * Legacy v2 bind ids, TrackEvent flow ids and v1 flows share one id space
 * in tp_flows.c, as in Perfetto.
 */
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_flows.h"
#include "tp_slices.h"
#include "tp_stats.h"
#include "tp_te_flows.h"

void tp_te_flows(struct tp_ctx *ctx, const struct ev *e, int64_t slice)
{
	if (e->le.has_bind_id) {
		uint64_t id = e->le.bind_id;
		if (!e->le.has_flow_direction) {
			tp_stat_inc(ctx, "flow_without_direction");
		} else {
			switch (e->le.flow_direction) {
			case FLOW_OUT: tp_flow_begin(ctx, id, slice); break;
			case FLOW_INOUT: tp_flow_step(ctx, id, slice); break;
			case FLOW_IN: tp_flow_end(ctx, id, slice, false); break;
			default:
				tp_stat_inc(ctx, "flow_without_direction");
			}
		}
	}
	if (!e->has_flows)
		return;
	struct pb_reader r;
	struct pb_field f;
	for (int pass = 0; pass < 2; pass++) {
		pb_reader_init(&r, e->te, e->te_len);
		while (pb_next(&r, &f)) {
			bool term = f.num == TE_TERMINATING_FLOW_IDS ||
				    f.num == TE_TERMINATING_FLOW_IDS_OLD;
			bool flow = f.num == TE_FLOW_IDS ||
				    f.num == TE_FLOW_IDS_OLD;
			if ((pass == 0 && !flow) || (pass == 1 && !term))
				continue;
			uint64_t ids[64];
			size_t n = 0;
			if (f.wt == PB_WT_VARINT || f.wt == PB_WT_FIXED64) {
				ids[n++] = f.val;
			} else if (f.wt == PB_WT_LEN &&
				   (f.num == TE_FLOW_IDS ||
				    f.num == TE_TERMINATING_FLOW_IDS)) {
				for (size_t i = 0; i + 8 <= f.len && n < 64;
				     i += 8)
					memcpy(&ids[n++], f.data + i, 8);
			} else if (f.wt == PB_WT_LEN) {
				struct pb_packed_iter it;
				uint64_t v;
				pb_packed_init(&it, f.data, f.len);
				while (n < 64 && pb_packed_next(&it, &v))
					ids[n++] = v;
			}
			for (size_t i = 0; i < n; i++) {
				bool active = tp_flow_active(ctx, ids[i]);
				if (flow && !active)
					tp_flow_begin(ctx, ids[i], slice);
				else if (flow)
					tp_flow_step(ctx, ids[i], slice);
				else if (active)
					tp_flow_end(ctx, ids[i], slice, true);
			}
		}
	}
}

void tp_te_flow_v1(struct tp_ctx *ctx, const struct ev *e, uint32_t track)
{
	if (!e->le.has_unscoped_id) {
		tp_stat_inc(ctx, "flow_invalid_id");
		return;
	}
	uint64_t id = tp_flow_v1_id(ctx, e->le.unscoped_id, e->category_id,
				    e->name_id);
	switch (e->le.phase) {
	case 's': tp_flow_begin(ctx, id, tp_slice_top(ctx, track)); break;
	case 't': tp_flow_step(ctx, id, tp_slice_top(ctx, track)); break;
	case 'f':
		if (!e->le.bind_to_enclosing)
			tp_flow_end_pending(ctx, track, id);
		else
			tp_flow_end(ctx, id, tp_slice_top(ctx, track), false);
		break;
	default: break;
	}
}
