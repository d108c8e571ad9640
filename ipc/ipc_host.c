/*
 * ipc_host.c - the service end of Perfetto's IPC on a vp_loop (see
 * ipc_host.h).
 *
 * Each connection owns a reassembler for what it receives and a transmit
 * queue for what it sends.  Replies are encoded straight into the queue and
 * written at once when the socket takes them; what it does not take waits
 * for EPOLLOUT, so the loop never blocks on a slow peer.  A fd passed with a
 * reply is remembered with the stream offset of its frame and goes out with
 * that frame's first byte; only if it has to wait is it dup'ed (the caller
 * keeps its own).
 *
 * Closing is deferred: a closed connection stops receiving at once, and a
 * zero-delay timer later runs on_disconnect and frees it, so handlers and
 * callbacks may close any connection, their own included.
 */
#include "ipc_host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc_client.h" /* VP_IPC_MAX_FRAME */
#include "ipc_frame.h"
#include "ipc_sock.h"
#include "vp_alloc.h"

/* The one service a host exposes gets this id in BindServiceReply. */
#define HOST_SERVICE_ID 1
/* Bytes read from one connection per wakeup, for fairness. */
#define CONN_READ_BUDGET (1u << 20)
/* A peer that lets more than this pile up unread is dropped. */
#define CONN_MAX_TX_QUEUE (256u << 20)
/* Request ids with drop_reply remembered for replies sent later. */
#define CONN_DROP_IDS 8
/* Connections accepted per listener wakeup. */
#define ACCEPT_BUDGET 64
/* Pause before accepting again after EMFILE/ENFILE. */
#define ACCEPT_BACKOFF_MS 100

struct tx_fd {
	uint64_t at; /* stream offset of the first byte of its frame */
	int fd;
	bool owned; /* a dup of the caller's fd, closed once sent */
};

struct vp_ipc_conn {
	struct vp_ipc_host *host;
	struct vp_ipc_conn *prev, *next; /* in host->conns or host->zombies */
	int fd;
	struct vp_ipc_peer peer;
	bool connected;    /* on_connect ran (on_disconnect will) */
	bool identified;   /* set_peer_identity seen */
	bool closing;
	bool watching_out;
	void *user;

	struct vp_ipc_rx rx;

	struct pb_buf tx;  /* bytes [tx_head, tx.len) wait to be sent */
	size_t tx_head;
	uint64_t tx_sent;  /* stream offset of tx.data[tx_head] */
	struct tx_fd *tx_fds;
	size_t n_tx_fds, cap_tx_fds;

	/* The frame being dispatched. */
	int cur_fds[VP_IPC_RX_MAX_FDS];
	int n_cur_fds;
	bool in_invoke;
	bool cur_drop_reply;
	bool cur_replied_final;
	uint64_t cur_request_id;
	uint64_t drop_ids[CONN_DROP_IDS];
	unsigned n_drop_ids, drop_next;

	size_t drain_below;
	vp_task_cb drain_fn;
	void *drain_ctx;

	/* Limits (with a group): counted in group->n_conns; fresh (no
	 * method call yet) ones in the group's fresh list, oldest first. */
	bool counted;
	bool fresh;
	uid_t limit_uid; /* SO_PEERCRED's, (uid_t)-1 for a remote peer */
	uint64_t accepted_ms;
	struct vp_ipc_conn *fprev, *fnext;
};

struct listener {
	int fd;
	char *addr;
	bool watching;
};

struct vp_ipc_host {
	struct vp_loop *loop;
	struct vp_ipc_service svc;
	struct listener *listeners;
	size_t n_listeners, cap_listeners;
	struct vp_ipc_conn *conns;
	struct vp_ipc_conn *zombies;
	uint64_t reap_timer;
	uint64_t accept_timer;
	struct vp_ipc_host_stats stats;
	struct vp_ipc_group *group;
	struct vp_ipc_host *gnext; /* in group->hosts */
};

struct vp_ipc_group {
	struct vp_loop *loop;
	struct vp_ipc_limits lim;
	struct vp_ipc_host *hosts;
	struct vp_ipc_conn *fresh_head, *fresh_tail;
	size_t n_conns;
	uint64_t idle_timer;
	int spare_fd; /* given up to accept-and-close when out of fds */
};

