/*
 * tracegen.c - synthetic host/guest Perfetto traces with a known clock
 * relation (the model and the host trace are described in tracegen.h).
 *
 * THE GUEST TRACE, one sequence per kind of timestamp the merge must map
 * (clock-sync.md, "What the rewrite covers"):
 *
 *   seq 1       service: TrackDescriptor; every 10th sync period a
 *               ClockSnapshot {BOOTTIME, MONOTONIC, REALTIME} with the
 *               BOOTTIME value as packet timestamp; every period a
 *               "mono_tick" instant whose packet has timestamp_clock_id =
 *               MONOTONIC; once, a packet with an unknown field 9000.
 *   seq 2       sync agent: cros/guest_clock_sync instants, one per sync
 *               period, alternately literal and interned (names, category,
 *               annotation names), every third with int_value instead of
 *               uint_value; cros/guest_clock_sync_exchange instants.
 *   seq 3..     one per thread: TrackDescriptors (process once, thread),
 *               begin/end slices with interned names, one debug annotation,
 *               absolute BOOTTIME packet timestamps.
 *   seq 40      incremental sequence-scoped clock: every 10th period the
 *               state is cleared and a packet carries TracePacketDefaults
 *               {timestamp_clock_id 64}, ClockSnapshot {BOOTTIME = B,
 *               64 = B/U incremental, unit_multiplier_ns = U} and its own
 *               timestamp B on an explicit BOOTTIME; then instants whose
 *               timestamps are deltas in units of U.
 *   seq 41      legacy microseconds (on MONOTONIC, as Perfetto reads
 *               them): every period a ThreadDescriptor packet
 *               with reference_timestamp_us, then instants with
 *               timestamp_delta_us, the last one of the period with
 *               timestamp_absolute_us instead (last, so that readers that do
 *               and that don't move the delta base on it agree).
 *   seq 50..    one per cpu: FtraceEventBundles with sched_switch
 *               FtraceEvents (first half of each period), and bundles with
 *               compact_sched switch and waking arrays (second half).
 *
 * Every packet of the guest trace is built once per guest-side output: the
 * guest trace itself, and optionally the "ideal" merge (times mapped
 * through the truth).  Both builds start from the same PRNG state and
 * branch only on shared data, so they describe the same events; whatever
 * differs between them (anchors, accumulated deltas) lives in struct gout.
 */
#include "tracegen.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "trace_io.h"

/* Clock ids (Perfetto's BuiltinClock; 64..127 are sequence-scoped). */
enum {
	TG_CLOCK_REALTIME = 1,
	TG_CLOCK_MONOTONIC = 3,
	TG_CLOCK_BOOTTIME = 6,
	TG_CLOCK_SEQUENCE_SCOPED_FIRST = 64,
	TG_CLOCK_SEQUENCE_SCOPED_LAST = 127,
	TG_CLOCK_CPU_COUNTER = 64, /* the perCetto convention (host trace) */
};

/* Fields perfetto_fields.h does not name (numbers checked against
 * Perfetto's ftrace_event_bundle.proto and sched.proto). */
enum {
	TG_SS_PREV_COMM = 1,
	TG_SS_PREV_PID = 2,
	TG_SS_PREV_PRIO = 3,
	TG_SS_PREV_STATE = 4,
	TG_SS_NEXT_COMM = 5,
	TG_SS_NEXT_PID = 6,
	TG_SS_NEXT_PRIO = 7,
	TG_CS_SWITCH_TIMESTAMP = 1,
	TG_CS_SWITCH_PREV_STATE = 2,
	TG_CS_SWITCH_NEXT_PID = 3,
	TG_CS_SWITCH_NEXT_PRIO = 4,
	TG_CS_INTERN_TABLE = 5,
	TG_CS_SWITCH_NEXT_COMM_INDEX = 6,
	TG_CS_WAKING_TIMESTAMP = 7,
	TG_CS_WAKING_PID = 8,
	TG_CS_WAKING_TARGET_CPU = 9,
	TG_CS_WAKING_PRIO = 10,
	TG_CS_WAKING_COMM_INDEX = 11,
	TG_CS_WAKING_COMMON_FLAGS = 12,
	TG_UNKNOWN_FIELD = 9000,
};

/* Sequence ids, track uuids and pids of the generated traces. */
enum {
	G_SEQ_SERVICE = 1,
	G_SEQ_SYNC = 2,
	G_SEQ_THREAD0 = 3,
	G_SEQ_INCR = 40,
	G_SEQ_LEGACY = 41,
	G_SEQ_FTRACE0 = 50,
	H_SEQ_CLOCK = 1,
	H_SEQ_SDK = 2,
	H_SEQ_MISC = 3,
};
#define G_UUID_PROCESS 0x1000u
#define G_UUID_THREAD0 0x2000u
#define G_UUID_AGENT 0x3000u
#define G_UUID_SERVICE 0x3001u
#define G_UUID_INCR 0x3002u
#define H_UUID_PROCESS 0x5000u
#define H_UUID_THREAD 0x5001u
#define H_UUID_SDK 0x5002u
#define G_PID_APP 1234
#define G_PID_AGENT 400
#define G_PID_SERVICE 300
#define G_TID_LEGACY 1300

#define MAX_THREADS 32
#define MAX_CPUS 32
#define CHUNK_WINDOWS 10        /* sync periods between incremental clears */
#define OUTLIER_NS 50000
#define ABS_LIMIT (UINT64_C(1) << 62)

/* 128-bit integers (GCC/Clang), as in merge/clock_model.c. */
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

/* ---- PRNG: splitmix64 ------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n is 0. */
static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((u128)rng_next(s) * n) >> 64);
}

