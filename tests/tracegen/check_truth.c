/*
 * check_truth.c - checks a merged trace against the generator's truth.
 *
 *   check_truth PARAMS GUEST.pb MERGED.pb --machine N --tolerance-ns T
 *               [--max-failures K] [-q]
 *
 * Walks the original guest trace (every packet) and the merged trace's
 * packets with machine_id N side by side with ts_walk; the merge keeps the
 * guest's packet order and the order of timestamps inside a packet, so the
 * k-th timestamp of one is the k-th of the other.  Each pair must be of the
 * same kind (the packet-timestamp kinds count as one: a merge may relabel a
 * MONOTONIC or scoped-clock packet onto BOOTTIME), the merged value must be
 * on BOOTTIME, and
 *
 *   |merged - truth(original)| <= T  (+ 999 ns for legacy microseconds,
 *                                     + unit - 1 for the incremental clock)
 *
 * where truth is tg_truth_guest_to_host (tg_truth_guest_mono_to_host for
 * MONOTONIC), rebuilt from PARAMS.  Prints per-kind counts and errors and
 * the first failures.  Exit 0: all within tolerance and the counts match;
 * 1: not; 2: usage or I/O error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracegen.h"
#include "ts_walk.h"

#define CHECK_CLOCK_BOOTTIME 6 /* Perfetto BuiltinClock BOOTTIME */

struct kind_stats {
	uint64_t count, failed, unchecked;
	uint64_t max_err;
	long double sum_err;
	uint64_t measured; /* timestamps in sum_err: within tolerance or not */
	int64_t min_signed, max_signed;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: check_truth PARAMS GUEST.pb MERGED.pb --machine N "
		   "--tolerance-ns T [--max-failures K] [-q]\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -1;
	unsigned long long v = strtoull(s, &end, 0);
	if (end == s || *end)
		return -1;
	*out = v;
	return 0;
}

/* Packet timestamps form one class; every other kind is its own. */
static int kind_class(enum ts_kind k)
{
	switch (k) {
	case TS_PACKET:
	case TS_PACKET_MONOTONIC:
	case TS_PACKET_INCREMENTAL:
	case TS_PACKET_OTHER:
		return 0;
	default:
		return 1 + (int)k;
	}
}

static void print_item(const char *what, const struct ts_item *it)
{
	printf("  %s: %s %" PRIu64 " (clock %u) packet %" PRIu64 " @%" PRIu64
	       " seq %u\n", what, ts_kind_name(it->kind), it->abs_ns,
	       it->clock_id, it->packet_index, it->packet_offset, it->seq_id);
}