static void conn_close(struct vp_ipc_conn *c);
static int tx_write(struct vp_ipc_conn *c);
static void conn_uncount(struct vp_ipc_conn *c);

/* ---- connection list ----------------------------------------------------- */

static void list_add(struct vp_ipc_conn **head, struct vp_ipc_conn *c)
{
	c->prev = NULL;
	c->next = *head;
	if (*head)
		(*head)->prev = c;
	*head = c;
}

static void list_del(struct vp_ipc_conn **head, struct vp_ipc_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

/* ---- closing and freeing ------------------------------------------------- */

static void close_fds(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

static void conn_free(struct vp_ipc_conn *c)
{
	struct vp_ipc_host *h = c->host;
	if (c->connected && h->svc.on_disconnect)
		h->svc.on_disconnect(h->svc.ctx, c);
	if (c->fd >= 0)
		close(c->fd);
	vp_ipc_rx_free(&c->rx);
	pb_buf_free(&c->tx);
	for (size_t i = 0; i < c->n_tx_fds; i++)
		if (c->tx_fds[i].owned)
			close(c->tx_fds[i].fd);
	free(c->tx_fds);
	close_fds(c->cur_fds, c->n_cur_fds);
	free(c);
}

/* Frees every closed connection; on_disconnect may close more. */
static void reap(struct vp_ipc_host *h)
{
	struct vp_ipc_conn *c;
	while ((c = h->zombies)) {
		list_del(&h->zombies, c);
		conn_free(c);
	}
}

static void reap_timer_cb(void *ctx)
{
	struct vp_ipc_host *h = ctx;
	h->reap_timer = 0;
	reap(h);
}

static void conn_close(struct vp_ipc_conn *c)
{
	struct vp_ipc_host *h = c->host;
	if (c->closing)
		return;
	c->closing = true;
	conn_uncount(c);
	/* Last chance for a reply queued just before closing (an error). */
	tx_write(c);
	vp_loop_unwatch(h->loop, c->fd);
	shutdown(c->fd, SHUT_RDWR);
	list_del(&h->conns, c);
	list_add(&h->zombies, c);
	if (!h->reap_timer)
		h->reap_timer = vp_loop_timer(h->loop, 0, 0, reap_timer_cb, h);
}

/* Drops a connection that broke the protocol. */
static void conn_drop(struct vp_ipc_conn *c, const char *why)
{
	(void)why; /* kept for a debugger; the host has no logger */
	c->host->stats.dropped_conns++;
	conn_close(c);
}

/* ---- transmit queue ------------------------------------------------------ */

size_t vp_ipc_conn_tx_queued(const struct vp_ipc_conn *c)
{
	return c->tx.len - c->tx_head;
}

static void tx_fd_pop(struct vp_ipc_conn *c)
{
	if (c->tx_fds[0].owned)
		close(c->tx_fds[0].fd);
	memmove(c->tx_fds, c->tx_fds + 1,
		(c->n_tx_fds - 1) * sizeof(*c->tx_fds));
	c->n_tx_fds--;
}

/* Moves the unsent bytes to the front once the sent ones dominate. */
static void tx_compact(struct vp_ipc_conn *c)
{
	size_t queued = c->tx.len - c->tx_head;
	if (queued == 0) {
		c->tx.len = c->tx_head = 0;
		if (c->tx.cap > (1u << 20)) {
			pb_buf_free(&c->tx);
			pb_buf_init(&c->tx);
		}
	} else if (c->tx_head >= (64u << 10) && c->tx_head > queued) {
		memmove(c->tx.data, c->tx.data + c->tx_head, queued);
		c->tx.len = queued;
		c->tx_head = 0;
	}
}

static void tx_set_watch(struct vp_ipc_conn *c)
{
	bool want = vp_ipc_conn_tx_queued(c) > 0;
	if (want == c->watching_out || c->closing)
		return;
	vp_loop_watch_modify(c->host->loop, c->fd,
			     VP_EV_IN | (want ? VP_EV_OUT : 0));
	c->watching_out = want;
}

static void run_drain(struct vp_ipc_conn *c)
{
	if (c->drain_fn && vp_ipc_conn_tx_queued(c) < c->drain_below) {
		vp_task_cb fn = c->drain_fn;
		c->drain_fn = NULL;
		fn(c->drain_ctx);
	}
}

/* Writes what the socket takes now.  Returns -1 if the connection broke
 * (the caller closes it). */
static int tx_write(struct vp_ipc_conn *c)
{
	while (c->tx_head < c->tx.len) {
		size_t len = c->tx.len - c->tx_head;
		int fd = -1;
		if (c->n_tx_fds > 0) {
			uint64_t at = c->tx_fds[0].at;
			if (at == c->tx_sent)
				fd = c->tx_fds[0].fd;
			/* Stop before the next frame that carries a fd. */
			uint64_t next = fd >= 0 ? (c->n_tx_fds > 1
							   ? c->tx_fds[1].at
							   : UINT64_MAX)
						: at;
			if (next - c->tx_sent < len)
				len = (size_t)(next - c->tx_sent);
		}
		ssize_t n = vp_sock_send_some(c->fd, c->tx.data + c->tx_head,
					      len, fd, true);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -1;
		}
		if (fd >= 0 && n > 0)
			tx_fd_pop(c);
		c->tx_head += (size_t)n;
		c->tx_sent += (uint64_t)n;
	}
	return 0;
}

static void conn_flush(struct vp_ipc_conn *c)
{
	if (c->closing)
		return;
	if (tx_write(c) < 0) {
		conn_close(c);
		return;
	}
	tx_compact(c);
	tx_set_watch(c);
}

/* Makes the fds still queued independent of their callers' copies. */
static int tx_own_fds(struct vp_ipc_conn *c)
{
	for (size_t i = 0; i < c->n_tx_fds; i++) {
		if (c->tx_fds[i].owned)
			continue;
		int d = fcntl(c->tx_fds[i].fd, F_DUPFD_CLOEXEC, 0);
		if (d < 0)
			return -1;
		c->tx_fds[i].fd = d;
		c->tx_fds[i].owned = true;
	}
	return 0;
}

static void tx_queue_fd(struct vp_ipc_conn *c, uint64_t at, int fd)
{
	/* The host runs in the tools only (vtraced, the agents): out of
	 * memory stops them (base/vp_alloc.h). */
	VP_XGROW(c->tx_fds, c->cap_tx_fds, c->n_tx_fds + 1);
	c->tx_fds[c->n_tx_fds++] = (struct tx_fd){at, fd, false};
}

/* Sends the frame just appended at tx offset `mark`, with pass_fd. */
static int tx_commit(struct vp_ipc_conn *c, size_t mark, int pass_fd)
{
	vp_ipc_frame_end(&c->tx, mark);
	if (pass_fd >= 0)
		tx_queue_fd(c, c->tx_sent + (mark - c->tx_head), pass_fd);
	bool was_idle = !c->watching_out;
	if (was_idle && tx_write(c) < 0) {
		conn_close(c);
		return -1;
	}
	if (tx_own_fds(c) < 0 ||
	    vp_ipc_conn_tx_queued(c) > CONN_MAX_TX_QUEUE) {
		conn_drop(c, "transmit queue overflow");
		return -1;
	}
	tx_compact(c);
	tx_set_watch(c);
	return 0;
}

/* ---- replies ------------------------------------------------------------- */

static bool drop_id_take(struct vp_ipc_conn *c, uint64_t id, bool final)
{
	for (unsigned i = 0; i < c->n_drop_ids; i++) {
		if (c->drop_ids[i] != id)
			continue;
		if (final) {
			c->drop_ids[i] = c->drop_ids[--c->n_drop_ids];
			if (c->drop_next > c->n_drop_ids)
				c->drop_next = c->n_drop_ids;
		}
		return true;
	}
	return false;
}

static void drop_id_add(struct vp_ipc_conn *c, uint64_t id)
{
	if (c->n_drop_ids < CONN_DROP_IDS) {
		c->drop_ids[c->n_drop_ids++] = id;
		return;
	}
	c->drop_ids[c->drop_next] = id; /* forget the oldest-ish */
	c->drop_next = (c->drop_next + 1) % CONN_DROP_IDS;
}

int vp_ipc_conn_reply(struct vp_ipc_conn *c, uint64_t request_id,
		      bool success, bool has_more, const void *reply,
		      size_t len, int pass_fd)
{
	if (c->closing)
		return -1;
	if (c->in_invoke && c->cur_drop_reply &&
	    request_id == c->cur_request_id) {
		if (!has_more)
			c->cur_replied_final = true;
		return 0;
	}
	if (drop_id_take(c, request_id, !has_more))
		return 0;
	size_t mark = vp_ipc_frame_begin(&c->tx, request_id);
	vp_ipc_put_invoke_reply(&c->tx, success, has_more, reply, len);
	return tx_commit(c, mark, pass_fd);
}

int vp_ipc_conn_reject(struct vp_ipc_conn *c, uint64_t request_id)
{
	return vp_ipc_conn_reply(c, request_id, false, false, NULL, 0, -1);
}

int vp_ipc_conn_error(struct vp_ipc_conn *c, uint64_t request_id,
		      const char *msg)
{
	if (c->closing)
		return -1;
	size_t mark = vp_ipc_frame_begin(&c->tx, request_id);
	vp_ipc_put_request_error(&c->tx, msg);
	return tx_commit(c, mark, -1);
}

static int send_bind_reply(struct vp_ipc_conn *c, uint64_t request_id,
			   bool success)
{
	const struct vp_ipc_service *svc = &c->host->svc;
	size_t mark = vp_ipc_frame_begin(&c->tx, request_id);
	size_t body = vp_ipc_put_bind_reply_begin(&c->tx, success,
						  HOST_SERVICE_ID);
	for (size_t i = 0; success && i < svc->n_methods; i++)
		vp_ipc_put_bind_reply_method(&c->tx, (uint32_t)(i + 1),
					     svc->methods[i].name);
	vp_ipc_put_bind_reply_end(&c->tx, body);
	return tx_commit(c, mark, -1);
}

/* ---- connection limits ---------------------------------------------------- */

static void fresh_del(struct vp_ipc_group *g, struct vp_ipc_conn *c)
{
	if (c->fprev)
		c->fprev->fnext = c->fnext;
	else
		g->fresh_head = c->fnext;
	if (c->fnext)
		c->fnext->fprev = c->fprev;
	else
		g->fresh_tail = c->fprev;
	c->fprev = c->fnext = NULL;
	c->fresh = false;
}

static void conn_uncount(struct vp_ipc_conn *c)
{
	struct vp_ipc_group *g = c->host->group;
	if (!c->counted)
		return;
	c->counted = false;
	g->n_conns--;
	if (c->fresh)
		fresh_del(g, c);
}

/* The first method call: the connection is in use, no longer fresh. */
static void conn_initialized(struct vp_ipc_conn *c)
{
	if (c->fresh)
		fresh_del(c->host->group, c);
}

static void idle_timer_cb(void *ctx);

static void idle_timer_arm(struct vp_ipc_group *g)
{
	if (g->idle_timer || !g->fresh_head || !g->lim.init_timeout_ms)
		return;
	uint64_t now = vp_loop_now_ms();
	uint64_t due = g->fresh_head->accepted_ms + g->lim.init_timeout_ms;
	g->idle_timer = vp_loop_timer(g->loop,
				      due > now ? (uint32_t)(due - now) : 0, 0,
				      idle_timer_cb, g);
}

/* Closes the fresh connections that are past the init timeout. */
static void idle_timer_cb(void *ctx)
{
	struct vp_ipc_group *g = ctx;
	uint64_t now = vp_loop_now_ms();
	g->idle_timer = 0;
	while (g->fresh_head &&
	       g->fresh_head->accepted_ms + g->lim.init_timeout_ms <= now) {
		struct vp_ipc_conn *c = g->fresh_head;
		c->host->stats.idle_closed++;
		conn_close(c); /* leaves the fresh list */
	}
	idle_timer_arm(g);
}

/* Closes the oldest fresh connection (of `uid` unless any_uid) and its
 * socket at once, so its fd is free; on_disconnect runs later, as for any
 * close (the caller may be in the middle of the service's work).  False
 * if there is none. */
static bool evict_fresh(struct vp_ipc_group *g, bool any_uid, uid_t uid)
{
	struct vp_ipc_conn *c = g->fresh_head;
	while (c && !any_uid && c->limit_uid != uid)
		c = c->fnext;
	if (!c)
		return false;
	c->host->stats.idle_closed++;
	conn_close(c);
	close(c->fd);
	c->fd = -1;
	return true;
}

static size_t count_uid(const struct vp_ipc_group *g, uid_t uid)
{
	size_t n = 0;
	for (const struct vp_ipc_host *h = g->hosts; h; h = h->gnext)
		for (const struct vp_ipc_conn *c = h->conns; c; c = c->next)
			n += c->limit_uid == uid;
	return n;
}

/* Whether a new connection from uid may come in (room made if need be). */
static bool admit(struct vp_ipc_group *g, uid_t uid)
{
	if (g->lim.max_conns_per_uid &&
	    count_uid(g, uid) >= g->lim.max_conns_per_uid &&
	    !evict_fresh(g, false, uid))
		return false;
	if (g->n_conns >= g->lim.max_conns && !evict_fresh(g, true, 0))
		return false;
	return true;
}

/* accept() found no fd: make room by closing a fresh connection, else take
 * the pending connection with the spare fd and close it, so that it does
 * not wake the loop again.  False if neither worked. */
static bool out_of_fds(struct vp_ipc_host *h, int lfd)
{
	struct vp_ipc_group *g = h->group;
	if (!g)
		return false;
	if (evict_fresh(g, true, 0))
		return true;
	if (g->spare_fd < 0)
		return false;
	close(g->spare_fd);
	int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd >= 0) {
		close(cfd);
		h->stats.refused_conns++;
	}
	g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return cfd >= 0;
}

