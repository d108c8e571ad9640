/*
 * fuzz_ipc_frame.c - libFuzzer target for the IPC frame decoder and the
 * host's handling of a connection's byte stream.
 *
 * (a) The input is decoded as one IPCFrame, and fed to the reassembler in
 *     pieces whose frames are decoded in turn.
 * (b) The input is written, in chunks, into one end of a socketpair whose
 *     other end a host adopted; the loop runs until the host has consumed
 *     everything or dropped the connection.  Handlers reply (sometimes with
 *     has_more, sometimes after closing) so replies, drops and deferred
 *     frees are all exercised.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event_loop.h"
#include "ipc_frame.h"
#include "ipc_host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_all(const uint8_t *data, size_t size)
{
	struct vp_ipc_frame f;
	struct vp_error err;
	if (vp_ipc_frame_decode(data, size, &f, &err) == 0 &&
	    f.msg == VP_IPC_MSG_BIND_SERVICE_REPLY) {
		struct vp_ipc_method_iter it;
		uint32_t id;
		struct vp_ipc_bytes name;
		vp_ipc_methods_begin(&f, &it);
		while (vp_ipc_methods_next(&it, &id, &name)) {
		}
	}

	struct vp_ipc_rx rx;
	struct vp_ipc_rx_frame rf;
	vp_ipc_rx_init(&rx);
	rx.max_frame = 1u << 16; /* keep the fuzzer's memory small */
	size_t off = 0;
	while (off < size) {
		size_t n = 1 + (data[off] % 64);
		if (n > size - off)
			n = size - off;
		vp_ipc_rx_feed(&rx, data + off, n);
		off += n;
		int rc;
		while ((rc = vp_ipc_rx_next(&rx, &rf, &err)) == 1)
			vp_ipc_frame_decode(rf.data, rf.len, &f, &err);
		if (rc < 0)
			break;
	}
	vp_ipc_rx_free(&rx);
}

/* ---- (b) a host connection ----------------------------------------------- */

struct run {
	struct vp_loop *loop;
	int fd;
	const uint8_t *data;
	size_t size, off;
	bool gone;
};

static void h_reply(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		    const uint8_t *args, size_t len)
{
	(void)ctx;
	int fd = vp_ipc_conn_take_fd(c);
	if (fd >= 0)
		close(fd);
	vp_ipc_conn_reply(c, id, true, len > 0 && args[0] & 1, args, len, -1);
}

static void h_close(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		    const uint8_t *args, size_t len)
{
	(void)ctx;
	vp_ipc_conn_error(c, id, "closing");
	vp_ipc_conn_reply(c, id, false, false, args, len, -1);
	vp_ipc_conn_close(c);
}

static void on_disconnect(void *ctx, struct vp_ipc_conn *c)
{
	struct run *r = ctx;
	(void)c;
	r->gone = true;
}

static void pump(void *ctx, int fd, uint32_t events)
{
	struct run *r = ctx;
	(void)events;
	/* Drain what the host sent, then feed the next piece. */
	char sink[4096];
	while (read(fd, sink, sizeof(sink)) > 0) {
	}
	if (r->off < r->size) {
		size_t n = r->size - r->off < 4096 ? r->size - r->off : 4096;
		ssize_t w = write(fd, r->data + r->off, n);
		if (w > 0)
			r->off += (size_t)w;
		else if (w < 0 && errno != EAGAIN)
			r->off = r->size; /* the host hung up */
	}
}

static void tick(void *ctx)
{
	struct run *r = ctx;
	if (r->gone || r->off >= r->size)
		vp_loop_quit(r->loop);
}

static void quit_task(void *ctx) { vp_loop_quit(ctx); }

static void host_stream(const uint8_t *data, size_t size)
{
	static const struct vp_ipc_method methods[] = {
		{"Reply", h_reply},
		{"Close", h_close},
	};
	struct run r = {.data = data, .size = size};
	struct vp_ipc_service svc = {.name = "FuzzPort",
				     .methods = methods,
				     .n_methods = 2,
				     .ctx = &r,
				     .on_disconnect = on_disconnect};
	struct vp_error err;
	struct vp_ipc_host *h;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sv) < 0)
		abort();
	if (vp_loop_new(&r.loop, &err) < 0 ||
	    vp_ipc_host_new(&h, r.loop, &svc, &err) < 0 ||
	    vp_ipc_host_adopt(h, sv[1], &err) < 0)
		abort();
	r.fd = sv[0];
	vp_loop_watch(r.loop, sv[0], VP_EV_IN | VP_EV_OUT, pump, &r, &err);
	uint64_t t = vp_loop_timer(r.loop, 0, 1, tick, &r);
	/* After the last byte, let the host read it (one more pass). */
	while (!r.gone) {
		vp_loop_run(r.loop);
		if (r.gone || r.off >= r.size)
			break;
	}
	vp_loop_cancel(r.loop, t);
	vp_loop_unwatch(r.loop, sv[0]);
	/* One more turn so the host handles the tail it has not read. */
	vp_loop_post(r.loop, quit_task, r.loop);
	vp_loop_run(r.loop);
	close(sv[0]);
	vp_ipc_host_free(h);
	vp_loop_free(r.loop);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode_all(data, size);
	host_stream(data, size);
	return 0;
}
