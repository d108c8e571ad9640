/*
 * consumer.c - a consumer as vtraced answers it: the EnableTracing reply
 * when its session ends, the events it observes, and ReadBuffers
 * streaming.  The ConsumerPort calls themselves are consumer_port.c's.
 *
 * ReadBuffers streams ReadBuffersResponse replies of slices (at most
 * SVC_READ_SLICE_MAX bytes each, replies under the IPC frame target) and
 * pauses whenever more than SVC_READ_TX_HIGH bytes wait on the consumer's
 * socket, resuming from vp_ipc_conn_on_drain: a slow consumer never makes
 * the service hold the whole trace in memory.
 */
#include <stdlib.h>
#include <string.h>

#include "consumer.h"
#include "perfetto_fields.h"
#include "session_read.h"
#include "svc_state.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "vp_alloc.h"

/* ---- EnableTracing and the end of a session ------------------------------ */

void vp_consumer_enable_reply(struct vp_consumer *c, uint64_t req,
			      const char *error)
{
	Perfetto__Protos__EnableTracingResponse r =
		PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
	r.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
	r.disabled = true;
	r.error = (char *)error;
	size_t n = perfetto__protos__enable_tracing_response__get_packed_size(
		&r);
	uint8_t *out = vp_xmalloc(n);
	perfetto__protos__enable_tracing_response__pack(&r, out);
	vp_ipc_conn_reply(c->conn, req, true, false, out, n, -1);
	free(out);
}

void vp_consumer_session_ended(struct vp_consumer *c, struct vp_session *s,
			       const char *error)
{
	if (!s->enable_pending)
		return;
	s->enable_pending = false;
	vp_consumer_enable_reply(c, s->enable_req, error);
}

/* ---- events -------------------------------------------------------------- */

void vp_consumer_all_started(struct vp_consumer *c)
{
	if (!c->observing || !c->observe_all_started)
		return;
	struct pb_buf b;
	pb_buf_init(&b);
	size_t n = pb_begin_nested(&b, OER_EVENTS);
	pb_put_varint(&b, OE_ALL_DATA_SOURCES_STARTED, 1);
	pb_end_nested(&b, n);
	vp_ipc_conn_reply(c->conn, c->observe_req, true, true, b.data, b.len,
			  -1);
	pb_buf_free(&b);
}

/* ---- ReadBuffers ---------------------------------------------------------- */

static void read_send(struct vp_consumer *c, bool last)
{
	struct vp_read_op *op = &c->read;
	vp_ipc_conn_reply(c->conn, op->request_id, true, !last,
			  op->reply.data, op->reply.len, -1);
	pb_buf_reset(&op->reply);
	op->reply_slices = 0;
}

void vp_consumer_read_end(struct vp_consumer *c)
{
	struct vp_read_op *op = &c->read;
	if (!op->active)
		return;
	op->active = false;
	vp_session_reader_fini(&op->rd);
	pb_buf_free(&op->reply);
}

/* Appends one packet as slices, sending replies as they fill up. */
static void read_add_packet(struct vp_consumer *c, const uint8_t *p,
			    size_t len)
{
	struct vp_read_op *op = &c->read;
	size_t off = 0;
	do {
		size_t n = len - off;
		if (n > SVC_READ_SLICE_MAX)
			n = SVC_READ_SLICE_MAX;
		if (op->reply.len + n + 32 > SVC_READ_REPLY_TARGET &&
		    op->reply_slices)
			read_send(c, false);
		size_t sl = pb_begin_nested(&op->reply, RBR_SLICES);
		pb_put_bytes(&op->reply, RBR_SLICE_DATA, p + off, n);
		off += n;
		if (off == len)
			pb_put_varint(&op->reply,
				      RBR_SLICE_LAST_SLICE_FOR_PACKET, 1);
		pb_end_nested(&op->reply, sl);
		op->reply_slices++;
	} while (off < len);
}

static void read_step(void *ctx)
{
	struct vp_consumer *c = ctx;
	struct vp_read_op *op = &c->read;
	if (!op->active)
		return;
	vp_session_reader_resume(&op->rd);
	for (;;) {
		if (vp_ipc_conn_tx_queued(c->conn) >= SVC_READ_TX_HIGH) {
			vp_ipc_conn_on_drain(c->conn, SVC_READ_TX_LOW,
					     read_step, c);
			return;
		}
		if (vp_session_reader_next(&op->rd) == 0) {
			read_send(c, true);
			vp_consumer_read_end(c);
			return;
		}
		read_add_packet(c, op->rd.pkt.data, op->rd.pkt.len);
	}
}

void vp_consumer_abort_read(struct vp_consumer *c, struct vp_session *s)
{
	if (!c->read.active || c->read.rd.session != s)
		return;
	read_send(c, true);
	vp_consumer_read_end(c);
}

void vp_consumer_read_start(struct vp_consumer *c, uint64_t req)
{
	struct vp_read_op *op = &c->read;
	memset(op, 0, sizeof(*op));
	op->active = true;
	op->request_id = req;
	pb_buf_init(&op->reply);
	vp_session_reader_init(&op->rd, c->session, true);
	read_step(c);
}
