/*
 * main.c - the vperfetto_merge command line.
 *
 *   vperfetto_merge HOST GUEST... -o OUT [options]
 *
 * Parses options into struct merge_opts, runs merge_run(), prints the
 * summary and writes the JSON report.  Exit status: 0 ok, 1 usage, 2 bad
 * input, 3 no usable sync data, 4 output could not be written.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "merge.h"
#include "vm_tracks.h"
#include "out_file.h"
#include "partition.h"
#include "perfetto_fields.h"
#include "report.h"
#include "trace_io.h"
#include "vp_alloc.h"
#include "vp_version.h"
#include "vp_log.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: vperfetto_merge HOST.pb GUEST.pb [GUEST2.pb ...] -o MERGED.pb [options]\n"
"\n"
"Maps every guest timestamp onto the host's time axis through the cpu\n"
"counter both sides share, and writes one Perfetto trace in which each\n"
"guest is a machine of its own.\n"
"\n"
"options:\n"
"  -o, --output FILE           the merged trace (written atomically)\n"
"  --guest-tsc-offset N        guest counter = host counter * ratio + N\n"
"                              (signed, decimal or 0x hex; once per guest)\n"
"  --guest-tsc-scaling R:F     ratio R / 2^F, as KVM's tsc-scaling-ratio and\n"
"                              tsc-scaling-ratio-frac-bits (once, or per guest)\n"
"  --guest-offset-ns N         no clock model: host time = guest time + N ns\n"
"                              (signed; once per guest), for traces recorded\n"
"                              without sync data; other guest clocks follow\n"
"                              through the guest's own clock snapshots\n"
"  --guest-vm-pid PID          which VM's kvm_tsc records in the host trace\n"
"                              belong to the guest (once per guest)\n"
"  --clock boottime|monotonic  the host clock to map onto (default: boottime,\n"
"                              or monotonic when the host only has that)\n"
"  --onto host|guest[:N]       whose time axis the output is on: the host's\n"
"                              (default), or the N-th guest's (default 1,\n"
"                              in the order given): its times are kept and\n"
"                              the host and the other guests are mapped\n"
"                              onto them (not with --concat, --vm-tracks or\n"
"                              --guest-offset-ns)\n"
"  --report FILE.json          write the clock model and its quality as JSON\n"
"  --concat                    no mapping: the traces joined unchanged, host\n"
"                              first, as one file (takes no other mapping\n"
"                              option, writes no report)\n"
"  --allow-unsynced            pass a guest without sync data through with\n"
"                              its timestamps unchanged instead of failing\n"
"  --vm-tracks                 per guest CPU, a track on the guest machine\n"
"                              with its vCPU's host state (running,\n"
"                              preempted, blocked, exit, unknown)\n"
"  --no-machine-id             for viewers without machine_id: remap guest\n"
"                              pids, tids and track uuids instead\n"
"  --threads N                 at most N threads, 1 up to the CPUs it may\n"
"                              use (its affinity, as nproc counts them;\n"
"                              the default); the output is the same\n"
"                              bytes either way\n"
"  --max-inflate SIZE          what the compressed_packets of one trace may\n"
"                              inflate to in all, bytes or with K/M/G\n"
"                              (default 2G); more is refused as a bomb\n"
"  -q, --quiet                 no summary on stderr (errors still print)\n"
"  -h, --help                  this text\n"
"  --version                   the version\n"
"\n"
"exit status: 0 ok, 1 usage, 2 bad input, 3 no usable sync data,\n"
"4 the output could not be written, 128+N killed by signal N (130: Ctrl-C).\n"
"-o and --report never name an input (refused with status 1).  The merged\n"
"trace and the report appear together or not at all: on any failure or\n"
"signal no output is left behind and files that existed stay as they were.\n");
}

static uint64_t guest_packets(const struct merge_result *res)
{
	uint64_t n = 0;
	for (size_t i = 0; i < res->n_guests; i++)
		n += res->guests[i].rw.packets;
	return n;
}

_Static_assert(MERGE_MAX_GUESTS == 64, "the usage message says 64");

/* Marks an option seen; false when it was already. */
static bool once(bool *seen)
{
	bool first = !*seen;
	*seen = true;
	return first;
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "vperfetto_merge: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'vperfetto_merge --help'.\n");
	return MERGE_USAGE;
}

static bool parse_i64(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 0);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (*s == '-')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

/* RATIO:FRACBITS */
static bool parse_scaling(const char *s, uint64_t *ratio, unsigned *frac)
{
	char buf[64];
	uint64_t f;
	const char *colon = strchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(buf))
		return false;
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = 0;
	if (!parse_u64(buf, ratio) || !parse_u64(colon + 1, &f) || f > 63 ||
	    *ratio == 0)
		return false;
	*frac = (unsigned)f;
	return true;
}

