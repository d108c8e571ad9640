/*
 * guest_ctl_client.c - the host's blocking client of vperfetto_guest_ctl
 * (see guest_ctl_client.h; the protocol is ctl/ctl_proto.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "ctl_proto.h"
#include "guest_ctl_client.h"
#include "out_file.h"
#include "event_loop.h"
#include "ipc_sock.h"

/* How long a request waits for its answer before it is sent again.  A
 * START waits longer: the guest answers it only once its consumer has
 * lived a moment (GC_START_GRACE_MS, 1 s). */
#define RESEND_MS 1000
#define START_RESEND_MS 5000

struct vp_guest_ctl {
	int fd;
	char addr[256];
	uint32_t next_id;
	struct vp_ctl_decoder dec;
	uint8_t in[65536];   /* bytes read but not yet decoded */
	size_t in_off, in_len;
	struct vp_ctl_msg msg; /* the last reply (large: kept off the stack) */
	bool timed_out;        /* the last request had no answer in time */
};

/* "30 s" or "500 ms", for messages. */
static void fmt_timeout(int ms, char *buf, size_t len)
{
	if (ms >= 1000 && ms % 1000 == 0)
		snprintf(buf, len, "%d s", ms / 1000);
	else
		snprintf(buf, len, "%d ms", ms);
}

/* ---- connecting --------------------------------------------------------- */

int vp_guest_ctl_connect(const char *addr, int timeout_ms,
			 struct vp_guest_ctl **out, struct vp_error *err)
{
	const char *a = strncmp(addr, "unix:", 5) == 0 ? addr + 5 : addr;
	struct vp_error e;
	struct stat st;
	int fd;

	*out = NULL;
	if (a[0] == '/' && stat(a, &st) == 0 && S_ISCHR(st.st_mode))
		fd = vp_chardev_open(a, false, &e);
	else
		fd = vp_sock_connect(a, timeout_ms, &e);
	if (fd < 0)
		return vp_errorf(err, "cannot reach the guest's control "
				 "endpoint at %s: %s", addr, e.msg);
	return vp_guest_ctl_from_fd(fd, addr, out, err);
}

int vp_guest_ctl_from_fd(int fd, const char *name, struct vp_guest_ctl **out,
			 struct vp_error *err)
{
	*out = NULL;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;
		close(fd);
		return vp_errorf(err, "%s: fcntl: %s", name, strerror(e));
	}
	struct vp_guest_ctl *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return vp_errorf(err, "out of memory");
	}
	c->fd = fd;
	snprintf(c->addr, sizeof(c->addr), "%s", name);
	/* Ids differ from an earlier run's, whose replies may still be on a
	 * serial port. */
	c->next_id = ((uint32_t)getpid() << 16) ^ (uint32_t)vp_loop_now_ms() ^
		     (uint32_t)time(NULL) << 8;
	if (c->next_id == 0)
		c->next_id = 1;
	vp_ctl_decoder_init(&c->dec);
	*out = c;
	return 0;
}

void vp_guest_ctl_close(struct vp_guest_ctl *c)
{
	if (!c)
		return;
	close(c->fd);
	vp_ctl_decoder_free(&c->dec);
	free(c);
}

/* ---- frames ------------------------------------------------------------- */

bool vp_guest_ctl_timed_out(const struct vp_guest_ctl *c)
{
	return c->timed_out;
}

/* Sends a request (id assigned here) before deadline. */
static int send_request(struct vp_guest_ctl *c, struct vp_ctl_msg *m,
			uint64_t deadline, struct vp_error *err)
{
	uint8_t *frame, *p;
	size_t len;

	m->id = c->next_id++;
	if (c->next_id == 0)
		c->next_id = 1;
	if (vp_ctl_encode(m, &frame, &len, err) < 0)
		return -1;
	p = frame;
	while (len > 0) {
		ssize_t w = write(c->fd, p, len);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN) {
			int e = errno;
			free(frame);
			return vp_errorf(err, "sending %s to the guest on %s: "
					 "%s", vp_ctl_type_name(m->type),
					 c->addr, strerror(e));
		}
		uint64_t now = vp_loop_now_ms();
		if (now >= deadline) {
			free(frame);
			return vp_errorf(err, "sending %s to the guest on %s: "
					 "timed out (the guest reads "
					 "nothing)", vp_ctl_type_name(m->type),
					 c->addr);
		}
		struct pollfd pf = {.fd = c->fd, .events = POLLOUT};
		poll(&pf, 1, (int)(deadline - now));
	}
	free(frame);
	return 0;
}

