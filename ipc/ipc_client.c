/*
 * ipc_client.c - the client end of Perfetto's IPC (see ipc_client.h):
 * one blocking socket, one bound service, replies matched to requests by
 * request_id and dispatched from vp_ipc_client_poll().
 */
#include "ipc_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "event_loop.h" /* vp_loop_now_ms */
#include "ipc_frame.h"
#include "ipc_sock.h"
#include "vp_alloc.h"

/* Reads per vp_ipc_client_poll() call before returning to the caller. */
#define CLIENT_MAX_READS 64

struct client_method {
	uint32_t id;
	char *name;
};

struct pending {
	uint64_t request_id;
	vp_ipc_reply_cb cb;
	void *ctx;
};

enum bind_state { BIND_IDLE, BIND_WAITING, BIND_OK, BIND_FAILED };

struct vp_ipc_client {
	int fd;
	struct vp_ipc_rx rx;
	struct pb_buf tx;
	uint64_t next_request_id;

	char *service_name;
	uint32_t service_id;
	struct client_method *methods;
	size_t n_methods;

	enum bind_state bind_state;
	uint64_t bind_request_id;
	struct vp_error bind_error;

	struct pending *pending;
	size_t n_pending, cap_pending;

	bool broken;              /* the connection is gone */
	struct vp_error broken_err;
	int depth;                /* > 0 while callbacks may run */
	bool close_requested;     /* vp_ipc_client_close() from a callback */

	char *capture_dir;        /* VPERFETTO_IPC_CAPTURE, or NULL */
	unsigned capture_seq;
};

/* ---- capture ------------------------------------------------------------- */

/* Writes one frame (without prefix) as <dir>/NNNNNN-<dir>.bin.  Numbers are
 * taken with O_EXCL, so several clients may share a directory.  Best
 * effort: capture never fails the connection. */
static void capture(struct vp_ipc_client *c, const char *kind,
		    const uint8_t *frame, size_t len)
{
	if (!c->capture_dir)
		return;
	char path[4096];
	for (int tries = 0; tries < 100000; tries++) {
		snprintf(path, sizeof(path), "%s/%06u-%s.bin", c->capture_dir,
			 c->capture_seq++, kind);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			      0644);
		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			return;
		}
		size_t off = 0;
		while (off < len) {
			ssize_t n = write(fd, frame + off, len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		close(fd);
		return;
	}
}

/* ---- lifetime ------------------------------------------------------------ */

struct vp_ipc_client *vp_ipc_client_from_fd(int fd)
{
	struct vp_ipc_client *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = fd;
	vp_ipc_rx_init(&c->rx);
	/* The SDK's producer thread sends through here: a message that
	 * cannot be built fails its call, never the application. */
	pb_buf_init_soft(&c->tx);
	c->next_request_id = 1;
	const char *dir = getenv("VPERFETTO_IPC_CAPTURE");
	if (dir && *dir)
		c->capture_dir = strdup(dir); /* NULL: a debug aid is off */
	return c;
}

int vp_ipc_client_connect(struct vp_ipc_client **out, const char *addr,
			  int timeout_ms, struct vp_error *err)
{
	int fd = vp_sock_connect(addr, timeout_ms, err);
	if (fd < 0)
		return -1;
	struct vp_ipc_client *c = vp_ipc_client_from_fd(fd);
	if (!c) {
		close(fd);
		return vp_errorf(err, "connect to \"%s\": out of memory", addr);
	}
	*out = c;
	return 0;
}

static void client_destroy(struct vp_ipc_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	vp_ipc_rx_free(&c->rx);
	pb_buf_free(&c->tx);
	for (size_t i = 0; i < c->n_methods; i++)
		free(c->methods[i].name);
	free(c->methods);
	free(c->pending);
	free(c->service_name);
	free(c->capture_dir);
	free(c);
}

