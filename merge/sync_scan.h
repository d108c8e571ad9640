/*
 * sync_scan.h - finds the clock-sync data in a trace (clock-sync.md).
 *
 * The scanner is fed packets one at a time and collects:
 *   - (counter, clock) samples from ClockSnapshots that hold clock 64 as a
 *     plain counter (not incremental, no unit multiplier) beside BOOTTIME
 *     and/or MONOTONIC;
 *   - the same from `cros`/`guest_clock_sync` track events;
 *   - `cros`/`guest_clock_sync_exchange` events (guest <-> host exchanges);
 *   - `vperfetto`/`kvm_tsc` events (KVM's counter offset and scaling);
 *   - the largest trusted_packet_sequence_id and the primary trace clock.
 * Names, categories and annotation names may be literal or interned; the
 * scanner remembers only interned strings it is looking for, so its memory
 * does not grow with the trace.
 */
#ifndef VP_SYNC_SCAN_H
#define VP_SYNC_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock_map.h"
#include "clock_model.h"
#include "pb_wire.h"
#include "vp_error.h"

struct kvm_tsc_record {
	int64_t vm_pid;
	int64_t vcpu;
	int64_t tsc_offset;
	uint64_t ratio;     /* 0 when absent */
	uint64_t frac_bits;
	uint64_t ts;        /* packet timestamp, as written */
};

/* What the scan keeps of a trace's sync data, whatever its size (the
 * merge's memory is bounded): of each kind of sample and of the
 * exchanges, at most SYNC_MAX_SAMPLES, an even spread of all (when full,
 * every other one is dropped and from then on only every other one
 * offered is kept; `offered` counts them all); of the kvm_tsc records,
 * those that change a value of their vCPU, at most SYNC_MAX_KVM.  Those
 * are for a merge of a host and one guest; with more inputs, whose sync
 * data the merge holds all at once, each keeps its share of twice that
 * (sync_scanner_share), down to SYNC_MIN_SAMPLES and SYNC_MIN_KVM. */
#define SYNC_MAX_SAMPLES 131072
#define SYNC_MAX_KVM 65536
#define SYNC_MIN_SAMPLES 2048
#define SYNC_MIN_KVM 1024

/* Kept entries of an array thinned as above. */
struct thinning {
	size_t offered, stride;
	size_t max;             /* kept at most (0: SYNC_MAX_SAMPLES) */
};

struct sample_vec {
	struct cm_sample *v;
	size_t n, cap;
	struct thinning thin;
};

/* The most packet sequences one trace may have.  The rewrite keeps a
 * few hundred bytes of state for each (its clocks, its defaults), so this
 * bounds that memory (to about 30 MiB); a trace with more is refused,
 * naming the packet that opened one too many.  A service numbers a
 * sequence per writer: real traces have hundreds. */
#define SYNC_MAX_SEQUENCES 65536
/* Sequences of ids below this have their load measured (seq_load). */
#define SYNC_SEQ_LOAD_IDS 256
/* A packet's share of the load beyond its bytes: what handling any packet
 * costs, in bytes of one the rewrite copies (a rough model: its fields'
 * walk and the map of its timestamp). */
#define SYNC_PACKET_LOAD 512

struct sync_data {
	struct sample_vec boot;  /* (counter, BOOTTIME) */
	struct sample_vec mono;  /* (counter, MONOTONIC) */
	/* (REALTIME, BOOTTIME) of each ClockSnapshot holding both, in file
	 * order: how REALTIME values are brought to BOOTTIME */
	struct sample_vec realtime;
	/* (REALTIME, MONOTONIC) of each holding both: the same for a merge
	 * onto MONOTONIC */
	struct sample_vec realtime_mono;
	/* (MONOTONIC, BOOTTIME) of each holding both: how a merge onto
	 * MONOTONIC puts a guest's BOOTTIME on the host's */
	struct sample_vec mono_boot;
	size_t n_snapshot_samples;   /* from ClockSnapshots */
	size_t n_event_samples;      /* from guest_clock_sync events */
	size_t n_incremental_64;     /* snapshots whose clock 64 is an
				      * incremental SDK clock: ignored */
	size_t n_bad_sync_events;    /* sync events missing a value */
	size_t n_compressed;         /* packets with compressed_packets */
	struct cm_exchange *ex;
	size_t n_ex, cap_ex;
	struct thinning ex_thin;
	struct kvm_tsc_record *kvm;
	size_t n_kvm, cap_kvm;
	size_t max_kvm;              /* kept at most (0: SYNC_MAX_KVM) */
	size_t n_kvm_dropped;        /* changes beyond that */
	uint32_t max_seq_id;
	size_t n_sequences;          /* distinct sequence ids */
	uint32_t max_machine_id;     /* largest TracePacket.machine_id seen */
	bool have_cpu;               /* an FtraceEventBundle.cpu was seen */
	uint32_t max_cpu;            /* ... the largest */
	uint32_t trace_clock;        /* primary_trace_clock, default BOOTTIME */
	uint64_t n_packets;
	/* Each sequence's packets, as bytes (those the scan read) plus
	 * SYNC_PACKET_LOAD a packet: the work it gives the rewrite, which
	 * shares the sequences out among its threads by it
	 * (partition_plan). */
	uint64_t seq_load[SYNC_SEQ_LOAD_IDS];
};

