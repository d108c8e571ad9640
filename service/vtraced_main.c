/*
 * vtraced_main.c - the vtraced command: Perfetto's tracing service.
 *
 *   vtraced [--foreground|--background] [--producer-socket A[,B...]]
 *           [--consumer-socket A[,B...]] [--remote-producer ADDR ...]
 *           [--pidfile F] [--init-timeout-ms N] [--max-conns-per-uid N]
 *           [--max-conns N] [-v]
 *
 * Sockets default to PERFETTO_PRODUCER_SOCK_NAME / PERFETTO_CONSUMER_SOCK_NAME
 * or traced's paths.  --remote-producer (vsock://-1:PORT, 0.0.0.0:PORT)
 * listens for producers on other machines.  SIGTERM / SIGINT stop every
 * session cleanly (flush, drain files), remove the sockets and exit 0; a
 * second signal exits at once.
 *
 * Connections that make no method call within --init-timeout-ms are
 * closed; a uid holds at most --max-conns-per-uid connections and all
 * together at most --max-conns (see vp_ipc_limits): idle connections
 * cannot use up the open files and lock real clients out.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event_loop.h"
#include "ipc_sock.h"
#include "vp_service.h"
#include "vp_version.h"
#include "vp_log.h"

struct opts {
	bool background;
	const char *producer_socks;
	const char *consumer_socks;
	const char **remote;
	size_t n_remote;
	const char *pidfile;
	uint32_t init_timeout_ms;
	uint32_t max_conns_per_uid;
	uint32_t max_conns;
};

/* Defaults of the connection limits. */
#define DEFAULT_INIT_TIMEOUT_MS 10000
#define DEFAULT_MAX_CONNS_PER_UID 256

struct app {
	struct vp_loop *loop;
	struct vp_service *svc;
	int sigfd;
	int signals;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vtraced [--foreground|--background] "
		"[--producer-socket A[,B...]]\n"
		"               [--consumer-socket A[,B...]] "
		"[--remote-producer ADDR ...]\n"
		"               [--pidfile FILE] [--init-timeout-ms N] "
		"[--max-conns-per-uid N]\n"
		"               [--max-conns N] [-v]\n"
		"Perfetto-compatible tracing service.  Addresses: /path, "
		"@abstract,\nvsock://CID:PORT, host:port.  Defaults: "
		"PERFETTO_PRODUCER_SOCK_NAME,\nPERFETTO_CONSUMER_SOCK_NAME, "
		"else traced's paths.\n"
		"Connections: closed if they make no call within "
		"--init-timeout-ms (default\n%u, 0: never); at most "
		"--max-conns-per-uid per uid (default %u, 0: no cap)\n"
		"and --max-conns in all (default: half the open-file "
		"limit).\n",
		DEFAULT_INIT_TIMEOUT_MS, DEFAULT_MAX_CONNS_PER_UID);
}

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{"foreground", no_argument, NULL, 'f'},
		{"background", no_argument, NULL, 'b'},
		{"producer-socket", required_argument, NULL, 'p'},
		{"consumer-socket", required_argument, NULL, 'c'},
		{"remote-producer", required_argument, NULL, 'r'},
		{"pidfile", required_argument, NULL, 'P'},
		{"init-timeout-ms", required_argument, NULL, 'T'},
		{"max-conns-per-uid", required_argument, NULL, 'U'},
		{"max-conns", required_argument, NULL, 'M'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int ch;
	memset(o, 0, sizeof(*o));
	o->init_timeout_ms = DEFAULT_INIT_TIMEOUT_MS;
	o->max_conns_per_uid = DEFAULT_MAX_CONNS_PER_UID;
	o->remote = calloc((size_t)argc + 1, sizeof(*o->remote));
	if (!o->remote)
		return -1;
	while ((ch = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			o->background = false;
			break;
		case 'b':
			o->background = true;
			break;
		case 'p':
			o->producer_socks = optarg;
			break;
		case 'c':
			o->consumer_socks = optarg;
			break;
		case 'r':
			o->remote[o->n_remote++] = optarg;
			break;
		case 'P':
			o->pidfile = optarg;
			break;
		case 'T':
		case 'U':
		case 'M': {
			uint32_t v;
			if (parse_u32(optarg, &v) < 0) {
				fprintf(stderr,
					"vtraced: %s: not a number: '%s'\n",
					ch == 'T'   ? "--init-timeout-ms"
					: ch == 'U' ? "--max-conns-per-uid"
						    : "--max-conns",
					optarg);
				return -1;
			}
			if (ch == 'T')
				o->init_timeout_ms = v;
			else if (ch == 'U')
				o->max_conns_per_uid = v;
			else
				o->max_conns = v;
			break;
		}
		case 'v':
			vp_log_verbose();
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("vtraced " VP_VERSION "\n");
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vtraced: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	if (!o->producer_socks)
		o->producer_socks = vp_producer_sock_name();
	if (!o->consumer_socks)
		o->consumer_socks = vp_consumer_sock_name();
	return 0;
}

/* Listens on each address of a comma-separated list. */
static int listen_list(struct vp_service *s, const char *list, bool producer)
{
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		return -1;
	int rc = 0;
	for (char *a = strtok_r(copy, ",", &save); a && rc == 0;
	     a = strtok_r(NULL, ",", &save)) {
		struct vp_error err;
		if (!*a)
			continue;
		rc = producer ? vp_service_listen_producer(s, a, &err)
			      : vp_service_listen_consumer(s, a, &err);
		if (rc < 0)
			fprintf(stderr, "vtraced: %s socket %s: %s\n",
				producer ? "producer" : "consumer", a,
				err.msg);
	}
	free(copy);
	return rc;
}

/* Double fork, new session, stdio to /dev/null. */
static int daemonize(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (chdir("/") != 0)
		return -1;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
	return 0;
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f);
}

static void on_shutdown_done(void *ctx)
{
	struct app *a = ctx;
	vp_loop_quit(a->loop);
}

static void on_signal(void *ctx, int fd, uint32_t events)
{
	struct app *a = ctx;
	struct signalfd_siginfo si;
	(void)events;
	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (++a->signals > 1) {
			vp_loop_quit(a->loop);
			return;
		}
		vp_service_shutdown(a->svc, on_shutdown_done, a);
	}
}

