/*
 * host_clock_main.c - vperfetto_host_clock: the host's clock-sync producer.
 *
 * Connects to the tracing service (vtraced, or Perfetto's traced) as a
 * producer with the vperfetto.clock_sync data source (clock_producer.c),
 * answers the guests' sync exchanges (sync_endpoint.c), and writes the
 * KVM counter relation of the VMs named on the command line (kvm_tsc.c,
 * libvirt_domain.c).  Runs until SIGINT or SIGTERM, then logs a one-line
 * summary (at the info level: -v).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vperfetto/vperfetto.h>

#include "clock_config.h"
#include "clock_producer.h"
#include "kvm_tsc.h"
#include "libvirt_domain.h"
#include "sync_endpoint.h"
#include "vp_clock.h"
#include "vp_version.h"
#include "vp_log.h"

#define PROG "vperfetto_host_clock"
#define MAX_VMS 64

struct args {
	const char *producer_socket;
	struct host_clock_opts clock;
	struct sync_endpoint_opts sync;
	int vm_pids[MAX_VMS];
	size_t n_vm_pids;
	const char *vm_names[MAX_VMS]; /* parallel to vm_pids; NULL: none */
	const char *domains[MAX_VMS];
	size_t n_domains;
	const char *qmp[MAX_VMS];
	size_t n_qmp;
	const char *chardevs[MAX_VMS]; /* the first goes in sync */
	size_t n_chardevs;
	const char *names[MAX_VMS]; /* --vm-name, paired with --vm-pid */
	size_t n_names;
	bool no_vcpu_map;
	const char *libvirt_uri;
	const char *kvm_debugfs;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options]\n"
		"\n"
		"Writes (clock, cpu counter) snapshots into the trace as the\n"
		"data source \"" CLOCK_PRODUCER_DS_NAME "\", answers guests' "
		"clock-sync\n"
		"exchanges, and records KVM's TSC offset of the given VMs.\n"
		"\n"
		"options:\n"
		"  --producer-socket ADDR   the service's producer socket\n"
		"                           (default: PERFETTO_PRODUCER_SOCK_NAME"
		" or\n"
		"                           Perfetto's default)\n"
		"  --clock boottime|monotonic\n"
		"                           the clock paired with the counter\n"
		"                           (default boottime)\n"
		"  --period-ms N            snapshot period (default %u)\n"
		"  --sync-vsock-port N      vsock port of the sync endpoint\n"
		"                           (default %u)\n"
		"  --no-vsock               no vsock sync endpoint\n"
		"  --sync-unix PATH         also listen on this UNIX socket\n"
		"  --qemu-chardev PATH      the host end of a virtio-serial port:"
		" (repeatable,\n"
		"                           one per guest)"
		"\n"
		"                           QEMU's chardev server socket, or a\n"
		"                           pty / character device\n"
		"  --vm-pid PID             a VM (QEMU pid) whose KVM TSC offset "
		"to\n"
		"                           record (repeatable)\n"
		"  --domain NAME            the same, by libvirt domain name\n"
		"                           (repeatable)\n"
		"  --qmp PATH               QEMU's QMP socket of the n-th VM "
		"(in\n"
		"                           the order of --vm-pid, then "
		"--domain):\n"
		"                           its vCPU threads from "
		"query-cpus-fast;\n"
		"                           without it, from the thread names;"
		"\n"
		"                           extra ones are VMs of their own\n"
		"  --no-vcpu-map            no vcpu_map records\n"
		"  --vm-name NAME           the n-th --vm-pid's name in its "
		"vcpu_map\n"
		"                           records (repeatable)\n"
		"  --libvirt-uri URI        libvirt connection (default %s)\n"
		"  --kvm-debugfs DIR        debugfs mount point (default %s)\n"
		"  -v, --verbose            log sessions, sync clients and the\n"
		"                           counts at exit\n"
		"  -h, --help               this text\n"
		"  --version                the version\n"
		"\n"
		"A session may override --clock and --period-ms through\n"
		"DataSourceConfig.legacy_config, e.g.\n"
		"  legacy_config: \"period_ms=50 clock=monotonic\"\n",
		HOST_CLOCK_DEFAULT_PERIOD_MS, VP_SYNC_DEFAULT_VSOCK_PORT,
		LIBVIRT_DEFAULT_URI, KVM_TSC_DEFAULT_DEBUGFS);
}

