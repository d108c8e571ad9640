/*
 * record_main.c - vperfetto_record: traces a host and its VMs at once and
 * merges the traces (one machine per guest).
 *
 *   vperfetto_record --domain NAME [-c host.cfg] [-g guest.cfg] [--txt]
 *                    [-t 10s] -o merged.pb
 *   vperfetto_record --qemu-chardev DIR|CONTROL.sock [--qemu-sync-chardev
 *                    SYNC.sock] [--qemu-pid PID] ...
 *   vperfetto_record --guest-vsock CID ...
 *
 * Several guests: each --domain, --qemu-chardev or --guest-vsock names one
 * more; --qemu-sync-chardev, --qemu-pid and --qmp apply to the guest named
 * last (before any, to the first).  The guests' traces are OUT.guest.pb
 * for one guest, OUT.guest1.pb, OUT.guest2.pb ... for several; guest i is
 * machine i of the merged trace.
 *
 * The run:
 *   1. finds the guest: a libvirt domain's channels, vsock CID and QEMU
 *      pid (record_domain.h), or the sockets of a plain QEMU's chardevs;
 *   2. starts the host session: its own vtraced on private sockets,
 *      vtraced_probes, vperfetto_host_clock (clock snapshots, the sync
 *      endpoint on the guest's sync channel, KVM counter offsets for the
 *      QEMU pid) and the vperfetto consumer writing OUT.host.pb;
 *   3. starts the guest session over the control channel
 *      (vperfetto_guest_ctl in the guest);
 *   4. waits for -t or Ctrl-C (a second Ctrl-C aborts);
 *   5. stops the guest session, then the host's, and pulls the guest
 *      trace into OUT.guest.pb;
 *   6. merges (merge.h) into OUT and prints the sync report
 *      (OUT.report.json holds it all).
 * Failures keep what was recorded: a guest that never answers or dies
 * leaves OUT.host.pb and no OUT; nothing is ever half-written (every file
 * is written to a temporary name and renamed into place).
 *
 * Exit status: 0 ok, 1 usage, 2 the host session failed, 3 the guest
 * session failed (the host trace is kept), 4 the merge failed (both traces
 * are kept), 130 aborted.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd_config.h"
#include "ctl_proto.h"
#include "guest_ctl_client.h"
#include "merge.h"
#include "out_file.h"
#include "record_domain.h"
#include "record_proc.h"
#include "report.h"
#include "textproto.h"
#include "trace_io.h"
#include "vcpu_threads.h"
#include "vm_tracks.h"
#include "vp_version.h"
#include "vp_log.h"
#include "vp_alloc.h"

enum record_status {
	REC_OK = 0,
	REC_USAGE = 1,
	REC_HOST_FAILED = 2,
	REC_GUEST_FAILED = 3,
	REC_MERGE_FAILED = 4,
	REC_ABORTED = 130,
};

/* Used when -c / -g are not given: what a VM developer wants first. */
/* ftrace gets a buffer of its own, so a busy machine's scheduler events
 * cannot overwrite the clock sync data and track events. */
static const char default_host_config[] =
	"buffers { size_kb: 8192 fill_policy: RING_BUFFER }\n"
	"buffers { size_kb: 65536 fill_policy: RING_BUFFER }\n"
	"data_sources { config { name: \"vperfetto.clock_sync\" } }\n"
	"data_sources { config { name: \"linux.ftrace\" target_buffer: 1\n"
	"  ftrace_config {\n"
	"  ftrace_events: \"sched/sched_switch\"\n"
	"  ftrace_events: \"sched/sched_waking\"\n"
	"  ftrace_events: \"task/task_newtask\"\n"
	"  ftrace_events: \"task/task_rename\"\n"
	"  ftrace_events: \"sched/sched_process_exit\"\n"
	"  ftrace_events: \"kvm/kvm_entry\"\n"
	"  ftrace_events: \"kvm/kvm_exit\"\n"
	"} } }\n"
	"data_sources { config { name: \"linux.process_stats\"\n"
	"  process_stats_config { scan_all_processes_on_start: true } } }\n"
	"data_sources { config { name: \"linux.system_info\" } }\n";
static const char default_guest_config[] =
	"buffers { size_kb: 8192 fill_policy: RING_BUFFER }\n"
	"buffers { size_kb: 32768 fill_policy: RING_BUFFER }\n"
	"data_sources { config { name: \"track_event\"\n"
	"  track_event_config { enabled_categories: \"*\" } } }\n"
	"data_sources { config { name: \"linux.ftrace\" target_buffer: 1\n"
	"  ftrace_config {\n"
	"  ftrace_events: \"sched/sched_switch\"\n"
	"  ftrace_events: \"sched/sched_waking\"\n"
	"  ftrace_events: \"task/task_newtask\"\n"
	"  ftrace_events: \"sched/sched_process_exit\"\n"
	"  ftrace_events: \"ftrace/print\"\n"
	"} } }\n"
	"data_sources { config { name: \"linux.process_stats\"\n"
	"  process_stats_config { scan_all_processes_on_start: true } } }\n"
	"data_sources { config { name: \"linux.system_info\" } }\n";

#define REC_MAX_GUESTS 8
/* The run directory with its NUL: room for "/p.sock" after it within
 * a socket address's 108 bytes. */
#define RUN_DIR_MAX 100

/* One guest as the command line names it. */
struct target {
	const char *domain;
	const char *qemu_chardev;
	const char *qemu_sync_chardev;
	pid_t qemu_pid;
	const char *qmp;
	unsigned guest_vsock;
};

