/*
 * probes_main.c - vtraced_probes: connects to the tracing service as a
 * producer and offers linux.ftrace, linux.process_stats, linux.sys_stats
 * and linux.system_info, like Perfetto's traced_probes.
 *
 *   vtraced_probes [--producer-socket ADDR] [--tracefs DIR] [-v]
 *
 * The socket defaults to PERFETTO_PRODUCER_SOCK_NAME or Perfetto's
 * default.  Runs until SIGINT or SIGTERM, then stops its data sources
 * (leaving tracefs as it found it) and exits 0.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes.h"
#include "vp_version.h"
#include "vperfetto/vperfetto.h"
#include "vp_log.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: vtraced_probes [--producer-socket ADDR] "
		   "[--tracefs DIR] [-v] [--version]\n");
}

int main(int argc, char **argv)
{
	vp_log_init("vtraced_probes", VP_LOG_WARN);
	static const struct option longopts[] = {
		{"producer-socket", required_argument, NULL, 's'},
		{"tracefs", required_argument, NULL, 't'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	struct probes_options opt = {0};
	const char *sock = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "s:t:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 't': opt.tracefs_dir = optarg; break;
		case 'v':
			vp_log_verbose();
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("vtraced_probes %s\n", VP_VERSION); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 1;
	}

	/* Signals are taken synchronously below; block them before the SDK
	 * starts its threads so they inherit the mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	struct vp_init_args a = {
		.backend = VP_BACKEND_SYSTEM,
		.producer_name = "vtraced_probes",
		.producer_socket = sock,
	};
	if (vp_init(&a) != 0)
		return 1;
	if (ftrace_probe_register(&opt) != 0 ||
	    process_probe_register(&opt) != 0 ||
	    sys_stats_probe_register(&opt) != 0 ||
	    system_info_probe_register(&opt) != 0) {
		vp_shutdown();
		return 1;
	}
	vp_log_info("serving %s\n",
			sock ? sock : "the default producer socket");
	int sig = 0;
	sigwait(&set, &sig);
	vp_log_info("%s, stopping\n", strsignal(sig));
	vp_shutdown();
	return 0;
}
