/*
 * sync_proto.h - the clock-sync exchange between the guest agent and the
 * host clock producer's sync endpoint.
 *
 * The guest reads its counter (guest_cputime_send), sends a request, the
 * host answers at once with its own counter read at receipt (host_cputime),
 * and the guest reads its counter again when the reply arrives
 * (guest_cputime_recv).  Each exchange bounds the counter offset:
 *   send <= ratio * host + offset <= recv      (clock-sync.md)
 *
 * The transport is any byte stream: vsock (default port 20020), a UNIX
 * stream socket, or a virtio-serial port / QEMU chardev.  A serial line may
 * deliver stale or garbled bytes, so frames carry a magic and the decoder
 * resynchronizes on it.  All integers are little-endian.
 *
 *   request (16 bytes): "VPSY" | version 1 (u8) | type 1 (u8) | 0 (u16) |
 *                       seq (u64)
 *   reply   (24 bytes): "VPSY" | version 1 (u8) | type 2 (u8) | 0 (u16) |
 *                       seq (u64) | host counter (u64)
 */
#ifndef VP_SYNC_PROTO_H
#define VP_SYNC_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VP_SYNC_VERSION 1u
#define VP_SYNC_DEFAULT_VSOCK_PORT 20020u
#define VP_SYNC_REQUEST_SIZE 16u
#define VP_SYNC_REPLY_SIZE 24u
#define VP_SYNC_MAX_FRAME VP_SYNC_REPLY_SIZE

/* vperfetto's own frames (no Perfetto schema has them). */
enum vp_sync_type {
	VP_SYNC_REQUEST = 1,
	VP_SYNC_REPLY = 2,
};

struct vp_sync_msg {
	uint8_t type;          /* enum vp_sync_type */
	uint64_t seq;
	uint64_t host_counter; /* replies only */
};

/* Serializes a frame into out (VP_SYNC_REQUEST_SIZE / _REPLY_SIZE bytes);
 * returns its size. */
size_t vp_sync_encode_request(uint8_t out[VP_SYNC_REQUEST_SIZE], uint64_t seq);
size_t vp_sync_encode_reply(uint8_t out[VP_SYNC_REPLY_SIZE], uint64_t seq,
			    uint64_t host_counter);

/* A streaming decoder: bytes in, whole frames out.  Bytes that cannot
 * start a valid frame are skipped (and counted) until the next magic. */
struct vp_sync_decoder {
	uint8_t buf[VP_SYNC_MAX_FRAME];
	size_t len;
	uint64_t skipped_bytes; /* garbage dropped while resynchronizing */
	uint64_t frames;        /* frames decoded */
};

void vp_sync_decoder_init(struct vp_sync_decoder *d);
/* Consumes bytes of p[0..n) until a frame is complete or the input is used
 * up; returns how many were consumed.  *got is true when *msg holds a
 * frame; call again with the rest of the input for more. */
size_t vp_sync_decode(struct vp_sync_decoder *d, const uint8_t *p, size_t n,
		      struct vp_sync_msg *msg, bool *got);

#endif