/* Uniform in [-j, +j]. */
static int64_t rng_pm(uint64_t *s, uint64_t j)
{
	return (int64_t)rng_below(s, 2 * j + 1) - (int64_t)j;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- parameters --------------------------------------------------------- */

struct tg_params tg_params_default(void)
{
	struct tg_params p;

	memset(&p, 0, sizeof(p));
	p.seed = 1;
	p.duration_ns = UINT64_C(10000000000);
	p.sync_period_ns = UINT64_C(100000000);
	p.offset = -INT64_C(0x123456789AB);
	p.tsc_ratio = UINT64_C(1) << 48;
	p.tsc_frac_bits = 48;
	p.drift_ppm = 25.0;
	p.jitter_ns = 100;
	p.outlier_every = 0;
	p.host_step_ns = 0;
	p.host_step_at = 0.5;
	p.n_events = 10000;
	p.n_threads = 4;
	p.n_cpus = 2;
	p.use_kvm_tsc = false;
	p.n_exchanges = 50;
	p.target_bytes = 0;
	p.vm_pid = 4242;
	p.incr_unit_ns = 1000;
	return p;
}

void tg_params_resolve(struct tg_params *p)
{
	uint64_t s = p->seed ^ UINT64_C(0x5EED5EED5EED5EED);

	/* Draw all four every time so each derived value depends only on the
	 * seed, not on which of the others were given. */
	uint64_t r_hz = rng_next(&s), r_c0 = rng_next(&s);
	uint64_t r_hb = rng_next(&s), r_gb = rng_next(&s);

	if (!p->host_hz)
		p->host_hz = UINT64_C(2900000000) + r_hz % UINT64_C(200000000);
	if (!p->c0)
		p->c0 = (UINT64_C(1) << 52) + (r_c0 & UINT64_C(0xFFFFFFFFF));
	if (!p->hb0) /* host up ~10 to ~110 days: BOOTTIME near 2^53 ns */
		p->hb0 = UINT64_C(864000000000000) +
			 r_hb % UINT64_C(8640000000000000);
	if (!p->gb0) /* guest booted 20 s to 1020 s ago */
		p->gb0 = UINT64_C(20000000000) +
			 r_gb % UINT64_C(1000000000000);
	if (!p->guest_mono_lag_ns)
		p->guest_mono_lag_ns = UINT64_C(1500000123);
	if (!p->guest_realtime_offset_ns)
		p->guest_realtime_offset_ns = UINT64_C(1700000000000000000);
}

/* A host BOOTTIME step or a guest TSC offset change: both happen at
 * step_dc, with quiet periods around. */
static bool has_step(const struct tg_params *p)
{
	return p->host_step_ns || p->tsc_step;
}

int tg_params_check(const struct tg_params *p, char *err, size_t errlen)
{
	if (p->sync_period_ns < 1000000 || p->sync_period_ns > UINT64_C(60000000000))
		return set_err(err, errlen, "sync period must be 1 ms .. 60 s"), -1;
	if (p->duration_ns < p->sync_period_ns ||
	    p->duration_ns > UINT64_C(864000000000000))
		return set_err(err, errlen,
			       "duration must be one sync period .. 10 days"), -1;
	if (p->duration_ns / p->sync_period_ns > 10000000)
		return set_err(err, errlen, "too many sync periods"), -1;
	if (p->tsc_frac_bits > 63 || p->tsc_ratio == 0 ||
	    p->tsc_ratio > (UINT64_C(1) << 63))
		return set_err(err, errlen, "bad tsc scaling ratio/frac bits"), -1;
	long double rho = (long double)p->tsc_ratio /
			  ldexpl(1.0L, (int)p->tsc_frac_bits);
	if (rho < 0.01L || rho > 100.0L)
		return set_err(err, errlen, "tsc scaling ratio must be 0.01 .. 100"),
		       -1;
	if (!(p->drift_ppm > -1000.0 && p->drift_ppm < 1000.0))
		return set_err(err, errlen, "drift must be within +-1000 ppm"), -1;
	if (!(p->host_drift_change_ppm > -1000.0 &&
	      p->host_drift_change_ppm < 1000.0))
		return set_err(err, errlen,
			       "host drift change must be within +-1000 ppm"),
		       -1;
	if (!(p->drift_ppm + p->drift_change_ppm > -1000.0 &&
	      p->drift_ppm + p->drift_change_ppm < 1000.0))
		return set_err(err, errlen,
			       "drift after its change must be within +-1000 ppm"),
		       -1;
	if (p->jitter_ns > p->sync_period_ns / 100)
		return set_err(err, errlen,
			       "jitter must be at most 1%% of the sync period"), -1;
	if (p->host_step_ns < 0 || p->host_step_ns > INT64_C(86400000000000))
		return set_err(err, errlen, "host step must be 0 .. 1 day"), -1;
	if (has_step(p) && p->duration_ns / p->sync_period_ns < 5)
		return set_err(err, errlen,
			       "a host step needs at least 5 sync periods"), -1;
	if (!(p->host_step_at >= 0.0 && p->host_step_at <= 1.0))
		return set_err(err, errlen, "host step position must be 0 .. 1"),
		       -1;
	if (p->n_threads < 1 || p->n_threads > MAX_THREADS)
		return set_err(err, errlen, "threads must be 1 .. %d", MAX_THREADS),
		       -1;
	if (p->n_cpus < 1 || p->n_cpus > MAX_CPUS)
		return set_err(err, errlen, "cpus must be 1 .. %d", MAX_CPUS), -1;
	if (p->incr_unit_ns < 1 || p->incr_unit_ns > 1000000)
		return set_err(err, errlen, "incremental unit must be 1 .. 1e6 ns"),
		       -1;
	if (p->n_exchanges > 1000000)
		return set_err(err, errlen, "too many exchanges"), -1;
	if (p->host_hz < 1000000 || p->host_hz > UINT64_C(100000000000))
		return set_err(err, errlen, "host_hz must be 1 MHz .. 100 GHz"), -1;
	if (p->c0 < UINT64_C(1) << 32 || p->c0 > UINT64_C(1) << 62)
		return set_err(err, errlen, "c0 must be 2^32 .. 2^62"), -1;
	if (p->hb0 < UINT64_C(1) << 36 || p->hb0 > ABS_LIMIT ||
	    p->gb0 < UINT64_C(1) << 34 || p->gb0 > ABS_LIMIT)
		return set_err(err, errlen, "hb0/gb0 out of range"), -1;
	if (p->guest_mono_lag_ns >= p->gb0 / 2)
		return set_err(err, errlen, "monotonic lag must be < gb0/2"), -1;
	/* The guest counter must stay positive and far from overflow from one
	 * period before the start to well after the end. */
	long double gc_lo = (long double)p->c0 * rho + (long double)p->offset -
			    2.0L * p->sync_period_ns * 1e-9L * p->host_hz * rho;
	if (gc_lo < 1e6L || gc_lo > 4e18L)
		return set_err(err, errlen,
			       "offset %" PRId64 " puts the guest counter out of "
			       "range", p->offset), -1;
	return 0;
}

/* Parses an unsigned or signed decimal/hex integer strictly. */
static int parse_i64(const char *s, int64_t *out)
{
	char *end;

	errno = 0;
	long long v = strtoll(s, &end, 0);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (*s == '-')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_f64(const char *s, double *out)
{
	char *end;

	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* The table of keys: name, type, offset. */
enum ptype { PT_U64, PT_U32, PT_I64, PT_F64, PT_BOOL };
struct pkey {
	const char *name;
	enum ptype type;
	size_t off;
};
#define PK(n, t) { #n, t, offsetof(struct tg_params, n) }
static const struct pkey pkeys[] = {
	PK(seed, PT_U64), PK(duration_ns, PT_U64), PK(sync_period_ns, PT_U64),
	PK(offset, PT_I64), PK(tsc_ratio, PT_U64), PK(tsc_frac_bits, PT_U32),
	PK(drift_ppm, PT_F64), PK(drift_change_ppm, PT_F64),
	PK(host_drift_change_ppm, PT_F64),
	PK(jitter_ns, PT_U64),
	PK(outlier_every, PT_U32), PK(host_step_ns, PT_I64),
	PK(host_step_at, PT_F64), PK(tsc_step, PT_I64),
	PK(n_events, PT_U64), PK(n_threads, PT_U32),
	PK(n_cpus, PT_U32), PK(use_kvm_tsc, PT_BOOL), PK(n_exchanges, PT_U32),
	PK(target_bytes, PT_U64), PK(vm_pid, PT_U32), PK(incr_unit_ns, PT_U64),
	PK(host_hz, PT_U64), PK(c0, PT_U64), PK(hb0, PT_U64), PK(gb0, PT_U64),
	PK(guest_mono_lag_ns, PT_U64), PK(guest_realtime_offset_ns, PT_U64),
};
#undef PK
#define N_PKEYS (sizeof(pkeys) / sizeof(pkeys[0]))

int tg_params_set(struct tg_params *p, const char *key, const char *value,
		  char *err, size_t errlen)
{
	for (size_t i = 0; i < N_PKEYS; i++) {
		const struct pkey *k = &pkeys[i];
		char *field = (char *)p + k->off;
		uint64_t u;
		int64_t s;
		double d;
		int bad = 0;

		if (strcmp(k->name, key))
			continue;
		switch (k->type) {
		case PT_U64:
			if (!(bad = parse_u64(value, &u)))
				memcpy(field, &u, sizeof(u));
			break;
		case PT_U32:
			bad = parse_u64(value, &u) || u > UINT32_MAX;
			if (!bad) {
				uint32_t v32 = (uint32_t)u;
				memcpy(field, &v32, sizeof(v32));
			}
			break;
		case PT_I64:
			if (!(bad = parse_i64(value, &s)))
				memcpy(field, &s, sizeof(s));
			break;
		case PT_F64:
			if (!(bad = parse_f64(value, &d)))
				memcpy(field, &d, sizeof(d));
			break;
		case PT_BOOL:
			bad = parse_u64(value, &u) || u > 1;
			if (!bad) {
				bool b = u != 0;
				memcpy(field, &b, sizeof(b));
			}
			break;
		}
		if (bad) {
			set_err(err, errlen, "bad value for %s: '%s'", key, value);
			return -1;
		}
		return 0;
	}
	set_err(err, errlen, "unknown parameter '%s'", key);
	return -1;
}

int tg_params_save(const struct tg_params *p, const char *path, char *err,
		   size_t errlen)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	fprintf(f, "# vperfetto_tracegen parameters (tracegen.h has the model)\n");
	for (size_t i = 0; i < N_PKEYS; i++) {
		const struct pkey *k = &pkeys[i];
		const char *field = (const char *)p + k->off;
		uint64_t u;
		uint32_t u32;
		int64_t s;
		double d;
		bool b;

		switch (k->type) {
		case PT_U64:
			memcpy(&u, field, sizeof(u));
			fprintf(f, "%s=%" PRIu64 "\n", k->name, u);
			break;
		case PT_U32:
			memcpy(&u32, field, sizeof(u32));
			fprintf(f, "%s=%" PRIu32 "\n", k->name, u32);
			break;
		case PT_I64:
			memcpy(&s, field, sizeof(s));
			fprintf(f, "%s=%" PRId64 "\n", k->name, s);
			break;
		case PT_F64:
			memcpy(&d, field, sizeof(d));
			fprintf(f, "%s=%.17g\n", k->name, d);
			break;
		case PT_BOOL:
			memcpy(&b, field, sizeof(b));
			fprintf(f, "%s=%d\n", k->name, b ? 1 : 0);
			break;
		}
	}
	if (ferror(f) | fclose(f)) {
		set_err(err, errlen, "%s: write failed", path);
		return -1;
	}
	return 0;
}

int tg_params_load(struct tg_params *p, const char *path, char *err,
		   size_t errlen)
{
	char line[512], e2[256];
	unsigned lineno = 0;
	FILE *f = fopen(path, "r");

	*p = tg_params_default();
	if (!f) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s = line, *eq, *e;

		lineno++;
		e = s + strlen(s);
		while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' ||
				 e[-1] == '\t'))
			*--e = 0;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			set_err(err, errlen, "%s:%u: expected key=value", path,
				lineno);
			fclose(f);
			return -1;
		}
		*eq = 0;
		if (tg_params_set(p, s, eq + 1, e2, sizeof(e2))) {
			set_err(err, errlen, "%s:%u: %s", path, lineno, e2);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	tg_params_resolve(p);
	return 0;
}

