/*
 * rewrite.h - re-encodes the packets of one trace onto another machine's
 * time axis: a guest's onto the host's (the default merge), or, with
 * vperfetto_merge --onto guest, the host's and the other guests' onto the
 * chosen guest's.  Nothing here knows which side is which: the map
 * function does the mapping, the configuration says what to move.
 *
 * Works at the wire level: every field the rewriter has no business with is
 * copied byte for byte (unknown fields included), and only the fields that
 * carry the input's time or identity are re-encoded:
 *   - TracePacket.timestamp in BOOTTIME/MONOTONIC (or the trace clock),
 *     relabelled to the target clock when it differs;
 *   - timestamps on sequence-scoped clocks 64..127, incremental or not, with
 *     unit multipliers: re-encoded deltas, anchored on the sequence's
 *     ClockSnapshot (whose target-clock entry is itself mapped);
 *   - TrackEvent timestamp_delta_us / timestamp_absolute_us and
 *     ThreadDescriptor.reference_timestamp_us (legacy microseconds);
 *   - FtraceEvent.timestamp, FtraceEventBundle.boot_timestamp and
 *     compact_sched switch/waking timestamps (delta-encoded);
 *   - trusted_packet_sequence_id (moved clear of the other traces'),
 *     machine_id;
 *   - with remap_ids (for viewers without machine_id): pids, tids and
 *     track uuids, with 0 kept as 0 and no other uuid ever turned into 0.
 */
#ifndef VP_REWRITE_H
#define VP_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "vp_error.h"

/* Maps a time of the input trace on its clock `clock_id` (BOOTTIME,
 * MONOTONIC, ...) to the target clock of the output axis; returns false
 * when the clock can't be mapped (the value is then left as it was). */
typedef bool (*rw_map_fn)(void *ctx, uint32_t clock_id, uint64_t in_ns,
			  uint64_t *out_ns);
/* The same for n times of one clock at once, in order (a map may keep
 * state from one time to the next): ok[i] is what the map would have
 * returned for in[i].  For the long delta lists of compact_sched, where a
 * call per time costs as much as the mapping. */
typedef void (*rw_map_many_fn)(void *ctx, uint32_t clock_id,
			       const uint64_t *in_ns, uint64_t *out_ns,
			       bool *ok, size_t n);

struct rewrite_cfg {
	const char *path;       /* input file, for messages */
	rw_map_fn map;          /* NULL: every time kept as it is (the trace
				 * whose axis the output is on); nothing is
				 * then counted as unmapped */
	void *map_ctx;
	rw_map_many_fn map_many; /* NULL: map, one time after the other */
	/* A REALTIME value inside a payload (an android_log entry's) to the
	 * output's REALTIME, with map_ctx; NULL: kept as it is, for a trace
	 * processor to convert through the input's own snapshots, which the
	 * output keeps on the input's machine */
	rw_map_fn log_map;
	/* With an output axis other than BOOTTIME (--clock monotonic): a
	 * BOOTTIME value of the input to the output's BOOTTIME, with
	 * map_ctx, for the BOOTTIME entries of the input's ClockSnapshots
	 * on its own machine: a trace processor, whose trace clock is
	 * BOOTTIME, converts the input's times through them.  NULL: those
	 * entries are left as they are */
	rw_map_fn boot_map;
	/* own_clocks_only onto BOOTTIME: a time on the output's axis to the
	 * output's MONOTONIC (the host's), with map_ctx, for what a trace
	 * processor reads as MONOTONIC on the host's machine: legacy
	 * microsecond timestamps and the MONOTONIC entries of the input's
	 * ClockSnapshots.  NULL: those are written on the axis */
	bool (*axis_to_mono)(void *ctx, uint64_t axis_ns, uint64_t *mono_ns);
	uint32_t target_clock;  /* clock of the output axis, which the mapped
				 * values are on */
	uint32_t trace_clock;   /* the input's primary trace clock */
	uint32_t seq_offset;    /* added to every non-zero sequence id */
	uint32_t machine_id;    /* written to every packet; 0: none */
	bool remap_ids;         /* rewrite pids, tids and track uuids */
	/* The packets go on the host's machine (--no-machine-id), where a
	 * trace processor takes the input's global clocks for the host's
	 * and every guest's at once (rewrite_snapshot): of a ClockSnapshot
	 * only the target clock, MONOTONIC and the sequence-scoped clocks
	 * are written, and one of global clocks only when its target time
	 * is at least snapshot_floor (those of the guests before). */
	bool own_clocks_only;
	uint64_t snapshot_floor;
	uint32_t pid_offset;    /* added to non-zero pids and tids */
	uint32_t cpu_offset;    /* added to ftrace cpu numbers (remap_ids) */
	uint64_t uuid_key;      /* odd; picks the uuid permutation */
	/* Counters the map keeps of its own (values it saturated): set back
	 * after a rewrite_piece that only measures.  NULL: none. */
	uint64_t *map_counts[2];
};