struct options {
	struct target t[REC_MAX_GUESTS];
	size_t n_targets;
	const char *libvirt_uri;
	bool no_vm_tracks;
	const char *host_cfg;
	const char *guest_cfg;
	bool txt;
	uint32_t duration_ms;
	const char *out;
	int guest_timeout_ms;
	bool keep_logs;
};

/* One guest of the run. */
struct guest {
	const struct target *t;
	struct record_guest_addr addr;
	char qmp[PATH_MAX]; /* QEMU's QMP socket; "" if none */
	char pb[PATH_MAX];  /* its trace beside OUT */
	char name[64];      /* for messages */
	struct vp_guest_ctl *ctl;
	bool started;       /* its session, by our START */
	bool stop_sent;     /* ... and our STOP to it, answered or not */
};

/* Everything a run owns, so that every exit path cleans up the same way. */
struct run {
	struct options o;
	struct guest g[REC_MAX_GUESTS];
	size_t n_guests;
	char dir[RUN_DIR_MAX];         /* sockets, configs, logs */
	char host_pb[PATH_MAX], report[PATH_MAX];
	char p_sock[PATH_MAX], c_sock[PATH_MAX];
	pid_t vtraced, probes, host_clock, consumer;
	struct guest *failed_guest; /* the one wait_recording lost */
	sigset_t sigs;
	int interrupts;
};

/* The error that ends the run (with its exit status): not a log line, it
 * prints whatever the log level.  The steps of the run are logged at the
 * info level (-v), warnings at the warn level. */
static void fail_msg(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void fail_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("vperfetto_record: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vperfetto_record (--domain NAME | --qemu-chardev PATH |"
		" --guest-vsock CID)...\n"
		"                        [-c HOST.cfg] [-g GUEST.cfg] [--txt]"
		" [-t 10s] -o MERGED.pb\n"
		"\n"
		"Records the host and its VMs at once and merges the traces"
		" onto the host's\ntime axis, one machine per guest.  Keeps"
		" MERGED.host.pb, MERGED.guest.pb\n(MERGED.guest1.pb ... for"
		" several guests) and MERGED.report.json beside the\noutput."
		"  Each --domain, --qemu-chardev or --guest-vsock names a guest;"
		"\n--qemu-sync-chardev, --qemu-pid and --qmp apply to the one"
		" named last.\n"
		"\n"
		"guest:\n"
		"  --domain NAME            a libvirt domain (its channels, vsock"
		" CID and QEMU pid)\n"
		"  --libvirt-uri URI        default qemu:///system\n"
		"  --qemu-chardev PATH      a QEMU started by hand: the directory"
		" holding\n"
		"                           control.sock and sync.sock, or the"
		" control socket\n"
		"  --qemu-sync-chardev PATH the sync channel's socket (default:"
		" sync.sock beside\n"
		"                           the control socket)\n"
		"  --qemu-pid PID           QEMU's pid, for KVM's counter offsets\n"
		"  --qmp PATH               QEMU's QMP socket, for which thread"
		" runs each vCPU\n"
		"                           (default: qmp.sock in the"
		" --qemu-chardev directory)\n"
		"  --guest-vsock CID        reach the guest over vsock (control"
		" port %u)\n"
		"  --guest-timeout SECONDS  how long the guest may take to answer"
		" (default 60)\n"
		"session:\n"
		"  -c, --host-config FILE   host TraceConfig (default: clock sync,"
		" sched, processes)\n"
		"  -g, --guest-config FILE  guest TraceConfig (default: track"
		" events, sched, processes)\n"
		"  --txt                    the configs are in text format\n"
		"  -t, --time DURATION      how long to record (default 10s;"
		" Ctrl-C stops early)\n"
		"  -o, --out FILE           the merged trace\n"
		"  --no-vm-tracks           no tracks of the vCPUs' host state in"
		" the merged trace\n"
		"  --keep-logs              keep the run directory's logs\n"
		"  -v, --verbose            say each step of the run and the"
		" programs started\n"
		"  -h, --help\n"
		"  --version\n"
		"\n"
		"exit status: 0 ok, 1 usage, 2 host session failed, 3 guest"
		" session failed\n(host trace kept), 4 merge failed (both traces"
		" kept), 130 aborted.\n",
		RECORD_CONTROL_VSOCK_PORT);
}

static int usage_error(const char *msg)
{
	fprintf(stderr, "vperfetto_record: %s\nTry 'vperfetto_record "
		"--help'.\n", msg);
	return REC_USAGE;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *v)
{
	char *e;
	errno = 0;
	unsigned long x = strtoul(s, &e, 10);
	if (errno || e == s || *e || x > max)
		return -1;
	*v = x;
	return 0;
}

