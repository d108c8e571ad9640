/*
 * session_read.c - reading a session out, one packet at a time: first the
 * packets the service queued (trace config, clock snapshots, events), then
 * each buffer's packets, then (optionally) the trace stats and the
 * read_tracing_buffers_completed event.
 *
 * Every producer packet gets the trusted fields appended after the
 * producer's bytes (protobuf: the last value wins): trusted_uid,
 * trusted_pid, trusted_packet_sequence_id, previous_packet_dropped and, for
 * other machines, machine_id.  A producer cannot forge them, nor anything
 * else only the service writes (trace_config, trace_stats, service events,
 * compressed packets, ...): a packet whose own bytes carry any such field
 * at the top level, or that does not parse, is dropped whole and counted
 * in invalid_packets, which goes out in trace_stats (what traced does).
 *
 * With TraceConfig.trace_filter every packet read out then goes through
 * the filter (trace_filter.h), as traced filters what ReadBuffers returns.
 *
 * A session still waiting for a trigger reads as empty.
 *
 * ReadBuffers and the write_into_file drain both use this reader.  The
 * session queues the packets the service writes for it here
 * (vp_session_push_packet), and this reader hands them out first.
 */
#include <string.h>
#include <time.h>

#include "perfetto_fields.h"
#include "packets.h"
#include "session_read.h"
#include "svc_state.h"

bool vp_session_waiting_for_trigger(const struct vp_session *sess)
{
	const Perfetto__Protos__TraceConfig__TriggerConfig *tc =
		sess->cfg->trigger_config;
	return !sess->cloned && tc && tc->n_triggers > 0 &&
	       sess->triggers_received == 0;
}

void vp_session_push_packet(struct vp_session *sess, const struct pb_buf *pkt)
{
	pb_put_bytes(&sess->pending, TRACE_PACKET, pkt->data, pkt->len);
}

void vp_session_reader_init(struct vp_session_reader *r,
			    struct vp_session *sess, bool with_stats)
{
	memset(r, 0, sizeof(*r));
	r->session = sess;
	r->stage = RD_SERVICE_PACKETS;
	r->with_stats = with_stats;
	pb_buf_init(&r->pkt);
	if (vp_session_waiting_for_trigger(sess)) {
		r->stage = RD_DONE;
		return;
	}
	if (!sess->provenance_emitted) { /* the first read, as traced */
		sess->provenance_emitted = true;
		struct pb_buf b;
		pb_buf_init(&b);
		vp_pkt_trace_provenance(sess, &b);
		vp_session_push_packet(sess, &b);
		pb_buf_free(&b);
	}
}

void vp_session_reader_fini(struct vp_session_reader *r)
{
	pb_buf_free(&r->pkt);
}

void vp_session_reader_resume(struct vp_session_reader *r)
{
	/* A new pass over the current buffer: chunks may have been added or
	 * overwritten meanwhile; what was read is gone from it. */
	r->buf_begun = false;
}

/* The TracePacket fields only the service writes (the list traced keeps
 * in its packet stream validator).  compressed_packets and
 * zstd_compressed_packets are on it: whatever they hold would reach the
 * trace unchecked, and the service compresses nothing a producer wrote.
 * trigger and clone_snapshot_trigger are not on traced's list, but only
 * the service writes them and they carry a trusted_producer_uid: a
 * producer must not be able to claim a trigger came. */
static const uint32_t service_only_fields[] = {
	TP_TRUSTED_UID,
	TP_TRUSTED_PACKET_SEQUENCE_ID,
	TP_TRACE_CONFIG,
	TP_TRACE_STATS,
	TP_SYNCHRONIZATION_MARKER,
	TP_COMPRESSED_PACKETS,
	TP_SERVICE_EVENT,
	TP_TRUSTED_PID,
	TP_MACHINE_ID,
	TP_TRACE_PROVENANCE,
	TP_PROTOVMS,
	TP_ZSTD_COMPRESSED_PACKETS,
	TP_TRIGGER,
	TP_CLONE_SNAPSHOT_TRIGGER,
};

/* False if a producer packet does not parse at its top level or carries a
 * field only the service may write. */
static bool producer_packet_valid(const uint8_t *p, size_t len)
{
	struct pb_reader rd;
	struct pb_field f;
	pb_reader_init(&rd, p, len);
	while (pb_next(&rd, &f)) {
		/* Any wire type: a reader that skips a mistyped field today
		 * may take it tomorrow. */
		for (size_t i = 0; i < sizeof(service_only_fields) /
					       sizeof(service_only_fields[0]);
		     i++)
			if (f.num == service_only_fields[i])
				return false;
	}
	return rd.err == PB_OK;
}

static void append_trusted(struct pb_buf *b,
			   const struct vp_tb_packet_info *info)
{
	if (info->meta.uid >= 0)
		pb_put_varint(b, TP_TRUSTED_UID, (uint64_t)info->meta.uid);
	if (info->meta.pid > 0)
		pb_put_varint(b, TP_TRUSTED_PID, (uint64_t)info->meta.pid);
	pb_put_varint(b, TP_TRUSTED_PACKET_SEQUENCE_ID,
		      info->meta.sequence_id);
	/* As traced: set on a sequence's first packet too (nothing before it
	 * was read; a reader must not take incremental state for granted). */
	if (info->previous_packet_dropped || info->first_packet_on_sequence)
		pb_put_varint(b, TP_PREVIOUS_PACKET_DROPPED, 1);
	if (info->meta.machine_id)
		pb_put_varint(b, TP_MACHINE_ID, info->meta.machine_id);
}

