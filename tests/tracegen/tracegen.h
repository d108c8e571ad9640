/*
 * tracegen.h - synthetic host and guest Perfetto traces with a known clock
 * relation, and the truth function to check a merge against.
 *
 * THE MODEL
 *
 * Everything is defined relative to a reference point: the host counter
 * value c0 at the start of the trace, where host BOOTTIME is hb0 and guest
 * BOOTTIME is gb0.  With F = host_hz (counter ticks per second),
 * rho = tsc_ratio / 2^tsc_frac_bits and delta = drift_ppm * 1e-6:
 *
 *   host counter     c            (~3 GHz, c0 = 2^52 + seed bits)
 *   host BOOTTIME    hb(c)  = hb0 + (c - c0) * 1e9 / F
 *                             + (c >= c_step ? host_step_ns : 0)
 *   guest counter    gc(c)  = c * rho + offset        (KVM: the guest reads
 *                             floor(c * rho) + offset, i.e. (c*R >> F) + off)
 *                             + (c >= c_step ? tsc_step : 0)
 *   guest BOOTTIME   gb(gc) = gb0 + (gc - gc(c0)) * 1e9 / (F * rho)
 *                                  * (1 + delta)
 *                    (with drift_change_ppm, the rate 1 + delta holds up to
 *                    c_step and 1 + delta + change * 1e-6 from there on:
 *                    the clock bends there, it does not jump;
 *                    host_drift_change_ppm bends hb(c) the same way)
 *   guest MONOTONIC  gm     = gb - guest_mono_lag_ns  (a fixed suspend offset)
 *   guest REALTIME   gr     = gb + guest_realtime_offset_ns
 *
 * where host BOOTTIME jumps forward by host_step_ns (a suspend gap) while
 * the counter keeps counting, at c_step = c0 + (s + 1/2) * Pc: the middle of
 * sync period s = floor(host_step_at * duration / sync_period) (kept below
 * the last period), Pc = sync_period_ns * F / 1e9 ticks.  Nobody can tell
 * where between two host snapshots a step happened, so periods s and s+1
 * are "quiet": no guest events or exchanges, the last host snapshot before
 * the step is at 1/5 of period s, the guest sync sample of period s+1 after
 * 1/5 of it, and the incremental sequence is cleared again in period s+2.
 * So guest BOOTTIME t happened at host counter
 * c = c0 + (t - gb0) * F / (1e9 * (1 + delta)) and the truth is
 *
 *   truth(t) = hb0 + (t - gb0) / (1 + delta) + (c >= c_step ? step : 0)
 *
 * evaluated in long double relative to the reference point and rounded to
 * the nearest ns (exact to < 1 ns; rho cancels out).
 *
 * Clock readings in the traces are the model's values rounded to whole ns
 * (and floored to whole guest cycles), plus a uniform +-jitter_ns on each
 * BOOTTIME/MONOTONIC read of a sync sample (host snapshots and guest sync
 * events alike; counters are exact), plus 50 us on both clocks of every
 * outlier_every-th guest sync sample.
 *
 * THE TRACES
 *
 * host.pb   seq 1: ClockSnapshot {BOOTTIME, clock 64 = counter} per sync
 *                  period (from one period before the start to one after
 *                  the end), packet timestamp = the BOOTTIME value.
 *           seq 2: Perfetto-SDK style incremental clock: ClockSnapshot
 *                  {BOOTTIME = B, 64 = B is_incremental, no unit (1 ns)}
 *                  every ~1 s after a state clear, TracePacketDefaults
 *                  {timestamp_clock_id 64}, TrackEvents with delta
 *                  timestamps.  Must never be taken for the counter.
 *           seq 3: process/thread TrackDescriptors, kvm_tsc events (when
 *                  use_kvm_tsc), one host slice per sync period.
 * guest.pb  see the comment at the top of tracegen.c (one sequence per
 *           timestamp kind of clock-sync.md "What the rewrite covers").
 * ideal.pb  (optional) the guest trace as a perfect merge would write it:
 *           every guest timestamp mapped through the truth, packets tagged
 *           machine_id, MONOTONIC packets relabelled to BOOTTIME.  Used to
 *           self-check ts_walk, check_truth and the generator.
 */
#ifndef VP_TRACEGEN_H
#define VP_TRACEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ts_walk.h"

