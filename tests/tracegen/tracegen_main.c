/*
 * tracegen_main.c - vperfetto_tracegen: writes a host and a guest trace
 * with a known clock relation (see tracegen.h for the model).
 *
 *   vperfetto_tracegen --host H.pb --guest G.pb [options]
 *
 * Prints what it wrote, including the number of guest timestamps of each
 * kind as ts_walk reports them; --verify re-reads the guest trace with
 * ts_walk and fails when the counts differ.  --ideal-out writes the guest
 * trace as a perfect merge would (for self-checks of check_truth).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracegen.h"
#include "ts_walk.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: vperfetto_tracegen --host H.pb --guest G.pb [options]\n"
"  --seed N             PRNG seed (default 1); also picks c0, hb0, gb0, host_hz\n"
"  --duration-s S       trace span in seconds (default 10)\n"
"  --sync-period-ms N   host snapshot / guest sync period (default 100)\n"
"  --offset N           guest counter = host * ratio + N (default -0x123456789AB)\n"
"  --tsc-scaling R:F    ratio R / 2^F (default 2^48:48, i.e. 1)\n"
"  --drift-ppm X        guest BOOTTIME rate error (default 25)\n"
"  --drift-change-ppm X ... changes by X ppm at --step-at (default 0)\n"
"  --host-drift-change-ppm X  host BOOTTIME's rate changes by X ppm there\n"
"  --jitter-ns N        uniform +- N on every sync clock read (default 100)\n"
"  --outlier-every N    every Nth guest sync sample +50 us (default 0: none)\n"
"  --step-ns N          host BOOTTIME jumps forward by N (a suspend gap)\n"
"  --step-at F          ... at this fraction of the duration (default 0.5)\n"
"  --tsc-step N         the guest counter offset changes by N cycles there\n"
"                       (a migration); kvm_tsc records both values\n"
"  --events N           guest events (default 10000)\n"
"  --threads N          guest thread sequences (default 4)\n"
"  --cpus N             guest ftrace cpus (default 2)\n"
"  --exchanges N        guest sync exchanges (default 50)\n"
"  --kvm-tsc            host writes vperfetto/kvm_tsc records\n"
"  --vm-pid N           vm_pid of those records (default 4242)\n"
"  --incr-unit-ns N     unit of the guest incremental clock (default 1000)\n"
"  --target-bytes N[KMG] add events until the guest trace is this big\n"
"  --params FILE        start from a saved parameter file\n"
"  --params-out FILE    save the (resolved) parameters as key=value lines\n"
"  --ideal-out FILE     also write the guest trace as a perfect merge would\n"
"  --machine N          machine_id of the ideal trace (default 1)\n"
"  --verify             re-read the guest trace and compare counts\n"
"  -q                   print nothing on success\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;

	if (parse_u64(s, &v) || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_i64(const char *s, int64_t *out)
{
	const char *digits = s;
	bool neg = false;

	if (!s || !*s)
		return -1;
	/* accept "-0x..." as well as decimal */
	if (*digits == '-' || *digits == '+')
		neg = *digits++ == '-';
	uint64_t mag;
	if (parse_u64(digits, &mag))
		return -1;
	if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
		return -1;
	*out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	return 0;
}

