/*
 * guest_ctl_main.c - vperfetto_guest_ctl, the guest's control endpoint:
 * the host starts and stops a guest tracing session through it and pulls
 * the trace back (protocol: ctl/ctl_proto.h; sessions:
 * guest_ctl.c).
 *
 *   vperfetto_guest_ctl --listen ADDR [--consumer PATH] [--out-dir DIR] [-v]
 *
 * ADDR:
 *   /dev/virtio-ports/NAME   a character device (virtio-serial port, serial
 *                            line, pty): opened read-write, raw mode if a
 *                            tty.  While the host side is not connected
 *                            it reports EOF / hang-up; the daemon keeps
 *                            polling, and reopens it when it fails or
 *                            does not exist yet.  It never exits for that.
 *   unix:PATH                a UNIX socket to listen on (tests)
 *   vsock://-1:20021         a vsock port to listen on
 * On sockets one host connection is served at a time; a new one replaces
 * the old.  Garbage on the link is logged and skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl_proto.h"
#include "guest_ctl.h"
#include "event_loop.h"
#include "ipc_sock.h"
#include "vp_version.h"
#include "vp_log.h"

#define TICK_MS 100
#define REOPEN_MS 500
#define HUP_BACKOFF_MS 250
#define WRITE_TIMEOUT_MS 30000

static volatile sig_atomic_t g_quit;

static void on_signal(int sig)
{
	(void)sig;
	g_quit = 1;
}

struct daemon {
	const char *addr;
	bool is_dev;         /* a character device, not a listening socket */
	const char *dev;     /* the device path */
	int listen_fd;
	int fd;              /* the link to the host, or -1 */
	bool open_error_logged;
	uint64_t reopen_at;  /* when to try opening the device again */
	uint64_t quiet_until;/* hang-up backoff on the device */
	struct vp_ctl_decoder dec;
	uint64_t reported_skipped, reported_bad;
	struct gc_session sess;
};

/* ---- the link ----------------------------------------------------------- */

/* Closes the link to the host, saying why at the given level: a host that
 * went away is info, a failed read or write a warning (info on a device,
 * where it is how a host that is not there shows: it is reopened). */
static void drop_link(struct daemon *d, enum vp_log_level level,
		      const char *why)
{
	if (d->fd < 0)
		return;
	vp_log(level, "link closed: %s", why);
	close(d->fd);
	d->fd = -1;
	vp_ctl_decoder_free(&d->dec);
	vp_ctl_decoder_init(&d->dec);
	d->reported_skipped = d->reported_bad = 0;
}

static enum vp_log_level link_error_level(const struct daemon *d)
{
	return d->is_dev ? VP_LOG_INFO : VP_LOG_WARN;
}

/* Writes all of buf, waiting (poll) up to WRITE_TIMEOUT_MS for room. */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
	uint64_t deadline = vp_loop_now_ms() + WRITE_TIMEOUT_MS;

	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w > 0) {
			buf += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return -1;
		uint64_t now = vp_loop_now_ms();
		if (now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int t = (int)(deadline - now);
		poll(&p, 1, t < TICK_MS ? t : TICK_MS);
	}
	return 0;
}

/* gc_send_fn: encodes and writes one reply to the host. */
static int send_msg(void *ctx, const struct vp_ctl_msg *m)
{
	struct daemon *d = ctx;
	struct vp_error e;
	uint8_t *frame;
	size_t len;

	if (d->fd < 0)
		return -1;
	if (vp_ctl_encode(m, &frame, &len, &e) < 0) {
		vp_log_error("cannot encode a reply: %s", e.msg);
		return -1;
	}
	int r = write_all(d->fd, frame, len);
	free(frame);
	if (r < 0) {
		char why[128];
		snprintf(why, sizeof(why), "write %s: %s",
			 vp_ctl_type_name(m->type), strerror(errno));
		drop_link(d, link_error_level(d), why);
		return -1;
	}
	return 0;
}

static void open_device(struct daemon *d)
{
	struct vp_error err;
	struct stat st;
	int fd = vp_chardev_open(d->dev, true, &err);

	if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISCHR(st.st_mode)) {
		close(fd);
		fd = -1;
		vp_errorf(&err, "%s: not a character device", d->dev);
	}
	if (fd < 0) {
		if (!d->open_error_logged)
			vp_log_warn("%s (retrying every %d ms)", err.msg,
				    REOPEN_MS);
		d->open_error_logged = true;
		d->reopen_at = vp_loop_now_ms() + REOPEN_MS;
		return;
	}
	/* After a warning, at its level: the warning is over. */
	vp_log(d->open_error_logged ? VP_LOG_WARN : VP_LOG_INFO, "%s: open%s",
	       d->dev, d->open_error_logged ? " again" : "");
	d->open_error_logged = false;
	d->fd = fd;
}