enum {
	OPT_DOMAIN = 256,
	OPT_URI,
	OPT_CHARDEV,
	OPT_SYNC_CHARDEV,
	OPT_QEMU_PID,
	OPT_VSOCK,
	OPT_TXT,
	OPT_GUEST_TIMEOUT,
	OPT_KEEP_LOGS,
	OPT_QMP,
	OPT_NO_VM_TRACKS,
	OPT_VERSION,
};

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"domain", required_argument, NULL, OPT_DOMAIN},
		{"libvirt-uri", required_argument, NULL, OPT_URI},
		{"qemu-chardev", required_argument, NULL, OPT_CHARDEV},
		{"qemu-sync-chardev", required_argument, NULL, OPT_SYNC_CHARDEV},
		{"qemu-pid", required_argument, NULL, OPT_QEMU_PID},
		{"guest-vsock", required_argument, NULL, OPT_VSOCK},
		{"guest-timeout", required_argument, NULL, OPT_GUEST_TIMEOUT},
		{"host-config", required_argument, NULL, 'c'},
		{"guest-config", required_argument, NULL, 'g'},
		{"txt", no_argument, NULL, OPT_TXT},
		{"time", required_argument, NULL, 't'},
		{"out", required_argument, NULL, 'o'},
		{"keep-logs", no_argument, NULL, OPT_KEEP_LOGS},
		{"qmp", required_argument, NULL, OPT_QMP},
		{"no-vm-tracks", no_argument, NULL, OPT_NO_VM_TRACKS},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{0},
	};
	struct vp_error err = {{0}};
	struct target pending = {0}; /* modifiers before any guest */
	struct target *cur = &pending;
	unsigned long v;
	int c;

	o->duration_ms = 10000;
	o->guest_timeout_ms = 60000;
	while ((c = getopt_long(argc, argv, "c:g:t:o:vh", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case OPT_DOMAIN:
		case OPT_CHARDEV:
		case OPT_VSOCK:
			if (o->n_targets == REC_MAX_GUESTS)
				return usage_error("too many guests");
			cur = &o->t[o->n_targets];
			/* the first guest takes what came before it */
			if (o->n_targets++ == 0)
				*cur = pending;
			if (c == OPT_DOMAIN) {
				cur->domain = optarg;
			} else if (c == OPT_CHARDEV) {
				cur->qemu_chardev = optarg;
			} else {
				if (parse_uint(optarg, 0xfffffffful, &v) < 0 ||
				    v < 3)
					return usage_error("--guest-vsock: not a "
							   "guest CID (3 or "
							   "more)");
				cur->guest_vsock = (unsigned)v;
			}
			break;
		case OPT_URI: o->libvirt_uri = optarg; break;
		case OPT_SYNC_CHARDEV: cur->qemu_sync_chardev = optarg; break;
		case OPT_QEMU_PID:
			if (parse_uint(optarg, INT_MAX, &v) < 0 || v == 0)
				return usage_error("--qemu-pid: not a pid");
			cur->qemu_pid = (pid_t)v;
			break;
		case OPT_GUEST_TIMEOUT:
			if (parse_uint(optarg, 3600, &v) < 0 || v == 0)
				return usage_error("--guest-timeout: 1 to 3600 "
						   "seconds");
			o->guest_timeout_ms = (int)v * 1000;
			break;
		case 'c': o->host_cfg = optarg; break;
		case 'g': o->guest_cfg = optarg; break;
		case OPT_TXT: o->txt = true; break;
		case 't':
			if (vp_cmd_parse_duration(optarg, &o->duration_ms,
						  &err) < 0)
				return usage_error(err.msg);
			if (o->duration_ms == 0)
				return usage_error("-t: the duration must be "
						   "more than 0");
			break;
		case 'o': o->out = optarg; break;
		case OPT_KEEP_LOGS: o->keep_logs = true; break;
		case OPT_QMP: cur->qmp = optarg; break;
		case OPT_NO_VM_TRACKS: o->no_vm_tracks = true; break;
		case 'v':
			vp_log_verbose();
			break;
		case 'h': usage(stdout); exit(0);
		case OPT_VERSION:
			printf("vperfetto_record %s\n", VP_VERSION);
			exit(0);
		default: return usage_error("bad option");
		}
	}
	if (optind != argc)
		return usage_error("unexpected arguments");
	if (!o->out)
		return usage_error("no output file (-o MERGED.pb)");
	if (!o->n_targets)
		return usage_error("name the guest: --domain, --qemu-chardev "
				   "or --guest-vsock");
	bool any_domain = false;
	for (size_t i = 0; i < o->n_targets; i++) {
		const struct target *t = &o->t[i];
		any_domain |= t->domain != NULL;
		if (t->qemu_sync_chardev && !t->qemu_chardev)
			return usage_error("--qemu-sync-chardev goes with "
					   "--qemu-chardev");
		if (t->qmp && t->guest_vsock)
			return usage_error("--qmp goes with --qemu-chardev or "
					   "--domain");
	}
	if (o->libvirt_uri && !any_domain)
		return usage_error("--libvirt-uri goes with --domain");
	return REC_OK;
}

/* OUT minus a ".pb"/".pftrace" suffix, plus suffix, into dst. */
static int beside(char *dst, const char *out, const char *suffix)
{
	size_t n = strlen(out);
	static const char *const exts[] = {".pb", ".pftrace",
					   ".perfetto-trace"};
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t e = strlen(exts[i]);
		if (n > e && strcmp(out + n - e, exts[i]) == 0) {
			n -= e;
			break;
		}
	}
	int w = snprintf(dst, PATH_MAX, "%.*s%s", (int)n, out, suffix);
	return w > 0 && w < PATH_MAX ? 0 : -1;
}

/* -------------------------------------------------------------- guest */

