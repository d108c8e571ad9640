/*
 * session_read.h - reading a session out (session_read.c), one packet at a
 * time: the service packets queued for it, then its buffers' packets with
 * the trusted fields appended.  ReadBuffers (consumer.c) and the
 * write_into_file drain (session.c) both read through it; the session
 * queues its own packets here.
 */
#ifndef VP_SVC_SESSION_READ_H
#define VP_SVC_SESSION_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "svc_state.h"

enum vp_reader_stage {
	RD_SERVICE_PACKETS,
	RD_BUFFERS,
	RD_TAIL,
	RD_DONE,
};

struct vp_session_reader {
	struct vp_session *session;
	enum vp_reader_stage stage;
	size_t buf_idx;
	bool buf_begun;
	uint64_t buf_bytes; /* read from the current buffer by this reader */
	bool with_stats;     /* trace_stats at the end */
	int tail_step;
	struct pb_buf pkt;   /* the current packet */
	long pkt_buf;        /* its buffer's index in the session, -1: none */
	bool pkt_is_stats;   /* it is the trace_stats packet */
};

/* A session whose config lists triggers and that has received none reads
 * as empty, as traced has it: no data, and none of the service's packets
 * either (a STOP_TRACING session that timed out gives an empty trace).
 * A copy made by CloneSession reads whatever it holds. */
bool vp_session_waiting_for_trigger(const struct vp_session *sess);

/* Queues a packet (built by packets.h) for the next read of the session. */
void vp_session_push_packet(struct vp_session *sess,
			    const struct pb_buf *pkt);

void vp_session_reader_init(struct vp_session_reader *r,
			    struct vp_session *sess, bool with_stats);
void vp_session_reader_fini(struct vp_session_reader *r);
/* The next packet (a TracePacket, without the Trace framing) in r->pkt.
 * Returns 1, or 0 at the end. */
int vp_session_reader_next(struct vp_session_reader *r);
/* Call after the reader paused (the buffers may have changed). */
void vp_session_reader_resume(struct vp_session_reader *r);

#endif
