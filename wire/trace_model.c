/*
 * trace_model.c - a packet's envelope in one walk, and its sequence's
 * state by Perfetto's rules (see trace_model.h).
 */
#include "trace_model.h"

#include <string.h>

#include "perfetto_fields.h"


bool vp_packet_is_envelope(uint32_t num)
{
	switch (num) {
	case TP_TIMESTAMP:
	case TP_TIMESTAMP_CLOCK_ID:
	case TP_TRUSTED_PACKET_SEQUENCE_ID:
	case TP_SEQUENCE_FLAGS:
	case TP_INCREMENTAL_STATE_CLEARED:
	case TP_PREVIOUS_PACKET_DROPPED:
	case TP_FIRST_PACKET_ON_SEQUENCE:
	case TP_TRUSTED_UID:
	case TP_TRUSTED_PID:
	case TP_MACHINE_ID:
	case TP_INTERNED_DATA:
	case TP_TRACE_PACKET_DEFAULTS:
	case TP_CLOCK_SNAPSHOT:
		return true;
	default:
		return false;
	}
}

/* One field of the envelope into p; payload fields are only kept. */
static inline __attribute__((always_inline)) void
envelope_field(struct vp_packet *p, const struct pb_field *f)
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

/* The one walk; keep says whether fields[] is filled.  Always inline, so
 * each caller gets its own loop with keep a constant. */
static inline __attribute__((always_inline)) bool
decode(struct vp_packet *p, const uint8_t *data, size_t len, bool keep)
{
	struct pb_reader r;
	struct pb_field spare;

	/* Member by member: a memset of them all compiles to `rep stos`,
	 * whose start-up costs more than the rest of a small packet's decode;
	 * fields[] is written as decoded. */
	p->data = data;
	p->len = len;
	p->ts = 0;
	p->clock_id = p->seq_id = p->seq_flags = p->machine_id = 0;
	p->trusted_uid = p->trusted_pid = 0;
	p->previous_packet_dropped = 0;
	p->has_ts = p->has_clock_id = p->has_seq_id = p->has_machine_id = false;
	p->has_trusted_uid = p->has_trusted_pid = false;
	p->clears_state = p->needs_state = p->first_on_sequence = false;
	p->compressed = p->sync_marker = false;
	p->interned.data = p->defaults.data = p->snapshot.data = NULL;
	p->interned.len = p->defaults.len = p->snapshot.len = 0;
	p->payload_num = 0;
	p->payload.data = NULL;
	p->payload.len = 0;
	p->n_fields = 0;
	pb_reader_init(&r, data, len);
	for (;;) {
		/* Decoded straight into its slot: a copy of a field just
		 * written would wait for the stores to be forwarded. */
		struct pb_field *f = keep && p->n_fields < VP_PACKET_MAX_FIELDS
					     ? &p->fields[p->n_fields]
					     : &spare;
		if (!pb_next(&r, f))
			break;
		p->n_fields++;
		envelope_field(p, f);
	}
	if (!keep)
		p->n_fields = VP_PACKET_MAX_FIELDS + 1; /* walk the bytes */
	p->err = r.err;
	p->err_off = r.err_off;
	return r.err == PB_OK;
}

bool vp_packet_decode(struct vp_packet *p, const uint8_t *data, size_t len)
{
	return decode(p, data, len, true);
}

bool vp_packet_envelope(struct vp_packet *p, const uint8_t *data, size_t len)
{
	return decode(p, data, len, false);
}

/* The clock TracePacketDefaults names, if any (0 is none); false when
 * the message is malformed. */
static bool defaults_clock(const struct vp_span *d, bool *have,
			   uint32_t *clock)
{
	struct pb_reader r;
	struct pb_field f;

	*have = false;
	*clock = 0;
	pb_reader_init(&r, d->data, d->len);
	while (pb_next(&r, &f))
		if (f.num == TPD_TIMESTAMP_CLOCK_ID && f.wt == PB_WT_VARINT) {
			*have = f.val && f.val <= UINT32_MAX;
			*clock = *have ? (uint32_t)f.val : 0;
		}
	if (r.err != PB_OK)
		*have = false;
	return r.err == PB_OK;
}

unsigned vp_seq_update_slow(struct vp_seq_state *s, const struct vp_packet *p)
{
	unsigned ev = 0;

	if (p->clears_state) {
		ev |= VP_SEQ_CLEARED;
		/* The first packet's clear starts the generation it is in. */
		if (s->seen_any) {
			s->generation++;
			ev |= VP_SEQ_NEW_GENERATION;
		}
		s->valid = true;
		s->has_default_clock = false;
		s->default_clock = 0;
	}
	if (p->previous_packet_dropped && s->seen_any) {
		s->losses++;
		s->valid = p->clears_state;
		if (!s->valid)
			ev |= VP_SEQ_LOST;
	}
	s->seen_any = true;
	s->packets++;
	/* Defaults (and interned data) are taken before the check below, as
	 * Perfetto takes them: a packet that cannot be read still sets them. */
	if (p->defaults.data) {
		ev |= VP_SEQ_DEFAULTS;
		bool ok = defaults_clock(&p->defaults, &s->has_default_clock,
					 &s->default_clock);
		if (!ok)
			ev |= VP_SEQ_BAD_DEFAULTS;
	}
	if (p->needs_state && !s->valid) {
		s->skipped++;
		ev |= VP_SEQ_SKIP;
	}
	return ev;
}