struct sync_scanner;

/* Sync samples and exchanges the scan offered but did not keep. */
size_t sync_data_thinned(const struct sync_data *d);

struct sync_scanner *sync_scanner_new(const char *path);
/* Sets what s keeps at most to one input's share when the merge has
 * n_inputs (sync_data: SYNC_MAX_SAMPLES); before the first packet. */
void sync_scanner_share(struct sync_scanner *s, size_t n_inputs);
/* What d keeps at most of a kind of sample, and of kvm_tsc changes. */
size_t sync_data_max_samples(const struct sync_data *d);
size_t sync_data_max_kvm(const struct sync_data *d);
void sync_scanner_free(struct sync_scanner *s);
/* After the last packet of a whole scan: gives back what s kept of each
 * sequence (its interning, up to SYNC_MAX_SEQUENCES of them), which the
 * merge, holding every input's sync data to the end, has no more use
 * for.  Only sync_scanner_data and sync_scanner_free may follow. */
void sync_scanner_end(struct sync_scanner *s);
/* Scans one packet found at file offset off.  Returns 0, 1 when the packet
 * holds compressed_packets (nothing was scanned: the caller inflates them
 * and scans each packet inside), or -1 with a message naming the file and
 * byte offset on malformed data. */
int sync_scan_packet(struct sync_scanner *s, const uint8_t *pkt, size_t len,
		     uint64_t off, struct vp_error *err);
/* For a scan that does not read every byte (sync_skim.h): the body that
 * stands in for a length-delimited TracePacket field `num` whose body
 * begins with head[0..n), appended to out, so that sync_scan_packet
 * finds in the packet what it would have found in the whole.  False
 * when the scan needs the whole body. */
bool sync_scan_field_skim(uint32_t num, const uint8_t *head, size_t n,
			  struct pb_buf *out);
/* What the scan reads of a field inside a large TracePacket field, by
 * the numbers on its path from the packet (path[0] is the packet's
 * field): for a scan that skims (sync_skim.h) and builds a stand-in
 * body with only that in it. */
enum sync_need {
	SYNC_SKIP,   /* nothing: it may be left out */
	SYNC_ALL,    /* its bytes as they are */
	SYNC_NAME,   /* a string compared with the names the scan looks
		      * for: one longer than SYNC_NAME_MAX bytes matches none,
		      * and an empty one may stand in for it */
	SYNC_FIELDS, /* a message: each field as sync_scan_need says */
};
#define SYNC_NAME_MAX 64
/* The deepest path sync_scan_need answers SYNC_FIELDS for, plus one. */
#define SYNC_NEED_DEPTH 3
enum sync_need sync_scan_need(const uint32_t *path, size_t depth);
/* A trace scanned in two parts at once: s, a scanner that has scanned
 * the trace up to a packet, and part, one made with
 * sync_scanner_new_part that has scanned the rest from that packet on,
 * not knowing the interning of the sequences before it (it takes it for
 * empty).  Its results that do not depend on order are counted apart;
 * the others it logs, with the packets whose scan read that interning,
 * up to a bound: past it, sync_scan_packet fails.
 * sync_scanner_join then gives s, as it would have from scanning the
 * rest itself, the part's results in order, scanning again with its own
 * interning the kept packets of a sequence for which that was not
 * empty (reading those kept by their offset with read): 0; or 1, s
 * unchanged, when that cannot be done exactly (a packet not kept, too
 * many sequences in all, malformed data that only s's interning leads
 * to, a read that fails), for the caller to scan the rest with s after
 * all, which says what is wrong as a plain scan does.  After a join, s
 * stands where the part ended, as if it had scanned it: a part that
 * began there may be joined next.  A part keeps up
 * to 4 MiB (packets read whole take 16 bytes each); when full it gives
 * up those of the sequences that keep the most. */
struct sync_scanner *sync_scanner_new_part(const char *path);
/* sync_scan_packet for a part scanner, of a packet that is the file's
 * bytes at off (read whole, not a skim's stand-in): one it keeps for the
 * join, it keeps by its offset, and the join reads it again. */
int sync_scan_part_packet(struct sync_scanner *part, const uint8_t *pkt,
			  size_t len, uint64_t off, struct vp_error *err);
/* Reads len bytes of the file at off into buf: 0, or -1. */
typedef int (*sync_read_fn)(void *ctx, uint64_t off, void *buf, size_t len);
int sync_scanner_join(struct sync_scanner *s, struct sync_scanner *part,
		      sync_read_fn read, void *read_ctx);

/* The data gathered so far (owned by the scanner). */
struct sync_data *sync_scanner_data(struct sync_scanner *s);

void sync_data_free(struct sync_data *d);

#endif