void vp_ipc_client_close(struct vp_ipc_client *c)
{
	if (!c)
		return;
	if (c->depth > 0) {
		/* Inside a reply callback: finish the dispatch first.  Pending
		 * callbacks are dropped, not called. */
		c->close_requested = true;
		c->n_pending = 0;
		return;
	}
	client_destroy(c);
}

int vp_ipc_client_fd(const struct vp_ipc_client *c) { return c->fd; }

/* Public entry points bracket their work with enter()/leave(), so a
 * callback that closes the client only marks it; the outermost leave()
 * frees it, and the entry point then returns without touching it. */
static void enter(struct vp_ipc_client *c) { c->depth++; }

static bool leave(struct vp_ipc_client *c)
{
	if (--c->depth == 0 && c->close_requested) {
		client_destroy(c);
		return true;
	}
	return false;
}

static int closed_by_callback(struct vp_error *err)
{
	return vp_errorf(err, "IPC client closed by a reply callback");
}


/* ---- pending requests ---------------------------------------------------- */

/* Room for one more pending request, made before its request is sent
 * so that a reply always finds its callback.  0, or -1 (out of memory). */
static int pending_reserve(struct vp_ipc_client *c)
{
	return VP_GROW(c->pending, c->cap_pending, c->n_pending + 1);
}

static void pending_add(struct vp_ipc_client *c, uint64_t id,
			vp_ipc_reply_cb cb, void *ctx)
{
	c->pending[c->n_pending++] = (struct pending){id, cb, ctx};
}

static struct pending *pending_find(struct vp_ipc_client *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_pending; i++)
		if (c->pending[i].request_id == id)
			return &c->pending[i];
	return NULL;
}

static void pending_remove(struct vp_ipc_client *c, uint64_t id)
{
	struct pending *p = pending_find(c, id);
	if (!p)
		return;
	size_t i = (size_t)(p - c->pending);
	memmove(p, p + 1, (c->n_pending - i - 1) * sizeof(*p));
	c->n_pending--;
}

/* The connection is gone: every pending callback learns it once. */
static int client_fail(struct vp_ipc_client *c, struct vp_error *err,
		       const char *what, const char *detail)
{
	if (!c->broken) {
		c->broken = true;
		vp_errorf(&c->broken_err, "%s: %s", what, detail);
		size_t n = c->n_pending;
		struct pending *list = c->pending;
		c->pending = NULL;
		c->n_pending = c->cap_pending = 0;
		if (c->bind_state == BIND_WAITING) {
			c->bind_state = BIND_FAILED;
			c->bind_error = c->broken_err;
		}
		struct vp_ipc_reply r = {.disconnected = true, .fd = -1};
		c->depth++;
		for (size_t i = 0; i < n && !c->close_requested; i++)
			if (list[i].cb)
				list[i].cb(list[i].ctx, &r);
		c->depth--;
		free(list);
	}
	return vp_errorf(err, "%s", c->broken_err.msg);
}

/* ---- sending ------------------------------------------------------------- */

/* Sends the frame built in c->tx (prefix included). */
static int client_send(struct vp_ipc_client *c, int pass_fd,
		       struct vp_error *err)
{
	if (c->broken)
		return vp_errorf(err, "%s", c->broken_err.msg);
	if (pb_buf_failed(&c->tx))
		return vp_errorf(err, "IPC send: out of memory");
	if (c->tx.len - VP_IPC_FRAME_HDR > VP_IPC_MAX_FRAME)
		return vp_errorf(err,
				 "IPC frame of %zu bytes exceeds the limit of "
				 "%u",
				 c->tx.len - VP_IPC_FRAME_HDR,
				 VP_IPC_MAX_FRAME);
	capture(c, "tx", c->tx.data + VP_IPC_FRAME_HDR,
		c->tx.len - VP_IPC_FRAME_HDR);
	if (vp_sock_send_all(c->fd, c->tx.data, c->tx.len, pass_fd) < 0)
		return client_fail(c, err, "IPC send", strerror(errno));
	return 0;
}

