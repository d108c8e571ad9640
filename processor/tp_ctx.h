/*
 * tp_ctx.h - the state of one trace being loaded, shared by the loader and
 * the parsers.
 *
 * Loading has two stages, as in Perfetto's trace processor:
 *
 *  1. tokenize (tp_load.c): packets in file order.  The loader decodes the
 *     packet envelope (sequence, interning, defaults, clocks, machine) into
 *     a struct tp_packet and hands each data field to the module that owns
 *     it (tp_<module>_tokenize).  A module either handles the field at once
 *     (metadata, stats, descriptors) or pushes timestamped events into the
 *     sorter (tp_sort.h).
 *  2. parse: the sorter hands every event back in timestamp order to the
 *     callback the module registered; that is where slices, sched rows and
 *     counters are built.
 *
 * Modules: track_event (tp_track_event.c), ftrace and processes
 * (tp_ftrace.c, tp_process.c), system probes and service packets
 * (tp_system.c).  Each has init / tokenize / finish entry points declared
 * in tp_modules.h and keeps its own state behind an opaque pointer here.
 */
#ifndef VP_TP_CTX_H
#define VP_TP_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "pb_wire.h"
#include "tp_db.h"
#include "tp_schema.h"
#include "trace_model.h"
#include "u64map.h"

struct tp_sorter;
struct tp_clocks;
struct tp_args_state;
struct tp_procs;
struct tp_tracks;
struct tp_slices;
struct tp_flows;
struct tp_seqs;
struct tp_stats;
struct tp_te_state;
struct tp_ftrace_state;
struct tp_system_state;
struct tp_syscalls;
struct tp_memevents;
struct tp_binder;
struct tp_diag;
struct tp_memory;
struct tp_compress;

/* Sequence-scoped clocks (ids 64..127) of one sequence: allocated by its
 * first clock snapshot that has one. */
struct tp_seq_clocks {
	/* incremental clocks (ClockSnapshot is_incremental) */
	struct tp_incr_clock {
		uint32_t clock_id;
		int64_t last;      /* in the clock's units */
		uint64_t mult_ns;  /* unit_multiplier_ns (1 if unset) */
	} iclocks[4];
	unsigned niclocks;
	uint64_t clock_mult[64]; /* unit_multiplier_ns of clocks 64..127 */
};

#define TP_LOSS_BITS 16

/* Per trusted_packet_sequence_id state the loader keeps (file order).
 * Small, since a trace may have a million sequences: what few sequences
 * need is allocated when they need it.  What one sequence costs in all
 * (this, its interning generation, its sorter queue, the track event
 * state): under 1 KB, 916 bytes measured with one track event each
 * (tests/processor/tp_limits.py); more for sequences with scoped clocks. */
struct tp_seq {
	uint32_t id;        /* trusted_packet_sequence_id */
	uint32_t machine;   /* machine table id */
	uint32_t queue;     /* sorter queue of this sequence's packets */
	uint32_t te_queue;  /* of its track events; UINT32_MAX until one */
	uint32_t gen;       /* current interning generation (tp_load.h) */
	/* validity, losses, skipped packets, default clock, by Perfetto's
	 * rules (wire/trace_model.h) */
	struct vp_seq_state st;
	/* previous_packet_dropped values, bit by bit (not counting the
	 * first packet of the sequence, where a loss is expected): NULL
	 * until a loss, then TP_LOSS_BITS counters */
	uint64_t *loss_bit_count;
	void *te;           /* track_event tokenizer state, owned by it */
	struct tp_seq_clocks *clocks; /* NULL until a scoped clock is seen */
};