static int find_guest(struct run *r, struct guest *g, struct vp_error *err)
{
	const struct target *o = g->t;
	struct stat st;

	if (o->domain)
		return record_domain_resolve(r->o.libvirt_uri, o->domain,
					     &g->addr, err);
	memset(&g->addr, 0, sizeof(g->addr));
	g->addr.qemu_pid = o->qemu_pid;
	if (o->guest_vsock) {
		g->addr.vsock_cid = o->guest_vsock;
		return 0;
	}
	const char *p = o->qemu_chardev;
	if (!p) /* (the options guarantee one; said for the compiler too) */
		return vp_errorf(err, "no address given for the guest");
	if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(g->addr.control, PATH_MAX, "%s/control.sock", p);
		snprintf(g->addr.sync, PATH_MAX, "%s/sync.sock", p);
	} else {
		snprintf(g->addr.control, PATH_MAX, "%s", p);
		const char *slash = strrchr(p, '/');
		int dl = slash ? (int)(slash - p) : 1;
		snprintf(g->addr.sync, PATH_MAX, "%.*s/sync.sock", dl,
			 slash ? p : ".");
	}
	if (o->qemu_sync_chardev)
		snprintf(g->addr.sync, PATH_MAX, "%s", o->qemu_sync_chardev);
	/* run_qemu.sh's layout: the QMP socket beside the chardevs. */
	if (o->qmp) {
		snprintf(g->qmp, PATH_MAX, "%s", o->qmp);
	} else {
		const char *slash = strrchr(g->addr.control, '/');
		int dl = slash ? (int)(slash - g->addr.control) : 0;
		snprintf(g->qmp, PATH_MAX, "%.*s/qmp.sock", dl,
			 g->addr.control);
		if (!dl || stat(g->qmp, &st) != 0 || !S_ISSOCK(st.st_mode))
			g->qmp[0] = 0;
	}
	/* Without a pid, QEMU's: the process of a vCPU thread QMP names. */
	if (!g->addr.qemu_pid && g->qmp[0]) {
		struct vcpu_thread vt[4];
		struct vp_error qerr;
		if (vcpu_threads_from_qmp(g->qmp, 2000, vt, 4, &qerr) > 0) {
			int pid = vcpu_thread_tgid("/proc", vt[0].tid);
			if (pid > 0)
				g->addr.qemu_pid = pid;
		}
	}
	if (stat(g->addr.control, &st) != 0 || !S_ISSOCK(st.st_mode))
		return vp_errorf(err, "%s: not a socket (QEMU's control "
				 "chardev: -chardev socket,path=...,server=on)",
				 g->addr.control);
	if (stat(g->addr.sync, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		vp_log_warn("%s is not a socket: no sync exchanges over "
			    "virtio-serial",
			    g->addr.sync);
		g->addr.sync[0] = 0;
	}
	return 0;
}

static void control_addr(const struct guest *g, char *buf, size_t len)
{
	if (g->addr.control[0])
		snprintf(buf, len, "%s", g->addr.control);
	else
		snprintf(buf, len, "vsock://%u:%u", g->addr.vsock_cid,
			 RECORD_CONTROL_VSOCK_PORT);
}

/* --------------------------------------------------------- configs */

/* True if the kvm module's trace events exist (KVM can run guests). */
static bool have_kvm_events(void)
{
	return access("/sys/kernel/tracing/events/kvm/kvm_entry", F_OK) == 0 ||
	       access("/sys/kernel/debug/tracing/events/kvm/kvm_entry",
		      F_OK) == 0;
}

/* The host's scheduler events are what the vcpu tables are made of: a
 * host config that records ftrace records sched_switch and sched_waking
 * too, and kvm_entry / kvm_exit where KVM runs (a config without ftrace
 * is left alone). */
static void ensure_sched_events(vp_trace_config *tc)
{
	static const char *const need[] = {"sched/sched_switch",
					   "sched/sched_waking",
					   "kvm/kvm_entry", "kvm/kvm_exit"};
	size_t n_need = have_kvm_events() ? 4 : 2;

	for (size_t i = 0; i < tc->n_data_sources; i++) {
		Perfetto__Protos__DataSourceConfig *c =
			tc->data_sources[i]->config;
		if (!c || !c->name || strcmp(c->name, "linux.ftrace") ||
		    !c->ftrace_config)
			continue;
		Perfetto__Protos__FtraceConfig *f = c->ftrace_config;
		for (size_t k = 0; k < n_need; k++) {
			/* the group's wildcard covers it too */
			size_t gl = (size_t)(strchr(need[k], '/') - need[k]);
			bool have = false;
			for (size_t j = 0; j < f->n_ftrace_events; j++) {
				const char *e = f->ftrace_events[j];
				have |= !strcmp(e, need[k]) ||
					(!strncmp(e, need[k], gl + 1) &&
					 !strcmp(e + gl + 1, "*"));
			}
			if (have)
				continue;
			f->ftrace_events = vp_xreallocarray(
				f->ftrace_events, f->n_ftrace_events + 1,
				sizeof(*f->ftrace_events));
			f->ftrace_events[f->n_ftrace_events++] =
				vp_xstrdup(need[k]);
		}
	}
}

/* Loads a config (or the default text), makes sure it records what the
 * merge needs, caps its duration, and serializes it into *bin. */
static int prepare_config(const char *file, bool txt, const char *deflt,
			  bool host, uint32_t duration_ms, uint8_t **bin,
			  size_t *bin_len, struct vp_error *err)
{
	vp_trace_config *tc = NULL;
	int rc;

	if (file) {
		rc = vp_cmd_load_config(file, txt, &tc, err);
	} else {
		rc = vp_textproto_parse(&perfetto__protos__trace_config__descriptor,
					deflt, strlen(deflt),
					host ? "default host config"
					     : "default guest config",
					(ProtobufCMessage **)&tc, err);
	}
	if (rc < 0)
		return -1;
	/* The merge needs the host's clock snapshots and the guest's
	 * cros/guest_clock_sync events. */
	if (host) {
		rc = vp_cmd_ensure_data_source(tc, "vperfetto.clock_sync", err);
		if (rc == 0)
			ensure_sched_events(tc);
	} else
		rc = vp_cmd_ensure_category(tc, "cros", err);
	/* A cap, in case we die and cannot stop the sessions: -t plus a
	 * minute.  We stop them ourselves before that. */
	if (rc == 0)
		rc = vp_cmd_override(tc, true, duration_ms + 60000, false, 0,
				     err);
	if (rc == 0)
		rc = vp_cmd_pack_config(tc, bin, bin_len, err);
	perfetto__protos__trace_config__free_unpacked(tc, NULL);
	return rc;
}