static void accept_host(struct daemon *d)
{
	int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	char peer[128];

	if (fd < 0)
		return;
	if (d->fd >= 0)
		drop_link(d, VP_LOG_INFO, "a new host connection replaces it");
	vp_sock_peer_name(fd, peer, sizeof(peer));
	vp_log_info("host connected (%s)", peer);
	d->fd = fd;
}

/* ---- requests ----------------------------------------------------------- */

static void handle_frame(struct daemon *d, const struct vp_ctl_frame *f)
{
	struct vp_ctl_msg *m = malloc(sizeof(*m));
	struct vp_error e;

	if (!m) {
		vp_log_error("out of memory: a request dropped");
		return;
	}
	if (vp_ctl_parse_payload(f->type, f->id, f->payload, f->len, m,
				 &e) < 0) {
		struct vp_ctl_msg req = {.type = f->type, .id = f->id};
		struct vp_ctl_msg *r = m;
		vp_log_warn("bad request: %s", e.msg);
		memset(r, 0, sizeof(*r));
		r->type = VP_CTL_ERROR;
		r->id = req.id;
		r->request_type = req.type;
		snprintf(r->text, sizeof(r->text), "bad request: %s", e.msg);
		send_msg(d, r);
	} else {
		gc_session_handle(&d->sess, m, send_msg, d);
	}
	free(m);
}

/* Reads what the link has and handles every frame in it.  Returns false
 * when the link reported EOF / hang-up with no data. */
static bool read_link(struct daemon *d)
{
	uint8_t buf[16384];
	ssize_t n = read(d->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n < 0) {
		char why[128];
		snprintf(why, sizeof(why), "read: %s", strerror(errno));
		drop_link(d, link_error_level(d), why);
		if (d->is_dev)
			d->reopen_at = vp_loop_now_ms() + REOPEN_MS;
		return true;
	}
	if (n == 0)
		return false;

	size_t off = 0;
	bool got;
	struct vp_ctl_frame f;
	do {
		off += vp_ctl_decode(&d->dec, buf + off, (size_t)n - off, &f,
				     &got);
		if (got)
			handle_frame(d, &f);
	} while (d->fd >= 0 && (got || off < (size_t)n));
	if (d->dec.skipped_bytes != d->reported_skipped ||
	    d->dec.bad_frames != d->reported_bad) {
		vp_log_warn("skipped %llu bytes of garbage, %llu frames with "
			    "a bad CRC so far on this link",
			    (unsigned long long)d->dec.skipped_bytes,
			    (unsigned long long)d->dec.bad_frames);
		d->reported_skipped = d->dec.skipped_bytes;
		d->reported_bad = d->dec.bad_frames;
	}
	return true;
}

/* One round of the loop: wait up to TICK_MS for input, handle it. */
static void loop_once(struct daemon *d)
{
	struct pollfd p[2];
	int n = 0, link = -1;
	uint64_t now = vp_loop_now_ms();

	if (d->is_dev && d->fd < 0 && now >= d->reopen_at)
		open_device(d);
	if (d->listen_fd >= 0)
		p[n++] = (struct pollfd){.fd = d->listen_fd, .events = POLLIN};
	if (d->fd >= 0 && now >= d->quiet_until) {
		link = n;
		p[n++] = (struct pollfd){.fd = d->fd, .events = POLLIN};
	}
	int r = poll(p, (nfds_t)n, TICK_MS);
	if (r > 0 && d->listen_fd >= 0 && (p[0].revents & POLLIN))
		accept_host(d);
	if (r > 0 && link >= 0 && d->fd == p[link].fd && p[link].revents) {
		bool alive = read_link(d);
		if (!alive || (p[link].revents & (POLLHUP | POLLERR) &&
			       !(p[link].revents & POLLIN))) {
			if (!d->is_dev)
				drop_link(d, VP_LOG_INFO, "host disconnected");
			else /* no host on the port yet: look again soon */
				d->quiet_until = vp_loop_now_ms() + HUP_BACKOFF_MS;
		}
	}
	gc_session_tick(&d->sess, send_msg, d);
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vperfetto_guest_ctl --listen ADDR [--consumer PATH] "
		"[--out-dir DIR]\n"
		"                           [--stop-timeout MS] [--start-grace MS] [-v]\n"
		"       vperfetto_guest_ctl --help | --version\n"
		"\n"
		"  --listen ADDR     a character device (/dev/virtio-ports/"
		"org.vperfetto.control),\n"
		"                    unix:PATH or vsock://-1:%u\n"
		"  --consumer PATH   the consumer program (default "
		"/bin/vperfetto)\n"
		"  --out-dir DIR     guest.cfg, guest.pb, consumer.log "
		"(default /tmp)\n"
		"  --stop-timeout MS SIGINT to SIGKILL of the consumer "
		"(default %d)\n"
		"  --start-grace MS  how long a new consumer must live before "
		"START is\n"
		"                    answered (default %d)\n"
		"  -v, --verbose     log every request\n"
		"  -h, --help        this text\n"
		"  --version         the version\n",
		VP_CTL_DEFAULT_VSOCK_PORT, GC_STOP_TIMEOUT_MS,
		GC_START_GRACE_MS);
}