int vp_ipc_client_set_peer_identity(struct vp_ipc_client *c, int32_t pid,
				    int32_t uid, const char *machine_id_hint,
				    const char *machine_name,
				    struct vp_error *err)
{
	pb_buf_reset(&c->tx);
	size_t m = vp_ipc_frame_begin(&c->tx, c->next_request_id++);
	vp_ipc_put_peer_identity(&c->tx, pid, uid, machine_id_hint,
				 machine_name);
	vp_ipc_frame_end(&c->tx, m);
	enter(c);
	int rc = client_send(c, -1, err);
	if (leave(c))
		return closed_by_callback(err);
	return rc;
}

static const struct client_method *find_method(const struct vp_ipc_client *c,
					       const char *name)
{
	for (size_t i = 0; i < c->n_methods; i++)
		if (strcmp(c->methods[i].name, name) == 0)
			return &c->methods[i];
	return NULL;
}

bool vp_ipc_client_has_method(const struct vp_ipc_client *c,
			      const char *method)
{
	return find_method(c, method) != NULL;
}

/* Sends an InvokeMethod; returns its request id, or 0 on error. */
static uint64_t client_invoke(struct vp_ipc_client *c, const char *method,
			      const void *args, size_t len, int pass_fd,
			      vp_ipc_reply_cb cb, void *ctx,
			      struct vp_error *err)
{
	if (c->bind_state != BIND_OK) {
		vp_errorf(err, "invoke %s: no service bound", method);
		return 0;
	}
	const struct client_method *m = find_method(c, method);
	if (!m) {
		vp_errorf(err, "invoke %s: not a method of %s", method,
			  c->service_name);
		return 0;
	}
	if (cb && pending_reserve(c) < 0) {
		vp_errorf(err, "invoke %s: out of memory", method);
		return 0;
	}
	uint64_t id = c->next_request_id++;
	pb_buf_reset(&c->tx);
	size_t mark = vp_ipc_frame_begin(&c->tx, id);
	vp_ipc_put_invoke(&c->tx, c->service_id, m->id, args, len, cb == NULL);
	vp_ipc_frame_end(&c->tx, mark);
	if (client_send(c, pass_fd, err) < 0)
		return 0;
	if (cb)
		pending_add(c, id, cb, ctx);
	return id;
}

int vp_ipc_client_invoke(struct vp_ipc_client *c, const char *method,
			 const void *args, size_t len, int pass_fd,
			 vp_ipc_reply_cb cb, void *ctx, struct vp_error *err)
{
	enter(c);
	uint64_t id = client_invoke(c, method, args, len, pass_fd, cb, ctx,
				    err);
	if (leave(c))
		return closed_by_callback(err);
	return id ? 0 : -1;
}

/* ---- receiving ----------------------------------------------------------- */