static int write_file(const char *path, const uint8_t *buf, size_t len,
		      struct vp_error *err)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return vp_errorf(err, "%s: %s", path, strerror(errno));
	bool ok = fwrite(buf, 1, len, f) == len;
	ok = (fclose(f) == 0) && ok;
	return ok ? 0 : vp_errorf(err, "%s: write failed", path);
}

/* ---------------------------------------------------- host session */

static void log_path(const struct run *r, const char *name, char *buf)
{
	snprintf(buf, PATH_MAX, "%s/%s.log", r->dir, name);
}

static pid_t start_program(struct run *r, const char *name,
			   const char *subdir, char **args, size_t n_args,
			   struct vp_error *err)
{
	char prog[PATH_MAX], log[PATH_MAX];
	char *argv[16 + 10 * REC_MAX_GUESTS];

	if (record_find_program(name, subdir, prog, sizeof(prog), err) < 0)
		return -1;
	if (n_args + 2 > sizeof(argv) / sizeof(argv[0])) {
		vp_errorf(err, "too many arguments for %s", name);
		return -1;
	}
	argv[0] = prog;
	for (size_t i = 0; i < n_args; i++)
		argv[i + 1] = args[i];
	argv[n_args + 1] = NULL;
	log_path(r, name, log);
	if (vp_log_enabled(VP_LOG_INFO)) {
		char line[900];
		size_t len = 0;
		for (size_t i = 0; argv[i] && len < sizeof(line); i++)
			len += (size_t)snprintf(line + len, sizeof(line) - len,
						"%s%s", i ? " " : "", argv[i]);
		vp_log_info("starting %s", line);
	}
	return record_spawn(argv, log, err);
}

static int host_failed(struct run *r, const char *name, struct vp_error *err)
{
	char log[PATH_MAX], tail[256];
	log_path(r, name, log);
	record_log_tail(log, tail, sizeof(tail));
	return vp_errorf(err, "%s failed%s%s (log: %s)", name,
			 tail[0] ? ": " : "", tail, log);
}

static int start_host_producers(struct run *r, struct vp_error *err)
{
	char *vt[] = {"--foreground", "--producer-socket", r->p_sock,
		      "--consumer-socket", r->c_sock};
	r->vtraced = start_program(r, "vtraced", "service", vt, 5, err);
	if (r->vtraced < 0)
		return -1;
	if (record_wait_socket(r->c_sock, 10000) < 0 ||
	    record_wait_socket(r->p_sock, 10000) < 0)
		return host_failed(r, "vtraced", err);

	char *pr[] = {"--producer-socket", r->p_sock, "-v"};
	r->probes = start_program(r, "vtraced_probes", "probes", pr, 3,
				  err);
	if (r->probes < 0)
		return -1;

	/* Per guest: its sync chardev, its VM (by domain name, so its
	 * vcpu_map records carry the name, or by pid) and its QMP socket;
	 * the n-th --qmp goes with the n-th VM, so a guest without a VM
	 * gives no --qmp either. */
	char *hc[8 + 8 * REC_MAX_GUESTS];
	char pid_args[REC_MAX_GUESTS][32];
	bool any_vsock = false;
	size_t n = 0;
	hc[n++] = "--producer-socket";
	hc[n++] = r->p_sock;
	hc[n++] = "-v";
	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		any_vsock |= g->addr.vsock_cid != 0;
		if (g->addr.sync[0]) {
			hc[n++] = "--qemu-chardev";
			hc[n++] = g->addr.sync;
		}
	}
	if (r->o.libvirt_uri) {
		hc[n++] = "--libvirt-uri";
		hc[n++] = (char *)r->o.libvirt_uri;
	}
	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		if (g->addr.qemu_pid <= 0)
			continue;
		snprintf(pid_args[i], sizeof(pid_args[i]), "%d",
			 (int)g->addr.qemu_pid);
		hc[n++] = "--vm-pid";
		hc[n++] = pid_args[i];
	}
	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		if (g->addr.qemu_pid <= 0)
			continue;
		hc[n++] = "--qmp";
		/* an empty path: this VM's threads by their names */
		hc[n++] = g->qmp[0] ? g->qmp : "";
	}
	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		if (g->addr.qemu_pid <= 0)
			continue;
		hc[n++] = "--vm-name";
		hc[n++] = g->t->domain ? (char *)g->t->domain : g->name;
	}
	if (!any_vsock)
		hc[n++] = "--no-vsock";
	r->host_clock = start_program(r, "vperfetto_host_clock", "host", hc, n,
				      err);
	return r->host_clock < 0 ? -1 : 0;
}

static int start_host_consumer(struct run *r, const char *cfg_path,
			       struct vp_error *err)
{
	char *args[] = {"--consumer-socket", r->c_sock, "-c", (char *)cfg_path,
			"-o", r->host_pb};
	r->consumer = start_program(r, "vperfetto", "consumer", args, 6,
				    err);
	if (r->consumer < 0)
		return -1;
	/* Give the session a moment to start: a consumer that fails (a bad
	 * config, no service) exits at once. */
	for (int i = 0; i < 25; i++) {
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
		if (!record_alive(r->consumer, NULL)) {
			r->consumer = 0;
			return host_failed(r, "vperfetto", err);
		}
	}
	return 0;
}