/* ---- the model ---------------------------------------------------------- */

static long double one_plus_drift(const struct tg_params *p)
{
	return 1.0L + (long double)p->drift_ppm * 1e-6L;
}

/* Host counter ticks per sync period. */
static uint64_t period_cycles(const struct tg_params *p)
{
	return (uint64_t)((u128)p->sync_period_ns * p->host_hz / 1000000000u);
}

/* The sync period in which host BOOTTIME steps: the one holding
 * host_step_at * duration, kept clear of the last period. */
static uint64_t step_window(const struct tg_params *p)
{
	uint64_t W = p->duration_ns / p->sync_period_ns;
	uint64_t w = (uint64_t)(p->host_step_at * (double)W);

	if (w + 2 > W)
		w = W >= 2 ? W - 2 : 0;
	return w;
}

/* Host counter ticks from c0 to the BOOTTIME step: the middle of its
 * period (see "quiet periods" in tracegen.h). */
static uint64_t step_dc(const struct tg_params *p)
{
	uint64_t pc = period_cycles(p);

	return step_window(p) * pc + pc / 2;
}

/* Guest BOOTTIME ns since gb0 after dc host cycles since c0: at the
 * drifted rate, which changes at step_dc by drift_change_ppm. */
static long double guest_ns_at(const struct tg_params *p, long double dc)
{
	long double ns_per_cycle = 1e9L / (long double)p->host_hz;
	long double k = (long double)step_dc(p);

	if (!p->drift_change_ppm || dc < k)
		return dc * ns_per_cycle * one_plus_drift(p);
	return k * ns_per_cycle * one_plus_drift(p) +
	       (dc - k) * ns_per_cycle * (one_plus_drift(p) +
				       (long double)p->drift_change_ppm * 1e-6L);
}

/* Its inverse: host ns since hb0 (no step) at guest ns dt since gb0. */
static long double host_ns_at(const struct tg_params *p, long double dt)
{
	long double ns_per_cycle = 1e9L / (long double)p->host_hz;
	long double hk = (long double)step_dc(p) * ns_per_cycle;
	long double gk = hk * one_plus_drift(p);

	if (!p->drift_change_ppm || dt < gk)
		return dt / one_plus_drift(p);
	return hk + (dt - gk) / (one_plus_drift(p) +
				 (long double)p->drift_change_ppm * 1e-6L);
}

/* What host BOOTTIME gains over its first rate dc host cycles after c0:
 * from step_dc on it runs host_drift_change_ppm faster. */
static long double host_bend_ns(const struct tg_params *p, long double dc)
{
	long double k = (long double)step_dc(p);

	if (!p->host_drift_change_ppm || dc < k)
		return 0;
	return (dc - k) * 1e9L / (long double)p->host_hz *
	       (long double)p->host_drift_change_ppm * 1e-6L;
}

static uint64_t add_signed(uint64_t base, long double delta_ns)
{
	return base + (uint64_t)(int64_t)llroundl(delta_ns);
}

uint64_t tg_host_boottime_at(const struct tg_params *p, uint64_t c)
{
	int64_t dc = (int64_t)(c - p->c0);
	uint64_t v = add_signed(p->hb0, (long double)dc * 1e9L /
					      (long double)p->host_hz +
					      host_bend_ns(p, (long double)dc));

	if (p->host_step_ns && dc >= (int64_t)step_dc(p))
		v += (uint64_t)p->host_step_ns;
	return v;
}

uint64_t tg_guest_counter_at(const struct tg_params *p, uint64_t c)
{
	uint64_t scaled = (uint64_t)(((u128)c * p->tsc_ratio) >>
				     p->tsc_frac_bits);
	uint64_t off = (uint64_t)p->offset;

	if (p->tsc_step && (int64_t)(c - p->c0) >= (int64_t)step_dc(p))
		off += (uint64_t)p->tsc_step;
	return scaled + off;
}

uint64_t tg_guest_boottime_at(const struct tg_params *p, uint64_t c)
{
	/* (floor(c*rho) - c0*rho) * 2^F, exactly, in 128 bits. */
	u128 scaled = ((u128)c * p->tsc_ratio) >>
				   p->tsc_frac_bits;
	i128 num = (i128)(scaled << p->tsc_frac_bits) -
		       (i128)((u128)p->c0 * p->tsc_ratio);
	/* guest cycles / rho = host cycles; then ns at the drifted rate */
	long double dc = (long double)num / (long double)p->tsc_ratio;

	return add_signed(p->gb0, guest_ns_at(p, dc));
}

uint64_t tg_truth_guest_to_host(const struct tg_params *p, uint64_t t)
{
	int64_t dt = (int64_t)(t - p->gb0);
	long double host_ns = host_ns_at(p, (long double)dt);
	long double dc = host_ns * (long double)p->host_hz / 1e9L;
	uint64_t v = add_signed(p->hb0, host_ns + host_bend_ns(p, dc));

	if (p->host_step_ns && dc >= (long double)step_dc(p))
		v += (uint64_t)p->host_step_ns;
	return v;
}

uint64_t tg_truth_guest_mono_to_host(const struct tg_params *p, uint64_t m)
{
	return tg_truth_guest_to_host(p, m + p->guest_mono_lag_ns);
}

/* ---- generator state ---------------------------------------------------- */

/* One guest-side output: the guest trace, or the ideal merge. */
struct gout {
	struct trace_writer *w;
	const char *path;
	bool ideal;
	uint32_t machine_id;
	uint64_t counts[TS_KIND_COUNT];
	uint64_t packets;
	/* incremental clock sequence: anchor and accumulator, this domain */
	uint64_t inc_b, inc_x, inc_acc;
	/* legacy sequence: last microsecond value written */
	int64_t leg_last_us;
	/* compact_sched / deltas scratch */
};

struct gen {
	const struct tg_params *p;
	uint64_t rng;
	struct pb_buf pkt;     /* packet being built */
	struct pb_buf tmp;     /* packed arrays */
	struct trace_writer *host;
	struct gout out[2];
	int nout;
	struct tg_result *res;
	char *err;
	size_t errlen;

	uint64_t P, Pc;        /* sync period in ns and in host cycles */
	uint64_t W;            /* nominal number of periods */
	uint64_t sdk_last;     /* host SDK sequence: last absolute time */

	/* event budget of the current period */
	uint64_t ev_total;     /* guest events generated so far */
	uint32_t pairs[MAX_THREADS];
	uint64_t n_incr, n_legacy;
	uint64_t n_fev[MAX_CPUS], n_sw[MAX_CPUS], n_wk[MAX_CPUS];
	uint64_t ex_lo, ex_hi; /* exchanges of this period: [lo, hi) */
	bool quiet;            /* a period around the host step: no events */
	uint64_t inc_chunk_w;  /* period of the last incremental-state clear */
};

typedef int (*win_fn)(struct gen *g, struct gout *o, uint64_t *r, uint64_t w);

static uint64_t map_b(const struct gen *g, const struct gout *o, uint64_t t)
{
	return o->ideal ? tg_truth_guest_to_host(g->p, t) : t;
}

static uint64_t div_round(uint64_t x, uint64_t d)
{
	return (x + d / 2) / d;
}

static int write_fail(struct gen *g, const struct vp_error *e)
{
	set_err(g->err, g->errlen, "%s", e->msg);
	return -1;
}

static int host_emit(struct gen *g)
{
	struct vp_error e;

	if (trace_writer_packet(g->host, g->pkt.data, g->pkt.len, &e))
		return write_fail(g, &e);
	g->res->host_packets++;
	return 0;
}

/* Finishes a guest packet (machine_id in the ideal output) and writes it. */
static int guest_emit(struct gen *g, struct gout *o)
{
	struct vp_error e;

	if (o->ideal)
		pb_put_varint(&g->pkt, TP_MACHINE_ID, o->machine_id);
	if (trace_writer_packet(o->w, g->pkt.data, g->pkt.len, &e))
		return write_fail(g, &e);
	o->packets++;
	return 0;
}

/* Runs one builder for every guest-side output from the same PRNG state. */
static int run_guest(struct gen *g, win_fn fn, uint64_t w)
{
	uint64_t start = g->rng, r = start;

	for (int i = 0; i < g->nout; i++) {
		r = start;
		if (fn(g, &g->out[i], &r, w))
			return -1;
	}
	g->rng = r;
	return 0;
}

/* ---- small message helpers ---------------------------------------------- */

static void put_interned(struct pb_buf *b, uint32_t field, uint64_t iid,
			 const char *name)
{
	size_t m = pb_begin_nested(b, field);
	pb_put_varint(b, INTERNED_IID, iid);
	pb_put_string(b, INTERNED_NAME, name);
	pb_end_nested(b, m);
}

