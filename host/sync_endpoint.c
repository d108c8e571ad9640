/*
 * sync_endpoint.c - the host's clock-sync endpoint: listeners on vsock and
 * a UNIX socket, the (re)connected QEMU chardev, and the per-connection
 * request handling, all on one event-loop thread (see sync_endpoint.h).
 */
#include "sync_endpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "event_loop.h"
#include "ipc_sock.h"
#include "vp_clock.h"
#include "vp_log.h"

#define MAX_CLIENTS 1024
#define ACCEPTS_PER_WAKEUP 64
#define CHARDEV_RETRY_MS 1000

/* ------------------------------------------------ per-connection state */

void sync_conn_init(struct sync_conn *c)
{
	memset(c, 0, sizeof(*c));
	vp_sync_decoder_init(&c->dec);
}

size_t sync_conn_room(const struct sync_conn *c)
{
	/* Whole slots left at the end of the buffer: after a short write
	 * the queue need not end on a slot boundary. */
	return (sizeof(c->out) - c->out_len) / VP_SYNC_REPLY_SIZE;
}

size_t sync_conn_feed(struct sync_conn *c, const uint8_t *p, size_t n,
		      uint64_t counter)
{
	size_t answered = 0;

	while (n > 0) {
		struct vp_sync_msg m;
		bool got;
		size_t used = vp_sync_decode(&c->dec, p, n, &m, &got);
		p += used;
		n -= used;
		if (!got)
			continue;
		if (m.type != VP_SYNC_REQUEST) {
			c->unexpected++;
			continue;
		}
		if (sync_conn_room(c) == 0) {
			c->dropped++;
			continue;
		}
		vp_sync_encode_reply(c->out + c->out_len, m.seq, counter);
		c->out_len += VP_SYNC_REPLY_SIZE;
		c->served++;
		answered++;
	}
	return answered;
}