/* Stops the host consumer (it flushes and writes OUT.host.pb).  0 when
 * the trace was written. */
static int stop_host_consumer(struct run *r, struct vp_error *err)
{
	int st = 0;
	if (r->consumer <= 0)
		return vp_errorf(err, "the host consumer is not running");
	int k = record_stop(r->consumer, SIGINT, 60000, &st);
	r->consumer = 0;
	if (k != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return host_failed(r, "vperfetto", err);
	return 0;
}

static void stop_host_producers(struct run *r)
{
	pid_t *ps[] = {&r->host_clock, &r->probes, &r->vtraced};
	for (size_t i = 0; i < 3; i++) {
		if (*ps[i] > 0)
			record_stop(*ps[i], SIGTERM, 10000, NULL);
		*ps[i] = 0;
	}
}

/* ------------------------------------------------------------- waiting */

/* Waits up to ms, returning early on SIGINT/SIGTERM (counted), when the
 * host consumer exits or when the guest stops answering (it is pinged
 * every 2 s).  Returns 1 on a signal, 0 at the end, -1 if the host
 * consumer died, -2 if the guest failed (err says how). */
static int wait_recording(struct run *r, uint32_t ms, struct vp_error *err)
{
	uint64_t left = ms, since_ping = 0;
	while (left > 0) {
		uint32_t step = left > 200 ? 200 : (uint32_t)left;
		struct timespec ts = {step / 1000, (long)(step % 1000) * 1000000L};
		int sig = sigtimedwait(&r->sigs, NULL, &ts);
		if (sig > 0) {
			r->interrupts++;
			return 1;
		}
		if (r->consumer > 0 && !record_alive(r->consumer, NULL)) {
			r->consumer = 0;
			return -1;
		}
		left -= step;
		since_ping += step;
		if (since_ping >= 2000 && left > 0) {
			since_ping = 0;
			for (size_t i = 0; i < r->n_guests; i++)
				if (vp_guest_ctl_ping(r->g[i].ctl, 10000, NULL,
						      err) < 0) {
					r->failed_guest = &r->g[i];
					return -2;
				}
		}
	}
	return 0;
}

/* True if a second Ctrl-C came (the user wants out now). */
static bool aborted(struct run *r)
{
	struct timespec zero = {0, 0};
	while (sigtimedwait(&r->sigs, NULL, &zero) > 0)
		r->interrupts++;
	return r->interrupts >= 2;
}

/* ------------------------------------------------------------- merge */

static int merge_traces(struct run *r, struct vp_error *err)
{
	struct merge_opts mo;
	struct merge_result res;
	struct vp_out *outs[2] = {NULL, NULL}; /* merged trace, report */

	memset(&mo, 0, sizeof(mo));
	mo.host = r->host_pb;
	for (size_t i = 0; i < r->n_guests; i++)
		mo.guests[i] = r->g[i].pb;
	mo.n_guests = r->n_guests;
	mo.out = r->o.out;
	mo.out_pending = &outs[0];
	mo.threads = merge_cpus() >= 2 ? 2 : 1;
	/* --guest-vm-pid is all or nothing: the kvm_tsc records and the
	 * vCPU tracks of guest i are those of the i-th pid. */
	bool all_pids = true;
	for (size_t i = 0; i < r->n_guests; i++)
		all_pids &= r->g[i].addr.qemu_pid > 0;
	for (size_t i = 0; all_pids && i < r->n_guests; i++)
		mo.vm_pid[i] = r->g[i].addr.qemu_pid;
	mo.n_vm_pid = all_pids ? r->n_guests : 0;
	if (!r->o.no_vm_tracks)
		mo.extra = vm_tracks_write;
	if (vp_out_open(&outs[1], r->report, 0, err) < 0)
		return -1;
	int st = merge_run(&mo, &res, err);
	if (st != MERGE_OK) {
		vp_out_abort(outs[1]);
		merge_result_free(&res);
		return -1;
	}
	report_summary(stderr, &mo, &res);
	int rc = report_write_json(outs[1], &mo, &res, err);
	merge_result_free(&res);
	if (rc == 0)
		rc = vp_out_commit_all(outs, 2, err);
	vp_out_abort(outs[0]);
	vp_out_abort(outs[1]);
	return rc;
}

/* --------------------------------------------------------------- run */

/* Connects to each guest's control endpoint and starts its session. */
static int start_guests(struct run *r, const uint8_t *cfg, size_t len,
			struct vp_error *err)
{
	char addr[PATH_MAX + 32];

	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		struct vp_guest_info info;
		control_addr(g, addr, sizeof(addr));
		if (vp_guest_ctl_connect(addr, r->o.guest_timeout_ms, &g->ctl,
					 err) < 0 ||
		    vp_guest_ctl_hello(g->ctl, r->o.guest_timeout_ms, &info,
				       err) < 0 ||
		    vp_guest_ctl_start(g->ctl, cfg, len, "vperfetto_record",
				       r->o.guest_timeout_ms, NULL, err) < 0) {
			r->failed_guest = g;
			return -1;
		}
		g->started = true;
		vp_log_info("%s: session started on %s (%s)", g->name,
			    info.machine, info.uname);
	}
	return 0;
}

/* After a STOP that had no answer: whether the guest still answers a
 * PING, added to err, so that a guest that hung (or lost its vperfetto_guest_ctl) is
 * told from a session that would not stop. */