/* A debug annotation with a literal name (name != NULL) or an interned one. */
static void put_ann(struct pb_buf *b, const char *name, uint64_t name_iid,
		    uint64_t v, bool as_int)
{
	size_t m = pb_begin_nested(b, TE_DEBUG_ANNOTATIONS);
	if (name)
		pb_put_string(b, DA_NAME, name);
	else
		pb_put_varint(b, DA_NAME_IID, name_iid);
	pb_put_varint(b, as_int ? DA_INT_VALUE : DA_UINT_VALUE, v);
	pb_end_nested(b, m);
}

static void put_clock(struct pb_buf *b, uint32_t id, uint64_t ts,
		      bool incremental, uint64_t unit)
{
	size_t m = pb_begin_nested(b, CS_CLOCKS);
	pb_put_varint(b, CLK_CLOCK_ID, id);
	pb_put_varint(b, CLK_TIMESTAMP, ts);
	if (incremental)
		pb_put_varint(b, CLK_IS_INCREMENTAL, 1);
	if (unit)
		pb_put_varint(b, CLK_UNIT_MULTIPLIER_NS, unit);
	pb_end_nested(b, m);
}

static void put_thread_track(struct pb_buf *b, uint64_t uuid, uint64_t parent,
			     int32_t pid, int32_t tid, const char *name)
{
	size_t td = pb_begin_nested(b, TP_TRACK_DESCRIPTOR);
	pb_put_varint(b, TD_UUID, uuid);
	if (parent)
		pb_put_varint(b, TD_PARENT_UUID, parent);
	size_t th = pb_begin_nested(b, TD_THREAD);
	pb_put_varint(b, THD_PID, (uint64_t)pid);
	pb_put_varint(b, THD_TID, (uint64_t)tid);
	pb_put_string(b, THD_THREAD_NAME, name);
	pb_end_nested(b, th);
	pb_end_nested(b, td);
}

static void put_process_track(struct pb_buf *b, uint64_t uuid, int32_t pid,
			      const char *name)
{
	size_t td = pb_begin_nested(b, TP_TRACK_DESCRIPTOR);
	pb_put_varint(b, TD_UUID, uuid);
	size_t pr = pb_begin_nested(b, TD_PROCESS);
	pb_put_varint(b, PD_PID, (uint64_t)pid);
	pb_put_string(b, PD_PROCESS_NAME, name);
	pb_end_nested(b, pr);
	pb_end_nested(b, td);
}

static void pkt_start(struct gen *g, uint32_t seq, uint32_t flags)
{
	pb_buf_reset(&g->pkt);
	pb_put_varint(&g->pkt, TP_TRUSTED_PACKET_SEQUENCE_ID, seq);
	if (flags)
		pb_put_varint(&g->pkt, TP_SEQUENCE_FLAGS, flags);
}

/* ---- host trace --------------------------------------------------------- */

/* Host clock snapshot number k (k may be -1), at a random phase of its
 * period. */
static int host_snapshot(struct gen *g, int64_t k)
{
	const struct tg_params *p = g->p;
	uint64_t phase = rng_below(&g->rng, g->Pc / 10);

	/* The last snapshot before a step is at a fixed phase, late enough
	 * that no event of the period before it maps past it. */
	if (has_step(p) && k == (int64_t)step_window(p))
		phase = g->Pc / 5;
	uint64_t c = p->c0 + (uint64_t)(k * (int64_t)g->Pc) + phase;
	uint64_t hb = tg_host_boottime_at(p, c) +
		      (uint64_t)rng_pm(&g->rng, p->jitter_ns);

	pkt_start(g, H_SEQ_CLOCK, k < 0 ? SEQ_INCREMENTAL_STATE_CLEARED : 0);
	pb_put_varint(&g->pkt, TP_TIMESTAMP, hb);
	size_t cs = pb_begin_nested(&g->pkt, TP_CLOCK_SNAPSHOT);
	put_clock(&g->pkt, TG_CLOCK_BOOTTIME, hb, false, 0);
	put_clock(&g->pkt, TG_CLOCK_CPU_COUNTER, c, false, 0);
	pb_end_nested(&g->pkt, cs);
	g->res->host_snapshots++;
	return host_emit(g);
}

/* A host track event (literal name and category). */
static void host_event(struct gen *g, uint64_t ts, uint64_t track, int type,
		       const char *cat, const char *name)
{
	pkt_start(g, H_SEQ_MISC, 0);
	pb_put_varint(&g->pkt, TP_TIMESTAMP, ts);
	size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
	pb_put_varint(&g->pkt, TE_TYPE, (uint64_t)type);
	pb_put_varint(&g->pkt, TE_TRACK_UUID, track);
	if (cat)
		pb_put_string(&g->pkt, TE_CATEGORIES, cat);
	if (name)
		pb_put_string(&g->pkt, TE_NAME, name);
	pb_end_nested(&g->pkt, te);
}

static int host_prologue(struct gen *g)
{
	const struct tg_params *p = g->p;

	pkt_start(g, H_SEQ_MISC, SEQ_INCREMENTAL_STATE_CLEARED);
	put_process_track(&g->pkt, H_UUID_PROCESS, (int32_t)p->vm_pid,
			  "qemu-system-x86_64");
	if (host_emit(g))
		return -1;
	pkt_start(g, H_SEQ_MISC, 0);
	put_thread_track(&g->pkt, H_UUID_THREAD, H_UUID_PROCESS,
			 (int32_t)p->vm_pid, (int32_t)p->vm_pid + 1, "CPU 0/KVM");
	if (host_emit(g))
		return -1;
	if (!p->use_kvm_tsc)
		return 0;
	for (uint32_t cpu = 0; cpu < p->n_cpus; cpu++) {
		uint64_t ts = tg_host_boottime_at(p, p->c0 + 1000 + cpu);

		pkt_start(g, H_SEQ_MISC, 0);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, ts);
		size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
		pb_put_varint(&g->pkt, TE_TYPE, TE_TYPE_INSTANT);
		pb_put_varint(&g->pkt, TE_TRACK_UUID, H_UUID_THREAD);
		pb_put_string(&g->pkt, TE_CATEGORIES, "vperfetto");
		pb_put_string(&g->pkt, TE_NAME, "kvm_tsc");
		put_ann(&g->pkt, "vm_pid", 0, p->vm_pid, false);
		put_ann(&g->pkt, "vcpu", 0, cpu, false);
		put_ann(&g->pkt, "tsc_offset", 0, (uint64_t)p->offset, true);
		put_ann(&g->pkt, "tsc_scaling_ratio", 0, p->tsc_ratio, false);
		put_ann(&g->pkt, "tsc_scaling_frac_bits", 0, p->tsc_frac_bits,
			false);
		pb_end_nested(&g->pkt, te);
		if (host_emit(g))
			return -1;
	}
	/* A TSC offset change: the records of the new value, as
	 * vperfetto_host_clock writes them when it sees it (just after). */
	for (uint32_t cpu = 0; p->tsc_step && cpu < p->n_cpus; cpu++) {
		uint64_t ts = tg_host_boottime_at(p, p->c0 + step_dc(p) + 1000 +
						       cpu);

		pkt_start(g, H_SEQ_MISC, 0);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, ts);
		size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
		pb_put_varint(&g->pkt, TE_TYPE, TE_TYPE_INSTANT);
		pb_put_varint(&g->pkt, TE_TRACK_UUID, H_UUID_THREAD);
		pb_put_string(&g->pkt, TE_CATEGORIES, "vperfetto");
		pb_put_string(&g->pkt, TE_NAME, "kvm_tsc");
		put_ann(&g->pkt, "vm_pid", 0, p->vm_pid, false);
		put_ann(&g->pkt, "vcpu", 0, cpu, false);
		put_ann(&g->pkt, "tsc_offset", 0,
			(uint64_t)(p->offset + p->tsc_step), true);
		put_ann(&g->pkt, "tsc_scaling_ratio", 0, p->tsc_ratio, false);
		put_ann(&g->pkt, "tsc_scaling_frac_bits", 0, p->tsc_frac_bits,
			false);
		pb_end_nested(&g->pkt, te);
		if (host_emit(g))
			return -1;
	}
	return 0;
}