int main(int argc, char **argv)
{
	const char *pos[3] = { NULL, NULL, NULL };
	int npos = 0;
	uint64_t machine = 0, tol = 0, max_fail = 10;
	bool have_machine = false, have_tol = false, quiet = false;
	struct tg_params p;
	char err[512];

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];

		if (!strcmp(o, "--machine") || !strcmp(o, "--tolerance-ns") ||
		    !strcmp(o, "--max-failures")) {
			uint64_t v;
			if (i + 1 >= argc || parse_u64(argv[i + 1], &v)) {
				fprintf(stderr, "check_truth: bad value for %s\n", o);
				usage(stderr);
				return 2;
			}
			i++;
			if (!strcmp(o, "--machine"))
				machine = v, have_machine = true;
			else if (!strcmp(o, "--tolerance-ns"))
				tol = v, have_tol = true;
			else
				max_fail = v;
		} else if (!strcmp(o, "-q")) {
			quiet = true;
		} else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			usage(stdout);
			return 0;
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, "check_truth: unknown option %s\n", o);
			usage(stderr);
			return 2;
		} else if (npos < 3) {
			pos[npos++] = o;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (npos != 3 || !have_machine || !have_tol || machine == 0 ||
	    machine > INT32_MAX) {
		usage(stderr);
		return 2;
	}
	if (tg_params_load(&p, pos[0], err, sizeof(err))) {
		fprintf(stderr, "check_truth: %s\n", err);
		return 2;
	}

	struct ts_walker *wa, *wb;
	if (ts_walker_open(&wa, pos[1], TS_MACHINE_ALL, err, sizeof(err))) {
		fprintf(stderr, "check_truth: %s\n", err);
		return 2;
	}
	if (ts_walker_open(&wb, pos[2], (int)machine, err, sizeof(err))) {
		fprintf(stderr, "check_truth: %s\n", err);
		ts_walker_close(wa);
		return 2;
	}

	struct kind_stats st[TS_KIND_COUNT];
	uint64_t n = 0, failures = 0, extra_a = 0, extra_b = 0;
	bool desync = false;
	int rc = 0;

	memset(st, 0, sizeof(st));
	for (int k = 0; k < TS_KIND_COUNT; k++) {
		st[k].min_signed = INT64_MAX;
		st[k].max_signed = INT64_MIN;
	}
	for (;;) {
		struct ts_item a, b;
		int ra = ts_walker_next(wa, &a, err, sizeof(err));
		if (ra < 0)
			goto io_error;
		int rb = ts_walker_next(wb, &b, err, sizeof(err));
		if (rb < 0)
			goto io_error;
		if (!ra && !rb)
			break;
		if (!ra || !rb) {
			/* one side ran out: count what is left on the other */
			struct ts_walker *w = ra ? wa : wb;
			struct ts_item x;
			uint64_t *extra = ra ? &extra_a : &extra_b;
			int r;
			(*extra)++;
			while ((r = ts_walker_next(w, &x, err, sizeof(err))) == 1)
				(*extra)++;
			if (r < 0)
				goto io_error;
			break;
		}
		n++;
		if (kind_class(a.kind) != kind_class(b.kind)) {
			printf("timestamp %" PRIu64 ": kinds differ; the traces are "
			       "out of step from here:\n", n - 1);
			print_item("guest ", &a);
			print_item("merged", &b);
			desync = true;
			break;
		}

		struct kind_stats *s = &st[a.kind];
		uint64_t truth, t = tol;
		bool fail = false;
		const char *why = NULL;

		s->count++;
		switch (a.kind) {
		case TS_PACKET_OTHER:
			s->unchecked++;
			continue;
		case TS_UNRESOLVED:
			fail = true, why = "unresolved in the guest trace";
			truth = 0;
			break;
		case TS_PACKET_MONOTONIC:
			truth = tg_truth_guest_mono_to_host(&p, a.abs_ns);
			break;
		case TS_PACKET_INCREMENTAL:
			truth = tg_truth_guest_to_host(&p, a.abs_ns);
			t += p.incr_unit_ns - 1;
			break;
		case TS_LEGACY_US: /* MONOTONIC, as Perfetto reads them */
			truth = tg_truth_guest_mono_to_host(&p, a.abs_ns);
			t += 999;
			break;
		default:
			truth = tg_truth_guest_to_host(&p, a.abs_ns);
			break;
		}
		if (!fail && (b.kind == TS_UNRESOLVED || b.kind == TS_PACKET_OTHER ||
			      b.clock_id != CHECK_CLOCK_BOOTTIME))
			fail = true, why = "merged value is not on BOOTTIME";
		int64_t e = (int64_t)(b.abs_ns - truth);
		uint64_t ae = e < 0 ? (uint64_t)0 - (uint64_t)e : (uint64_t)e;
		if (!fail) {
			if (ae > s->max_err)
				s->max_err = ae;
			if (e < s->min_signed)
				s->min_signed = e;
			if (e > s->max_signed)
				s->max_signed = e;
			s->sum_err += (long double)ae;
			s->measured++;
			if (ae > t)
				fail = true, why = "beyond tolerance";
		}
		if (fail) {
			s->failed++;
			if (failures++ < max_fail) {
				printf("FAIL timestamp %" PRIu64 " (%s): %s; truth %"
				       PRIu64 ", error %" PRId64 " ns, tolerance %"
				       PRIu64 "\n", n - 1, ts_kind_name(a.kind), why,
				       truth, e, t);
				print_item("guest ", &a);
				print_item("merged", &b);
			}
		}
	}

	if (!quiet || failures || extra_a || extra_b || desync) {
		printf("%-20s %10s %8s %9s %12s %12s %12s\n", "kind", "count",
		       "failed", "unchecked", "max|err|ns", "mean|err|ns",
		       "err range");
		for (int k = 0; k < TS_KIND_COUNT; k++) {
			const struct kind_stats *s = &st[k];
			if (!s->count)
				continue;
			printf("%-20s %10" PRIu64 " %8" PRIu64 " %9" PRIu64
			       " %12" PRIu64 " %12.1Lf", ts_kind_name((enum ts_kind)k),
			       s->count, s->failed, s->unchecked, s->max_err,
			       s->measured ? s->sum_err / s->measured : 0.0L);
			if (s->min_signed <= s->max_signed)
				printf("  [%" PRId64 ", %" PRId64 "]", s->min_signed,
				       s->max_signed);
			printf("\n");
		}
		printf("compared %" PRIu64 " timestamps (guest %" PRIu64
		       " packets, merged %" PRIu64 " packets walked), tolerance %"
		       PRIu64 " ns\n", n, ts_walker_packets(wa),
		       ts_walker_packets(wb), tol);
	}
	if (extra_a)
		printf("COUNT MISMATCH: the guest trace has %" PRIu64
		       " more timestamps than machine %" PRIu64
		       " of the merged trace\n", extra_a, machine);
	if (extra_b)
		printf("COUNT MISMATCH: machine %" PRIu64 " of the merged trace has %"
		       PRIu64 " more timestamps than the guest trace\n", machine,
		       extra_b);
	if (failures > max_fail)
		printf("... %" PRIu64 " failures in all\n", failures);
	if (failures || extra_a || extra_b || desync || n == 0)
		rc = 1;
	if (n == 0)
		printf("no timestamps compared\n");
	ts_walker_close(wa);
	ts_walker_close(wb);
	return rc;

io_error:
	fprintf(stderr, "check_truth: %s\n", err);
	ts_walker_close(wa);
	ts_walker_close(wb);
	return 2;
}
