/*
 * tp_te_counters.h - the counter values of track events: a TYPE_COUNTER
 * event's own value and the extra counter values any event carries, made
 * absolute (unit multiplier, incremental sums) in tokenize order and put
 * on their counter tracks at parse; and a legacy event's thread time and
 * instruction count, as counters of its thread.
 */
#ifndef VP_TP_TE_COUNTERS_H
#define VP_TP_TE_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "u64map.h"

struct tp_ctx;
struct tp_packet;
struct ev;

/* ---- tokenize ---- */

/* The absolute value of v for counter track uuid: scaled by its unit
 * multiplier and, for an incremental counter, added to its running sum in
 * sums (the sequence's, uuid -> double bits).  false when uuid is not a
 * counter track. */
bool tp_te_counter_value(struct tp_ctx *ctx, uint32_t machine,
			 struct u64map *sums,
			 uint64_t uuid, double v, double *out);
/* The extra counter values of TrackEvent p (their uuids its own, else the
 * sequence's defaults'), appended to out as the payload's (uuid, value)
 * pairs, *count of them; false when the event is to be dropped, its
 * error counted under Perfetto's track_event_extra_counter_* stat. */
bool tp_te_tokenize_extra_counters(struct tp_ctx *ctx,
				   const struct tp_packet *pkt,
				   struct u64map *sums, const uint8_t *p,
				   size_t len, struct pb_buf *out,
				   size_t *count);

/* ---- parse ---- */

/* The event's extra counter values, onto their tracks. */
void tp_te_extra_counters(struct tp_ctx *ctx, const struct ev *e, int64_t ts);
/* A legacy event's thread time / instruction count (its own fields, not
 * extra counters), onto counter tracks of its thread. */
void tp_te_legacy_thread_counters(struct tp_ctx *ctx, const struct ev *e,
				  int64_t ts);

#endif