/* Host period w: the snapshot, the SDK-style incremental sequence, a slice. */
static int host_window(struct gen *g, uint64_t w)
{
	const struct tg_params *p = g->p;
	uint64_t cw = p->c0 + w * g->Pc;

	if (host_snapshot(g, (int64_t)w))
		return -1;

	/* SDK-style sequence: clock 64 incremental in ns (no unit field).
	 * Its track first, in a packet of its own (TrackDescriptor and
	 * ClockSnapshot are members of the same oneof). */
	if (w == 0) {
		pkt_start(g, H_SEQ_SDK, SEQ_INCREMENTAL_STATE_CLEARED);
		size_t td = pb_begin_nested(&g->pkt, TP_TRACK_DESCRIPTOR);
		pb_put_varint(&g->pkt, TD_UUID, H_UUID_SDK);
		pb_put_varint(&g->pkt, TD_PARENT_UUID, H_UUID_PROCESS);
		pb_put_string(&g->pkt, TD_NAME, "sdk track");
		pb_end_nested(&g->pkt, td);
		if (host_emit(g))
			return -1;
	}
	if (w % CHUNK_WINDOWS == 0) {
		uint64_t b = tg_host_boottime_at(p, cw + g->Pc / 8);

		pkt_start(g, H_SEQ_SDK, SEQ_INCREMENTAL_STATE_CLEARED);
		pb_put_varint(&g->pkt, TP_INCREMENTAL_STATE_CLEARED, 1);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, b);
		pb_put_varint(&g->pkt, TP_TIMESTAMP_CLOCK_ID, TG_CLOCK_BOOTTIME);
		size_t cs = pb_begin_nested(&g->pkt, TP_CLOCK_SNAPSHOT);
		put_clock(&g->pkt, TG_CLOCK_BOOTTIME, b, false, 0);
		put_clock(&g->pkt, 64, b, true, 0);
		pb_end_nested(&g->pkt, cs);
		size_t d = pb_begin_nested(&g->pkt, TP_TRACE_PACKET_DEFAULTS);
		pb_put_varint(&g->pkt, TPD_TIMESTAMP_CLOCK_ID, 64);
		size_t ted = pb_begin_nested(&g->pkt, TPD_TRACK_EVENT_DEFAULTS);
		pb_put_varint(&g->pkt, TED_TRACK_UUID, H_UUID_SDK);
		pb_end_nested(&g->pkt, ted);
		pb_end_nested(&g->pkt, d);
		size_t in = pb_begin_nested(&g->pkt, TP_INTERNED_DATA);
		put_interned(&g->pkt, ID_EVENT_NAMES, 1, "sdk_work");
		put_interned(&g->pkt, ID_EVENT_CATEGORIES, 1, "host");
		pb_end_nested(&g->pkt, in);
		if (host_emit(g))
			return -1;
		g->sdk_last = b;
	}
	for (int i = 0; i < 2; i++) {
		uint64_t c = cw + g->Pc / 4 + (uint64_t)i * (g->Pc / 10) +
			     rng_below(&g->rng, g->Pc / 20);
		uint64_t t = tg_host_boottime_at(p, c);

		pkt_start(g, H_SEQ_SDK, SEQ_NEEDS_INCREMENTAL_STATE);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, t - g->sdk_last);
		g->sdk_last = t;
		size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
		pb_put_varint(&g->pkt, TE_TYPE,
			      i ? TE_TYPE_SLICE_END : TE_TYPE_SLICE_BEGIN);
		if (!i) {
			pb_put_varint(&g->pkt, TE_NAME_IID, 1);
			pb_put_varint(&g->pkt, TE_CATEGORY_IIDS, 1);
		}
		pb_end_nested(&g->pkt, te);
		if (host_emit(g))
			return -1;
	}

	/* one vcpu slice with absolute timestamps */
	uint64_t c1 = cw + g->Pc * 6 / 10 + rng_below(&g->rng, g->Pc / 20);
	host_event(g, tg_host_boottime_at(p, c1), H_UUID_THREAD,
		   TE_TYPE_SLICE_BEGIN, "kvm", "vcpu_run");
	if (host_emit(g))
		return -1;
	host_event(g, tg_host_boottime_at(p, c1 + g->Pc / 10), H_UUID_THREAD,
		   TE_TYPE_SLICE_END, NULL, NULL);
	return host_emit(g);
}

/* ---- guest: service sequence (ClockSnapshots, MONOTONIC, unknown field) - */

static int g_service(struct gen *g, struct gout *o, uint64_t *r, uint64_t w)
{
	const struct tg_params *p = g->p;
	uint64_t ws = p->gb0 + w * g->P;

	if (w == 0) {
		pkt_start(g, G_SEQ_SERVICE, SEQ_INCREMENTAL_STATE_CLEARED);
		put_process_track(&g->pkt, G_UUID_SERVICE, G_PID_SERVICE,
				  "traced");
		if (guest_emit(g, o))
			return -1;
	}
	if (g->quiet)
		return 0;
	if (w % CHUNK_WINDOWS == 0) {
		uint64_t t = ws + g->P / 5 + rng_below(r, g->P / 50);

		pkt_start(g, G_SEQ_SERVICE, 0);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, map_b(g, o, t));
		size_t cs = pb_begin_nested(&g->pkt, TP_CLOCK_SNAPSHOT);
		put_clock(&g->pkt, TG_CLOCK_BOOTTIME, map_b(g, o, t), false, 0);
		put_clock(&g->pkt, TG_CLOCK_MONOTONIC, t - p->guest_mono_lag_ns,
			  false, 0);
		put_clock(&g->pkt, TG_CLOCK_REALTIME,
			  t + p->guest_realtime_offset_ns, false, 0);
		pb_end_nested(&g->pkt, cs);
		o->counts[TS_PACKET]++;
		o->counts[TS_SNAPSHOT_BOOTTIME]++;
		if (guest_emit(g, o))
			return -1;
	}

	/* a packet on MONOTONIC */
	uint64_t tm = ws + g->P / 4 + rng_below(r, g->P / 50);
	pkt_start(g, G_SEQ_SERVICE, 0);
	if (o->ideal) {
		pb_put_varint(&g->pkt, TP_TIMESTAMP,
			      tg_truth_guest_to_host(p, tm));
		pb_put_varint(&g->pkt, TP_TIMESTAMP_CLOCK_ID, TG_CLOCK_BOOTTIME);
		o->counts[TS_PACKET]++;
	} else {
		pb_put_varint(&g->pkt, TP_TIMESTAMP, tm - p->guest_mono_lag_ns);
		pb_put_varint(&g->pkt, TP_TIMESTAMP_CLOCK_ID, TG_CLOCK_MONOTONIC);
		o->counts[TS_PACKET_MONOTONIC]++;
	}
	size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
	pb_put_varint(&g->pkt, TE_TYPE, TE_TYPE_INSTANT);
	pb_put_varint(&g->pkt, TE_TRACK_UUID, G_UUID_SERVICE);
	pb_put_string(&g->pkt, TE_CATEGORIES, "service");
	pb_put_string(&g->pkt, TE_NAME, "mono_tick");
	pb_end_nested(&g->pkt, te);
	if (guest_emit(g, o))
		return -1;

	if (w == (has_step(p) && step_window(p) == 0 ? 2u : 0u)) {
		/* an unknown field that must survive the merge (in the first
		 * period that is not quiet) */
		uint64_t tu = ws + g->P * 3 / 10;
		pkt_start(g, G_SEQ_SERVICE, 0);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, map_b(g, o, tu));
		pb_put_varint(&g->pkt, TG_UNKNOWN_FIELD, 0xC0FFEE);
		o->counts[TS_PACKET]++;
		if (guest_emit(g, o))
			return -1;
	}
	return 0;
}

/* ---- guest: sync agent -------------------------------------------------- */

static const char *const sync_ann_names[] = {
	"clock_sync_boottime", "clock_sync_monotonic", "clock_sync_cputime",
	"sync_seq", "guest_cputime_send", "guest_cputime_recv", "host_cputime",
};