struct tg_params {
	uint64_t seed;
	uint64_t duration_ns;       /* trace span, default 10 s */
	uint64_t sync_period_ns;    /* host snapshots and guest sync, 100 ms */
	int64_t offset;             /* guest counter = host * rho + offset */
	uint64_t tsc_ratio;         /* R: rho = R / 2^frac_bits (default 1.0) */
	uint32_t tsc_frac_bits;     /* 48 as on VMX */
	double drift_ppm;           /* guest BOOTTIME rate error vs the host */
	double drift_change_ppm;    /* ... changes by this much at the step
				     * point (NTP retuning the guest clock):
				     * continuous, no quiet periods; 0 = none */
	double host_drift_change_ppm; /* host BOOTTIME's rate against the
				     * counter changes by this much there */
	uint64_t jitter_ns;         /* uniform +- on each sync clock read */
	uint32_t outlier_every;     /* every Nth guest sync sample +50 us; 0 off */
	int64_t host_step_ns;       /* host BOOTTIME jump (>= 0); 0 = none */
	int64_t tsc_step;           /* guest counter offset change at the same
				     * point (a migration, a TSC write); 0 =
				     * none; kvm_tsc records both values */
	double host_step_at;        /* where, as a fraction of duration_ns */
	uint64_t n_events;          /* guest timestamped events (approx.) */
	uint32_t n_threads;         /* guest thread sequences */
	uint32_t n_cpus;            /* guest ftrace cpus (one sequence each) */
	bool use_kvm_tsc;           /* host writes vperfetto/kvm_tsc records */
	uint32_t n_exchanges;       /* guest cros/guest_clock_sync_exchange */
	uint64_t target_bytes;      /* >0: add events until guest.pb is this big */
	uint32_t vm_pid;            /* vm_pid of the kvm_tsc records */
	uint64_t incr_unit_ns;      /* guest incremental clock unit (1000) */

	/* The reference point and rates.  Zero means "derive from the seed"
	 * (tg_params_resolve); --params-out always writes the resolved values. */
	uint64_t host_hz;           /* counter frequency */
	uint64_t c0;                /* host counter at the start */
	uint64_t hb0;               /* host BOOTTIME at c0 */
	uint64_t gb0;               /* guest BOOTTIME at c0 */
	uint64_t guest_mono_lag_ns; /* guest BOOTTIME - MONOTONIC */
	uint64_t guest_realtime_offset_ns; /* guest REALTIME - BOOTTIME */
};

/* Per-kind counts of what the generator wrote; guest_counts is indexed by
 * enum ts_kind and must equal what ts_walk finds in guest.pb. */
struct tg_result {
	uint64_t guest_counts[TS_KIND_COUNT];
	uint64_t host_packets, guest_packets;
	uint64_t host_bytes, guest_bytes, ideal_bytes;
	uint64_t windows;           /* sync periods generated */
	uint64_t sync_samples;      /* guest guest_clock_sync events */
	uint64_t exchanges;
	uint64_t host_snapshots;
};

struct tg_outputs {
	const char *host_path;      /* required */
	const char *guest_path;     /* required */
	const char *ideal_path;     /* optional: NULL for none */
	uint32_t ideal_machine_id;  /* machine_id of ideal.pb's packets (>= 1) */
};

/* Defaults: seed 1, 10 s, 100 ms, offset -0x123456789AB, rho 1 (2^48/48),
 * 25 ppm, 100 ns jitter, no outliers, no step, 10000 events, 4 threads,
 * 2 cpus, no kvm_tsc, 50 exchanges, incremental unit 1000 ns; derived
 * fields zero. */
struct tg_params tg_params_default(void);

/* Fills the derived fields that are zero from the seed.  Idempotent. */
void tg_params_resolve(struct tg_params *p);

/* Checks ranges (durations, frac bits, offset keeping the guest counter
 * positive, ...).  Returns 0, or -1 with a message. */
int tg_params_check(const struct tg_params *p, char *err, size_t errlen);

/* key=value lines, one per field (doubles with 17 significant digits). */
int tg_params_save(const struct tg_params *p, const char *path, char *err,
		   size_t errlen);
/* Starts from tg_params_default(), applies each line, resolves.  Unknown
 * keys and bad values are errors.  Blank lines and '#' comments are ok. */
int tg_params_load(struct tg_params *p, const char *path, char *err,
		   size_t errlen);
/* Applies one "key" = "value" (also used by the loader). */
int tg_params_set(struct tg_params *p, const char *key, const char *value,
		  char *err, size_t errlen);

/* The model (p must be resolved). */
uint64_t tg_host_boottime_at(const struct tg_params *p, uint64_t host_counter);
uint64_t tg_guest_counter_at(const struct tg_params *p, uint64_t host_counter);
uint64_t tg_guest_boottime_at(const struct tg_params *p, uint64_t host_counter);

/* The truth: a guest BOOTTIME (or MONOTONIC) value mapped to host BOOTTIME,
 * rounded to the nearest ns. */
uint64_t tg_truth_guest_to_host(const struct tg_params *p,
				uint64_t guest_boottime_ns);
uint64_t tg_truth_guest_mono_to_host(const struct tg_params *p,
				     uint64_t guest_monotonic_ns);

/* Writes the traces.  Returns 0, or -1 with a message (outputs are written
 * to temporaries and renamed into place only on success). */
int tg_generate(const struct tg_params *p, const struct tg_outputs *out,
		struct tg_result *res, char *err, size_t errlen);

#endif