/* A decimal in [lo, hi] that is the whole string. */
static bool parse_uint(const char *s, unsigned long lo, unsigned long hi,
		       unsigned long *out)
{
	char *end;
	if (s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || errno || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

enum {
	OPT_PRODUCER_SOCKET = 256,
	OPT_CLOCK,
	OPT_PERIOD_MS,
	OPT_VSOCK_PORT,
	OPT_NO_VSOCK,
	OPT_SYNC_UNIX,
	OPT_QEMU_CHARDEV,
	OPT_VM_PID,
	OPT_DOMAIN,
	OPT_LIBVIRT_URI,
	OPT_KVM_DEBUGFS,
	OPT_QMP,
	OPT_NO_VCPU_MAP,
	OPT_VM_NAME,
	OPT_VERSION,
};

static const struct option long_opts[] = {
	{"producer-socket", required_argument, NULL, OPT_PRODUCER_SOCKET},
	{"clock", required_argument, NULL, OPT_CLOCK},
	{"period-ms", required_argument, NULL, OPT_PERIOD_MS},
	{"sync-vsock-port", required_argument, NULL, OPT_VSOCK_PORT},
	{"no-vsock", no_argument, NULL, OPT_NO_VSOCK},
	{"sync-unix", required_argument, NULL, OPT_SYNC_UNIX},
	{"qemu-chardev", required_argument, NULL, OPT_QEMU_CHARDEV},
	{"vm-pid", required_argument, NULL, OPT_VM_PID},
	{"domain", required_argument, NULL, OPT_DOMAIN},
	{"libvirt-uri", required_argument, NULL, OPT_LIBVIRT_URI},
	{"kvm-debugfs", required_argument, NULL, OPT_KVM_DEBUGFS},
	{"qmp", required_argument, NULL, OPT_QMP},
	{"no-vcpu-map", no_argument, NULL, OPT_NO_VCPU_MAP},
	{"vm-name", required_argument, NULL, OPT_VM_NAME},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

static int bad_arg(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, PROG ": %s \"%s\": %s\n", opt, val, want);
	usage(stderr);
	return -1;
}

/* Returns 0, 1 when done (help, version), -1 on a bad command line. */
static int parse_args(int argc, char **argv, struct args *a)
{
	struct vp_error err;
	unsigned long v;
	bool have_port = false, no_vsock = false;
	int c;

	host_clock_opts_default(&a->clock);
	a->sync.vsock = true;
	a->sync.vsock_port = VP_SYNC_DEFAULT_VSOCK_PORT;
	while ((c = getopt_long(argc, argv, "vh", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_PRODUCER_SOCKET:
			a->producer_socket = optarg;
			break;
		case OPT_CLOCK:
			if (host_clock_parse_clock(optarg, &a->clock.clock_id,
						   &err) < 0)
				return bad_arg("--clock", optarg,
					       "want boottime or monotonic");
			break;
		case OPT_PERIOD_MS:
			if (host_clock_parse_period(optarg,
						    &a->clock.period_ms,
						    &err) < 0)
				return bad_arg("--period-ms", optarg, err.msg);
			break;
		case OPT_VSOCK_PORT:
			if (!parse_uint(optarg, 1, UINT32_MAX - 1, &v))
				return bad_arg("--sync-vsock-port", optarg,
					       "not a port number");
			a->sync.vsock_port = (uint32_t)v;
			have_port = true;
			break;
		case OPT_NO_VSOCK:
			no_vsock = true;
			break;
		case OPT_SYNC_UNIX:
			a->sync.unix_path = optarg;
			break;
		case OPT_QEMU_CHARDEV:
			if (a->n_chardevs == MAX_VMS)
				return bad_arg("--qemu-chardev", optarg,
					       "too many chardevs");
			a->chardevs[a->n_chardevs++] = optarg;
			a->sync.qemu_chardev = a->chardevs[0];
			break;
		case OPT_VM_NAME:
			if (a->n_names == MAX_VMS)
				return bad_arg("--vm-name", optarg,
					       "too many VMs");
			a->names[a->n_names++] = optarg;
			break;
		case OPT_VM_PID:
			if (!parse_uint(optarg, 1, INT_MAX, &v))
				return bad_arg("--vm-pid", optarg,
					       "not a process id");
			if (a->n_vm_pids == MAX_VMS)
				return bad_arg("--vm-pid", optarg,
					       "too many VMs");
			a->vm_pids[a->n_vm_pids++] = (int)v;
			break;
		case OPT_DOMAIN:
			if (a->n_domains == MAX_VMS)
				return bad_arg("--domain", optarg,
					       "too many VMs");
			a->domains[a->n_domains++] = optarg;
			break;
		case OPT_LIBVIRT_URI:
			a->libvirt_uri = optarg;
			break;
		case OPT_KVM_DEBUGFS:
			a->kvm_debugfs = optarg;
			break;
		case OPT_QMP:
			if (a->n_qmp == MAX_VMS)
				return bad_arg("--qmp", optarg, "too many VMs");
			a->qmp[a->n_qmp++] = optarg;
			break;
		case OPT_NO_VCPU_MAP:
			a->no_vcpu_map = true;
			break;
		case 'v':
			vp_log_verbose();
			break;
		case 'h':
			usage(stdout);
			return 1;
		case OPT_VERSION:
			printf(PROG " %s\n", VP_VERSION);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument \"%s\"\n",
			argv[optind]);
		usage(stderr);
		return -1;
	}
	if (no_vsock && have_port) {
		fprintf(stderr, PROG ": --sync-vsock-port and --no-vsock "
				"contradict each other\n");
		usage(stderr);
		return -1;
	}
	a->sync.vsock = !no_vsock;
	return 0;
}

/* --domain NAME -> --vm-pid; a domain that cannot be resolved is a
 * warning (the VM may start later; give --vm-pid then). */
static void resolve_domains(struct args *a)
{
	for (size_t i = 0; i < a->n_domains; i++) {
		struct vp_error err;
		pid_t pid;
		if (libvirt_domain_pid(a->libvirt_uri, a->domains[i], &pid,
				       &err) < 0) {
			vp_log_warn("--domain %s: %s; no kvm_tsc records for "
				    "it",
				    a->domains[i], err.msg);
			continue;
		}
		if (a->n_vm_pids == MAX_VMS)
			break;
		vp_log_info("domain %s is QEMU pid %d", a->domains[i],
			    (int)pid);
		a->vm_names[a->n_vm_pids] = a->domains[i];
		a->vm_pids[a->n_vm_pids++] = (int)pid;
	}
}

/* The VMs whose vCPU threads to map: each VM, by QMP when it has a --qmp
 * socket (paired in order), else by its thread names; then the --qmp
 * sockets left over, as VMs of their own.  Returns how many. */
static size_t vcpu_sources(const struct args *a, struct vcpu_source *out)
{
	size_t n = 0;

	if (a->no_vcpu_map)
		return 0;
	for (size_t i = 0; i < a->n_vm_pids; i++)
		out[n++] = (struct vcpu_source){
			.vmm_pid = a->vm_pids[i],
			.vm = a->vm_names[i],
			/* "" holds the place of a VM mapped by names */
			.qmp = i < a->n_qmp && a->qmp[i][0] ? a->qmp[i] : NULL,
		};
	for (size_t i = a->n_vm_pids; i < a->n_qmp; i++)
		out[n++] = (struct vcpu_source){.qmp = a->qmp[i]};
	return n;
}

/* Stops every endpoint; *total (if not NULL) sums their counters. */
static void stop_endpoints(struct sync_endpoint *ep,
			   struct sync_endpoint **more, size_t n,
			   struct sync_endpoint_stats *total)
{
	struct sync_endpoint_stats one;

	sync_endpoint_stop(ep, total);
	for (size_t i = 1; i < n; i++) {
		sync_endpoint_stop(more[i], &one);
		if (!total)
			continue;
		total->served += one.served;
		total->clients += one.clients;
		total->garbage_bytes += one.garbage_bytes;
		total->unexpected += one.unexpected;
		total->dropped_replies += one.dropped_replies;
	}
}

int main(int argc, char **argv)
{
	vp_log_init("vperfetto_host_clock", VP_LOG_WARN);
	struct args a = {0};
	struct vp_error err;

	int rc = parse_args(argc, argv, &a);
	if (rc != 0)
		return rc < 0 ? 1 : 0;
	/* --vm-name names the --vm-pid VMs in order; domains name their
	 * own (resolve_domains appends them after). */
	for (size_t i = 0; i < a.n_names && i < a.n_vm_pids; i++)
		a.vm_names[i] = a.names[i];
	resolve_domains(&a);

	/* Every thread started from here on inherits the blocked signals;
	 * this one waits for them. */
	sigset_t stop_set;
	sigemptyset(&stop_set);
	sigaddset(&stop_set, SIGINT);
	sigaddset(&stop_set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* One endpoint per chardev: the first also has vsock and the UNIX
	 * socket; each runs its own thread. */
	struct sync_endpoint *ep = NULL;
	struct sync_endpoint *more[MAX_VMS] = {NULL};
	if (sync_endpoint_start(&a.sync, &ep, &err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return 1;
	}
	for (size_t i = 1; i < a.n_chardevs; i++) {
		struct sync_endpoint_opts so = {
			.qemu_chardev = a.chardevs[i],
		};
		if (sync_endpoint_start(&so, &more[i], &err) < 0) {
			fprintf(stderr, PROG ": %s\n", err.msg);
			for (size_t k = 1; k < i; k++)
				sync_endpoint_stop(more[k], NULL);
			sync_endpoint_stop(ep, NULL);
			return 1;
		}
	}
	struct vp_init_args ia = {
		.backend = VP_BACKEND_SYSTEM,
		.producer_name = PROG,
		.producer_socket = a.producer_socket,
	};
	if (vp_init(&ia) < 0) {
		fprintf(stderr, PROG ": cannot start libvperfetto\n");
		stop_endpoints(ep, more, a.n_chardevs, NULL);
		return 1;
	}
	struct vcpu_source vsrc[2 * MAX_VMS];
	struct clock_producer_opts po = {
		.defaults = a.clock,
		.kvm_debugfs = a.kvm_debugfs,
		.vm_pids = a.vm_pids,
		.n_vm_pids = a.n_vm_pids,
		.vcpu_srcs = vsrc,
		.n_vcpu_srcs = vcpu_sources(&a, vsrc),
	};
	struct clock_producer *prod = NULL;
	if (clock_producer_new(&po, &prod, &err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		vp_shutdown();
		stop_endpoints(ep, more, a.n_chardevs, NULL);
		return 1;
	}
	vp_log_info("running: %s and the cpu counter (%s) every %u ms, %zu "
		    "VM(s)",
		    host_clock_name(a.clock.clock_id), vp_cpu_counter_name(),
		    a.clock.period_ms, a.n_vm_pids);

	int sig = 0;
	while (sigwait(&stop_set, &sig) != 0)
		;

	/* Stopping the SDK stops running sessions, which write their final
	 * snapshots. */
	struct sync_endpoint_stats es;
	struct clock_producer_stats ps;
	stop_endpoints(ep, more, a.n_chardevs, &es);
	vp_shutdown();
	clock_producer_get_stats(prod, &ps);
	clock_producer_free(prod);
	vp_log_info("%llu snapshots written in %llu session(s), %llu "
		    "kvm_tsc records, %llu vcpu_map records, %llu packets "
		    "dropped; %llu exchanges served to %llu client(s), %llu "
		    "garbage bytes skipped",
		    (unsigned long long)ps.snapshots,
		    (unsigned long long)ps.sessions,
		    (unsigned long long)ps.kvm_records,
		    (unsigned long long)ps.vcpu_maps,
		    (unsigned long long)ps.dropped,
		    (unsigned long long)es.served,
		    (unsigned long long)es.clients,
		    (unsigned long long)es.garbage_bytes);
	return 0;
}