static int g_sync(struct gen *g, struct gout *o, uint64_t *r, uint64_t w)
{
	const struct tg_params *p = g->p;
	uint64_t phase = rng_below(r, g->Pc / 10);

	/* just after a host step: after the first host snapshot past it */
	if (g->quiet && w == step_window(p) + 1)
		phase += g->Pc / 5;
	uint64_t c = p->c0 + w * g->Pc + phase;
	uint64_t gc = tg_guest_counter_at(p, c);
	uint64_t gb = tg_guest_boottime_at(p, c);
	int64_t j1 = rng_pm(r, p->jitter_ns), j2 = rng_pm(r, p->jitter_ns);
	bool outlier = p->outlier_every && (w + 1) % p->outlier_every == 0;
	uint64_t vb = gb + (uint64_t)j1 + (outlier ? OUTLIER_NS : 0);
	uint64_t vm = gb - p->guest_mono_lag_ns + (uint64_t)j2 +
		      (outlier ? OUTLIER_NS : 0);
	bool literal = w % 2 == 0, as_int = w % 3 == 0;

	if (w == 0) {
		pkt_start(g, G_SEQ_SYNC, SEQ_INCREMENTAL_STATE_CLEARED);
		put_thread_track(&g->pkt, G_UUID_AGENT, 0, G_PID_AGENT,
				 G_PID_AGENT + 1, "vperfetto_agent");
		size_t in = pb_begin_nested(&g->pkt, TP_INTERNED_DATA);
		put_interned(&g->pkt, ID_EVENT_CATEGORIES, 1, "cros");
		put_interned(&g->pkt, ID_EVENT_NAMES, 1, "guest_clock_sync");
		put_interned(&g->pkt, ID_EVENT_NAMES, 2,
			     "guest_clock_sync_exchange");
		for (unsigned i = 0; i < 7; i++)
			put_interned(&g->pkt, ID_DEBUG_ANNOTATION_NAMES, i + 1,
				     sync_ann_names[i]);
		pb_end_nested(&g->pkt, in);
		if (guest_emit(g, o))
			return -1;
	}

	pkt_start(g, G_SEQ_SYNC, SEQ_NEEDS_INCREMENTAL_STATE);
	pb_put_varint(&g->pkt, TP_TIMESTAMP, map_b(g, o, vb));
	o->counts[TS_PACKET]++;
	size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
	pb_put_varint(&g->pkt, TE_TYPE, TE_TYPE_INSTANT);
	pb_put_varint(&g->pkt, TE_TRACK_UUID, G_UUID_AGENT);
	if (literal) {
		pb_put_string(&g->pkt, TE_CATEGORIES, "cros");
		pb_put_string(&g->pkt, TE_NAME, "guest_clock_sync");
	} else {
		pb_put_varint(&g->pkt, TE_CATEGORY_IIDS, 1);
		pb_put_varint(&g->pkt, TE_NAME_IID, 1);
	}
	put_ann(&g->pkt, literal ? sync_ann_names[0] : NULL, 1, vb, as_int);
	put_ann(&g->pkt, literal ? sync_ann_names[1] : NULL, 2, vm, as_int);
	put_ann(&g->pkt, literal ? sync_ann_names[2] : NULL, 3, gc, as_int);
	pb_end_nested(&g->pkt, te);
	if (guest_emit(g, o))
		return -1;

	/* the exchanges of this period, spread over its middle */
	uint64_t n = g->ex_hi - g->ex_lo;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t cs = p->c0 + w * g->Pc + g->Pc / 5 +
			      k * (g->Pc * 3 / 5) / n +
			      rng_below(r, g->Pc / (10 * n) + 1);
		uint64_t rt_ns = 2000 + rng_below(r, 28001);
		uint64_t rt = rt_ns * p->host_hz / 1000000000u;
		uint64_t ch = cs + 1 + rng_below(r, rt - 1);
		uint64_t cr = cs + rt;

		pkt_start(g, G_SEQ_SYNC, SEQ_NEEDS_INCREMENTAL_STATE);
		pb_put_varint(&g->pkt, TP_TIMESTAMP,
			      map_b(g, o, tg_guest_boottime_at(p, cr)));
		o->counts[TS_PACKET]++;
		te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
		pb_put_varint(&g->pkt, TE_TYPE, TE_TYPE_INSTANT);
		pb_put_varint(&g->pkt, TE_TRACK_UUID, G_UUID_AGENT);
		pb_put_varint(&g->pkt, TE_CATEGORY_IIDS, 1);
		pb_put_varint(&g->pkt, TE_NAME_IID, 2);
		put_ann(&g->pkt, NULL, 4, g->ex_lo + k, false);
		put_ann(&g->pkt, NULL, 5, tg_guest_counter_at(p, cs), false);
		put_ann(&g->pkt, NULL, 6, tg_guest_counter_at(p, cr), false);
		put_ann(&g->pkt, NULL, 7, ch, false);
		pb_end_nested(&g->pkt, te);
		if (guest_emit(g, o))
			return -1;
	}
	return 0;
}

/* ---- guest: thread sequences -------------------------------------------- */

static const char *const work_names[] = { "work_a", "work_b", "parse",
					  "render" };

static int g_threads(struct gen *g, struct gout *o, uint64_t *r, uint64_t w)
{
	const struct tg_params *p = g->p;
	uint64_t ws = p->gb0 + w * g->P;

	for (uint32_t i = 0; i < p->n_threads; i++) {
		uint32_t seq = G_SEQ_THREAD0 + i;

		if (w == 0) {
			if (i == 0) {
				pkt_start(g, seq, SEQ_INCREMENTAL_STATE_CLEARED);
				put_process_track(&g->pkt, G_UUID_PROCESS,
						  G_PID_APP, "guest_app");
				if (guest_emit(g, o))
					return -1;
			}
			char name[32];
			snprintf(name, sizeof(name), "worker%u", i);
			pkt_start(g, seq, SEQ_INCREMENTAL_STATE_CLEARED);
			put_thread_track(&g->pkt, G_UUID_THREAD0 + i,
					 G_UUID_PROCESS, G_PID_APP,
					 G_PID_APP + 1 + (int32_t)i, name);
			size_t in = pb_begin_nested(&g->pkt, TP_INTERNED_DATA);
			put_interned(&g->pkt, ID_EVENT_CATEGORIES, 1, "app");
			for (unsigned k = 0; k < 4; k++)
				put_interned(&g->pkt, ID_EVENT_NAMES, k + 1,
					     work_names[k]);
			put_interned(&g->pkt, ID_DEBUG_ANNOTATION_NAMES, 1,
				     "item");
			pb_end_nested(&g->pkt, in);
			if (guest_emit(g, o))
				return -1;
		}
		uint64_t n = g->pairs[i];
		if (!n)
			continue;
		uint64_t slot = g->P / n;
		for (uint64_t k = 0; k < n; k++) {
			uint64_t tb = ws + k * slot + rng_below(r, slot / 4 + 1);
			uint64_t tend = tb + slot / 2 + rng_below(r, slot / 8 + 1);
			uint64_t name = 1 + rng_below(r, 4);

			for (int end = 0; end < 2; end++) {
				pkt_start(g, seq, SEQ_NEEDS_INCREMENTAL_STATE);
				pb_put_varint(&g->pkt, TP_TIMESTAMP,
					      map_b(g, o, end ? tend : tb));
				o->counts[TS_PACKET]++;
				size_t te = pb_begin_nested(&g->pkt,
							    TP_TRACK_EVENT);
				pb_put_varint(&g->pkt, TE_TYPE,
					      end ? TE_TYPE_SLICE_END
						  : TE_TYPE_SLICE_BEGIN);
				pb_put_varint(&g->pkt, TE_TRACK_UUID,
					      G_UUID_THREAD0 + i);
				if (!end) {
					pb_put_varint(&g->pkt, TE_CATEGORY_IIDS, 1);
					pb_put_varint(&g->pkt, TE_NAME_IID, name);
				}
				put_ann(&g->pkt, NULL, 1, k, false);
				pb_end_nested(&g->pkt, te);
				if (guest_emit(g, o))
					return -1;
			}
		}
	}
	return 0;
}

/* ---- guest: incremental sequence-scoped clock ---------------------------- */

static int g_incr(struct gen *g, struct gout *o, uint64_t *r, uint64_t w)
{
	const struct tg_params *p = g->p;
	uint64_t U = p->incr_unit_ns;
	uint64_t ws = p->gb0 + w * g->P;
	/* the guest-domain anchor of the current chunk */
	uint64_t B = p->gb0 + g->inc_chunk_w * g->P + 1234;

	if (w == 0) {
		pkt_start(g, G_SEQ_INCR, SEQ_INCREMENTAL_STATE_CLEARED);
		put_thread_track(&g->pkt, G_UUID_INCR, G_UUID_PROCESS, G_PID_APP,
				 G_PID_APP + 100, "incremental");
		if (guest_emit(g, o))
			return -1;
	}
	if (w == g->inc_chunk_w && !g->quiet) {
		uint64_t b = map_b(g, o, B);

		o->inc_b = b;
		o->inc_x = b / U;
		o->inc_acc = o->inc_x;
		pkt_start(g, G_SEQ_INCR, SEQ_INCREMENTAL_STATE_CLEARED);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, b);
		pb_put_varint(&g->pkt, TP_TIMESTAMP_CLOCK_ID, TG_CLOCK_BOOTTIME);
		o->counts[TS_PACKET]++;
		size_t d = pb_begin_nested(&g->pkt, TP_TRACE_PACKET_DEFAULTS);
		pb_put_varint(&g->pkt, TPD_TIMESTAMP_CLOCK_ID, 64);
		size_t ted = pb_begin_nested(&g->pkt, TPD_TRACK_EVENT_DEFAULTS);
		pb_put_varint(&g->pkt, TED_TRACK_UUID, G_UUID_INCR);
		pb_end_nested(&g->pkt, ted);
		pb_end_nested(&g->pkt, d);
		size_t cs = pb_begin_nested(&g->pkt, TP_CLOCK_SNAPSHOT);
		put_clock(&g->pkt, TG_CLOCK_BOOTTIME, b, false, 0);
		put_clock(&g->pkt, 64, o->inc_x, true, U);
		pb_end_nested(&g->pkt, cs);
		o->counts[TS_SNAPSHOT_BOOTTIME]++;
		size_t in = pb_begin_nested(&g->pkt, TP_INTERNED_DATA);
		put_interned(&g->pkt, ID_EVENT_NAMES, 1, "tick");
		put_interned(&g->pkt, ID_EVENT_CATEGORIES, 1, "incr");
		pb_end_nested(&g->pkt, in);
		if (guest_emit(g, o))
			return -1;
	}
	uint64_t n = g->n_incr;
	if (!n)
		return 0;
	uint64_t slot = (g->P - 2000) / n;
	for (uint64_t k = 0; k < n; k++) {
		/* a guest time on the unit grid of the anchor */
		uint64_t t = ws + 2000 + k * slot + rng_below(r, slot / 2 + 1);
		uint64_t j = (t - B) / U;
		uint64_t v;

		if (o->ideal) {
			uint64_t a = tg_truth_guest_to_host(p, B + j * U);
			v = o->inc_x + div_round(a - o->inc_b, U);
		} else {
			v = o->inc_x + j;
		}
		if (v < o->inc_acc) /* cannot happen: both are monotonic */
			v = o->inc_acc;
		pkt_start(g, G_SEQ_INCR, SEQ_NEEDS_INCREMENTAL_STATE);
		pb_put_varint(&g->pkt, TP_TIMESTAMP, v - o->inc_acc);
		o->inc_acc = v;
		o->counts[TS_PACKET_INCREMENTAL]++;
		size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
		pb_put_varint(&g->pkt, TE_TYPE, TE_TYPE_INSTANT);
		pb_put_varint(&g->pkt, TE_NAME_IID, 1);
		pb_put_varint(&g->pkt, TE_CATEGORY_IIDS, 1);
		pb_end_nested(&g->pkt, te);
		if (guest_emit(g, o))
			return -1;
	}
	return 0;
}