static void close_fds(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

static void on_bind_reply(struct vp_ipc_client *c,
			  const struct vp_ipc_frame *f)
{
	if (c->bind_state != BIND_WAITING || f->request_id != c->bind_request_id)
		return;
	if (!f->bind_reply.success) {
		c->bind_state = BIND_FAILED;
		vp_errorf(&c->bind_error, "the peer does not offer service %s",
			  c->service_name);
		return;
	}
	struct client_method *ms = calloc(f->bind_reply.n_methods + 1,
					  sizeof(*ms));
	if (!ms)
		goto oom;
	size_t n = 0;
	struct vp_ipc_method_iter it;
	uint32_t id;
	struct vp_ipc_bytes name;
	vp_ipc_methods_begin(f, &it);
	while (n < f->bind_reply.n_methods &&
	       vp_ipc_methods_next(&it, &id, &name)) {
		ms[n].id = id;
		ms[n].name = strndup((const char *)name.data, name.len);
		if (!ms[n].name)
			goto oom;
		n++;
	}
	for (size_t i = 0; i < c->n_methods; i++)
		free(c->methods[i].name);
	free(c->methods);
	c->methods = ms;
	c->n_methods = n;
	c->service_id = f->bind_reply.service_id;
	c->bind_state = BIND_OK;
	return;
oom:
	/* The bind fails; the caller may try again. */
	if (ms)
		for (size_t i = 0; i < n; i++)
			free(ms[i].name);
	free(ms);
	c->bind_state = BIND_FAILED;
	vp_errorf(&c->bind_error, "out of memory for the methods of %s",
		  c->service_name);
}

static void on_reply(struct vp_ipc_client *c, const struct vp_ipc_frame *f,
		     const struct vp_ipc_rx_frame *rf)
{
	struct pending *p = pending_find(c, f->request_id);
	if (!p) {
		/* A reply nobody waits for (drop_reply, a timed-out call). */
		close_fds(rf->fds, rf->n_fds);
		return;
	}
	struct pending cur = *p;
	if (!f->reply.has_more)
		pending_remove(c, f->request_id);
	struct vp_ipc_reply r = {
		.success = f->reply.success,
		.has_more = f->reply.has_more,
		.data = f->reply.reply.data,
		.len = f->reply.reply.len,
		.fd = rf->n_fds > 0 ? rf->fds[0] : -1,
	};
	close_fds(rf->fds + 1, rf->n_fds > 1 ? rf->n_fds - 1 : 0);
	cur.cb(cur.ctx, &r);
}

static void on_request_error(struct vp_ipc_client *c,
			     const struct vp_ipc_frame *f)
{
	if (c->bind_state == BIND_WAITING && f->request_id == c->bind_request_id) {
		c->bind_state = BIND_FAILED;
		vp_errorf(&c->bind_error, "request error: %.*s",
			 (int)(f->error.error.len > 200 ? 200
							: f->error.error.len),
			 f->error.error.len ? (const char *)f->error.error.data
					    : "");
		return;
	}
	struct pending *p = pending_find(c, f->request_id);
	if (!p)
		return;
	struct pending cur = *p;
	pending_remove(c, f->request_id);
	struct vp_ipc_reply r = {.fd = -1};
	cur.cb(cur.ctx, &r);
}

static int handle_frame(struct vp_ipc_client *c,
			const struct vp_ipc_rx_frame *rf, struct vp_error *err)
{
	struct vp_ipc_frame f;
	struct vp_error derr;

	capture(c, "rx", rf->data, rf->len);
	if (vp_ipc_frame_decode(rf->data, rf->len, &f, &derr) < 0) {
		close_fds(rf->fds, rf->n_fds);
		char what[64];
		snprintf(what, sizeof(what),
			 "IPC receive: bad frame at stream offset %llu",
			 (unsigned long long)rf->offset);
		return client_fail(c, err, what, derr.msg);
	}
	switch (f.msg) {
	case VP_IPC_MSG_BIND_SERVICE_REPLY:
		close_fds(rf->fds, rf->n_fds);
		on_bind_reply(c, &f);
		break;
	case VP_IPC_MSG_INVOKE_METHOD_REPLY:
		on_reply(c, &f, rf);
		break;
	case VP_IPC_MSG_REQUEST_ERROR:
		close_fds(rf->fds, rf->n_fds);
		on_request_error(c, &f);
		break;
	default:
		close_fds(rf->fds, rf->n_fds); /* not for a client */
		break;
	}
	return 0;
}

/* One recvmsg and the frames it completes.  1: read something, 0: nothing
 * to read, -1: the connection failed. */
static int read_once(struct vp_ipc_client *c, struct vp_error *err)
{
	size_t avail;
	uint8_t *space = vp_ipc_rx_space(&c->rx, &avail);
	if (!space)
		return client_fail(c, err, "IPC receive", "out of memory");
	int fds[VP_IPC_RX_MAX_FDS];
	int n_fds = 0;
	ssize_t n = vp_sock_recv(c->fd, space, avail, fds, VP_IPC_RX_MAX_FDS,
				 &n_fds);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return client_fail(c, err, "IPC receive", strerror(errno));
	}
	if (n == 0) {
		close_fds(fds, n_fds);
		return client_fail(c, err, "IPC receive",
				   "the service closed the connection");
	}
	vp_ipc_rx_commit(&c->rx, (size_t)n);
	struct vp_error ferr;
	if (vp_ipc_rx_add_fds(&c->rx, fds, n_fds, &ferr) < 0)
		return client_fail(c, err, "IPC receive", ferr.msg);
	struct vp_ipc_rx_frame rf;
	int rc;
	while (!c->close_requested && !c->broken &&
	       (rc = vp_ipc_rx_next(&c->rx, &rf, &ferr)) != 0) {
		if (rc < 0)
			return client_fail(c, err, "IPC receive", ferr.msg);
		if (handle_frame(c, &rf, err) < 0)
			return -1;
	}
	return c->broken ? vp_errorf(err, "%s", c->broken_err.msg) : 1;
}