static int setup_signals(struct app *a)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	a->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sigfd < 0)
		return -1;
	struct vp_error err;
	if (vp_loop_watch(a->loop, a->sigfd, VP_EV_IN, on_signal, a, &err) <
	    0) {
		fprintf(stderr, "vtraced: %s\n", err.msg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	vp_log_init("vtraced", VP_LOG_WARN);
	struct opts o;
	struct app a = {.sigfd = -1};
	struct vp_error err;
	int rc = 1;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (vp_loop_new(&a.loop, &err) < 0) {
		fprintf(stderr, "vtraced: %s\n", err.msg);
		goto out;
	}
	struct vp_service_opts so = {
		.init_timeout_ms = o.init_timeout_ms,
		.max_conns_per_uid = o.max_conns_per_uid,
		.max_conns = o.max_conns,
	};
	if (vp_service_new(&a.svc, a.loop, &so, &err) < 0) {
		fprintf(stderr, "vtraced: %s\n", err.msg);
		goto out;
	}
	if (listen_list(a.svc, o.producer_socks, true) < 0 ||
	    listen_list(a.svc, o.consumer_socks, false) < 0)
		goto out;
	for (size_t i = 0; i < o.n_remote; i++)
		if (listen_list(a.svc, o.remote[i], true) < 0)
			goto out;
	if (o.background && daemonize() < 0) {
		perror("vtraced: daemonize");
		goto out;
	}
	if (o.pidfile && write_pidfile(o.pidfile) < 0) {
		fprintf(stderr, "vtraced: pidfile %s: %s\n", o.pidfile,
			strerror(errno));
		goto out;
	}
	if (setup_signals(&a) < 0) {
		perror("vtraced: signals");
		goto out;
	}
	if (vp_loop_run(a.loop) == 0)
		rc = 0;
out:
	if (a.sigfd >= 0) {
		vp_loop_unwatch(a.loop, a.sigfd);
		close(a.sigfd);
	}
	vp_service_free(a.svc);
	if (a.loop)
		vp_loop_free(a.loop);
	if (o.pidfile && rc == 0)
		unlink(o.pidfile);
	free(o.remote);
	return rc;
}