/* ---- guest: legacy microsecond timestamps -------------------------------- */

/* A guest MONOTONIC time in us, mapped in the ideal output. */
static int64_t legacy_us(const struct gen *g, const struct gout *o,
			 uint64_t us)
{
	if (!o->ideal)
		return (int64_t)us;
	/* Legacy microseconds are MONOTONIC, as Perfetto reads them. */
	return (int64_t)div_round(tg_truth_guest_mono_to_host(g->p, us * 1000),
				  1000);
}

static int g_legacy(struct gen *g, struct gout *o, uint64_t *r, uint64_t w)
{
	const struct tg_params *p = g->p;
	uint64_t ws = p->gb0 + w * g->P;
	/* Written on MONOTONIC: the guest's BOOTTIME less its lag. */
	uint64_t ref = (ws - p->guest_mono_lag_ns + 500) / 1000;

	if (g->quiet)
		return 0;
	pkt_start(g, G_SEQ_LEGACY, SEQ_INCREMENTAL_STATE_CLEARED);
	size_t td = pb_begin_nested(&g->pkt, TP_THREAD_DESCRIPTOR);
	pb_put_varint(&g->pkt, THD_PID, G_PID_APP);
	pb_put_varint(&g->pkt, THD_TID, G_TID_LEGACY);
	pb_put_string(&g->pkt, THD_THREAD_NAME, "legacy");
	o->leg_last_us = legacy_us(g, o, ref);
	pb_put_varint(&g->pkt, THD_REFERENCE_TIMESTAMP_US,
		      (uint64_t)o->leg_last_us);
	pb_end_nested(&g->pkt, td);
	o->counts[TS_LEGACY_US]++;
	size_t in = pb_begin_nested(&g->pkt, TP_INTERNED_DATA);
	put_interned(&g->pkt, ID_EVENT_NAMES, 1, "legacy_event");
	put_interned(&g->pkt, ID_EVENT_CATEGORIES, 1, "legacy");
	pb_end_nested(&g->pkt, in);
	if (guest_emit(g, o))
		return -1;

	uint64_t n = g->n_legacy;
	if (!n)
		return 0;
	uint64_t slot = (g->P - 4000) / n;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t = ws + 2000 + k * slot + rng_below(r, slot / 2 + 1);
		int64_t us = legacy_us(g, o, (t - p->guest_mono_lag_ns) / 1000);
		bool absolute = k == n - 1;

		pkt_start(g, G_SEQ_LEGACY, SEQ_NEEDS_INCREMENTAL_STATE);
		size_t te = pb_begin_nested(&g->pkt, TP_TRACK_EVENT);
		if (absolute) {
			pb_put_varint(&g->pkt, TE_TIMESTAMP_ABSOLUTE_US,
				      (uint64_t)us);
		} else {
			pb_put_varint(&g->pkt, TE_TIMESTAMP_DELTA_US,
				      (uint64_t)(us - o->leg_last_us));
			o->leg_last_us = us;
		}
		o->counts[TS_LEGACY_US]++;
		pb_put_varint(&g->pkt, TE_TYPE, TE_TYPE_INSTANT);
		pb_put_varint(&g->pkt, TE_NAME_IID, 1);
		pb_put_varint(&g->pkt, TE_CATEGORY_IIDS, 1);
		pb_end_nested(&g->pkt, te);
		if (guest_emit(g, o))
			return -1;
	}
	return 0;
}

/* ---- guest: ftrace ------------------------------------------------------ */

static const char *const comms[] = { "swapper/0", "kworker/0:1", "app_main",
				     "render", "vperfetto_agent" };
#define N_COMMS 5
static const int32_t comm_pids[N_COMMS] = { 0, 17, 1234, 1236, 401 };

/* Appends a packed varint array built in g->tmp. */
static void put_packed_tmp(struct gen *g, uint32_t field)
{
	pb_put_bytes(&g->pkt, field, g->tmp.data, g->tmp.len);
	pb_buf_reset(&g->tmp);
}

/* n sorted times in [lo, lo + span), mapped, written as packed deltas
 * (first absolute) into g->tmp. */
static void packed_times(struct gen *g, struct gout *o, uint64_t *r,
			 uint64_t lo, uint64_t span, uint64_t n)
{
	uint64_t slot = span / n, prev = 0;

	for (uint64_t k = 0; k < n; k++) {
		uint64_t t = map_b(g, o, lo + k * slot +
					      rng_below(r, slot / 2 + 1));
		pb_put_raw_varint(&g->tmp, k ? t - prev : t);
		prev = t;
	}
}

static int g_ftrace(struct gen *g, struct gout *o, uint64_t *r, uint64_t w)
{
	const struct tg_params *p = g->p;
	uint64_t ws = p->gb0 + w * g->P;

	for (uint32_t cpu = 0; cpu < p->n_cpus; cpu++) {
		uint32_t seq = G_SEQ_FTRACE0 + cpu;
		uint64_t n = g->n_fev[cpu];

		/* FtraceEvent sched_switch, first half of the period */
		if (n) {
			uint64_t slot = (g->P / 2) / n;
			int32_t prev = 0;

			pkt_start(g, seq, 0);
			size_t fb = pb_begin_nested(&g->pkt, TP_FTRACE_EVENTS);
			pb_put_varint(&g->pkt, FB_CPU, cpu);
			for (uint64_t k = 0; k < n; k++) {
				uint64_t t = ws + k * slot +
					     rng_below(r, slot / 2 + 1);
				int32_t next = (int32_t)rng_below(r, N_COMMS);
				uint64_t state = rng_below(r, 3);

				size_t ev = pb_begin_nested(&g->pkt, FB_EVENT);
				pb_put_varint(&g->pkt, FE_TIMESTAMP, map_b(g, o, t));
				pb_put_varint(&g->pkt, FE_PID,
					      (uint64_t)comm_pids[prev]);
				size_t ss = pb_begin_nested(&g->pkt,
							    FE_SCHED_SWITCH);
				pb_put_string(&g->pkt, TG_SS_PREV_COMM, comms[prev]);
				pb_put_varint(&g->pkt, TG_SS_PREV_PID,
					      (uint64_t)comm_pids[prev]);
				pb_put_varint(&g->pkt, TG_SS_PREV_PRIO, 120);
				pb_put_varint(&g->pkt, TG_SS_PREV_STATE, state);
				pb_put_string(&g->pkt, TG_SS_NEXT_COMM, comms[next]);
				pb_put_varint(&g->pkt, TG_SS_NEXT_PID,
					      (uint64_t)comm_pids[next]);
				pb_put_varint(&g->pkt, TG_SS_NEXT_PRIO, 120);
				pb_end_nested(&g->pkt, ss);
				pb_end_nested(&g->pkt, ev);
				o->counts[TS_FTRACE]++;
				prev = next;
			}
			pb_end_nested(&g->pkt, fb);
			if (guest_emit(g, o))
				return -1;
		}

		/* compact_sched, second half of the period */
		uint64_t nsw = g->n_sw[cpu], nwk = g->n_wk[cpu];
		if (!nsw && !nwk)
			continue;
		uint64_t lo = ws + g->P / 2, span = g->P / 2 - 1000;
		pkt_start(g, seq, 0);
		size_t fb = pb_begin_nested(&g->pkt, TP_FTRACE_EVENTS);
		pb_put_varint(&g->pkt, FB_CPU, cpu);
		size_t cs = pb_begin_nested(&g->pkt, FB_COMPACT_SCHED);
		for (unsigned k = 0; k < N_COMMS; k++)
			pb_put_string(&g->pkt, TG_CS_INTERN_TABLE, comms[k]);
		if (nsw) {
			packed_times(g, o, r, lo, span, nsw);
			put_packed_tmp(g, TG_CS_SWITCH_TIMESTAMP);
			uint64_t start = *r; /* same draws for every array */
			for (uint64_t k = 0; k < nsw; k++)
				pb_put_raw_varint(&g->tmp, rng_below(r, 3));
			put_packed_tmp(g, TG_CS_SWITCH_PREV_STATE);
			*r = start;
			for (uint64_t k = 0; k < nsw; k++)
				pb_put_raw_varint(&g->tmp, (uint64_t)comm_pids[
					rng_below(r, 3) + 1]);
			put_packed_tmp(g, TG_CS_SWITCH_NEXT_PID);
			for (uint64_t k = 0; k < nsw; k++)
				pb_put_raw_varint(&g->tmp, 120);
			put_packed_tmp(g, TG_CS_SWITCH_NEXT_PRIO);
			*r = start;
			for (uint64_t k = 0; k < nsw; k++)
				pb_put_raw_varint(&g->tmp, rng_below(r, 3) + 1);
			put_packed_tmp(g, TG_CS_SWITCH_NEXT_COMM_INDEX);
			o->counts[TS_COMPACT_SWITCH] += nsw;
		}
		if (nwk) {
			packed_times(g, o, r, lo, span, nwk);
			put_packed_tmp(g, TG_CS_WAKING_TIMESTAMP);
			uint64_t start = *r;
			for (uint64_t k = 0; k < nwk; k++)
				pb_put_raw_varint(&g->tmp, (uint64_t)comm_pids[
					rng_below(r, 3) + 2]);
			put_packed_tmp(g, TG_CS_WAKING_PID);
			for (uint64_t k = 0; k < nwk; k++)
				pb_put_raw_varint(&g->tmp, k % p->n_cpus);
			put_packed_tmp(g, TG_CS_WAKING_TARGET_CPU);
			for (uint64_t k = 0; k < nwk; k++)
				pb_put_raw_varint(&g->tmp, 120);
			put_packed_tmp(g, TG_CS_WAKING_PRIO);
			*r = start;
			for (uint64_t k = 0; k < nwk; k++)
				pb_put_raw_varint(&g->tmp, rng_below(r, 3) + 2);
			put_packed_tmp(g, TG_CS_WAKING_COMM_INDEX);
			for (uint64_t k = 0; k < nwk; k++)
				pb_put_raw_varint(&g->tmp, 1);
			put_packed_tmp(g, TG_CS_WAKING_COMMON_FLAGS);
			o->counts[TS_COMPACT_WAKING] += nwk;
		}
		pb_end_nested(&g->pkt, cs);
		pb_end_nested(&g->pkt, fb);
		if (guest_emit(g, o))
			return -1;
	}
	return 0;
}