static int parse_f64(const char *s, double *out)
{
	char *end;

	if (!s || !*s)
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* N with an optional K, M or G (powers of 1024). */
static int parse_size(const char *s, uint64_t *out)
{
	char buf[64];
	size_t n = s ? strlen(s) : 0;
	uint64_t mul = 1, v;

	if (!n || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n + 1);
	switch (buf[n - 1]) {
	case 'k': case 'K': mul = 1ull << 10; break;
	case 'm': case 'M': mul = 1ull << 20; break;
	case 'g': case 'G': mul = 1ull << 30; break;
	}
	if (mul != 1)
		buf[n - 1] = 0;
	if (parse_u64(buf, &v) || v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

/* Counts what ts_walk finds, for --verify. */
static void count_cb(void *ctx, enum ts_kind kind, uint64_t abs_ns)
{
	uint64_t *counts = ctx;

	(void)abs_ns;
	counts[kind]++;
}

static int bad_arg(const char *opt, const char *val)
{
	fprintf(stderr, "vperfetto_tracegen: bad value for %s: '%s'\n", opt,
		val ? val : "(missing)");
	return 1;
}

int main(int argc, char **argv)
{
	struct tg_params p = tg_params_default();
	struct tg_outputs out = { NULL, NULL, NULL, 1 };
	struct tg_result res;
	const char *params_out = NULL;
	bool verify = false, quiet = false;
	char err[512];

	/* --params first, so that other options override the file */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--params")) {
			if (i + 1 >= argc)
				return bad_arg("--params", NULL);
			if (tg_params_load(&p, argv[i + 1], err, sizeof(err))) {
				fprintf(stderr, "vperfetto_tracegen: %s\n", err);
				return 1;
			}
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool used = true; /* whether the option takes v */
		double d;

		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(o, "--kvm-tsc")) {
			p.use_kvm_tsc = true, used = false;
		} else if (!strcmp(o, "--verify")) {
			verify = true, used = false;
		} else if (!strcmp(o, "-q")) {
			quiet = true, used = false;
		} else if (!v) {
			fprintf(stderr, "vperfetto_tracegen: %s needs a value "
				"(or is unknown)\n", o);
			usage(stderr);
			return 1;
		} else if (!strcmp(o, "--params")) {
			/* done above */
		} else if (!strcmp(o, "--host")) {
			out.host_path = v;
		} else if (!strcmp(o, "--guest")) {
			out.guest_path = v;
		} else if (!strcmp(o, "--ideal-out")) {
			out.ideal_path = v;
		} else if (!strcmp(o, "--params-out")) {
			params_out = v;
		} else if (!strcmp(o, "--machine")) {
			if (parse_u32(v, &out.ideal_machine_id) ||
			    !out.ideal_machine_id)
				return bad_arg(o, v);
		} else if (!strcmp(o, "--seed")) {
			if (parse_u64(v, &p.seed))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--duration-s")) {
			if (parse_f64(v, &d) || d <= 0 || d > 864000)
				return bad_arg(o, v);
			p.duration_ns = (uint64_t)llround(d * 1e9);
		} else if (!strcmp(o, "--sync-period-ms")) {
			if (parse_f64(v, &d) || d <= 0 || d > 60000)
				return bad_arg(o, v);
			p.sync_period_ns = (uint64_t)llround(d * 1e6);
		} else if (!strcmp(o, "--offset")) {
			if (parse_i64(v, &p.offset))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--tsc-scaling")) {
			char buf[64];
			char *colon;
			if (strlen(v) >= sizeof(buf))
				return bad_arg(o, v);
			strcpy(buf, v);
			colon = strchr(buf, ':');
			if (!colon)
				return bad_arg(o, v);
			*colon = 0;
			if (parse_u64(buf, &p.tsc_ratio) ||
			    parse_u32(colon + 1, &p.tsc_frac_bits))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--drift-ppm")) {
			if (parse_f64(v, &p.drift_ppm))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--drift-change-ppm")) {
			if (parse_f64(v, &p.drift_change_ppm))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--host-drift-change-ppm")) {
			if (parse_f64(v, &p.host_drift_change_ppm))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--jitter-ns")) {
			if (parse_u64(v, &p.jitter_ns))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--outlier-every")) {
			if (parse_u32(v, &p.outlier_every))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--step-ns")) {
			if (parse_i64(v, &p.host_step_ns) || p.host_step_ns < 0)
				return bad_arg(o, v);
		} else if (!strcmp(o, "--tsc-step")) {
			if (parse_i64(v, &p.tsc_step))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--step-at")) {
			if (parse_f64(v, &p.host_step_at))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--events")) {
			if (parse_u64(v, &p.n_events))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--threads")) {
			if (parse_u32(v, &p.n_threads))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--cpus")) {
			if (parse_u32(v, &p.n_cpus))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--exchanges")) {
			if (parse_u32(v, &p.n_exchanges))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--vm-pid")) {
			if (parse_u32(v, &p.vm_pid))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--incr-unit-ns")) {
			if (parse_u64(v, &p.incr_unit_ns))
				return bad_arg(o, v);
		} else if (!strcmp(o, "--target-bytes")) {
			if (parse_size(v, &p.target_bytes))
				return bad_arg(o, v);
		} else {
			fprintf(stderr, "vperfetto_tracegen: unknown option %s\n",
				o);
			usage(stderr);
			return 1;
		}
		if (used)
			i++;
	}
	if (!out.host_path || !out.guest_path) {
		fprintf(stderr, "vperfetto_tracegen: --host and --guest are "
			"required\n");
		usage(stderr);
		return 1;
	}

	tg_params_resolve(&p);
	if (tg_params_check(&p, err, sizeof(err))) {
		fprintf(stderr, "vperfetto_tracegen: %s\n", err);
		return 1;
	}
	if (tg_generate(&p, &out, &res, err, sizeof(err))) {
		fprintf(stderr, "vperfetto_tracegen: %s\n", err);
		return 1;
	}
	if (params_out && tg_params_save(&p, params_out, err, sizeof(err))) {
		fprintf(stderr, "vperfetto_tracegen: %s\n", err);
		return 1;
	}

	if (!quiet) {
		printf("host:  %s  %" PRIu64 " bytes, %" PRIu64 " packets, %" PRIu64
		       " clock snapshots\n", out.host_path, res.host_bytes,
		       res.host_packets, res.host_snapshots);
		printf("guest: %s  %" PRIu64 " bytes, %" PRIu64 " packets, %" PRIu64
		       " sync samples, %" PRIu64 " exchanges, %" PRIu64
		       " periods\n", out.guest_path, res.guest_bytes,
		       res.guest_packets, res.sync_samples, res.exchanges,
		       res.windows);
		if (out.ideal_path)
			printf("ideal: %s  %" PRIu64 " bytes (machine_id %u)\n",
			       out.ideal_path, res.ideal_bytes,
			       out.ideal_machine_id);
		printf("guest timestamps:");
		for (int k = 0; k < TS_KIND_COUNT; k++)
			if (res.guest_counts[k])
				printf(" %s=%" PRIu64, ts_kind_name((enum ts_kind)k),
				       res.guest_counts[k]);
		printf("\n");
	}

	if (verify) {
		uint64_t counts[TS_KIND_COUNT] = { 0 };
		int bad = 0;

		if (ts_walk_file(out.guest_path, TS_MACHINE_ALL, count_cb, counts,
				 err, sizeof(err))) {
			fprintf(stderr, "vperfetto_tracegen: verify: %s\n", err);
			return 1;
		}
		for (int k = 0; k < TS_KIND_COUNT; k++) {
			if (counts[k] == res.guest_counts[k])
				continue;
			fprintf(stderr, "vperfetto_tracegen: verify: %s: wrote %"
				PRIu64 ", ts_walk found %" PRIu64 "\n",
				ts_kind_name((enum ts_kind)k), res.guest_counts[k],
				counts[k]);
			bad = 1;
		}
		if (bad)
			return 1;
		if (!quiet)
			printf("verify: ts_walk counts match\n");
	}
	return 0;
}
