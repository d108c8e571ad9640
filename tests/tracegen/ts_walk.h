/*
 * ts_walk.h - an independent resolver of every timestamp in a Perfetto trace.
 *
 * This is the yardstick the merge is measured with, so it shares no code
 * with the merge's rewriter beyond the wire scanner and the file reader.
 * It walks the packets of a trace file in file order and reports, for each
 * packet, the ABSOLUTE time in nanoseconds of every timestamp it carries,
 * in the clock domain the packet's timestamps resolve to, in this canonical
 * order:
 *
 *   1. TracePacket.timestamp, on the clock named by timestamp_clock_id, else
 *      the sequence's TracePacketDefaults, else the trace clock (BOOTTIME
 *      unless a ClockSnapshot's primary_trace_clock says otherwise).  A
 *      sequence-scoped clock (64..127) is resolved through that sequence's
 *      last ClockSnapshot: abs = B + (v - X) * U, where B is the snapshot's
 *      BOOTTIME entry (MONOTONIC when it has no BOOTTIME), X the snapshot's
 *      value of the scoped clock and U its unit_multiplier_ns (default 1);
 *      for an incremental clock v is X plus the sum of the deltas of the
 *      packets since the snapshot.  Not that of a packet holding nothing
 *      but a timestamp, its clock and a machine_id (what a merge writes
 *      first on each guest machine, merge.c's write_machine_anchor).
 *   2. ThreadDescriptor.reference_timestamp_us, then TrackEvent
 *      timestamp_delta_us (accumulated from the reference) or
 *      timestamp_absolute_us, times 1000.  An absolute value does not move
 *      the delta base (Perfetto's and Chrome's reading).
 *   3. Each FtraceEvent.timestamp of an FtraceEventBundle.
 *   4. Each compact_sched switch timestamp (packed deltas, first absolute).
 *   5. Each compact_sched waking timestamp (likewise).
 *   6. Each BOOTTIME entry of a ClockSnapshot.
 *
 * Sequence state (defaults, scoped clocks, legacy reference) is kept per
 * trusted_packet_sequence_id for every packet, whether or not the packet
 * passes the machine filter; only reporting is filtered.  An incremental
 * state clear (sequence_flags bit 1 or incremental_state_cleared) drops the
 * sequence's TracePacketDefaults before the packet's own defaults are read;
 * scoped-clock snapshots and the legacy reference survive it (the packets
 * that clear state re-send them anyway).  compressed_packets are not
 * expanded.
 */
#ifndef VP_TS_WALK_H
#define VP_TS_WALK_H

#include <stddef.h>
#include <stdint.h>

enum ts_kind {
	TS_PACKET,             /* TracePacket.timestamp on BOOTTIME */
	TS_PACKET_MONOTONIC,   /* TracePacket.timestamp on MONOTONIC */
	TS_PACKET_INCREMENTAL, /* on a sequence-scoped clock 64..127 (incremental
				* or not), resolved to BOOTTIME through the
				* sequence's ClockSnapshot */
	TS_PACKET_OTHER,       /* on any other clock: the raw value */
	TS_LEGACY_US,          /* reference_timestamp_us / timestamp_*_us, x1000 */
	TS_FTRACE,             /* FtraceEvent.timestamp */
	TS_COMPACT_SWITCH,     /* compact_sched switch_timestamp (accumulated) */
	TS_COMPACT_WAKING,     /* compact_sched waking_timestamp (accumulated) */
	TS_SNAPSHOT_BOOTTIME,  /* the BOOTTIME entry of a ClockSnapshot */
	TS_UNRESOLVED,         /* scoped clock with no snapshot, or a legacy
				* delta with no reference: the raw value */
	TS_KIND_COUNT
};

/* Machine filter values for ts_walk_file() / ts_walker_open(). */
#define TS_MACHINE_ALL (-1)  /* every packet */
#define TS_MACHINE_NONE 0    /* packets without machine_id (or 0) */

/* One reported timestamp. */
struct ts_item {
	enum ts_kind kind;
	uint64_t abs_ns;        /* absolute time in the resolved domain */
	uint32_t clock_id;      /* the clock abs_ns is on (6, 3, or the raw
				 * clock for TS_PACKET_OTHER / TS_UNRESOLVED) */
	uint32_t seq_id;        /* trusted_packet_sequence_id of the packet */
	uint64_t packet_index;  /* 0-based index of the packet in the file */
	uint64_t packet_offset; /* file offset of the packet's record */
};

const char *ts_kind_name(enum ts_kind k);

/* Streaming interface: one timestamp at a time, memory bounded by the
 * largest packet. */
struct ts_walker;

/* Returns 0, or -1 with a message in err. */
int ts_walker_open(struct ts_walker **out, const char *path,
		   int machine_filter, char *err, size_t errlen);
/* 1: *it holds the next timestamp; 0: end of file; -1: error (err). */
int ts_walker_next(struct ts_walker *w, struct ts_item *it, char *err,
		   size_t errlen);
/* Packets read so far (all of them, filtered or not). */
uint64_t ts_walker_packets(const struct ts_walker *w);
void ts_walker_close(struct ts_walker *w);

/* Callback interface over a whole file.  Returns 0, or -1 with err set. */
int ts_walk_file(const char *path, int machine_filter,
		 void (*cb)(void *ctx, enum ts_kind kind, uint64_t abs_ns),
		 void *ctx, char *err, size_t errlen);

#endif
