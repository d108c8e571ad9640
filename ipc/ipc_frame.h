/*
 * ipc_frame.h - Perfetto's IPCFrame on the wire: encoding, zero-copy
 * decoding and reassembly of frames from a byte stream.
 *
 * On the socket every frame is a 4-byte little-endian length followed by
 * that many bytes of IPCFrame (protos/perfetto/ipc/ipc.proto):
 *   request_id 2, msg_bind_service 3, msg_bind_service_reply 4,
 *   msg_invoke_method 5, msg_invoke_method_reply 6, msg_request_error 7,
 *   set_peer_identity 8 (a oneof: the last one on the wire wins).
 *
 * Decoding fills a struct vp_ipc_frame whose byte fields point into the
 * frame buffer (valid as long as that buffer is).  Encoding appends whole
 * frames, length prefix included, to a pb_buf.
 *
 * The reassembler (struct vp_ipc_rx) takes bytes and passed fds as they come
 * off a socket and hands out whole frames.  A fd is attached to the first
 * frame that ends at or after the point of the stream where it arrived:
 * senders pass a fd with the first byte of its frame, and the kernel
 * delivers it with the last bytes of the recvmsg that reads that byte.
 */
#ifndef VP_IPC_FRAME_H
#define VP_IPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "vp_error.h"

/* Bytes of the length prefix. */
#define VP_IPC_FRAME_HDR 4
/* Most fds the reassembler holds that no frame has taken yet; a peer that
 * sends more is breaking the protocol. */
#define VP_IPC_RX_MAX_FDS 4

/* enum vp_ipc_msg, which member of the IPCFrame.msg oneof is set (the
 * field number), is perfetto_fields.h's. */

/* A byte range inside the decoded frame (not NUL-terminated). */
struct vp_ipc_bytes {
	const uint8_t *data;
	size_t len;
};

/* A decoded IPCFrame.  Only the member of the union named by `msg` is
 * meaningful; absent fields are 0 / false / empty. */
struct vp_ipc_frame {
	uint64_t request_id;
	enum vp_ipc_msg msg;
	union {
		struct {
			struct vp_ipc_bytes service_name;
		} bind;
		struct {
			bool success;
			uint32_t service_id;
			size_t n_methods;
			struct vp_ipc_bytes body; /* for vp_ipc_methods_* */
		} bind_reply;
		struct {
			uint32_t service_id;
			uint32_t method_id;
			bool drop_reply;
			struct vp_ipc_bytes args;
		} invoke;
		struct {
			bool success;
			bool has_more;
			struct vp_ipc_bytes reply;
		} reply;
		struct {
			struct vp_ipc_bytes error;
		} error;
		struct {
			bool has_pid, has_uid;
			int32_t pid, uid;
			struct vp_ipc_bytes machine_id_hint;
			struct vp_ipc_bytes machine_name;
		} peer;
	};
};

/* Decodes one IPCFrame (without its length prefix).  Every nested message
 * is checked.  Returns 0, or -1 with err naming the byte offset inside the
 * frame. */
int vp_ipc_frame_decode(const uint8_t *buf, size_t len,
			struct vp_ipc_frame *f, struct vp_error *err);

/* Walks the method table of a decoded BindServiceReply. */
struct vp_ipc_method_iter {
	struct pb_reader r;
};
void vp_ipc_methods_begin(const struct vp_ipc_frame *f,
			  struct vp_ipc_method_iter *it);
/* Returns false after the last method. */
bool vp_ipc_methods_next(struct vp_ipc_method_iter *it, uint32_t *id,
			 struct vp_ipc_bytes *name);

/* True if the bytes equal the NUL-terminated string s. */
bool vp_ipc_bytes_eq(struct vp_ipc_bytes b, const char *s);

/* ---- encoding ------------------------------------------------------------
 * A frame is vp_ipc_frame_begin(), exactly one vp_ipc_put_*() (or the
 * bind-reply trio), then vp_ipc_frame_end().  Frames may be appended one
 * after another to the same buffer. */

