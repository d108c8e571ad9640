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
 *
 * --pidfile is locked (flock) for the daemon's life: a second vtraced with
 * the same file refuses to start, a symbolic link or anything but a plain
 * file is refused, and the file is removed at exit only by its holder.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

/*
 * The pidfile: the directory it is in (opened once, so that a relative path
 * still names the same file after daemonize's chdir("/") and a renamed
 * parent cannot redirect the final unlink), its name in there, and the
 * locked file itself.
 */
struct pidfile {
	const char *path; /* as given, for messages */
	char *name;
	int dirfd;
	int fd;
};

/* An address both comma-separated lists name (a static copy), or NULL. */
static const char *shared_address(const char *a, const char *b)
{
	static char hit[256];
	size_t la = strlen(a);

	for (size_t i = 0; i < la;) {
		size_t n = strcspn(a + i, ",");
		for (const char *q = b; *q;) {
			size_t m = strcspn(q, ",");
			if (n && n == m && !memcmp(a + i, q, n) &&
			    n < sizeof(hit)) {
				memcpy(hit, a + i, n);
				hit[n] = 0;
				return hit;
			}
			q += m + (q[m] == ',');
		}
		i += n + (a[i + n] == ',');
	}
	return NULL;
}

/* Attempts at locking a pidfile that a stopping holder unlinks meanwhile. */
#define PIDFILE_LOCK_TRIES 8

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
	const char *both = shared_address(o->producer_socks,
					  o->consumer_socks);
	if (both) {
		/* the second listen would find the first and say a service
		 * is already there, which is not what happened */
		fprintf(stderr, "vtraced: %s is both a producer and a consumer "
			"socket address: give each its own (--producer-socket, "
			"--consumer-socket or PERFETTO_PRODUCER_SOCK_NAME, "
			"PERFETTO_CONSUMER_SOCK_NAME)\n", both);
		return -1;
	}
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

/* Splits pf->path into the directory (opened as pf->dirfd) and pf->name. */
static int pidfile_open_dir(struct pidfile *pf)
{
	const char *slash = strrchr(pf->path, '/');
	const char *name = slash ? slash + 1 : pf->path;
	if (!*name) {
		errno = EISDIR;
		return -1;
	}
	pf->name = strdup(name);
	char *dir =
	    slash ? strndup(pf->path, (size_t)(slash - pf->path)) : strdup(".");
	if (!pf->name || !dir) {
		free(dir);
		errno = ENOMEM;
		return -1;
	}
	pf->dirfd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	return pf->dirfd < 0 ? -1 : 0;
}

/* True if pf->name in pf->dirfd is still the file pf->fd has open. */
static bool pidfile_is_ours(const struct pidfile *pf)
{
	struct stat fst, pst;
	return fstat(pf->fd, &fst) == 0 &&
	       fstatat(pf->dirfd, pf->name, &pst, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fst.st_dev == pst.st_dev && fst.st_ino == pst.st_ino;
}

/* The pid a pidfile holds, or 0 if it holds none (yet). */
static long pidfile_read_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *end;
	long pid = strtol(buf, &end, 10);
	return end != buf && pid > 0 ? pid : 0;
}

/*
 * Opens and locks the pidfile once: 1 when locked, 0 when it was unlinked
 * under us (try again), -1 with a message printed.  O_NOFOLLOW: vtraced
 * may run as root, and a symbolic link planted at the path would have it
 * overwrite (and at exit unlink) whatever the link points to; only a plain
 * file with one link is taken, and nothing is truncated before the lock is
 * ours.  O_NONBLOCK and O_NOCTTY keep a FIFO or a device at the path from
 * blocking the open or becoming our terminal before it is refused.
 */
static int pidfile_try_lock(struct pidfile *pf)
{
	struct stat st;
	pf->fd = openat(pf->dirfd, pf->name,
			O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
			    O_NONBLOCK,
			0644);
	if (pf->fd < 0) {
		if (errno == ELOOP)
			fprintf(stderr,
				"vtraced: pidfile %s is a symbolic link; "
				"refusing to use it\n",
				pf->path);
		else
			fprintf(stderr, "vtraced: pidfile %s: %s\n", pf->path,
				strerror(errno));
		return -1;
	}
	if (fstat(pf->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_nlink != 1) {
		fprintf(stderr,
			"vtraced: pidfile %s is not a plain file with a single "
			"link; refusing to use it\n",
			pf->path);
		goto fail;
	}
	/*
	 * flock, not fcntl(F_SETLK): a flock lock belongs to the open file
	 * description, so it survives daemonize's forks into the process that
	 * stays; an fcntl lock belongs to the process and would go with the
	 * parent that exits (and with any close of the file in this one).
	 */
	if (flock(pf->fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK) {
			fprintf(stderr, "vtraced: pidfile %s: lock: %s\n",
				pf->path, strerror(errno));
			goto fail;
		}
		long pid = pidfile_read_pid(pf->fd);
		if (pid > 0)
			fprintf(stderr,
				"vtraced: pidfile %s is locked by another "
				"vtraced (pid %ld); is it already running?\n",
				pf->path, pid);
		else
			fprintf(stderr,
				"vtraced: pidfile %s is locked by another "
				"process; is vtraced already running?\n",
				pf->path);
		goto fail;
	}
	/* A holder that was stopping may have unlinked it before we locked
	 * it: then this lock guards nothing and the path is free again. */
	if (!pidfile_is_ours(pf)) {
		close(pf->fd);
		pf->fd = -1;
		return 0;
	}
	return 1;
fail:
	close(pf->fd);
	pf->fd = -1;
	return -1;
}

/*
 * Takes the pidfile before anything else is set up, so that a second
 * vtraced is refused on its terminal (not after daemonize silenced it) and
 * before it creates any socket.  The lock is kept until exit.
 */
static int pidfile_lock(struct pidfile *pf)
{
	if (pidfile_open_dir(pf) < 0) {
		fprintf(stderr, "vtraced: pidfile %s: %s\n", pf->path,
			strerror(errno));
		return -1;
	}
	for (int i = 0; i < PIDFILE_LOCK_TRIES; i++) {
		int rc = pidfile_try_lock(pf);
		if (rc != 0)
			return rc > 0 ? 0 : -1;
	}
	fprintf(stderr, "vtraced: pidfile %s keeps being replaced\n", pf->path);
	return -1;
}

/* Writes our pid into the locked pidfile (after daemonize: the pid of the
 * process that stays). */
static int pidfile_write(struct pidfile *pf)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(pf->fd, 0) != 0)
		return -1;
	errno = EIO; /* for a short write, which sets none */
	return pwrite(pf->fd, buf, (size_t)n, 0) == (ssize_t)n ? 0 : -1;
}

/*
 * Removes the pidfile if we hold it, while still holding the lock, and only
 * if the path still names the file we locked: one someone put in its place
 * is not ours to remove.
 */
static void pidfile_release(struct pidfile *pf)
{
	if (pf->fd >= 0) {
		if (pidfile_is_ours(pf))
			unlinkat(pf->dirfd, pf->name, 0);
		close(pf->fd);
	}
	if (pf->dirfd >= 0)
		close(pf->dirfd);
	free(pf->name);
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
	struct pidfile pf = {.dirfd = -1, .fd = -1};
	struct vp_error err;
	int rc = 1;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	pf.path = o.pidfile;
	if (o.pidfile && pidfile_lock(&pf) < 0)
		goto out;
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
	if (o.pidfile && pidfile_write(&pf) < 0) {
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
	pidfile_release(&pf);
	free(o.remote);
	return rc;
}