enum {
	OPT_OFFSET = 256,
	OPT_SCALING,
	OPT_VM_PID,
	OPT_CLOCK,
	OPT_REPORT,
	OPT_ALLOW_UNSYNCED,
	OPT_NO_MACHINE_ID,
	OPT_VERSION,
	OPT_THREADS,
	OPT_MAX_INFLATE,
	OPT_OFFSET_NS,
	OPT_CONCAT,
	OPT_VM_TRACKS,
	OPT_ONTO,
};

/* --onto: "host" (0), "guest" (1) or "guest:N" (N >= 1). */
static bool parse_onto(const char *s, size_t *out)
{
	uint64_t n;

	if (!strcmp(s, "host")) {
		*out = 0;
		return true;
	}
	if (!strcmp(s, "guest")) {
		*out = 1;
		return true;
	}
	if (strncmp(s, "guest:", 6) || s[6] < '0' || s[6] > '9' ||
	    !parse_u64(s + 6, &n) || n < 1 || n > MERGE_MAX_GUESTS)
		return false;
	*out = (size_t)n;
	return true;
}

/* N, NK, NM or NG (powers of 1024) */
static bool parse_size(const char *s, uint64_t *out)
{
	char buf[32];
	size_t n = strlen(s);
	unsigned shift = 0;
	if (!n || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n + 1);
	switch (buf[n - 1]) {
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	}
	if (shift)
		buf[n - 1] = 0;
	uint64_t v;
	if (!parse_u64(buf, &v) || !v || v > (UINT64_MAX >> shift))
		return false;
	*out = v << shift;
	return true;
}