static void probe_after_stop(struct vp_guest_ctl *c, struct vp_error *err)
{
	struct vp_guest_status st;
	struct vp_error e;
	size_t n = strlen(err->msg);

	st.state = UINT32_MAX; /* left so when nothing answers */
	vp_guest_ctl_ping(c, 5000, &st, &e);
	if (st.state == UINT32_MAX)
		snprintf(err->msg + n, sizeof(err->msg) - n,
			 "; it answers no PING either (5 s): the guest, or "
			 "vperfetto_guest_ctl in it, has stopped running");
	else
		snprintf(err->msg + n, sizeof(err->msg) - n,
			 "; it still answers PING (session \"%.100s\" %s%s%.200s)",
			 st.session, vp_ctl_state_name(st.state),
			 st.message[0] ? ": " : "", st.message);
}

/* A guest's failure, named when there are several. */
static void say_guest_failed(const struct run *r, const struct vp_error *err)
{
	if (r->n_guests > 1 && r->failed_guest)
		fail_msg("guest session: %s: %s", r->failed_guest->name,
			 err->msg);
	else
		fail_msg("guest session: %s", err->msg);
}

/* A run that failed before it stopped every guest (another guest or the
 * host failed, a second Ctrl-C): each session it started still runs, and
 * would refuse the next START until its duration (capped at -t + 60 s)
 * ends it.  A STOP to each, not waited for long; a guest that does not
 * answer is left as it is. */
static void stop_left_sessions(struct run *r)
{
	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		struct vp_error e;
		if (!g->ctl || !g->started || g->stop_sent)
			continue;
		g->stop_sent = true;
		if (vp_guest_ctl_stop(g->ctl, aborted(r) ? 1000 : 5000, NULL,
				      &e) == 0)
			vp_log_info("%s: its session stopped (the run failed)",
				    g->name);
		else
			vp_log_info("%s: a STOP after the failure: %s",
				    g->name, e.msg);
	}
}

static int record(struct run *r)
{
	struct vp_error err = {{0}};
	uint8_t *host_cfg = NULL, *guest_cfg = NULL;
	size_t host_len = 0, guest_len = 0;
	char path[PATH_MAX], addr[PATH_MAX + 32];
	int status = REC_OK;

	if (prepare_config(r->o.host_cfg, r->o.txt, default_host_config, true,
			   r->o.duration_ms, &host_cfg, &host_len, &err) < 0 ||
	    prepare_config(r->o.guest_cfg, r->o.txt, default_guest_config,
			   false, r->o.duration_ms, &guest_cfg, &guest_len,
			   &err) < 0) {
		fail_msg("%s", err.msg);
		status = REC_USAGE;
		goto out;
	}
	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		if (find_guest(r, g, &err) < 0) {
			r->failed_guest = g;
			say_guest_failed(r, &err);
			status = REC_GUEST_FAILED;
			goto out;
		}
		control_addr(g, addr, sizeof(addr));
		vp_log_info("%s: control %s, sync %s%s", g->name, addr,
			    g->addr.sync[0] ? g->addr.sync
			    : (g->addr.vsock_cid ? "over vsock" : "none"),
			    g->addr.qemu_pid > 0
				    ? ""
				    : ", QEMU pid unknown (no kvm_tsc)");
	}

	snprintf(path, sizeof(path), "%s/host.cfg.pb", r->dir);
	if (write_file(path, host_cfg, host_len, &err) < 0 ||
	    start_host_producers(r, &err) < 0 ||
	    start_host_consumer(r, path, &err) < 0) {
		fail_msg("host session: %s", err.msg);
		status = REC_HOST_FAILED;
		goto out;
	}
	vp_log_info("host session recording into %s", r->host_pb);

	if (start_guests(r, guest_cfg, guest_len, &err) < 0) {
		say_guest_failed(r, &err);
		status = REC_GUEST_FAILED;
		goto stop_host;
	}
	vp_log_info("recording for %u ms (Ctrl-C stops early)",
		    r->o.duration_ms);

	int w = wait_recording(r, r->o.duration_ms, &err);
	if (w == -1) {
		fail_msg("the host consumer stopped on its own");
		status = REC_HOST_FAILED;
		goto stop_host;
	} else if (w == -2) {
		say_guest_failed(r, &err);
		status = REC_GUEST_FAILED;
		goto stop_host;
	} else if (w > 0) {
		vp_log_info("stopping (Ctrl-C again aborts)");
	}
	if (aborted(r)) {
		status = REC_ABORTED;
		goto stop_host;
	}

	for (size_t i = 0; i < r->n_guests; i++) {
		uint64_t guest_size = 0;
		r->g[i].stop_sent = true;
		if (vp_guest_ctl_stop(r->g[i].ctl, 60000, &guest_size,
				      &err) < 0) {
			r->failed_guest = &r->g[i];
			if (vp_guest_ctl_timed_out(r->g[i].ctl))
				probe_after_stop(r->g[i].ctl, &err);
			say_guest_failed(r, &err);
			status = REC_GUEST_FAILED;
		}
	}