/* The next frame from the guest, parsed into c->msg.  Returns 1 with a
 * frame, 0 at the deadline, -1 on a closed or failed link. */
static int next_frame(struct vp_guest_ctl *c, uint64_t deadline,
		      struct vp_error *err)
{
	for (;;) {
		struct vp_ctl_frame f;
		bool got;
		c->in_off += vp_ctl_decode(&c->dec, c->in + c->in_off,
					   c->in_len - c->in_off, &f, &got);
		if (got) {
			struct vp_error e;
			if (vp_ctl_parse_payload(f.type, f.id, f.payload,
						 f.len, &c->msg, &e) < 0)
				continue; /* not for us to fix: skip it */
			return 1;
		}
		c->in_off = c->in_len = 0;
		uint64_t now = vp_loop_now_ms();
		if (now >= deadline)
			return 0;
		struct pollfd pf = {.fd = c->fd, .events = POLLIN};
		int r = poll(&pf, 1, (int)(deadline - now));
		if (r <= 0)
			continue;
		ssize_t n = read(c->fd, c->in, sizeof(c->in));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return vp_errorf(err, "reading from the guest on %s: %s",
					 c->addr, strerror(errno));
		if (n == 0)
			return vp_errorf(err, "the guest's control endpoint on "
					 "%s closed the connection", c->addr);
		c->in_len = (size_t)n;
	}
}

/* Waits for a reply to request id (frames for other ids are stale and
 * skipped).  An ERROR reply becomes err.  what names the request for
 * messages. */
static int wait_reply(struct vp_guest_ctl *c, uint32_t first_id,
		      uint32_t last_id, uint64_t deadline, int timeout_ms,
		      const char *what, struct vp_error *err)
{
	struct vp_error e;
	char tmo[32];

	c->timed_out = false; /* this wait's, the last one's of a call */
	for (;;) {
		int r = next_frame(c, deadline, &e);
		if (r < 0)
			return vp_errorf(err, "%s: %s", what, e.msg);
		if (r == 0) {
			c->timed_out = true;
			fmt_timeout(timeout_ms, tmo, sizeof(tmo));
			return vp_errorf(err, "guest did not answer %s within "
					 "%s on %s", what, tmo, c->addr);
		}
		if (c->msg.id - first_id > last_id - first_id)
			continue;
		if (c->msg.type == VP_CTL_ERROR)
			return vp_errorf(err, "guest: %s failed: %s", what,
					 c->msg.text);
		return 0;
	}
}

/* Checks the reply type; a wrong one is a protocol error. */
static int expect(struct vp_guest_ctl *c, uint8_t type, const char *what,
		  struct vp_error *err)
{
	if (c->msg.type == type)
		return 0;
	return vp_errorf(err, "guest answered %s with %s (want %s) on %s",
			 what, vp_ctl_type_name(c->msg.type),
			 vp_ctl_type_name(type), c->addr);
}

/* When a request given timeout_ms from now times out. */
static uint64_t deadline_in(int timeout_ms)
{
	return vp_loop_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
}

/* One request, one reply of type want. */
static int call(struct vp_guest_ctl *c, struct vp_ctl_msg *req, uint8_t want,
		int timeout_ms, struct vp_error *err)
{
	uint64_t deadline = deadline_in(timeout_ms);
	const char *what = vp_ctl_type_name(req->type);

	c->timed_out = false;
	if (send_request(c, req, deadline, err) < 0)
		return -1;
	if (wait_reply(c, req->id, req->id, deadline, timeout_ms, what,
		       err) < 0)
		return -1;
	return expect(c, want, what, err);
}

/* call() for an idempotent request, sent again every resend_ms until any
 * of its copies is answered or the timeout passes: a frame lost on the
 * serial port (or sent before the guest listened) costs a resend
 * interval, not the whole timeout.  The guest answers a repeated HELLO,
 * START (same start key) or STOP as the first. */
static int call_resending(struct vp_guest_ctl *c, struct vp_ctl_msg *req,
			  uint8_t want, int timeout_ms, int resend_ms,
			  struct vp_error *err)
{
	uint64_t deadline = deadline_in(timeout_ms);
	const char *what = vp_ctl_type_name(req->type);
	uint32_t first = 0;