int vp_ipc_group_new(struct vp_ipc_group **out, struct vp_loop *loop,
		     const struct vp_ipc_limits *lim, struct vp_error *err)
{
	struct vp_ipc_group *g = calloc(1, sizeof(*g));
	if (!g)
		return vp_errorf(err, "IPC host: out of memory");
	g->loop = loop;
	if (lim)
		g->lim = *lim;
	if (!g->lim.max_conns) {
		struct rlimit rl;
		rlim_t n = 1024;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY)
			n = rl.rlim_cur;
		else if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
			n = 1u << 20;
		n /= 2;
		g->lim.max_conns = n > UINT32_MAX ? UINT32_MAX
			: n < 1 ? 1 : (uint32_t)n;
	}
	g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	*out = g;
	return 0;
}

void vp_ipc_group_free(struct vp_ipc_group *g)
{
	if (!g)
		return;
	if (g->idle_timer)
		vp_loop_cancel(g->loop, g->idle_timer);
	if (g->spare_fd >= 0)
		close(g->spare_fd);
	free(g);
}

bool vp_ipc_group_reclaim_fd(struct vp_ipc_group *g)
{
	return g && evict_fresh(g, true, 0);
}

int vp_ipc_host_set_group(struct vp_ipc_host *h, struct vp_ipc_group *g)
{
	if (h->group || h->conns || h->n_listeners)
		return -1;
	h->group = g;
	h->gnext = g->hosts;
	g->hosts = h;
	return 0;
}