/* One TracePacket as the loader decoded its envelope. */
struct tp_packet {
	const uint8_t *data; /* the whole packet */
	size_t len;
	uint64_t offset;     /* file offset of the packet payload */
	struct tp_seq *seq;  /* NULL without trusted_packet_sequence_id */
	uint32_t gen;        /* interning generation for this packet */
	uint32_t machine;    /* machine table id (0: the tracing host) */
	uint32_t queue;      /* sorter queue for events of this packet */
	bool has_ts;         /* ts is valid */
	bool ts_implied;     /* the packet has none: ts is the one Perfetto
				gives it (the latest time so far) */
	int64_t ts;          /* packet timestamp in trace time */
	int64_t raw_ts;      /* timestamp as written */
	uint32_t clock_id;   /* clock of raw_ts */
	/* the rest of the envelope (sequence flags, trusted uid and pid,
	 * ...) as the trace model decoded it (wire/trace_model.h) */
	const struct vp_packet *env;
};

struct tp_ctx {
	struct tp_strpool *pool;
	/* track_group_id of the next set of compressed tracks (tp_compress) */
	uint32_t track_groups;
	struct tp_table tables[TP_T_COUNT];

	struct tp_sorter *sorter;
	struct tp_clocks *clocks;
	struct tp_args_state *args;
	struct tp_procs *procs;
	struct tp_tracks *tracks;
	struct tp_slices *slices;
	struct tp_flows *flows;
	struct tp_states *states;
	struct tp_seqs *seqs;  /* per-sequence state (tp_seq.h) */
	struct tp_stats *stats;
	struct tp_te_state *te;
	struct tp_te_tracks *te_tracks; /* its descriptor tracks */
	struct tp_ftrace_state *ftrace;
	struct tp_system_state *sys;
	struct tp_sys_stats *sys_stats; /* tp_sys_stats.c */
	struct tp_syscalls *syscalls; /* tp_syscalls.h */
	struct tp_memevents *memevents; /* tp_memevents.h */
	struct tp_binder *binder; /* binder and i2c slices (tp_binder.h) */
	struct tp_diag *diag;   /* the trace configs' diagnostics (tp_diag.h) */
	struct tp_memory *memory; /* memory ftrace events (tp_memory.h) */
	struct tp_compress *compress; /* shared async tracks (tp_compress.h) */
	struct tp_sessions_state *sessions;
	struct tp_alog_state *alog; /* tp_android_log.c */

	struct u64map machines; /* raw machine_id -> machine table id */
	bool host_has_data;     /* a packet of machine 0 was seen */
	bool machine_resolved;  /* the first remote machine was placed */
	const char *path;       /* trace file, for messages */
	bool quiet;             /* no warnings on stderr (tp_warn) */
	unsigned warnings;      /* printed so far (tp_warn stops at 20) */
	uint64_t file_size;
	/* FNV-1a of the first 4 KiB of the input as given (gzip'd or not),
	 * from which a trace without a uuid gets one, as in Perfetto */
	bool have_head_hash;
	uint64_t head_hash;
	uint64_t packets;       /* packets tokenized */
	int64_t first_ts, last_ts; /* bounds of parsed events (trace time) */
	bool have_ts;
	bool sorting_done;      /* true once the parse stage has run */
};

static inline struct tp_table *tp_tab(struct tp_ctx *c, enum tp_table_id t)
{
	return &c->tables[t];
}

static inline tp_str tp_s(struct tp_ctx *c, const char *s)
{
	return tp_intern_cstr(c->pool, s);
}

/* The bytes of a LEN field, interned as a string. */
static inline tp_str tp_s_field(struct tp_ctx *c, const struct pb_field *f)
{
	return tp_intern(c->pool, (const char *)f->data, f->len);
}

/* Machine table id for a raw TracePacket.machine_id (0: the host). */
uint32_t tp_machine(struct tp_ctx *c, uint32_t raw_machine_id);
/* The same for a packet in file order, with Perfetto's adoption: when the
 * first packet that carries a machine_id comes before any packet of the
 * host (synchronization markers and compressed-packet envelopes do not
 * count), the host has no data of its own and that machine takes the
 * host's row (machine 0, raw_id relabelled); later machines get rows of
 * their own. */
uint32_t tp_packet_machine(struct tp_ctx *c, uint32_t raw_machine_id,
			   bool counts_for_host);

/* Prints a warning about the trace (tp_stats.c): through vp_log, the
 * first 20 of a load, none when the load is quiet. */
void tp_warn(struct tp_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
