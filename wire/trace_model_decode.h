/*
 * trace_model_decode.h - the envelope decode of trace_model.h, inline, for
 * the one reader whose time is mostly a packet's decode: the merge's sync
 * scan, which reads every packet of both traces and keeps little of them.
 * There the call per packet cost a few per cent (tests/bench/merge_bench.py,
 * small packets); in the rewrite, inlined into a large function, it made
 * things slower, so everyone else calls vp_packet_decode or
 * vp_packet_envelope, which are this.  Apart from trace_model.h because it
 * needs perfetto_fields.h, whose enum names clash with some readers' own.
 */
#ifndef VP_TRACE_MODEL_DECODE_H
#define VP_TRACE_MODEL_DECODE_H

#include "perfetto_fields.h"
#include "trace_model.h"

/* One field of the envelope into p; payload fields are only kept. */
static inline __attribute__((always_inline)) void
vp_packet_envelope_field(struct vp_packet *p, const struct pb_field *f)
{
	bool v = f->wt == PB_WT_VARINT, l = f->wt == PB_WT_LEN;

	switch (f->num) {
	case TP_TIMESTAMP:
		if (v) {
			p->ts = f->val;
			p->has_ts = true;
		}
		break;
	case TP_TIMESTAMP_CLOCK_ID:
		/* 0 is no clock; ids are 32 bits wide */
		if (v && f->val && f->val <= UINT32_MAX) {
			p->clock_id = (uint32_t)f->val;
			p->has_clock_id = true;
		}
		break;
	case TP_TRUSTED_PACKET_SEQUENCE_ID:
		if (v) {
			p->seq_id = f->val <= UINT32_MAX ? (uint32_t)f->val : 0;
			p->has_seq_id = true;
		}
		break;
	case TP_SEQUENCE_FLAGS:
		if (v) {
			p->seq_flags = (uint32_t)f->val;
			if (f->val & SEQ_INCREMENTAL_STATE_CLEARED)
				p->clears_state = true;
			p->needs_state =
				(f->val & SEQ_NEEDS_INCREMENTAL_STATE) != 0;
		}
		break;
	case TP_INCREMENTAL_STATE_CLEARED:
		if (v && f->val)
			p->clears_state = true;
		break;
	case TP_PREVIOUS_PACKET_DROPPED:
		if (v)
			p->previous_packet_dropped = f->val;
		break;
	case TP_FIRST_PACKET_ON_SEQUENCE:
		if (v && f->val)
			p->first_on_sequence = true;
		break;
	case TP_TRUSTED_UID:
		if (v) {
			p->trusted_uid = (int32_t)f->val;
			p->has_trusted_uid = true;
		}
		break;
	case TP_TRUSTED_PID:
		if (v) {
			p->trusted_pid = (int32_t)f->val;
			p->has_trusted_pid = true;
		}
		break;
	case TP_MACHINE_ID:
		if (v && f->val <= UINT32_MAX) {
			p->machine_id = (uint32_t)f->val;
			p->has_machine_id = true;
		}
		break;
	case TP_INTERNED_DATA:
		if (l)
			p->interned = (struct vp_span){f->data, f->len};
		break;
	case TP_TRACE_PACKET_DEFAULTS:
		if (l)
			p->defaults = (struct vp_span){f->data, f->len};
		break;
	case TP_CLOCK_SNAPSHOT:
		if (l)
			p->snapshot = (struct vp_span){f->data, f->len};
		break;
	case TP_SYNCHRONIZATION_MARKER:
		p->sync_marker = true;
		goto payload;
	case TP_COMPRESSED_PACKETS:
		if (l)
			p->compressed = true;
		goto payload;
	default:
	payload:
		if (l) {
			p->payload_num = f->num;
			p->payload = (struct vp_span){f->data, f->len};
		}
		break;
	}
}

/* The one walk; keep says whether fields[] is filled. */
static inline __attribute__((always_inline)) bool
vp_packet_decode_inline(struct vp_packet *p, const uint8_t *data, size_t len,
			bool keep)
{
	struct pb_reader r;
	struct pb_field spare;

	/* Member by member: a memset of them all compiles to `rep stos`,
	 * whose start-up costs more than the rest of a small packet's decode;
	 * fields[] is written as decoded. */
	p->data = data;
	p->len = len;
	p->ts = 0;
	p->seq_id = p->seq_flags = p->machine_id = 0;
	p->trusted_uid = p->trusted_pid = 0;
	p->previous_packet_dropped = 0;
	p->has_ts = p->has_clock_id = p->has_seq_id = p->has_machine_id = false;
	p->has_trusted_uid = p->has_trusted_pid = false;
	p->clears_state = p->needs_state = p->first_on_sequence = false;
	p->compressed = p->sync_marker = false;
	/* a span's len, like clock_id, means nothing until it is set */
	p->interned.data = p->defaults.data = p->snapshot.data = NULL;
	p->payload_num = 0;
	p->payload.data = NULL;
	pb_reader_init(&r, data, len);
	size_t n = 0; /* in a register: p->n_fields might alias a field */
	for (;;) {
		/* Decoded straight into its slot: a copy of a field just
		 * written would wait for the stores to be forwarded. */
		struct pb_field *f = keep && n < VP_PACKET_MAX_FIELDS
					     ? &p->fields[n]
					     : &spare;
		if (!pb_next(&r, f))
			break;
		n++;
		vp_packet_envelope_field(p, f);
	}
	/* Without fields[], vp_packet_field walks the bytes again. */
	p->n_fields = keep ? n : VP_PACKET_MAX_FIELDS + 1;
	p->err = r.err;
	p->err_off = r.err_off;
	return r.err == PB_OK;
}

#endif
