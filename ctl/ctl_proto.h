/*
 * ctl_proto.h - the guest control protocol: how the host (vperfetto_record,
 * through host/guest_ctl_client.h) starts and stops a guest tracing session
 * and pulls the guest's trace back, talking to vperfetto_guest_ctl.
 *
 * The transport is any byte stream: vsock (the guest listens on port
 * 20021), a virtio-serial port (org.vperfetto.control), a UNIX socket.  A
 * serial port may hold stale or garbled bytes from an earlier session, so
 * every frame starts with a magic, its header carries its own CRC32, and
 * the payload is covered by a second CRC32; the decoder drops anything that
 * does not check out and resynchronizes on the next magic.
 *
 * Frame (all integers little-endian):
 *   0  "VPCT"                 magic
 *   4  version (u8)           VP_CTL_VERSION
 *   5  type (u8)              enum vp_ctl_type
 *   6  flags (u16)            0
 *   8  request id (u32)       replies echo the id of their request
 *  12  payload length (u32)   at most VP_CTL_MAX_PAYLOAD
 *  16  header CRC32 (u32)     zlib crc32 of bytes 0..15
 *  20  payload
 *  20+len  payload CRC32 (u32)
 *
 * Payloads are protobuf-encoded messages (unknown fields are skipped, so
 * either side can grow); the fields of each type are listed below with
 * struct vp_ctl_msg, which holds the decoded form of any of them.
 */
#ifndef VP_CTL_PROTO_H
#define VP_CTL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vp_error.h"

#define VP_CTL_VERSION 1u
#define VP_CTL_DEFAULT_VSOCK_PORT 20021u
#define VP_CTL_HEADER_SIZE 20u
#define VP_CTL_TRAILER_SIZE 4u
#define VP_CTL_MAX_PAYLOAD (1u << 20)
#define VP_CTL_MAX_FRAME \
	(VP_CTL_HEADER_SIZE + VP_CTL_MAX_PAYLOAD + VP_CTL_TRAILER_SIZE)
/* DATA chunks: the default, and the largest a PULL may ask for. */
#define VP_CTL_DEFAULT_CHUNK (64u << 10)
#define VP_CTL_MAX_CHUNK (512u << 10)
/* Longest text field kept (messages, names); longer ones are cut. */
#define VP_CTL_MAX_TEXT 1024u

/* The message types and field numbers below are vperfetto's own protocol
 * (no Perfetto schema has them), so they are defined here, not in
 * protos/. */
enum vp_ctl_type {
	VP_CTL_HELLO = 1,       /* host: 1 version, 2 host name */
	VP_CTL_HELLO_REPLY = 2, /* guest: 1 version, 2 machine (nodename),
				 * 3 uname, 4 consumer path, 5 consumer
				 * usable, 6 state, 7 trace size */
	VP_CTL_START = 3,       /* host: 1 TraceConfig (binary), 2 session
				 * name, 3 start key (the same in every
				 * copy of one START the host resends) */
	VP_CTL_STARTED = 4,     /* guest: 1 consumer pid */
	VP_CTL_STOP = 5,        /* host: (empty) */
	VP_CTL_STOPPED = 6,     /* guest: 1 trace size, 2 exit status */
	VP_CTL_PULL = 7,        /* host: 1 offset, 2 chunk size (0: default) */
	VP_CTL_DATA = 8,        /* guest: 1 offset, 2 bytes */
	VP_CTL_END = 9,         /* guest: 1 total size, 2 CRC32 of the file */
	VP_CTL_PING = 10,       /* host: (empty) */
	VP_CTL_PONG = 11,       /* guest: 6 state, 7 trace size, 2 exit
				 * status, 8 session name, 9 message */
	VP_CTL_ERROR = 12,      /* guest: 1 type of the failed request,
				 * 2 message */
};

/* The guest's session state (HELLO_REPLY and PONG field 6). */
enum vp_ctl_state {
	VP_CTL_IDLE = 0,    /* no session since the daemon started */
	VP_CTL_RUNNING = 1, /* the consumer is tracing */
	VP_CTL_STOPPING = 2,/* SIGINT sent, waiting for the trace */
	VP_CTL_ENDED = 3,   /* the consumer exited 0; a trace can be pulled */
	VP_CTL_FAILED = 4,  /* the consumer failed (message says how) */
};