static int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	uint64_t deadline = vp_loop_now_ms() + (uint64_t)(timeout_ms > 0
							       ? timeout_ms
							       : 0);
	for (;;) {
		int rc = poll(&p, 1, timeout_ms);
		if (rc >= 0)
			return rc;
		if (errno != EINTR)
			return -1;
		if (timeout_ms > 0) {
			uint64_t now = vp_loop_now_ms();
			timeout_ms = now >= deadline ? 0
						     : (int)(deadline - now);
		}
	}
}

static int client_poll(struct vp_ipc_client *c, int timeout_ms,
		       struct vp_error *err)
{
	int rc = 0;

	if (c->broken)
		return vp_errorf(err, "%s", c->broken_err.msg);
	for (int i = 0; i < CLIENT_MAX_READS && !c->close_requested; i++) {
		int w = wait_readable(c->fd, i == 0 ? timeout_ms : 0);
		if (w < 0) {
			rc = client_fail(c, err, "IPC poll", strerror(errno));
			break;
		}
		if (w == 0)
			break;
		int r = read_once(c, err);
		if (r <= 0) {
			rc = r;
			break;
		}
	}
	if (c->close_requested)
		return closed_by_callback(err);
	return rc;
}

int vp_ipc_client_poll(struct vp_ipc_client *c, int timeout_ms,
		       struct vp_error *err)
{
	enter(c);
	int rc = client_poll(c, timeout_ms, err);
	return leave(c) ? -1 : rc;
}

/* ---- blocking helpers ---------------------------------------------------- */

/* One poll for a blocking call, bounded by its deadline (timeout_ms < 0:
 * none).  0, or -1 on timeout or a broken connection (err filled). */
static int wait_step(struct vp_ipc_client *c, uint64_t deadline,
		     int timeout_ms, const char *what, struct vp_error *err)
{
	int left = -1;
	if (timeout_ms >= 0) {
		uint64_t now = vp_loop_now_ms();
		if (now >= deadline)
			return vp_errorf(err, "%s: no reply within %d ms", what,
					 timeout_ms);
		left = (int)(deadline - now);
	}
	return client_poll(c, left, err) < 0 ? -1 : 0;
}