stop_host:
	if (r->consumer > 0) {
		if (stop_host_consumer(r, &err) < 0) {
			fail_msg("host session: %s", err.msg);
			status = REC_HOST_FAILED;
		} else {
			vp_log_info("host trace: %s", r->host_pb);
		}
	}
	stop_host_producers(r);
	if (status != REC_OK || aborted(r)) {
		if (aborted(r))
			status = REC_ABORTED;
		goto out;
	}

	/* From here on nothing is left to stop cleanly: a signal removes the
	 * file being pulled or merged and ends the run. */
	vp_out_signals(false);
	signal(SIGPIPE, SIG_IGN); /* a closed socket is an error, not an end */
	sigprocmask(SIG_UNBLOCK, &r->sigs, NULL);
	for (size_t i = 0; i < r->n_guests; i++) {
		struct guest *g = &r->g[i];
		if (vp_guest_ctl_pull(g->ctl, g->pb, 0, 60000, NULL, NULL, NULL,
				      &err) < 0) {
			fail_msg("pulling the trace of %s: %s", g->name,
				 err.msg);
			status = REC_GUEST_FAILED;
			goto out;
		}
		vp_log_info("%s trace: %s", g->name, g->pb);
	}

	if (merge_traces(r, &err) < 0) {
		fail_msg("merge: %s", err.msg);
		status = REC_MERGE_FAILED;
		goto out;
	}
	vp_log_info("merged trace: %s (sync report: %s)", r->o.out,
		    r->report);

out:
	stop_left_sessions(r);
	for (size_t i = 0; i < r->n_guests; i++) {
		if (r->g[i].ctl)
			vp_guest_ctl_close(r->g[i].ctl);
		r->g[i].ctl = NULL;
	}
	if (r->consumer > 0)
		record_stop(r->consumer, SIGINT, 30000, NULL);
	stop_host_producers(r);
	free(host_cfg);
	free(guest_cfg);
	return status;
}

/* The run directory's mkdtemp template: under $TMPDIR when it is set
 * and short enough for the sockets inside (sun_path holds 108 bytes
 * with its NUL), else under /tmp. */
static void make_run_dir_template(char dir[RUN_DIR_MAX])
{
	static const char leaf[] = "/vperfetto_record.XXXXXX";
	const char *tmp = getenv("TMPDIR");
	size_t n = tmp ? strlen(tmp) : 0;

	while (n > 1 && tmp[n - 1] == '/')
		n--;
	if (!tmp || !n || tmp[0] != '/' || n > RUN_DIR_MAX - sizeof(leaf)) {
		tmp = "/tmp";
		n = 4;
	}
	snprintf(dir, RUN_DIR_MAX, "%.*s%s", (int)n, tmp, leaf);
}

static void remove_run_dir(const struct run *r)
{
	static const char *const names[] = {
		"host.cfg.pb", "vtraced.log", "vtraced_probes.log",
		"vperfetto_host_clock.log", "vperfetto.log", "p.sock",
		"c.sock"};
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", r->dir, names[i]);
		unlink(p);
	}
	if (rmdir(r->dir) != 0)
		vp_log_warn("left %s: %s", r->dir, strerror(errno));
}

int main(int argc, char **argv)
{
	vp_log_init("vperfetto_record", VP_LOG_WARN);
	static struct run r;
	int st = parse_args(argc, argv, &r.o);
	if (st != REC_OK)
		return st;
	if (beside(r.host_pb, r.o.out, ".host.pb") < 0 ||
	    beside(r.report, r.o.out, ".report.json") < 0)
		return usage_error("-o: path too long");
	r.n_guests = r.o.n_targets;
	for (size_t i = 0; i < r.n_guests; i++) {
		struct guest *g = &r.g[i];
		char suffix[32];
		g->t = &r.o.t[i];
		if (r.n_guests == 1) {
			snprintf(suffix, sizeof(suffix), ".guest.pb");
			snprintf(g->name, sizeof(g->name), "guest");
		} else {
			snprintf(suffix, sizeof(suffix), ".guest%zu.pb", i + 1);
			snprintf(g->name, sizeof(g->name), "guest %zu", i + 1);
		}
		if (beside(g->pb, r.o.out, suffix) < 0)
			return usage_error("-o: path too long");
	}
	/* No output may be one of the configs it reads, nor another
	 * output. */
	{
		const char *inputs[] = {r.o.host_cfg, r.o.guest_cfg};
		const char *outs[3 + REC_MAX_GUESTS] = {r.o.out, r.host_pb,
							r.report};
		const char *what[3 + REC_MAX_GUESTS] = {
			"-o", "the host trace", "the report"};
		size_t n = 3;
		for (size_t i = 0; i < r.n_guests; i++) {
			outs[n] = r.g[i].pb;
			what[n++] = "a guest trace";
		}
		struct vp_error err;
		for (size_t i = 0; i < n; i++) {
			int bad = vp_out_check_inputs(what[i], outs[i], inputs,
						      2, &err);
			for (size_t k = i + 1; k < n && !bad; k++)
				bad = vp_out_check_distinct(what[i], outs[i],
							    what[k], outs[k],
							    &err);
			if (bad) {
				fail_msg("%s", err.msg);
				return REC_USAGE;
			}
		}
	}

	/* Signals are taken synchronously (sigtimedwait); children get the
	 * default mask back (record_spawn). */
	sigemptyset(&r.sigs);
	sigaddset(&r.sigs, SIGINT);
	sigaddset(&r.sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &r.sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	make_run_dir_template(r.dir);
	if (!mkdtemp(r.dir)) {
		perror("vperfetto_record: mkdtemp");
		return REC_HOST_FAILED;
	}
	snprintf(r.p_sock, sizeof(r.p_sock), "%s/p.sock", r.dir);
	snprintf(r.c_sock, sizeof(r.c_sock), "%s/c.sock", r.dir);

	st = record(&r);
	if (st == REC_OK && !r.o.keep_logs)
		remove_run_dir(&r);
	else /* part of the final message, or what --keep-logs asked */
		fprintf(stderr, "vperfetto_record: logs in %s\n", r.dir);
	return st;
}