/* ---- receiving ----------------------------------------------------------- */

static void conn_notify_connect(struct vp_ipc_conn *c)
{
	struct vp_ipc_host *h = c->host;
	if (c->connected)
		return;
	c->connected = true;
	if (h->svc.on_connect)
		h->svc.on_connect(h->svc.ctx, c);
}

static void copy_bytes(char *dst, size_t cap, struct vp_ipc_bytes b)
{
	size_t n = b.len < cap - 1 ? b.len : cap - 1;
	if (n)
		memcpy(dst, b.data, n);
	dst[n] = '\0';
}

/* Only a remote peer may say who it is, and only once (UNIX peers have
 * SO_PEERCRED, which cannot be forged). */
static void on_peer_identity(struct vp_ipc_conn *c,
			     const struct vp_ipc_frame *f)
{
	if (!c->peer.remote || c->identified || c->connected)
		return;
	c->identified = true;
	if (f->peer.has_pid)
		c->peer.pid = f->peer.pid;
	if (f->peer.has_uid)
		c->peer.uid = (uid_t)f->peer.uid;
	copy_bytes(c->peer.machine_id_hint, sizeof(c->peer.machine_id_hint),
		   f->peer.machine_id_hint);
	copy_bytes(c->peer.machine_name, sizeof(c->peer.machine_name),
		   f->peer.machine_name);
}