/* ---- the period loop ---------------------------------------------------- */

/* Splits this period's event budget ev over the sequences. */
static void set_budget(struct gen *g, uint64_t ev)
{
	const struct tg_params *p = g->p;
	uint64_t th = ev / 2, inc = ev / 5, leg = ev * 15 / 100;
	uint64_t ft = ev > th + inc + leg ? ev - th - inc - leg : 0;
	uint64_t pairs = th / 2;

	if (ev) { /* every kind at least once per period */
		pairs = pairs ? pairs : 1;
		inc = inc ? inc : 1;
		leg = leg ? leg : 1;
		ft = ft > 3 ? ft : 3;
	}
	for (uint32_t i = 0; i < p->n_threads; i++)
		g->pairs[i] = (uint32_t)(pairs / p->n_threads +
					 (i < pairs % p->n_threads));
	g->n_incr = inc;
	g->n_legacy = leg;
	for (uint32_t c = 0; c < p->n_cpus; c++) {
		uint64_t fc = ft / p->n_cpus + (c < ft % p->n_cpus);
		g->n_fev[c] = fc / 2;
		g->n_sw[c] = fc / 4;
		g->n_wk[c] = fc - fc / 2 - fc / 4;
	}
	g->ev_total += ev;
}

/* Events for period w: n_events spread evenly, or, with a byte target,
 * whatever the remaining periods need at the average size so far. */
static uint64_t period_events(struct gen *g, uint64_t w, uint64_t bytes)
{
	const struct tg_params *p = g->p;

	if (!p->target_bytes)
		return w < g->W ? p->n_events / g->W + (w < p->n_events % g->W)
				: 0;
	if (bytes >= p->target_bytes)
		return 0;
	uint64_t bpe = g->ev_total > 1000 ? bytes / g->ev_total : 60;
	uint64_t left = w < g->W ? g->W - w : 1;
	if (!bpe)
		bpe = 1;
	return (p->target_bytes - bytes) / bpe / left + 1;
}

static int generate(struct gen *g)
{
	const struct tg_params *p = g->p;
	static const win_fn fns[] = { g_service, g_sync, g_threads, g_incr,
				      g_legacy, g_ftrace };
	uint64_t w;

	if (host_prologue(g) || host_snapshot(g, -1))
		return -1;
	for (w = 0;; w++) {
		uint64_t bytes = trace_writer_bytes(g->out[0].w);

		if (w >= g->W && (!p->target_bytes || bytes >= p->target_bytes))
			break;
		g->quiet = has_step(p) && (w == step_window(p) ||
					       w == step_window(p) + 1);
		set_budget(g, g->quiet ? 0 : period_events(g, w, bytes));
		/* the incremental sequence is cleared every CHUNK_WINDOWS
		 * periods, and again after the quiet periods */
		if (!g->quiet && (w % CHUNK_WINDOWS == 0 ||
				  (has_step(p) && w == step_window(p) + 2)))
			g->inc_chunk_w = w;
		if (w < g->W && p->n_exchanges && !g->quiet) {
			g->ex_lo = (w * p->n_exchanges + g->W - 1) / g->W;
			g->ex_hi = ((w + 1) * p->n_exchanges + g->W - 1) / g->W;
		} else {
			g->ex_lo = g->ex_hi = 0;
		}
		g->res->exchanges += g->ex_hi - g->ex_lo;
		g->res->sync_samples++;
		if (host_window(g, w))
			return -1;
		for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
			if (run_guest(g, fns[i], w))
				return -1;
	}
	/* One more sync sample and two more host snapshots, so that every
	 * event lies between sync samples. */
	g->ex_lo = g->ex_hi = 0;
	g->quiet = false;
	g->res->sync_samples++;
	if (host_snapshot(g, (int64_t)w) || run_guest(g, g_sync, w) ||
	    host_snapshot(g, (int64_t)w + 1))
		return -1;
	g->res->windows = w;
	return 0;
}

static int open_writer(struct gen *g, struct trace_writer **w,
		       const char *path)
{
	struct vp_error e;

	if (trace_writer_open(w, path, &e))
		return write_fail(g, &e);
	return 0;
}

int tg_generate(const struct tg_params *params, const struct tg_outputs *out,
		struct tg_result *res, char *err, size_t errlen)
{
	struct tg_params p = *params;
	struct gen g;
	struct vp_error e;
	int rc = -1;

	tg_params_resolve(&p);
	if (tg_params_check(&p, err, errlen))
		return -1;
	if (!out->host_path || !out->guest_path) {
		set_err(err, errlen, "host and guest paths are required");
		return -1;
	}
	memset(res, 0, sizeof(*res));
	memset(&g, 0, sizeof(g));
	g.p = &p;
	g.res = res;
	g.err = err;
	g.errlen = errlen;
	g.rng = p.seed;
	g.P = p.sync_period_ns;
	g.Pc = period_cycles(&p);
	g.W = p.duration_ns / p.sync_period_ns;
	pb_buf_init(&g.pkt);
	pb_buf_init(&g.tmp);
	g.out[0].path = out->guest_path;
	g.nout = 1;
	if (out->ideal_path) {
		g.out[1].path = out->ideal_path;
		g.out[1].ideal = true;
		g.out[1].machine_id = out->ideal_machine_id ? out->ideal_machine_id
							    : 1;
		g.nout = 2;
	}
	if (open_writer(&g, &g.host, out->host_path))
		goto done;
	for (int i = 0; i < g.nout; i++)
		if (open_writer(&g, &g.out[i].w, g.out[i].path))
			goto done;
	if (generate(&g))
		goto done;

	res->host_bytes = trace_writer_bytes(g.host);
	res->guest_bytes = trace_writer_bytes(g.out[0].w);
	if (g.nout > 1)
		res->ideal_bytes = trace_writer_bytes(g.out[1].w);
	res->guest_packets = g.out[0].packets;
	memcpy(res->guest_counts, g.out[0].counts, sizeof(res->guest_counts));

	/* Commit all (each commit frees its writer); after a failure the
	 * rest are aborted. */
	struct trace_writer *all[3] = { g.host, g.out[0].w,
					g.nout > 1 ? g.out[1].w : NULL };
	g.host = g.out[0].w = g.out[1].w = NULL;
	rc = 0;
	for (int i = 0; i < 3; i++) {
		if (!all[i])
			continue;
		if (rc == 0) {
			if (trace_writer_commit(all[i], &e))
				rc = write_fail(&g, &e);
		} else {
			trace_writer_abort(all[i]);
		}
	}
done:
	if (g.host)
		trace_writer_abort(g.host);
	for (int i = 0; i < g.nout; i++)
		if (g.out[i].w)
			trace_writer_abort(g.out[i].w);
	pb_buf_free(&g.pkt);
	pb_buf_free(&g.tmp);
	return rc;
}
