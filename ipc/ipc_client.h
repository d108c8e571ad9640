/*
 * ipc_client.h - the client end of Perfetto's IPC: connect, bind one
 * service by name, invoke its methods, dispatch the replies.
 *
 * One client is one connection bound to one service (ProducerPort or
 * ConsumerPort).  Not thread-safe: one thread owns a client (the SDK's
 * producer thread, the consumer command's main thread).
 *
 * Frames are Perfetto's: a 4-byte little-endian length, then an IPCFrame
 * (protos/perfetto/ipc/ipc.proto).  Frames larger than VP_IPC_MAX_FRAME are
 * a protocol error.
 *
 * Capture: when the environment variable VPERFETTO_IPC_CAPTURE names a
 * directory (read when the client is created), the client writes every frame
 * it sends and receives there as NNNNNN-tx.bin / NNNNNN-rx.bin (a counter
 * shared by both directions, numbers taken with O_EXCL so several clients
 * may share the directory; the frame bytes without the 4-byte length), for
 * `protoc --decode=perfetto.protos.IPCFrame -I protos perfetto/ipc/ipc.proto
 * < 000000-tx.bin`.  Capture is best effort and never fails a call.
 *
 * A reply callback may call any function of this client, including
 * vp_ipc_client_close(); then the function that ran the callback returns -1
 * ("closed by a reply callback") and the client is gone.
 */
#ifndef VP_IPC_CLIENT_H
#define VP_IPC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vp_error.h"

/* Largest frame either side accepts (length prefix excluded). */
#define VP_IPC_MAX_FRAME (8u << 20)
/* Largest frame either side sends, as Perfetto's own buffers expect. */
#define VP_IPC_SEND_FRAME_TARGET (128u << 10)

struct vp_ipc_client;

/* A reply to an invoke.  For a streaming method the callback runs once per
 * reply until has_more is false.  `fd` is a file descriptor that came with
 * the reply (SCM_RIGHTS), or -1; the callback owns it.  `success` false with
 * len 0 also reports a RequestError or a lost connection (then
 * `disconnected` is true and every pending callback is called once). */
struct vp_ipc_reply {
	bool success;
	bool has_more;
	bool disconnected;
	const uint8_t *data;
	size_t len;
	int fd;
};
typedef void (*vp_ipc_reply_cb)(void *ctx, const struct vp_ipc_reply *r);

/* Connects to addr (see ipc_sock.h) within timeout_ms. */
int vp_ipc_client_connect(struct vp_ipc_client **out, const char *addr,
			  int timeout_ms, struct vp_error *err);
/* Wraps an already connected, blocking socket (tests, socketpair); the
 * client owns it from then on.  NULL when out of memory. */
struct vp_ipc_client *vp_ipc_client_from_fd(int fd);
void vp_ipc_client_close(struct vp_ipc_client *c);

/* Over vsock/TCP: tells the service who we are (IPCFrame.set_peer_identity).
 * Send before binding. */
int vp_ipc_client_set_peer_identity(struct vp_ipc_client *c, int32_t pid,
				    int32_t uid, const char *machine_id_hint,
				    const char *machine_name,
				    struct vp_error *err);

/* Binds service_name; blocks until the reply (or timeout_ms).  Remembers
 * the method table for vp_ipc_client_invoke(). */
int vp_ipc_client_bind(struct vp_ipc_client *c, const char *service_name,
		       int timeout_ms, struct vp_error *err);
/* True if the bound service offered this method. */
bool vp_ipc_client_has_method(const struct vp_ipc_client *c,
			      const char *method);

/* Sends an InvokeMethod.  cb NULL sets drop_reply.  pass_fd >= 0 travels as
 * SCM_RIGHTS with the frame.  Never blocks for the reply; replies are read
 * by vp_ipc_client_poll(). */
int vp_ipc_client_invoke(struct vp_ipc_client *c, const char *method,
			 const void *args, size_t len, int pass_fd,
			 vp_ipc_reply_cb cb, void *ctx, struct vp_error *err);

/* Reads what has arrived, waiting up to timeout_ms (0: don't wait, -1:
 * forever) for the first byte, and runs reply callbacks.  Returns 0, or -1
 * when the connection is gone or broke the protocol (err says why; pending
 * callbacks have been called with disconnected). */
int vp_ipc_client_poll(struct vp_ipc_client *c, int timeout_ms,
		       struct vp_error *err);

/* Invoke and wait for a single (non-streaming) reply.  *reply is malloc'd
 * (free it), *fd_out (if not NULL) gets a passed fd or -1.  Returns 0 on
 * success, -1 on error or a failed reply (err says which). */
int vp_ipc_client_call(struct vp_ipc_client *c, const char *method,
		       const void *args, size_t len, uint8_t **reply,
		       size_t *reply_len, int *fd_out, int timeout_ms,
		       struct vp_error *err);

/* The socket, to poll together with other fds. */
int vp_ipc_client_fd(const struct vp_ipc_client *c);

#endif