static void on_bind(struct vp_ipc_conn *c, const struct vp_ipc_frame *f)
{
	bool ok = vp_ipc_bytes_eq(f->bind.service_name, c->host->svc.name);
	send_bind_reply(c, f->request_id, ok);
}

static void on_invoke(struct vp_ipc_conn *c, const struct vp_ipc_frame *f,
		      struct vp_ipc_rx_frame *rf)
{
	struct vp_ipc_host *h = c->host;
	uint32_t sid = f->invoke.service_id, mid = f->invoke.method_id;

	if (sid != HOST_SERVICE_ID || mid == 0 || mid > h->svc.n_methods) {
		h->stats.unknown_methods++;
		close_fds(rf->fds, rf->n_fds);
		/* Perfetto's host answers even a drop_reply request here. */
		if (!c->closing) {
			size_t mark = vp_ipc_frame_begin(&c->tx, f->request_id);
			vp_ipc_put_invoke_reply(&c->tx, false, false, NULL, 0);
			tx_commit(c, mark, -1);
		}
		return;
	}
	conn_initialized(c);
	memcpy(c->cur_fds, rf->fds, sizeof(int) * (size_t)rf->n_fds);
	c->n_cur_fds = rf->n_fds;
	c->in_invoke = true;
	c->cur_request_id = f->request_id;
	c->cur_drop_reply = f->invoke.drop_reply;
	c->cur_replied_final = false;
	h->svc.methods[mid - 1].fn(h->svc.ctx, c, f->request_id,
				   f->invoke.args.data, f->invoke.args.len);
	c->in_invoke = false;
	if (c->cur_drop_reply && !c->cur_replied_final)
		drop_id_add(c, f->request_id); /* a reply may come later */
	close_fds(c->cur_fds, c->n_cur_fds);
	c->n_cur_fds = 0;
}