	c->timed_out = false;
	for (;;) {
		uint64_t now = vp_loop_now_ms();
		uint64_t until = now + (uint64_t)resend_ms < deadline
					 ? now + (uint64_t)resend_ms : deadline;
		if (send_request(c, req, deadline, err) < 0)
			return -1;
		if (!first)
			first = req->id;
		if (wait_reply(c, first, req->id, until, timeout_ms, what,
			       err) == 0)
			return expect(c, want, what, err);
		if (vp_loop_now_ms() < until || until >= deadline)
			return -1; /* an error, or the real deadline */
	}
}

/* ---- requests ----------------------------------------------------------- */

int vp_guest_ctl_hello(struct vp_guest_ctl *c, int timeout_ms,
		       struct vp_guest_info *info, struct vp_error *err)
{
	struct vp_ctl_msg *req = calloc(1, sizeof(*req));
	int rc = -1;

	if (!req)
		return vp_errorf(err, "out of memory");
	req->type = VP_CTL_HELLO;
	req->version = VP_CTL_VERSION;
	gethostname(req->machine, sizeof(req->machine) - 1);
	if (call_resending(c, req, VP_CTL_HELLO_REPLY, timeout_ms,
			   RESEND_MS, err) < 0)
		goto out;
	if (c->msg.version != VP_CTL_VERSION) {
		vp_errorf(err, "guest on %s speaks control protocol version "
			  "%u, we speak %u", c->addr, c->msg.version,
			  VP_CTL_VERSION);
		goto out;
	}
	if (info) {
		memset(info, 0, sizeof(*info));
		info->version = c->msg.version;
		memcpy(info->machine, c->msg.machine, sizeof(info->machine));
		memcpy(info->uname, c->msg.uname, sizeof(info->uname));
		memcpy(info->consumer, c->msg.consumer, sizeof(info->consumer));
		info->consumer_ok = c->msg.consumer_ok;
		info->state = c->msg.state;
		info->trace_size = c->msg.trace_size;
	}
	rc = 0;
out:
	free(req);
	return rc;
}

/* A key no earlier START to this guest had: random where the kernel
 * gives randomness, else made of our pid, the time and the request id. */
static uint64_t new_start_key(const struct vp_guest_ctl *c)
{
	uint64_t k = 0;

	if (getrandom(&k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k))
		k = ((uint64_t)getpid() << 40) ^ ((uint64_t)time(NULL) << 20) ^
		    vp_loop_now_ms() ^ c->next_id;
	return k ? k : 1;
}

int vp_guest_ctl_start(struct vp_guest_ctl *c, const uint8_t *config,
		       size_t config_len, const char *session_name,
		       int timeout_ms, uint32_t *pid, struct vp_error *err)
{
	struct vp_ctl_msg *req = calloc(1, sizeof(*req));
	int rc;

	if (!req)
		return vp_errorf(err, "out of memory");
	req->type = VP_CTL_START;
	req->bytes = config;
	req->bytes_len = config_len;
	if (session_name)
		snprintf(req->session, sizeof(req->session), "%s",
			 session_name);
	req->start_key = new_start_key(c);
	rc = call_resending(c, req, VP_CTL_STARTED, timeout_ms,
			    START_RESEND_MS, err);
	free(req);
	if (rc == 0 && pid)
		*pid = c->msg.pid;
	return rc;
}

int vp_guest_ctl_stop(struct vp_guest_ctl *c, int timeout_ms,
		      uint64_t *trace_size, struct vp_error *err)
{
	struct vp_ctl_msg *req = calloc(1, sizeof(*req));
	int rc;

	if (!req)
		return vp_errorf(err, "out of memory");
	req->type = VP_CTL_STOP;
	rc = call_resending(c, req, VP_CTL_STOPPED, timeout_ms,
			    RESEND_MS, err);
	free(req);
	if (rc == 0 && trace_size)
		*trace_size = c->msg.trace_size;
	return rc;
}

int vp_guest_ctl_ping(struct vp_guest_ctl *c, int timeout_ms,
		      struct vp_guest_status *st, struct vp_error *err)
{
	struct vp_ctl_msg *req = calloc(1, sizeof(*req));
	int rc;