struct rewrite_stats {
	uint64_t packets;
	uint64_t ts_packet;       /* absolute packet timestamps mapped */
	uint64_t ts_scoped;       /* sequence-scoped clock timestamps */
	uint64_t ts_legacy_us;    /* TrackEvent / ThreadDescriptor us */
	uint64_t ts_ftrace;       /* FtraceEvent.timestamp and boot_ts */
	uint64_t ts_compact;      /* compact_sched switch + waking */
	uint64_t ts_snapshot;     /* ClockSnapshot entries */
	uint64_t ts_log;          /* android_log entries (REALTIME) */
	uint64_t ts_unmapped;     /* left as they were: unknown clock */
	uint64_t backwards;       /* mapped time went back on a sequence */
	uint64_t clamped;         /* deltas that would be negative: set 0 */
	uint64_t overflow;        /* mapped values outside the field's range
				   * (far outside the model): saturated */
	uint64_t relabelled;      /* packets given timestamp_clock_id */
	uint64_t first_boot_ts;   /* smallest and largest BOOTTIME packet */
	uint64_t last_boot_ts;    /* timestamp mapped (input values) */
	uint64_t snapshot_last;   /* own_clocks_only: the greatest target
				   * time of a snapshot of global clocks
				   * written (output value) */
};

struct rewriter;

struct rewriter *rewriter_new(const struct rewrite_cfg *cfg);
void rewriter_free(struct rewriter *rw);
/* Rewrites one packet of the input (found at file offset off), appending it to
 * out.  Returns 0, 1 when the packet holds compressed_packets
 * (nothing was written: the caller inflates them and rewrites each packet
 * inside), or -1 with a message naming file and byte offset on malformed
 * data. */
int rewrite_packet(struct rewriter *rw, const uint8_t *pkt, size_t len,
		   uint64_t off, struct pb_buf *out, struct vp_error *err);
/* True when rewriting this packet reads and writes no per-sequence state
 * of the rewriter (an ftrace bundle, process data without a timestamp), so
 * any rewriter with the same configuration gives the same bytes and the
 * same counts; *seq_id is the packet's sequence either way. */
bool rewrite_packet_stateless(const uint8_t *pkt, size_t len,
			      uint32_t *seq_id);
/* True when rewrite_packet copies every top-level field of number num
 * byte for byte, whatever it holds, under any configuration, and reads
 * nothing in it: the body of such a field need not be in memory (a large
 * packet's may be passed from file to output, partition.h). */
bool rewrite_field_passes(uint32_t num);
/* The same for a rewriter that keeps the guest's ids (remap_ids off):
 * process and track data pass too. */
bool rewrite_field_passes_ids_kept(uint32_t num);
/* True when rewrite_packet copies field sub of a top-level message num
 * byte for byte under any configuration and reads nothing in it (a track
 * event's debug annotations, say); with sub 0, whether message num may
 * have such fields. */
bool rewrite_field_passes_in(uint32_t num, uint32_t sub);
/* Of a top-level field num, the number of the fields rewrite_piece
 * rewrites one by one (an ftrace bundle's events), PARTITION_PIECE_ANY
 * when each of its fields is one (a process tree's processes and
 * threads); 0 for none. */
uint32_t rewrite_piece_of(uint32_t num);
/* Appends to out what rewrite_packet writes for the fields [p, p + len)
 * (whole fields of number rewrite_piece_of(num), at file offset off) of a
 * top-level message num whose other fields are msg, with the same counts
 * when count, else with none (a pass that only measures the output).  For
 * a packet too large to hold in memory at once (partition.h). */
int rewrite_piece(struct rewriter *rw, uint32_t num, const uint8_t *msg,
		  size_t msg_len, const uint8_t *p, size_t len, uint64_t off,
		  bool count, struct pb_buf *out, struct vp_error *err);
const struct rewrite_stats *rewriter_stats(const struct rewriter *rw);
/* Adds src's counts to dst (the halves of a partitioned rewrite). */
void rewrite_stats_add(struct rewrite_stats *dst,
		       const struct rewrite_stats *src);

/* The uuid permutation used by remap_ids: a bijection on 64-bit values
 * that keeps 0 at 0 (so no other uuid can become 0). */
uint64_t rewrite_remap_uuid(uint64_t uuid, uint64_t key);

#endif