static void handle_frame(struct vp_ipc_conn *c, struct vp_ipc_rx_frame *rf)
{
	struct vp_ipc_host *h = c->host;
	struct vp_ipc_frame f;
	struct vp_error err;

	h->stats.frames_in++;
	if (vp_ipc_frame_decode(rf->data, rf->len, &f, &err) < 0) {
		close_fds(rf->fds, rf->n_fds);
		h->stats.bad_frames++;
		conn_drop(c, err.msg);
		return;
	}
	if (f.msg == VP_IPC_MSG_SET_PEER_IDENTITY) {
		close_fds(rf->fds, rf->n_fds);
		on_peer_identity(c, &f);
		return;
	}
	conn_notify_connect(c);
	if (c->closing) {
		close_fds(rf->fds, rf->n_fds);
		return;
	}
	switch (f.msg) {
	case VP_IPC_MSG_BIND_SERVICE:
		close_fds(rf->fds, rf->n_fds);
		on_bind(c, &f);
		break;
	case VP_IPC_MSG_INVOKE_METHOD:
		on_invoke(c, &f, rf);
		break;
	default:
		/* Nothing a client sends: answer as Perfetto's host does. */
		close_fds(rf->fds, rf->n_fds);
		vp_ipc_conn_error(c, f.request_id, "unknown request");
		break;
	}
}

static void conn_read(struct vp_ipc_conn *c)
{
	struct vp_ipc_host *h = c->host;
	size_t budget = CONN_READ_BUDGET;

	while (!c->closing && budget > 0) {
		size_t avail;
		uint8_t *space = vp_ipc_rx_space(&c->rx, &avail);
		if (!space) {
			/* A peer's frame the daemon has no memory for: that
			 * peer goes, the service stays. */
			conn_drop(c, "out of memory for its frame");
			return;
		}
		/* One more slot than allowed, to see a peer that sends too
		 * many (the kernel would otherwise close the excess). */
		int fds[VP_IPC_RX_MAX_FDS + 1];
		int n_fds = 0;
		ssize_t n = vp_sock_recv(c->fd, space, avail, fds,
					 VP_IPC_RX_MAX_FDS + 1, &n_fds);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			conn_close(c);
			return;
		}
		if (n == 0) {
			close_fds(fds, n_fds);
			conn_close(c);
			return;
		}
		budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
		vp_ipc_rx_commit(&c->rx, (size_t)n);
		struct vp_error err;
		if (vp_ipc_rx_add_fds(&c->rx, fds, n_fds, &err) < 0) {
			conn_drop(c, err.msg);
			return;
		}
		struct vp_ipc_rx_frame rf;
		int rc;
		while (!c->closing && (rc = vp_ipc_rx_next(&c->rx, &rf, &err))) {
			if (rc < 0) {
				h->stats.bad_frames++;
				conn_drop(c, err.msg);
				return;
			}
			handle_frame(c, &rf);
		}
	}
}