static int setup_listen(struct daemon *d, struct vp_error *err)
{
	d->listen_fd = -1;
	d->fd = -1;
	if (strncmp(d->addr, "unix:", 5) == 0) {
		if (!d->addr[5])
			return vp_errorf(err, "--listen %s: empty path",
					 d->addr);
		d->listen_fd = vp_sock_listen(d->addr + 5, err);
		return d->listen_fd < 0 ? -1 : 0;
	}
	if (strncmp(d->addr, "vsock://", 8) == 0) {
		d->listen_fd = vp_sock_listen(d->addr, err);
		return d->listen_fd < 0 ? -1 : 0;
	}
	if (d->addr[0] != '/')
		return vp_errorf(err, "--listen %s: want a device path, "
				 "unix:PATH or vsock://CID:PORT", d->addr);
	d->is_dev = true;
	d->dev = d->addr;
	return 0;
}

/* An option's milliseconds, lo..hi; -1 (said on stderr) when not. */
static int parse_ms(const char *name, const char *arg, long lo, long hi,
		    int *out)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "vperfetto_guest_ctl: %s %s: want milliseconds "
			"(%ld..%ld)\n", name, arg, lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	vp_log_init("vperfetto_guest_ctl", VP_LOG_WARN);
	static const struct option longopts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"consumer", required_argument, NULL, 'c'},
		{"out-dir", required_argument, NULL, 'o'},
		{"stop-timeout", required_argument, NULL, 's'},
		{"start-grace", required_argument, NULL, 'g'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	static struct daemon d;
	struct gc_options opt = {.consumer = "/bin/vperfetto",
				 .out_dir = "/tmp",
				 .stop_timeout_ms = GC_STOP_TIMEOUT_MS,
				 .start_grace_ms = GC_START_GRACE_MS};
	struct vp_error err;
	int c;

	while ((c = getopt_long(argc, argv, "v", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': d.addr = optarg; break;
		case 'c': opt.consumer = optarg; break;
		case 'o': opt.out_dir = optarg; break;
		case 's':
			if (parse_ms("--stop-timeout", optarg, 1, 3600000,
				     &opt.stop_timeout_ms) < 0)
				return 2;
			break;
		case 'g':
			if (parse_ms("--start-grace", optarg, 0, 60000,
				     &opt.start_grace_ms) < 0)
				return 2;
			break;
		case 'v':
			vp_log_verbose();
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("vperfetto_guest_ctl %s\n", VP_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!d.addr || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (gc_session_init(&d.sess, &opt, &err) < 0 ||
	    setup_listen(&d, &err) < 0) {
		fprintf(stderr, "vperfetto_guest_ctl: %s\n", err.msg);
		return 1;
	}
	vp_ctl_decoder_init(&d.dec);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	vp_log_info("listening on %s; consumer %s, out dir %s", d.addr,
		    opt.consumer, opt.out_dir);

	while (!g_quit)
		loop_once(&d);

	vp_log_info("exiting");
	gc_session_shutdown(&d.sess, 5000);
	if (d.fd >= 0)
		close(d.fd);
	if (d.listen_fd >= 0) {
		close(d.listen_fd);
		if (strncmp(d.addr, "unix:", 5) == 0)
			vp_sock_unlink(d.addr + 5);
	}
	vp_ctl_decoder_free(&d.dec);
	return 0;
}