static int client_bind(struct vp_ipc_client *c, const char *service_name,
		       int timeout_ms, struct vp_error *err)
{
	uint64_t deadline = vp_loop_now_ms() +
			    (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	char *name = strdup(service_name);
	if (!name)
		return vp_errorf(err, "bind %s: out of memory", service_name);
	free(c->service_name);
	c->service_name = name;
	c->bind_request_id = c->next_request_id++;
	c->bind_state = BIND_WAITING;
	pb_buf_reset(&c->tx);
	size_t m = vp_ipc_frame_begin(&c->tx, c->bind_request_id);
	vp_ipc_put_bind(&c->tx, service_name);
	vp_ipc_frame_end(&c->tx, m);
	if (client_send(c, -1, err) < 0) {
		c->bind_state = BIND_FAILED;
		return -1;
	}
	char what[300];
	snprintf(what, sizeof(what), "bind %s", service_name);
	while (c->bind_state == BIND_WAITING) {
		if (wait_step(c, deadline, timeout_ms, what, err) < 0 &&
		    c->bind_state == BIND_WAITING) {
			c->bind_state = BIND_FAILED;
			return -1;
		}
	}
	if (c->bind_state != BIND_OK)
		return vp_errorf(err, "bind %s: %s", service_name,
				 c->bind_error.msg);
	return 0;
}

/* The outcome of vp_ipc_client_call(), filled by its callback. */
struct call_result {
	bool done;
	bool success;
	bool disconnected;
	bool oom; /* the reply came but could not be kept */
	uint8_t *data;
	size_t len;
	int fd;
};

static void call_cb(void *ctx, const struct vp_ipc_reply *r)
{
	struct call_result *res = ctx;
	if (res->done) {
		if (r->fd >= 0)
			close(r->fd);
		return;
	}
	res->done = true;
	res->success = r->success;
	res->disconnected = r->disconnected;
	res->fd = r->fd;
	res->len = r->len;
	res->data = malloc(r->len ? r->len : 1);
	if (!res->data) {
		res->success = false;
		res->oom = true;
		return;
	}
	if (r->len)
		memcpy(res->data, r->data, r->len);
}

static int client_call(struct vp_ipc_client *c, const char *method,
		       const void *args, size_t len, uint8_t **reply,
		       size_t *reply_len, int *fd_out, int timeout_ms,
		       struct vp_error *err)
{
	uint64_t deadline = vp_loop_now_ms() +
			    (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	struct call_result res = {.fd = -1};
	char what[300];

	if (fd_out)
		*fd_out = -1;
	uint64_t id = client_invoke(c, method, args, len, -1, call_cb, &res,
				    err);
	if (id == 0)
		return -1;
	snprintf(what, sizeof(what), "%s.%s", c->service_name, method);
	int rc = 0;
	while (!res.done && rc == 0)
		rc = wait_step(c, deadline, timeout_ms, what, err);
	if (res.done && !res.disconnected)
		rc = 0; /* the reply came, even if the peer left right after */
	/* A streaming or late reply must not reach this stack frame. */
	if (!c->broken)
		pending_remove(c, id);
	if (rc < 0) {
		free(res.data);
		if (res.fd >= 0)
			close(res.fd);
		return -1;
	}
	if (!res.success) {
		free(res.data);
		if (res.fd >= 0)
			close(res.fd);
		return vp_errorf(err, "%s: %s", what,
				 res.oom ? "out of memory for the reply"
				 : res.disconnected ? "connection lost"
						    : "the service failed the "
						      "request");
	}
	*reply = res.data;
	*reply_len = res.len;
	if (fd_out)
		*fd_out = res.fd;
	else if (res.fd >= 0)
		close(res.fd);
	return 0;
}

int vp_ipc_client_bind(struct vp_ipc_client *c, const char *service_name,
		       int timeout_ms, struct vp_error *err)
{
	enter(c);
	int rc = client_bind(c, service_name, timeout_ms, err);
	return leave(c) ? -1 : rc;
}

int vp_ipc_client_call(struct vp_ipc_client *c, const char *method,
		       const void *args, size_t len, uint8_t **reply,
		       size_t *reply_len, int *fd_out, int timeout_ms,
		       struct vp_error *err)
{
	enter(c);
	int rc = client_call(c, method, args, len, reply, reply_len, fd_out,
			     timeout_ms, err);
	if (leave(c)) {
		if (rc == 0) {
			free(*reply);
			*reply = NULL;
			if (fd_out && *fd_out >= 0) {
				close(*fd_out);
				*fd_out = -1;
			}
		}
		return closed_by_callback(err);
	}
	return rc;
}