void sync_conn_consumed(struct sync_conn *c, size_t n)
{
	c->out_off += n;
	if (c->out_off >= c->out_len) {
		c->out_off = 0;
		c->out_len = 0;
	} else if (c->out_off >= sizeof(c->out) / 2) {
		/* Keep whole reply slots free at the end of the queue. */
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
}

/* ----------------------------------------------------------- endpoint */

struct client {
	struct sync_endpoint *ep;
	int fd;
	bool is_socket;  /* send() with MSG_NOSIGNAL, else write() */
	bool is_chardev; /* reopened when it drops */
	uint32_t watching;
	char name[96];
	struct sync_conn conn;
	struct client *next;
};

struct sync_endpoint {
	struct sync_endpoint_opts o;
	char *unix_path;
	char *chardev;
	struct vp_loop *loop;
	pthread_t thread;
	bool thread_started;
	int vsock_fd, unix_fd;
	struct client *clients;
	size_t n_clients;
	struct client *chardev_client;
	char chardev_last_err[256];
	_Atomic uint64_t served, n_clients_total, garbage, unexpected, dropped;
};

static void client_cb(void *ctx, int fd, uint32_t events);

/* Adds the per-connection counters to the endpoint's as the connection
 * goes away. */
static void client_close(struct client *c, const char *why)
{
	struct sync_endpoint *ep = c->ep;

	vp_log_info("sync client %s closed: %s (%llu requests served)",
		    c->name, why, (unsigned long long)c->conn.served);
	atomic_fetch_add(&ep->garbage, c->conn.dec.skipped_bytes);
	atomic_fetch_add(&ep->unexpected, c->conn.unexpected);
	atomic_fetch_add(&ep->dropped,
			 c->conn.dropped + (c->conn.out_len - c->conn.out_off) /
						   VP_SYNC_REPLY_SIZE);
	vp_loop_unwatch(ep->loop, c->fd);
	close(c->fd);
	for (struct client **pp = &ep->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	ep->n_clients--;
	if (ep->chardev_client == c)
		ep->chardev_client = NULL; /* the retry timer reopens it */
	free(c);
}

static struct client *client_add(struct sync_endpoint *ep, int fd,
				 bool is_socket, bool is_chardev,
				 const char *name)
{
	struct vp_error err;
	struct client *c = calloc(1, sizeof(*c));

	if (!c) {
		vp_log_error("out of memory: sync client %s refused", name);
		close(fd);
		return NULL;
	}
	c->ep = ep;
	c->fd = fd;
	c->is_socket = is_socket;
	c->is_chardev = is_chardev;
	snprintf(c->name, sizeof(c->name), "%s", name);
	sync_conn_init(&c->conn);
	c->watching = VP_EV_IN;
	if (vp_loop_watch(ep->loop, fd, VP_EV_IN, client_cb, c, &err) < 0) {
		vp_log_error("sync client %s refused: %s", name, err.msg);
		close(fd);
		free(c);
		return NULL;
	}
	c->next = ep->clients;
	ep->clients = c;
	ep->n_clients++;
	atomic_fetch_add(&ep->n_clients_total, 1);
	vp_log_info("sync client %s connected", name);
	return c;
}

/* Writes what the client's queue holds.  False if the client is gone. */
static bool client_flush(struct client *c)
{
	struct sync_conn *k = &c->conn;

	while (k->out_off < k->out_len) {
		const uint8_t *p = k->out + k->out_off;
		size_t len = k->out_len - k->out_off;
		ssize_t n = c->is_socket ? send(c->fd, p, len,
						MSG_NOSIGNAL | MSG_DONTWAIT)
					 : write(c->fd, p, len);
		if (n > 0) {
			sync_conn_consumed(k, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		client_close(c, n < 0 ? strerror(errno) : "write returned 0");
		return false;
	}
	return true;
}

/* Reads once, with the counter read right after, and answers.  `hup`:
 * the fd reported a hang-up or error without data, so nothing to read
 * means it is over. */
static bool client_read(struct client *c, bool hup)
{
	uint8_t buf[SYNC_CONN_READ_MAX];
	ssize_t n;

	do
		n = read(c->fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	uint64_t counter = vp_cpu_counter();
	if (n == 0) {
		client_close(c, "end of stream");
		return false;
	}
	if (n < 0) {
		if ((errno == EAGAIN || errno == EWOULDBLOCK) && !hup)
			return true;
		client_close(c, hup ? "hung up" : strerror(errno));
		return false;
	}
	size_t got = sync_conn_feed(&c->conn, buf, (size_t)n, counter);
	atomic_fetch_add(&c->ep->served, got);
	return true;
}

/* Reads only while a whole read's replies fit; otherwise waits for the
 * client to take its replies (its requests wait in the kernel). */
static void client_update_watch(struct client *c)
{
	uint32_t want = 0;
	if (sync_conn_room(&c->conn) >= SYNC_CONN_READ_ROOM)
		want |= VP_EV_IN;
	if (c->conn.out_off < c->conn.out_len)
		want |= VP_EV_OUT;
	if (want != c->watching) {
		vp_loop_watch_modify(c->ep->loop, c->fd, want);
		c->watching = want;
	}
}

static void client_cb(void *ctx, int fd, uint32_t events)
{
	struct client *c = ctx;
	(void)fd;

	if ((events & VP_EV_OUT) && !client_flush(c))
		return;
	if (events & (VP_EV_IN | VP_EV_HUP | VP_EV_ERR)) {
		if (sync_conn_room(&c->conn) >= SYNC_CONN_READ_ROOM) {
			if (!client_read(c, !(events & VP_EV_IN)))
				return;
		} else if (!(events & VP_EV_IN)) {
			/* Hung up while its replies wait: nobody takes them. */
			client_close(c, "hung up");
			return;
		}
		if (!client_flush(c))
			return;
	}
	client_update_watch(c);
}

static void listener_cb(void *ctx, int fd, uint32_t events)
{
	struct sync_endpoint *ep = ctx;
	(void)events;

	for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				vp_log_error("sync endpoint: accept: %s",
					     strerror(errno));
			return;
		}
		char name[80];
		vp_sock_peer_name(cfd, name, sizeof(name));
		if (ep->n_clients >= MAX_CLIENTS) {
			vp_log_error("sync client %s refused: %d clients "
				     "already",
				     name, MAX_CLIENTS);
			close(cfd);
			continue;
		}
		client_add(ep, cfd, true, false, name);
	}
}

/* ------------------------------------------------------------ chardev */

static void chardev_warn(struct sync_endpoint *ep, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Reports a chardev problem once, until it changes or is over. */
static void chardev_warn(struct sync_endpoint *ep, const char *fmt, ...)
{
	char msg[sizeof(ep->chardev_last_err)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (strcmp(msg, ep->chardev_last_err) == 0)
		return;
	snprintf(ep->chardev_last_err, sizeof(ep->chardev_last_err), "%s",
		 msg);
	vp_log_warn("qemu chardev %s: %s; retrying every %d ms", ep->chardev,
		    msg, CHARDEV_RETRY_MS);
}

/* QEMU's server socket: a non-blocking connect, which for a UNIX socket
 * completes at once or fails. */
static int chardev_connect(struct sync_endpoint *ep)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (strlen(ep->chardev) >= sizeof(sa.sun_path)) {
		chardev_warn(ep, "socket path too long");
		return -1;
	}
	strcpy(sa.sun_path, ep->chardev);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		chardev_warn(ep, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		chardev_warn(ep, "connect: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* A character device or pty: opened read-write, raw (ipc_sock.h). */
static int chardev_open_tty(struct sync_endpoint *ep)
{
	struct vp_error err;
	int fd = vp_chardev_open(ep->chardev, true, &err);
	if (fd < 0)
		chardev_warn(ep, "%s", err.msg);
	return fd;
}

static void chardev_try_open(void *ctx)
{
	struct sync_endpoint *ep = ctx;
	struct stat st;

	if (ep->chardev_client)
		return;
	if (stat(ep->chardev, &st) < 0) {
		chardev_warn(ep, "%s", strerror(errno));
		return;
	}
	bool sock = S_ISSOCK(st.st_mode);
	int fd = sock ? chardev_connect(ep) : chardev_open_tty(ep);
	if (fd < 0)
		return;
	char name[96];
	snprintf(name, sizeof(name), "chardev:%s", ep->chardev);
	ep->chardev_client = client_add(ep, fd, sock, true, name);
	if (ep->chardev_client) {
		/* After a warning, at its level: the warning is over. */
		vp_log(ep->chardev_last_err[0] ? VP_LOG_WARN : VP_LOG_INFO,
		       "qemu chardev %s: %s%s", ep->chardev,
		       sock ? "connected" : "opened",
		       ep->chardev_last_err[0] ? " again" : "");
		ep->chardev_last_err[0] = '\0';
	}
}

/* ------------------------------------------------------------- thread */

static void *endpoint_main(void *arg)
{
	struct sync_endpoint *ep = arg;
	if (vp_loop_run(ep->loop) < 0)
		vp_log_error("sync endpoint: event loop failed: %s; no more "
			     "exchanges",
			     strerror(errno));
	return NULL;
}

static int add_listener(struct sync_endpoint *ep, const char *addr,
			struct vp_error *err)
{
	int fd = vp_sock_listen(addr, err);
	if (fd < 0)
		return -1;
	if (vp_loop_watch(ep->loop, fd, VP_EV_IN, listener_cb, ep, err) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void endpoint_free(struct sync_endpoint *ep)
{
	while (ep->clients)
		client_close(ep->clients, "stopping");
	if (ep->vsock_fd >= 0)
		close(ep->vsock_fd);
	if (ep->unix_fd >= 0) {
		close(ep->unix_fd);
		vp_sock_unlink(ep->unix_path);
	}
	if (ep->loop)
		vp_loop_free(ep->loop);
	free(ep->unix_path);
	free(ep->chardev);
	free(ep);
}

int sync_endpoint_start(const struct sync_endpoint_opts *o,
			struct sync_endpoint **out, struct vp_error *err)
{
	struct sync_endpoint *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return vp_errorf(err, "out of memory");
	ep->o = *o;
	ep->vsock_fd = ep->unix_fd = -1;
	if ((o->unix_path && !(ep->unix_path = strdup(o->unix_path))) ||
	    (o->qemu_chardev && !(ep->chardev = strdup(o->qemu_chardev)))) {
		endpoint_free(ep);
		return vp_errorf(err, "out of memory");
	}
	if (vp_loop_new(&ep->loop, err) < 0) {
		endpoint_free(ep);
		return -1;
	}
	if (o->vsock) {
		char addr[64];
		struct vp_error e;
		snprintf(addr, sizeof(addr), "vsock://-1:%u",
			 o->vsock_port ? o->vsock_port
				       : VP_SYNC_DEFAULT_VSOCK_PORT);
		ep->vsock_fd = add_listener(ep, addr, &e);
		if (ep->vsock_fd < 0)
			vp_log_warn("no vsock sync endpoint: %s", e.msg);
		else
			vp_log_info("sync endpoint on %s", addr);
	}
	if (ep->unix_path) {
		struct vp_error e;
		ep->unix_fd = add_listener(ep, ep->unix_path, &e);
		if (ep->unix_fd < 0) {
			vp_errorf(err, "sync endpoint: %s", e.msg);
			endpoint_free(ep);
			return -1;
		}
	}
	if (ep->chardev) {
		chardev_try_open(ep);
		vp_loop_timer(ep->loop, CHARDEV_RETRY_MS, CHARDEV_RETRY_MS,
			      chardev_try_open, ep);
	}
	int rc = pthread_create(&ep->thread, NULL, endpoint_main, ep);
	if (rc != 0) {
		vp_errorf(err, "sync endpoint thread: %s", strerror(rc));
		endpoint_free(ep);
		return -1;
	}
	ep->thread_started = true;
	*out = ep;
	return 0;
}

void sync_endpoint_get_stats(struct sync_endpoint *ep,
			     struct sync_endpoint_stats *out)
{
	out->served = atomic_load(&ep->served);
	out->clients = atomic_load(&ep->n_clients_total);
	out->garbage_bytes = atomic_load(&ep->garbage);
	out->unexpected = atomic_load(&ep->unexpected);
	out->dropped_replies = atomic_load(&ep->dropped);
}

void sync_endpoint_stop(struct sync_endpoint *ep,
			struct sync_endpoint_stats *final)
{
	if (!ep)
		return;
	if (ep->thread_started) {
		vp_loop_quit(ep->loop);
		pthread_join(ep->thread, NULL);
	}
	/* The loop thread is gone: its state is ours now.  Closing the
	 * clients adds their counters in. */
	while (ep->clients)
		client_close(ep->clients, "stopping");
	if (final)
		sync_endpoint_get_stats(ep, final);
	endpoint_free(ep);
}