int main(int argc, char **argv)
{
	/* held to 64 MiB on any input at any number of threads */
	vp_alloc_give_back_freed();
	vp_log_init("vperfetto_merge", VP_LOG_WARN);
	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"guest-tsc-offset", required_argument, NULL, OPT_OFFSET},
		{"guest-tsc-scaling", required_argument, NULL, OPT_SCALING},
		{"guest-vm-pid", required_argument, NULL, OPT_VM_PID},
		{"guest-offset-ns", required_argument, NULL, OPT_OFFSET_NS},
		{"concat", no_argument, NULL, OPT_CONCAT},
		{"clock", required_argument, NULL, OPT_CLOCK},
		{"report", required_argument, NULL, OPT_REPORT},
		{"allow-unsynced", no_argument, NULL, OPT_ALLOW_UNSYNCED},
		{"no-machine-id", no_argument, NULL, OPT_NO_MACHINE_ID},
		{"vm-tracks", no_argument, NULL, OPT_VM_TRACKS},
		{"onto", required_argument, NULL, OPT_ONTO},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{"threads", required_argument, NULL, OPT_THREADS},
		{"max-inflate", required_argument, NULL, OPT_MAX_INFLATE},
		{NULL, 0, NULL, 0},
	};
	struct merge_opts o;
	const char *report = NULL;
	bool quiet = false;
	int c;
	/* options that take one value: given twice is refused, as -o is,
	 * rather than the last one winning unseen */
	bool seen_clock = false, seen_onto = false, seen_threads = false,
	     seen_inflate = false;

	memset(&o, 0, sizeof(o));
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (o.out)
				return usage_error("%s", "-o given twice");
			if (!*optarg)
				return usage_error("%s", "-o: an empty file name");
			o.out = optarg;
			break;
		case OPT_OFFSET:
			if (o.n_tsc_offset == MERGE_MAX_GUESTS ||
			    !parse_i64(optarg, &o.tsc_offset[o.n_tsc_offset]))
				return usage_error("bad --guest-tsc-offset '%s'",
						   optarg);
			o.n_tsc_offset++;
			break;
		case OPT_CONCAT:
			o.concat = true;
			break;
		case OPT_OFFSET_NS:
			if (o.n_offset_ns == MERGE_MAX_GUESTS ||
			    !parse_i64(optarg, &o.offset_ns[o.n_offset_ns]))
				return usage_error("bad --guest-offset-ns '%s'",
						   optarg);
			o.n_offset_ns++;
			break;
		case OPT_SCALING:
			if (o.n_tsc_scaling == MERGE_MAX_GUESTS ||
			    !parse_scaling(optarg, &o.tsc_ratio[o.n_tsc_scaling],
					   &o.tsc_frac_bits[o.n_tsc_scaling]))
				return usage_error("bad --guest-tsc-scaling '%s' "
						   "(want RATIO:FRACBITS)", optarg);
			o.n_tsc_scaling++;
			break;
		case OPT_VM_PID:
			if (o.n_vm_pid == MERGE_MAX_GUESTS ||
			    !parse_i64(optarg, &o.vm_pid[o.n_vm_pid]) ||
			    o.vm_pid[o.n_vm_pid] <= 0)
				return usage_error("bad --guest-vm-pid '%s'", optarg);
			o.n_vm_pid++;
			break;
		case OPT_CLOCK:
			if (!once(&seen_clock))
				return usage_error("%s", "--clock given twice");
			if (!strcmp(optarg, "boottime"))
				o.clock = BUILTIN_CLOCK_BOOTTIME;
			else if (!strcmp(optarg, "monotonic"))
				o.clock = BUILTIN_CLOCK_MONOTONIC;
			else
				return usage_error("bad --clock '%s' (boottime or "
						   "monotonic)", optarg);
			break;
		case OPT_REPORT:
			if (report)
				return usage_error("%s", "--report given twice");
			if (!*optarg)
				return usage_error("%s", "--report: an empty file "
						   "name");
			report = optarg;
			break;
		case OPT_ALLOW_UNSYNCED:
			o.allow_unsynced = true;
			break;
		case OPT_VM_TRACKS:
			o.extra = vm_tracks_write;
			break;
		case OPT_ONTO:
			if (!once(&seen_onto))
				return usage_error("%s", "--onto given twice");
			if (!parse_onto(optarg, &o.onto_guest))
				return usage_error("bad --onto '%s' (host, guest or "
						   "guest:N, N from 1)", optarg);
			break;
		case OPT_NO_MACHINE_ID:
			o.no_machine_id = true;
			break;
		case OPT_THREADS: {
			int64_t n;
			char why[64];
			if (!once(&seen_threads))
				return usage_error("%s", "--threads given twice");
			snprintf(why, sizeof(why), "bad --threads '%%s' (1 to %u, "
				 "the CPUs it may use)", merge_cpus());
			if (!parse_i64(optarg, &n) || n < 1 ||
			    n > (int64_t)merge_cpus())
				return usage_error(why, optarg);
			o.threads = (unsigned)n;
			break;
		}
		case OPT_MAX_INFLATE:
			if (!once(&seen_inflate))
				return usage_error("%s", "--max-inflate given "
						   "twice");
			if (!parse_size(optarg, &o.max_inflate))
				return usage_error("bad --max-inflate '%s' (bytes, "
						   "or with K, M or G)", optarg);
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("vperfetto_merge %s\n", VP_VERSION);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value",
					   argv[optind - 1]);
		default:
			/* A short option inside a cluster ("-qz") leaves optind
			 * on the cluster or, when it is the first, still on the
			 * program's name: name the letter getopt stopped at. */
			if (optopt) {
				char letter[3] = { '-', (char)optopt, 0 };
				return usage_error("unknown option '%s'",
						   letter);
			}
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}

	if (o.onto_guest && argc - optind < 2)
		return usage_error("%s", "--onto guest needs a guest trace to put "
				   "the output on the time axis of");
	if (argc - optind < 2)
		return usage_error("%s", "need a host trace and at least one guest "
				   "trace");
	if (!o.out)
		return usage_error("%s", "no output file (-o MERGED.pb)");
	o.host = argv[optind++];
	for (; optind < argc; optind++) {
		if (o.n_guests == MERGE_MAX_GUESTS)
			return usage_error("%s", "too many guest traces (at "
					   "most 64)");
		o.guests[o.n_guests++] = argv[optind];
	}
	if (o.n_tsc_offset && o.n_tsc_offset != o.n_guests)
		return usage_error("%s", "--guest-tsc-offset must be given once "
				   "per guest trace");
	if (o.concat && (o.n_offset_ns || o.n_tsc_offset || o.n_tsc_scaling ||
			 o.n_vm_pid || o.clock || report || o.allow_unsynced ||
			 o.no_machine_id || o.extra))
		return usage_error("%s", "--concat joins the traces unchanged: it "
				   "takes no mapping option and writes no "
				   "report");
	if (o.onto_guest && o.concat)
		return usage_error("%s", "--onto guest maps the traces onto a "
				   "guest's time axis; --concat maps nothing");
	if (o.onto_guest > o.n_guests) {
		char why[96];
		snprintf(why, sizeof(why), "--onto guest:%zu: there %s only %zu "
			 "guest trace%s", o.onto_guest,
			 o.n_guests == 1 ? "is" : "are", o.n_guests,
			 o.n_guests == 1 ? "" : "s");
		return usage_error("%s", why);
	}
	if (o.onto_guest && o.n_offset_ns)
		return usage_error("%s", "--onto guest maps the host through the "
				   "guest's clock model; --guest-offset-ns gives "
				   "none");
	if (o.onto_guest && o.extra)
		return usage_error("%s", "--onto guest does not take --vm-tracks "
				   "(its tracks are on the host's time axis)");
	if (o.n_offset_ns && o.n_offset_ns != o.n_guests)
		return usage_error("%s", "--guest-offset-ns must be given once "
				   "per guest trace");
	if (o.n_offset_ns && o.n_tsc_offset)
		return usage_error("%s", "--guest-offset-ns and --guest-tsc-offset "
				   "exclude each other");
	/* an option that would do nothing is refused, not ignored */
	if (o.n_offset_ns && o.n_tsc_scaling)
		return usage_error("%s", "--guest-offset-ns and "
				   "--guest-tsc-scaling exclude each other (no "
				   "counter is mapped)");
	if (o.n_offset_ns && o.n_vm_pid && !o.extra)
		return usage_error("%s", "--guest-vm-pid picks the kvm_tsc "
				   "records (or with --vm-tracks, the VM's "
				   "threads); --guest-offset-ns uses no kvm_tsc");
	if (o.n_tsc_scaling > 1 && o.n_tsc_scaling != o.n_guests)
		return usage_error("%s", "--guest-tsc-scaling must be given once, "
				   "or once per guest trace");
	if (o.n_vm_pid && o.n_vm_pid != o.n_guests)
		return usage_error("%s", "--guest-vm-pid must be given once per "
				   "guest trace");

	struct vp_error err = {{0}};
	const char *inputs[MERGE_MAX_GUESTS + 1] = {o.host};
	for (size_t i = 0; i < o.n_guests; i++)
		inputs[i + 1] = o.guests[i];
	if (vp_out_check_inputs("-o", o.out, inputs, o.n_guests + 1, &err) < 0 ||
	    vp_out_check_inputs("--report", report, inputs, o.n_guests + 1,
				&err) < 0 ||
	    vp_out_check_distinct("-o", o.out, "--report", report, &err) < 0) {
		fprintf(stderr, "vperfetto_merge: %s\n", err.msg);
		return MERGE_USAGE;
	}

	if (!o.threads)
		o.threads = merge_cpus();

	/* A signal removes the files being written and ends the run. */
	o.cancel = vp_out_signals(false);
	/* The outputs are files: a summary that finds stderr closed is no
	 * reason to fail a merge that has written them. */
	signal(SIGPIPE, SIG_IGN);

	uint64_t total = 0;
	struct stat st;
	if (stat(o.host, &st) == 0)
		total += (uint64_t)st.st_size;
	for (size_t i = 0; i < o.n_guests; i++)
		if (stat(o.guests[i], &st) == 0)
			total += (uint64_t)st.st_size;
	o.progress = !quiet && isatty(STDERR_FILENO) && total > (64u << 20);

	struct merge_result res;
	struct vp_out *outs[2] = {NULL, NULL}; /* merged trace, report */
	if (report && vp_out_open(&outs[1], report, 0, &err) < 0) {
		fprintf(stderr, "vperfetto_merge: %s\n", err.msg);
		return MERGE_IO_ERROR;
	}
	o.out_pending = &outs[0];
	int status = o.concat ? merge_concat(&o, &res, &err)
			      : merge_run(&o, &res, &err);
	if (status != MERGE_OK) {
		fprintf(stderr, "vperfetto_merge: %s\n", err.msg);
		if (status == MERGE_USAGE)
			fprintf(stderr, "Try 'vperfetto_merge --help'.\n");
		vp_out_abort(outs[0]);
		vp_out_abort(outs[1]);
		merge_result_free(&res);
		return status;
	}
	if (outs[1] && report_write_json(outs[1], &o, &res, &err) < 0)
		status = MERGE_IO_ERROR;
	else if (vp_out_commit_all(outs, 2, &err) < 0)
		status = MERGE_IO_ERROR;
	if (status != MERGE_OK) {
		vp_out_abort(outs[0]);
		vp_out_abort(outs[1]);
		fprintf(stderr, "vperfetto_merge: %s\n", err.msg);
		merge_result_free(&res);
		return status;
	}
	if (!quiet && o.concat)
		fprintf(stderr, "vperfetto_merge: joined %zu traces unchanged "
			"(--concat): %llu packets, %llu bytes -> %s\n",
			o.n_guests + 1,
			(unsigned long long)(res.host_packets +
					     guest_packets(&res)),
			(unsigned long long)res.bytes_out, o.out);
	else if (!quiet)
		report_summary(stderr, &o, &res);
	merge_result_free(&res);
	return 0;
}