	if (!req)
		return vp_errorf(err, "out of memory");
	req->type = VP_CTL_PING;
	rc = call(c, req, VP_CTL_PONG, timeout_ms, err);
	free(req);
	if (rc < 0)
		return -1;
	if (st) {
		memset(st, 0, sizeof(*st));
		st->state = c->msg.state;
		st->exit_status = c->msg.exit_status;
		st->trace_size = c->msg.trace_size;
		memcpy(st->session, c->msg.session, sizeof(st->session));
		snprintf(st->message, sizeof(st->message), "%s", c->msg.text);
	}
	if (c->msg.state == VP_CTL_FAILED)
		return vp_errorf(err, "guest session failed: %s",
				 c->msg.text[0] ? c->msg.text : "(no message)");
	return 0;
}

/* ---- pull --------------------------------------------------------------- */

struct pull {
	struct vp_out *out;
	uint64_t received;
	uLong crc;
};

static int pull_open(struct pull *p, const char *path, struct vp_error *err)
{
	p->crc = crc32(0L, Z_NULL, 0);
	return vp_out_open(&p->out, path, 0, err);
}

static void pull_abort(struct pull *p)
{
	vp_out_abort(p->out);
	p->out = NULL;
}

static int pull_write(struct pull *p, const uint8_t *b, size_t n,
		      const char *path, struct vp_error *err)
{
	(void)path;
	p->crc = crc32(p->crc, b, (uInt)n);
	p->received += n;
	return vp_out_write(p->out, b, n, err);
}

/* fsync, rename into place. */
static int pull_commit(struct pull *p, const char *path, struct vp_error *err)
{
	(void)path;
	struct vp_out *o = p->out;
	p->out = NULL;
	return vp_out_commit(o, err);
}

/* The DATA / END stream of a PULL. */
static int pull_stream(struct vp_guest_ctl *c, struct pull *p, uint32_t id,
		       const char *path, int stall_timeout_ms,
		       vp_guest_ctl_progress_fn progress, void *progress_ctx,
		       struct vp_error *err)
{
	for (;;) {
		uint64_t deadline = vp_loop_now_ms() + (uint64_t)stall_timeout_ms;
		if (wait_reply(c, id, id, deadline, stall_timeout_ms,
			       "PULL", err) < 0)
			return -1;
		struct vp_ctl_msg *m = &c->msg;
		if (m->type == VP_CTL_END) {
			if (m->total != p->received)
				return vp_errorf(err, "pulling %s: the guest "
						 "sent %llu bytes but says the "
						 "trace has %llu", path,
						 (unsigned long long)p->received,
						 (unsigned long long)m->total);
			if (m->crc != (uint32_t)p->crc)
				return vp_errorf(err, "CRC mismatch pulling "
						 "%s: got %08x, the guest says "
						 "%08x", path,
						 (unsigned)p->crc, m->crc);
			return 0;
		}
		if (m->type != VP_CTL_DATA)
			return expect(c, VP_CTL_DATA, "PULL", err);
		if (m->offset != p->received)
			return vp_errorf(err, "pulling %s: DATA at offset %llu, "
					 "expected %llu", path,
					 (unsigned long long)m->offset,
					 (unsigned long long)p->received);
		if (pull_write(p, m->bytes, m->bytes_len, path, err) < 0)
			return -1;
		if (progress)
			progress(progress_ctx, p->received);
	}
}

int vp_guest_ctl_pull(struct vp_guest_ctl *c, const char *path,
		      uint32_t chunk, int stall_timeout_ms,
		      vp_guest_ctl_progress_fn progress, void *progress_ctx,
		      uint64_t *size, struct vp_error *err)
{
	struct vp_ctl_msg *req = calloc(1, sizeof(*req));
	struct pull p = {.out = NULL};
	int rc = -1;

	if (!req)
		return vp_errorf(err, "out of memory");
	if (stall_timeout_ms <= 0)
		stall_timeout_ms = 1;
	if (pull_open(&p, path, err) < 0)
		goto out;
	req->type = VP_CTL_PULL;
	req->offset = 0;
	req->chunk = chunk;
	if (send_request(c, req, vp_loop_now_ms() + (uint64_t)stall_timeout_ms,
			 err) < 0)
		goto out;
	if (pull_stream(c, &p, req->id, path, stall_timeout_ms, progress,
			progress_ctx, err) < 0 ||
	    pull_commit(&p, path, err) < 0)
		goto out;
	if (size)
		*size = p.received;
	rc = 0;
out:
	pull_abort(&p);
	free(req);
	return rc;
}
