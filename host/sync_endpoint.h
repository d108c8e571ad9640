/*
 * sync_endpoint.h - the host side of the clock-sync exchange: answers each
 * guest request (sync_proto.h) with the host's cpu counter, read right
 * after the read() that completed the request.
 *
 * Transports, all served by one thread running an event loop:
 *   vsock       listens on vsock://-1:PORT (default 20020) when AF_VSOCK
 *               works on this host, else a warning;
 *   UNIX        listens on a UNIX stream socket path;
 *   chardev     the host end of a virtio-serial port: QEMU's
 *               `-chardev socket,path=P,server=on` is a UNIX socket we
 *               connect to; a character device or pty path is opened
 *               instead.  Either is reopened (every second) when it drops.
 * Many clients at once; a client sending garbage is resynchronized on the
 * frame magic and counted; a client that floods without reading its
 * replies is paused (its replies wait, its requests stay in the kernel)
 * and never stalls the others.
 */
#ifndef HOST_SYNC_ENDPOINT_H
#define HOST_SYNC_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync_proto.h"
#include "vp_error.h"

struct sync_endpoint_opts {
	bool vsock;           /* listen on vsock */
	uint32_t vsock_port;  /* default VP_SYNC_DEFAULT_VSOCK_PORT */
	const char *unix_path;    /* NULL: none */
	const char *qemu_chardev; /* NULL: none */
};

struct sync_endpoint_stats {
	uint64_t served;           /* requests answered */
	uint64_t clients;          /* connections accepted / opened */
	uint64_t garbage_bytes;    /* bytes skipped while resynchronizing */
	uint64_t unexpected;       /* frames that are not requests */
	uint64_t dropped_replies;  /* replies a dead client never took */
};

struct sync_endpoint;

/* Opens the listeners and starts the endpoint's thread.  A UNIX path that
 * cannot be listened on is an error; no vsock and a chardev that is not
 * there yet are warnings (the chardev is retried). */
int sync_endpoint_start(const struct sync_endpoint_opts *o,
			struct sync_endpoint **out, struct vp_error *err);
/* Any thread.  garbage_bytes, unexpected and dropped_replies count the
 * connections closed so far. */
void sync_endpoint_get_stats(struct sync_endpoint *ep,
			     struct sync_endpoint_stats *out);
/* Stops the thread, closes everything (removing the UNIX socket file),
 * stores the final counters in *final (if not NULL), frees. */
void sync_endpoint_stop(struct sync_endpoint *ep,
			struct sync_endpoint_stats *final);

/* ---- per-connection request handling (also driven by the fuzz target) */

/* Replies waiting to be written, at most this many. */
#define SYNC_CONN_MAX_REPLIES 256u
/* The most bytes read at once: every request they can complete fits in
 * the reply queue when it has SYNC_CONN_READ_ROOM replies free. */
#define SYNC_CONN_READ_MAX 2048u
#define SYNC_CONN_READ_ROOM (SYNC_CONN_READ_MAX / VP_SYNC_REQUEST_SIZE + 1u)

struct sync_conn {
	struct vp_sync_decoder dec;
	uint8_t out[SYNC_CONN_MAX_REPLIES * VP_SYNC_REPLY_SIZE];
	size_t out_off, out_len; /* unsent replies: out[out_off..out_len) */
	uint64_t served, unexpected, dropped;
};

void sync_conn_init(struct sync_conn *c);
/* Free reply slots. */
size_t sync_conn_room(const struct sync_conn *c);
/* Decodes p[0..n), which one read() returned just before the counter was
 * read, and queues a reply carrying `counter` for every request it
 * completes (a full queue drops and counts).  Returns the requests
 * answered. */
size_t sync_conn_feed(struct sync_conn *c, const uint8_t *p, size_t n,
		      uint64_t counter);
/* Marks n queued bytes as written. */
void sync_conn_consumed(struct sync_conn *c, size_t n);

#endif
