/*
 * merge.h - the whole merge: host trace + guest traces -> one trace.
 *
 *   1. scan each guest trace for its sync data (sync_scan.h);
 *   2. copy the host trace byte for byte while scanning it for the host's
 *      sync data, KVM counter records and largest sequence id;
 *   3. fit the clock model per guest (clock_model.h, clock_map.h);
 *   4. rewrite each guest trace onto the host's time axis (rewrite.h).
 * Passes 1 and 2 read different files and share nothing: with several
 * threads they run at once, a file per thread.
 * With --onto guest (merge_opts.onto_guest) the axis is one guest's: the
 * host is only scanned in pass 2, every model is built, then the host is
 * rewritten onto that guest's axis through the inverse map
 * (cm_map_inv_ts), the chosen guest is copied with its times kept and the
 * other guests go through the host's axis onto it.
 * Output goes through the crash-safe writer: on any failure no output
 * appears and an existing file is left as it was.
 */
#ifndef VP_MERGE_H
#define VP_MERGE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock_map.h"
#include "clock_model.h"
#include "rewrite.h"
#include "vp_error.h"

#define MERGE_MAX_GUESTS 64
#define MERGE_MAX_WARNINGS 32
/* Default cap on what the compressed_packets of one trace inflate to. */
#define MERGE_DEFAULT_MAX_INFLATE (2ull << 30)

/* Exit statuses of vperfetto_merge. */
enum merge_status {
	MERGE_OK = 0,
	MERGE_USAGE = 1,
	MERGE_BAD_INPUT = 2,
	MERGE_NO_SYNC = 3,
	MERGE_IO_ERROR = 4,
};

struct merge_opts;
struct merge_result;
struct trace_writer;
/* Packets of the caller's own, appended after the guests and committed
 * with the rest (vm_tracks.h); seq_base: the sequence ids above it are
 * free.  Returns a merge_status. */
typedef int (*merge_extra_fn)(void *ctx, const struct merge_opts *o,
			      struct merge_result *res, uint32_t seq_base,
			      struct trace_writer *w, struct vp_error *err);

struct merge_opts {
	const char *host;
	const char *guests[MERGE_MAX_GUESTS];
	size_t n_guests;
	const char *out;
	/* --guest-tsc-offset: none, or one per guest */
	int64_t tsc_offset[MERGE_MAX_GUESTS];
	size_t n_tsc_offset;
	/* --guest-tsc-scaling: none, one for all, or one per guest */
	uint64_t tsc_ratio[MERGE_MAX_GUESTS];
	unsigned tsc_frac_bits[MERGE_MAX_GUESTS];
	size_t n_tsc_scaling;
	/* --guest-offset-ns: none, or one per guest: host ns = guest ns + N
	 * for every guest clock, no clock model (traces without sync data) */
	int64_t offset_ns[MERGE_MAX_GUESTS];
	size_t n_offset_ns;
	/* --guest-vm-pid: picks the guest's kvm_tsc records */
	int64_t vm_pid[MERGE_MAX_GUESTS];
	size_t n_vm_pid;
	uint32_t clock;        /* 0: BOOTTIME if the host has it, else MONOTONIC */
	bool allow_unsynced;
	bool concat;           /* --concat: no mapping, the files joined */
	bool no_machine_id;
	/* --onto guest[:N]: 0, the output is on the host's time axis (the
	 * default); N, on the N-th guest's (1-based): its packets keep their
	 * times, the host's and the other guests' are mapped onto them */
	size_t onto_guest;
	bool progress;         /* draw a progress bar on stderr */
	unsigned threads;      /* 1 .. PARTITION_MAX_THREADS (0: 1); the
				* output is the same bytes either way */
	uint64_t max_inflate;  /* bytes compressed_packets may inflate to, in
				* all, per trace (0: MERGE_DEFAULT_MAX_INFLATE) */
	volatile sig_atomic_t *cancel; /* set by a signal handler: stop */
	/* When set, the merged output is left aside here instead of being
	 * committed, for the caller to commit with its other outputs
	 * (vp_out_commit_all); NULL on failure. */
	struct vp_out **out_pending;
	merge_extra_fn extra; /* NULL: none */
	void *extra_ctx;
};

/* Distribution of an error bound, ns. */
struct bound_stats {
	double p50, p99, max;
};