static void conn_on_event(void *ctx, int fd, uint32_t events)
{
	struct vp_ipc_conn *c = ctx;
	(void)fd;
	if (events & VP_EV_OUT) {
		conn_flush(c);
		if (!c->closing)
			run_drain(c);
	}
	if (!c->closing && (events & (VP_EV_IN | VP_EV_HUP | VP_EV_ERR)))
		conn_read(c);
}

/* ---- connections --------------------------------------------------------- */

static void fill_peer(struct vp_ipc_conn *c)
{
	struct vp_ipc_peer *p = &c->peer;
	vp_sock_peer_name(c->fd, p->addr, sizeof(p->addr));
	if (vp_sock_peer_cred(c->fd, &p->pid, &p->uid) == 0) {
		p->remote = false;
		return;
	}
	p->pid = -1;
	p->uid = (uid_t)-1;
	p->remote = true;
}

static int conn_new(struct vp_ipc_host *h, int fd, struct vp_error *err)
{
	struct vp_ipc_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return vp_errorf(err, "IPC host: out of memory for a connection");
	}
	c->host = h;
	c->fd = fd;
	vp_ipc_rx_init(&c->rx);
	pb_buf_init(&c->tx);
	fill_peer(c);
	if (vp_loop_watch(h->loop, fd, VP_EV_IN, conn_on_event, c, err) < 0) {
		vp_ipc_rx_free(&c->rx);
		close(fd);
		free(c);
		return -1;
	}
	list_add(&h->conns, c);
	h->stats.connections++;
	if (h->group) {
		struct vp_ipc_group *g = h->group;
		c->counted = true;
		c->limit_uid = c->peer.remote ? (uid_t)-1 : c->peer.uid;
		g->n_conns++;
		c->fresh = true;
		c->accepted_ms = vp_loop_now_ms();
		c->fprev = g->fresh_tail;
		if (g->fresh_tail)
			g->fresh_tail->fnext = c;
		else
			g->fresh_head = c;
		g->fresh_tail = c;
		idle_timer_arm(g);
	}
	/* A remote peer says who it is in its first frame: on_connect waits
	 * for that frame so the service sees the identity. */
	if (!c->peer.remote)
		conn_notify_connect(c);
	return 0;
}

/* ---- listening ----------------------------------------------------------- */

static void listener_on_event(void *ctx, int fd, uint32_t events);

static void accept_resume(void *ctx)
{
	struct vp_ipc_host *h = ctx;
	h->accept_timer = 0;
	for (size_t i = 0; i < h->n_listeners; i++) {
		struct listener *l = &h->listeners[i];
		if (!l->watching &&
		    vp_loop_watch(h->loop, l->fd, VP_EV_IN, listener_on_event,
				  h, NULL) == 0)
			l->watching = true;
	}
}

/* Out of fds: the pending connection would wake the loop forever, so stop
 * listening for a moment. */
static void accept_pause(struct vp_ipc_host *h, int fd)
{
	for (size_t i = 0; i < h->n_listeners; i++) {
		if (h->listeners[i].fd == fd && h->listeners[i].watching) {
			vp_loop_unwatch(h->loop, fd);
			h->listeners[i].watching = false;
		}
	}
	if (!h->accept_timer)
		h->accept_timer = vp_loop_timer(h->loop, ACCEPT_BACKOFF_MS, 0,
						accept_resume, h);
}

static void listener_on_event(void *ctx, int fd, uint32_t events)
{
	struct vp_ipc_host *h = ctx;
	(void)events;
	for (int i = 0; i < ACCEPT_BUDGET; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED ||
			    errno == EPROTO)
				continue;
			if ((errno == EMFILE || errno == ENFILE) &&
			    out_of_fds(h, fd))
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				accept_pause(h, fd);
			return;
		}
		if (h->group) {
			pid_t pid;
			uid_t uid;
			if (vp_sock_peer_cred(cfd, &pid, &uid) < 0)
				uid = (uid_t)-1;
			if (!admit(h->group, uid)) {
				close(cfd);
				h->stats.refused_conns++;
				continue;
			}
		}
		conn_new(h, cfd, NULL);
	}
}