/* Field numbers (shared where the meaning is shared). */
enum {
	VP_CTL_F_VERSION = 1, VP_CTL_F_HOST_NAME = 2,
	VP_CTL_F_MACHINE = 2, VP_CTL_F_UNAME = 3, VP_CTL_F_CONSUMER = 4,
	VP_CTL_F_CONSUMER_OK = 5, VP_CTL_F_STATE = 6, VP_CTL_F_TRACE_SIZE = 7,
	VP_CTL_F_CONFIG = 1, VP_CTL_F_SESSION = 2, VP_CTL_F_START_KEY = 3,
	VP_CTL_F_PID = 1,
	VP_CTL_F_SIZE = 1, VP_CTL_F_EXIT_STATUS = 2,
	VP_CTL_F_OFFSET = 1, VP_CTL_F_CHUNK = 2, VP_CTL_F_BYTES = 2,
	VP_CTL_F_TOTAL = 1, VP_CTL_F_CRC = 2,
	VP_CTL_F_PONG_SESSION = 8, VP_CTL_F_MESSAGE = 9,
	VP_CTL_F_REQUEST_TYPE = 1, VP_CTL_F_ERROR_TEXT = 2,
};

/*
 * A decoded message.  Which fields mean something depends on type (see
 * enum vp_ctl_type); the others are zero / empty.  Byte fields (config,
 * data) point into the frame they came from and live as long as it does.
 */
struct vp_ctl_msg {
	uint8_t type;
	uint32_t id;

	uint32_t version;
	char machine[256];     /* HELLO: host name; HELLO_REPLY: nodename */
	char uname[256];
	char consumer[256];
	bool consumer_ok;
	uint32_t state;        /* enum vp_ctl_state */
	uint64_t trace_size;   /* HELLO_REPLY, PONG, STOPPED */
	uint32_t pid;
	int32_t exit_status;   /* STOPPED, PONG: wait status as the shell
				* reports it: code, or 128 + signal */
	uint64_t offset;       /* PULL, DATA */
	uint32_t chunk;        /* PULL */
	uint64_t total;        /* END */
	uint32_t crc;          /* END */
	uint32_t request_type; /* ERROR */
	uint64_t start_key;    /* START: nonzero; a repeat is answered as
				* the first */
	char session[256];     /* START, PONG */
	char text[VP_CTL_MAX_TEXT]; /* ERROR, PONG */
	const uint8_t *bytes;  /* START: config; DATA: chunk */
	size_t bytes_len;
};

/* The name of a message type ("HELLO", ...; "type 77" style for others,
 * in a static buffer). */
const char *vp_ctl_type_name(uint32_t type);
const char *vp_ctl_state_name(uint32_t state);

/* Encodes m (its type, id and the fields its type uses) into a malloc'd
 * frame.  Returns 0, or -1 when the payload would exceed
 * VP_CTL_MAX_PAYLOAD or memory runs out. */
int vp_ctl_encode(const struct vp_ctl_msg *m, uint8_t **frame, size_t *len,
		  struct vp_error *err);

/* Decodes a frame's payload into m (type and id set by the caller's frame).
 * Returns 0, or -1 for a malformed payload. */
int vp_ctl_parse_payload(uint8_t type, uint32_t id, const uint8_t *p,
			 size_t n, struct vp_ctl_msg *m, struct vp_error *err);

/* A streaming decoder: bytes in, checked frames out.  Bytes that cannot
 * start a valid frame, and frames whose CRC does not match, are skipped
 * (and counted) up to the next magic. */
struct vp_ctl_decoder {
	uint8_t *buf;
	size_t len, cap;
	size_t consumed;        /* the frame returned last, dropped next call */
	uint64_t skipped_bytes; /* garbage dropped while resynchronizing */
	uint64_t bad_frames;    /* frames dropped for a payload CRC mismatch */
	uint64_t frames;        /* frames decoded */
};

/* A frame as it came off the wire; payload points into the decoder and
 * is valid until the next call on it. */
struct vp_ctl_frame {
	uint8_t type;
	uint32_t id;
	const uint8_t *payload;
	size_t len;
};

void vp_ctl_decoder_init(struct vp_ctl_decoder *d);
void vp_ctl_decoder_free(struct vp_ctl_decoder *d);

/* Consumes bytes of p[0..n) until a frame is complete or the input is used
 * up; returns how many were consumed.  *got is true when *f holds a frame.
 * A frame may also come out of bytes already buffered, so callers loop
 * until the input is used up and no frame came:
 *
 *	size_t off = 0; bool got;
 *	do {
 *		off += vp_ctl_decode(d, p + off, n - off, &f, &got);
 *		if (got) handle(&f);
 *	} while (got || off < n);
 */
size_t vp_ctl_decode(struct vp_ctl_decoder *d, const uint8_t *p, size_t n,
		     struct vp_ctl_frame *f, bool *got);

#endif