struct merge_guest {
	const char *path;
	uint32_t machine_id;
	uint32_t seq_offset;
	bool synced;                 /* false: passed through (--allow-unsynced)
				      * or moved by a given offset (manual) */
	bool manual;                 /* --guest-offset-ns: host = guest + ... */
	int64_t manual_offset_ns;    /* ... this, for every guest clock */
	size_t n_samples_boot, n_samples_mono;
	size_t n_snapshot_samples, n_event_samples;
	struct cm_fit fit_boot, fit_mono;
	bool have_boot, have_mono;
	struct cm_cross cross;
	int64_t kvm_vm_pid;          /* when the offset came from kvm_tsc */
	/* When the offset changed during the trace (kvm_tsc recorded it, or
	 * the guest's fits have segments): the offset in force in each
	 * segment of the guest's fits (NULL: one offset, cross.offset,
	 * throughout) */
	int64_t *seg_offset_boot, *seg_offset_mono;
	/* ... and, per segment, true when no evidence of its own gave it
	 * its offset: it was carried across the step from a neighbour's */
	bool *seg_carried_boot, *seg_carried_mono;
	/* ... and the error bound of each segment of the fit the bounds are
	 * of (BOOTTIME's when there is one), ns */
	double *seg_bound_ns;
	size_t n_offset_values;      /* distinct values in the records */
	enum cm_offset_source seg_offset_source; /* kvm_tsc or exchanges */
	size_t n_exchanges, n_causality_violations;
	struct bound_stats exchange_width_ns; /* round trips, in host ns */
	struct bound_stats bound_ns; /* mapping error bound at the samples */
	double bound_edges_ns;       /* at the first and last guest packet */
	double freq_mismatch;        /* relative, after the ratio */
	double drift_ppm;            /* guest clock rate vs host clock rate */
	/* --onto guest, another guest than the chosen one: the bound of its
	 * map onto the chosen guest's axis (through the host's) */
	struct bound_stats onto_bound_ns;
	double onto_bound_edges_ns;
	struct rewrite_stats rw;
	uint64_t bytes_in, bytes_out;
	unsigned threads;      /* its rewrite ran on */
	/* its sync scan was in scan_parts parts at once, the second from
	 * this byte offset (scan_split.h); 0: in one */
	uint64_t scan_split_at;
	unsigned scan_parts;
};

struct merge_result {
	uint32_t clock;              /* host clock of the output axis */
	uint64_t host_packets, host_bytes;
	size_t host_samples;
	struct cm_fit host_fit;
	bool have_host_fit;
	/* --onto guest (merge_opts.onto_guest, 0: the host's axis): the fit
	 * of the host's other clock (MONOTONIC when clock is BOOTTIME and the
	 * other way round), the host's rewrite and its bound onto the chosen
	 * guest's axis */
	size_t onto_guest;
	struct cm_fit host_fit_other;
	bool have_host_fit_other;
	struct rewrite_stats host_rw;
	uint64_t host_bytes_in;      /* host_bytes: what the rewrite wrote */
	struct bound_stats host_bound_ns;
	double host_bound_edges_ns;
	uint32_t max_host_seq;
	size_t n_kvm_records;
	size_t host_incremental_64;  /* SDK snapshots: clock 64 incremental,
				      * not the counter */
	struct merge_guest guests[MERGE_MAX_GUESTS];
	size_t n_guests;
	char warnings[MERGE_MAX_WARNINGS][256];
	size_t n_warnings, n_warnings_dropped;
	uint64_t bytes_out;
	double seconds;
};

/* --concat: the host trace and the guests' joined unchanged, as one file
 * (each read through, so a broken input is refused with its byte offset;
 * res gets the packet and byte counts).  Returns a merge_status. */
int merge_concat(const struct merge_opts *o, struct merge_result *res,
		 struct vp_error *err);

/* Runs the merge.  Returns a merge_status; err says what failed. */
int merge_run(const struct merge_opts *o, struct merge_result *res,
	      struct vp_error *err);

/* The threads a merge may use: the CPUs this process may run on (its
 * affinity, as nproc(1) counts them: one under `taskset -c 0`, where a
 * second thread would only take turns with the first), at most
 * PARTITION_MAX_THREADS. */
unsigned merge_cpus(void);
void merge_result_free(struct merge_result *res);

#endif