int vp_ipc_host_new(struct vp_ipc_host **out, struct vp_loop *loop,
		    const struct vp_ipc_service *svc, struct vp_error *err)
{
	if (!svc || !svc->name)
		return vp_errorf(err, "IPC host: no service given");
	for (size_t i = 0; i < svc->n_methods; i++)
		if (!svc->methods[i].name || !svc->methods[i].fn)
			return vp_errorf(err,
					 "IPC host: service %s, method %zu has "
					 "no name or handler",
					 svc->name, i + 1);
	struct vp_ipc_host *h = calloc(1, sizeof(*h));
	if (!h)
		return vp_errorf(err, "IPC host: out of memory");
	h->loop = loop;
	h->svc = *svc;
	*out = h;
	return 0;
}

int vp_ipc_host_listen(struct vp_ipc_host *h, const char *addr,
		       struct vp_error *err)
{
	char *copy = vp_xstrdup(addr ? addr : "");
	VP_XGROW(h->listeners, h->cap_listeners, h->n_listeners + 1);
	int fd = vp_sock_listen(addr, err);
	if (fd < 0) {
		free(copy);
		return -1;
	}
	if (vp_loop_watch(h->loop, fd, VP_EV_IN, listener_on_event, h, err) <
	    0) {
		close(fd);
		vp_sock_unlink(addr);
		free(copy);
		return -1;
	}
	h->listeners[h->n_listeners++] = (struct listener){fd, copy, true};
	return 0;
}

int vp_ipc_host_adopt(struct vp_ipc_host *h, int fd, struct vp_error *err)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return vp_errorf(err, "IPC host: adopt fd %d: %s", fd,
				 strerror(errno));
	return conn_new(h, fd, err);
}

void vp_ipc_host_free(struct vp_ipc_host *h)
{
	if (!h)
		return;
	if (h->reap_timer)
		vp_loop_cancel(h->loop, h->reap_timer);
	if (h->accept_timer)
		vp_loop_cancel(h->loop, h->accept_timer);
	for (size_t i = 0; i < h->n_listeners; i++) {
		struct listener *l = &h->listeners[i];
		if (l->watching)
			vp_loop_unwatch(h->loop, l->fd);
		close(l->fd);
		vp_sock_unlink(l->addr);
		free(l->addr);
	}
	free(h->listeners);
	while (h->conns)
		conn_close(h->conns);
	if (h->group) {
		struct vp_ipc_host **pp = &h->group->hosts;
		while (*pp && *pp != h)
			pp = &(*pp)->gnext;
		if (*pp)
			*pp = h->gnext;
	}
	if (h->reap_timer) {
		vp_loop_cancel(h->loop, h->reap_timer);
		h->reap_timer = 0;
	}
	reap(h);
	/* on_disconnect may have closed nothing new (all are closed), but a
	 * timer it armed through conn_close would point here: cancel it. */
	if (h->reap_timer)
		vp_loop_cancel(h->loop, h->reap_timer);
	free(h);
}

const struct vp_ipc_host_stats *vp_ipc_host_stats(const struct vp_ipc_host *h)
{
	return &h->stats;
}

/* ---- per-connection accessors -------------------------------------------- */

int vp_ipc_conn_take_fd(struct vp_ipc_conn *c)
{
	if (c->n_cur_fds == 0)
		return -1;
	int fd = c->cur_fds[0];
	memmove(c->cur_fds, c->cur_fds + 1,
		sizeof(int) * (size_t)(c->n_cur_fds - 1));
	c->n_cur_fds--;
	return fd;
}

void vp_ipc_conn_close(struct vp_ipc_conn *c)
{
	conn_close(c);
}

void vp_ipc_conn_on_drain(struct vp_ipc_conn *c, size_t below,
			  vp_task_cb fn, void *ctx)
{
	c->drain_below = below;
	c->drain_fn = fn;
	c->drain_ctx = ctx;
	if (!c->closing)
		run_drain(c);
}

const struct vp_ipc_peer *vp_ipc_conn_peer(const struct vp_ipc_conn *c)
{
	return &c->peer;
}

void vp_ipc_conn_set_user(struct vp_ipc_conn *c, void *user)
{
	c->user = user;
}

void *vp_ipc_conn_user(const struct vp_ipc_conn *c) { return c->user; }
