/*
 * tp_clock.h - converts timestamps of any clock into trace time, per
 * machine, as Perfetto's ClockTracker does.
 *
 * Each machine has a clock graph: every ClockSnapshot links all its clocks
 * to each other.  A timestamp in clock A is converted to the trace clock by
 * a shortest path through the graph, using on each hop the latest snapshot
 * at or before the value (or the first one when the value precedes them
 * all).  Clocks 64-127 are sequence-scoped: the loader maps them to a
 * global id with tp_clock_seq_scoped().  The trace clock is BOOTTIME unless
 * a snapshot names a primary_trace_clock.  With no snapshot at all on a
 * machine every clock is taken to be the trace clock.
 */
#ifndef VP_TP_CLOCK_H
#define VP_TP_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

struct tp_clocks *tp_clocks_new(void);
void tp_clocks_free(struct tp_clocks *c);

/* A global id for sequence-scoped clock `clock_id` (64..127) of sequence
 * `seq`; other ids are returned unchanged. */
uint64_t tp_clock_seq_scoped(uint32_t seq, uint32_t clock_id);

/* Adds one snapshot: n clocks with their values (already scaled to ns).
 * Returns the snapshot id. */
struct tp_clock_reading {
	uint64_t clock_id; /* global id */
	int64_t ts_ns;
};
uint32_t tp_clock_add_snapshot(struct tp_clocks *c, uint32_t machine,
			       const struct tp_clock_reading *r, unsigned n);

/* Sets the trace clock (primary_trace_clock); false if events were already
 * converted with another one. */
bool tp_clock_set_trace_clock(struct tp_clocks *c, uint32_t machine,
			      uint64_t clock_id);
uint64_t tp_clock_trace_clock(const struct tp_clocks *c, uint32_t machine);
/* Whether a time of another clock than the machine's trace clock was
 * converted (or tried) already: Perfetto's count of conversions, which
 * a time already in the trace clock does not enter. */
bool tp_clock_other_converted(const struct tp_clocks *c, uint32_t machine);

/* Converts ts in clock_id to trace time; false when no path exists. */
bool tp_clock_to_trace(struct tp_clocks *c, uint32_t machine,
		       uint64_t clock_id, int64_t ts, int64_t *out);
/* The stat a failed tp_clock_to_trace() of clock_id counts, by Perfetto's
 * reason: the clock is in no snapshot, the trace clock is in none, or no
 * chain of snapshots links them. */
const char *tp_clock_failure_stat(struct tp_clocks *c, uint32_t machine,
				  uint64_t clock_id);

#endif
