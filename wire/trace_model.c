/*
 * trace_model.c - a packet's envelope in one walk, and its sequence's
 * state by Perfetto's rules (see trace_model.h).
 */
#include "trace_model.h"

#include <string.h>

#include "perfetto_fields.h"
#include "trace_model_decode.h"


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

bool vp_packet_decode(struct vp_packet *p, const uint8_t *data, size_t len)
{
	return vp_packet_decode_inline(p, data, len, true);
}

bool vp_packet_envelope(struct vp_packet *p, const uint8_t *data, size_t len)
{
	return vp_packet_decode_inline(p, data, len, false);
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

void vp_snapshot_begin(struct vp_snapshot_iter *it, const uint8_t *data,
		       size_t len)
{
	pb_reader_init(&it->r, data, len);
	it->primary = 0;
	it->has_primary = false;
	it->bad = NULL;
	it->bad_what = NULL;
}

bool vp_snapshot_next(struct vp_snapshot_iter *it, struct vp_clock_reading *c)
{
	struct pb_field f, cf;

	while (pb_next(&it->r, &f)) {
		if (f.num == CS_PRIMARY_TRACE_CLOCK && f.wt == PB_WT_VARINT) {
			it->primary = f.val;
			it->has_primary = true;
			continue;
		}
		if (f.num != CS_CLOCKS || f.wt != PB_WT_LEN)
			continue;
		*c = (struct vp_clock_reading){0};
		pb_reader_init(&it->cr, f.data, f.len);
		while (pb_next(&it->cr, &cf)) {
			if (cf.wt != PB_WT_VARINT)
				continue;
			if (cf.num == CLK_CLOCK_ID) {
				c->id = cf.val;
			} else if (cf.num == CLK_TIMESTAMP) {
				c->ts = cf.val;
				c->has_ts = true;
			} else if (cf.num == CLK_IS_INCREMENTAL) {
				c->incremental = cf.val != 0;
			} else if (cf.num == CLK_UNIT_MULTIPLIER_NS) {
				c->unit_ns = cf.val;
			}
		}
		if (it->cr.err != PB_OK) {
			it->bad = &it->cr;
			it->bad_what = "clock snapshot entry";
			return false;
		}
		return true;
	}
	if (it->r.err != PB_OK) {
		it->bad = &it->r;
		it->bad_what = "clock_snapshot";
	}
	return false;
}