/* The next queued service packet, if any. */
static bool next_service_packet(struct vp_session_reader *r)
{
	struct vp_session *sess = r->session;
	struct pb_reader rd;
	struct pb_field f;
	if (sess->pending_off >= sess->pending.len) {
		sess->pending.len = 0;
		sess->pending_off = 0;
		return false;
	}
	pb_reader_init(&rd, sess->pending.data + sess->pending_off,
		       sess->pending.len - sess->pending_off);
	if (!pb_next(&rd, &f) || f.wt != PB_WT_LEN) {
		/* Cannot happen (we framed them); drop the rest. */
		sess->pending.len = 0;
		sess->pending_off = 0;
		return false;
	}
	pb_buf_reset(&r->pkt);
	pb_put_raw(&r->pkt, f.data, f.len);
	sess->pending_off += (size_t)(f.end - f.start);
	return true;
}

/* The next valid packet of the current buffer; false when the buffer has
 * nothing more for this pass (or this reader read a buffer's worth). */
static bool next_buffer_packet(struct vp_session_reader *r,
			       struct vp_svc_buffer *b)
{
	struct vp_session *sess = r->session;
	if (!r->buf_begun) {
		vp_trace_buffer_begin_read(b->tb);
		r->buf_begun = true;
	}
	while (r->buf_bytes <= b->size) {
		struct vp_tb_packet_info info;
		pb_buf_reset(&r->pkt);
		memset(&info, 0, sizeof(info));
		if (vp_trace_buffer_read_packet(b->tb, &r->pkt, &info) != 1)
			return false;
		r->buf_bytes += r->pkt.len;
		if (!producer_packet_valid(r->pkt.data, r->pkt.len)) {
			sess->invalid_packets++;
			sess->svc->stats.invalid_packets++;
			/* Its sequence's next packet says one was lost (it
			 * may have carried interned data or a loss flag). */
			vp_trace_buffer_packet_dropped(b->tb, &info);
			continue;
		}
		append_trusted(&r->pkt, &info);
		return true;
	}
	return false;
}

/* The next packet as the session holds it, unfiltered; r->pkt_buf says
 * which buffer it came from (-1: the service's) and r->pkt_is_stats
 * whether it is the trace_stats packet. */
static int reader_next_raw(struct vp_session_reader *r)
{
	struct vp_session *sess = r->session;
	r->pkt_buf = -1;
	r->pkt_is_stats = false;
	for (;;) {
		switch (r->stage) {
		case RD_SERVICE_PACKETS:
			if (next_service_packet(r))
				return 1;
			r->stage = RD_BUFFERS;
			r->buf_idx = 0;
			r->buf_begun = false;
			r->buf_bytes = 0;
			break;
		case RD_BUFFERS:
			if (r->buf_idx >= sess->n_bufs) {
				r->stage = RD_TAIL;
				break;
			}
			if (next_buffer_packet(r, sess->bufs[r->buf_idx])) {
				r->pkt_buf = (long)r->buf_idx;
				return 1;
			}
			r->buf_idx++;
			r->buf_begun = false;
			r->buf_bytes = 0;
			break;
		case RD_TAIL:
			if (r->tail_step == 0) {
				/* Service packets queued during the read. */
				if (next_service_packet(r))
					return 1;
				r->tail_step = 1;
			}
			if (r->tail_step == 1) {
				r->tail_step = 2;
				if (r->with_stats) {
					vp_pkt_trace_stats(sess, &r->pkt);
					r->pkt_is_stats = true;
					return 1;
				}
			}
			if (r->tail_step == 2) {
				r->tail_step = 3;
				if (sess->state == SESS_STOPPED &&
				    sess->service_events &&
				    !sess->read_completed_emitted) {
					sess->read_completed_emitted = true;
					vp_pkt_service_event(
						sess,
						SE_READ_TRACING_BUFFERS_COMPLETED,
						&r->pkt);
					return 1;
				}
			}
			r->stage = RD_DONE;
			break;
		case RD_DONE:
			return 0;
		}
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Passes r->pkt through the session's trace_filter, counting what traced
 * counts in FilterStats.  Every packet goes through it, the service's own
 * too, but trace_stats, which is counted as passed whole (traced writes
 * it after filtering, so that it is never filtered away).  A packet the
 * filter drops whole, or that does not parse, reads out empty rather than
 * not at all, as traced has it (a reader can count them). */
static void filter_packet(struct vp_session_reader *r)
{
	struct vp_session *sess = r->session;
	struct vp_filter_stats *st = &sess->filter_stats;
	size_t in_len = r->pkt.len;
	st->input_packets++;
	st->input_bytes += in_len;
	if (r->pkt_is_stats) {
		st->output_bytes += in_len;
		return;
	}
	uint64_t t0 = mono_ns();
	bool ok = vp_trace_filter_packet(sess->filter, r->pkt.data, in_len,
					 &sess->filter_out);
	st->time_taken_ns += mono_ns() - t0;
	pb_buf_reset(&r->pkt);
	if (!ok) {
		st->errors++;
		return;
	}
	st->output_bytes += sess->filter_out.len;
	if (r->pkt_buf >= 0)
		vp_filter_stats_discarded(st, (size_t)r->pkt_buf,
					  in_len - sess->filter_out.len);
	pb_put_raw(&r->pkt, sess->filter_out.data, sess->filter_out.len);
}

int vp_session_reader_next(struct vp_session_reader *r)
{
	int rc = reader_next_raw(r);
	if (rc == 1 && r->session->filter)
		filter_packet(r);
	return rc;
}