/* Appends the length placeholder and request_id; returns a bookmark. */
size_t vp_ipc_frame_begin(struct pb_buf *b, uint64_t request_id);
/* Back-patches the length prefix of the frame opened at bookmark. */
void vp_ipc_frame_end(struct pb_buf *b, size_t bookmark);

void vp_ipc_put_bind(struct pb_buf *b, const char *service_name);
size_t vp_ipc_put_bind_reply_begin(struct pb_buf *b, bool success,
				   uint32_t service_id);
void vp_ipc_put_bind_reply_method(struct pb_buf *b, uint32_t id,
				  const char *name);
void vp_ipc_put_bind_reply_end(struct pb_buf *b, size_t bookmark);
void vp_ipc_put_invoke(struct pb_buf *b, uint32_t service_id,
		       uint32_t method_id, const void *args, size_t len,
		       bool drop_reply);
void vp_ipc_put_invoke_reply(struct pb_buf *b, bool success, bool has_more,
			     const void *reply, size_t len);
void vp_ipc_put_request_error(struct pb_buf *b, const char *msg);
/* machine_id_hint / machine_name may be NULL (then omitted). */
void vp_ipc_put_peer_identity(struct pb_buf *b, int32_t pid, int32_t uid,
			      const char *machine_id_hint,
			      const char *machine_name);

/* ---- reassembly ---------------------------------------------------------- */

struct vp_ipc_rx {
	uint8_t *buf;
	size_t cap;
	size_t head;          /* first unconsumed byte */
	size_t len;           /* bytes held */
	uint64_t base_off;    /* stream offset of buf[0] */
	size_t max_frame;     /* VP_IPC_MAX_FRAME unless changed */
	bool failed;          /* an error was reported; nothing more comes out */
	int n_fds;
	int fds[VP_IPC_RX_MAX_FDS];
	uint64_t fd_at[VP_IPC_RX_MAX_FDS]; /* stream offset of arrival */
};

/* A whole frame handed out by vp_ipc_rx_next().  data/len exclude the
 * prefix and stay valid until the next vp_ipc_rx_space()/_feed() call.
 * The fds are the caller's (close the ones not used). */
struct vp_ipc_rx_frame {
	const uint8_t *data;
	size_t len;
	uint64_t offset; /* stream offset of the length prefix */
	int n_fds;
	int fds[VP_IPC_RX_MAX_FDS];
};

void vp_ipc_rx_init(struct vp_ipc_rx *rx);
/* Frees the buffer and closes fds not handed out. */
void vp_ipc_rx_free(struct vp_ipc_rx *rx);
/* Room to receive into (never less than 1 KiB); commit what was written.
 * NULL (and *avail 0) when out of memory: the caller fails the stream. */
uint8_t *vp_ipc_rx_space(struct vp_ipc_rx *rx, size_t *avail);
void vp_ipc_rx_commit(struct vp_ipc_rx *rx, size_t n);
/* Copies bytes in (space + memcpy + commit, in as many steps as needed;
 * frames are not extracted, so feed at most what the caller will drain).
 * 0, or -1 when out of memory (part of the bytes may be in). */
int vp_ipc_rx_feed(struct vp_ipc_rx *rx, const void *data, size_t len);
/* Queues fds that arrived with the bytes committed so far.  On overflow
 * (more than VP_IPC_RX_MAX_FDS waiting) closes them all and returns -1. */
int vp_ipc_rx_add_fds(struct vp_ipc_rx *rx, const int *fds, int n,
		      struct vp_error *err);
/* 1: a frame is in *out; 0: need more bytes; -1: the stream is broken (a
 * length over max_frame; err names the stream offset).  After -1 every
 * call returns -1. */
int vp_ipc_rx_next(struct vp_ipc_rx *rx, struct vp_ipc_rx_frame *out,
		   struct vp_error *err);
/* Bytes held that do not form a whole frame yet. */
static inline size_t vp_ipc_rx_pending(const struct vp_ipc_rx *rx)
{
	return rx->len - rx->head;
}

#endif
