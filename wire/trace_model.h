/*
 * trace_model.h - the trace model every reader of packets shares: a
 * TracePacket's envelope, decoded in one walk, and the state of the
 * sequence the packet is on, kept by Perfetto's rules.
 *
 * The envelope is what a packet says about itself rather than about what
 * it traced: its timestamp and clock, its sequence and the sequence's
 * flags, interned data, defaults, clock snapshot, machine, trusted uid and
 * pid, loss marks, compressed packets.  vp_packet_decode finds all of it
 * and keeps every field as decoded, so a reader that goes on to the
 * packet's payload needs no second decode.
 *
 * A sequence's state (struct vp_seq_state) follows the rules of Perfetto's
 * tokenizer, which the merge's scan and rewrite and the processor's loader
 * all need alike:
 *  - SEQ_INCREMENTAL_STATE_CLEARED (or incremental_state_cleared) starts a
 *    new interning generation, drops the TracePacketDefaults, and makes
 *    the state valid;
 *  - previous_packet_dropped after the first packet counts a loss and
 *    makes the state invalid unless the same packet clears it;
 *  - a packet flagged SEQ_NEEDS_INCREMENTAL_STATE while the state is not
 *    valid cannot be read (its interned references may be lost), though
 *    its interned data and defaults are still taken;
 *  - TracePacketDefaults.timestamp_clock_id is the clock of the packets
 *    that name none, until the next clear (0 names none, in a packet or
 *    in defaults).
 * ClockSnapshots are read clock by clock (vp_snapshot_next) the same way
 * for all: each reader then does what it does with them.
 *
 * Each reader keeps its own per-sequence data (interned names, scoped
 * clocks) beside a vp_seq_state, in a seq_table slot, and acts on the
 * events vp_seq_update returns.
 */
#ifndef VP_TRACE_MODEL_H
#define VP_TRACE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"

/* Fields kept as decoded; a packet with more is walked again past them. */
#define VP_PACKET_MAX_FIELDS 32

struct vp_packet {
	const uint8_t *data;
	size_t len;

	uint64_t ts;
	uint32_t clock_id;   /* timestamp_clock_id, when has_clock_id (a
			      * clock id of 0 is none, as Perfetto has it) */
	uint32_t seq_id;     /* trusted_packet_sequence_id; 0 when none */
	uint32_t seq_flags;  /* sequence_flags */
	uint32_t machine_id; /* machine_id, when has_machine_id */
	int32_t trusted_uid, trusted_pid;
	uint64_t previous_packet_dropped; /* the field's value; 0 when absent */
	bool has_ts, has_clock_id, has_seq_id, has_machine_id;
	bool has_trusted_uid, has_trusted_pid;
	/* sequence_flags has SEQ_INCREMENTAL_STATE_CLEARED, or the older
	 * incremental_state_cleared field is true */
	bool clears_state;
	bool needs_state; /* sequence_flags has SEQ_NEEDS_INCREMENTAL_STATE */
	bool first_on_sequence;
	bool compressed;  /* compressed_packets (a LEN field) */
	bool sync_marker; /* synchronization_marker */

	/* interned_data, trace_packet_defaults, clock_snapshot: the bodies
	 * of the LEN fields (the last of each), or data NULL when absent */
	struct vp_span {
		const uint8_t *data;
		size_t len;
	} interned, defaults, snapshot;

	/* the payload: the one field of TracePacket's `data` oneof, all of
	 * whose members are LEN fields (the last LEN field outside the
	 * envelope, if a packet breaks the oneof), or payload_num 0 and
	 * data NULL */
	uint32_t payload_num;
	struct vp_span payload;

	/* every field in order, the first VP_PACKET_MAX_FIELDS of them
	 * (vp_packet_decode only) */
	struct pb_field fields[VP_PACKET_MAX_FIELDS];
	size_t n_fields; /* all of them, also those past the array (more
			  * than the array holds after vp_packet_envelope) */

	/* when vp_packet_decode fails: what and where, from data */
	enum pb_err err;
	size_t err_off;
};

/* Decodes the envelope of the packet (data, len).  Returns false on
 * malformed bytes (p->err, p->err_off say what and where); what was
 * decoded before the bad field stays in p. */
bool vp_packet_decode(struct vp_packet *p, const uint8_t *data, size_t len);

/* The same without keeping fields[] (vp_packet_field then walks the
 * bytes again): for readers that need only the envelope and payload. */
bool vp_packet_envelope(struct vp_packet *p, const uint8_t *data, size_t len);

/* Walks the packet's fields in order: *i starts at 0 and r is the
 * caller's (used only for packets of more than VP_PACKET_MAX_FIELDS).
 * Returns false after the last.  *f may point into p, valid while p is. */
static inline __attribute__((always_inline)) bool
vp_packet_field(const struct vp_packet *p, size_t *i,
		struct pb_reader *r, struct pb_field *spare,
		const struct pb_field **f)
{
	if (p->n_fields <= VP_PACKET_MAX_FIELDS) {
		if (*i >= p->n_fields)
			return false;
		*f = &p->fields[(*i)++];
		return true;
	}
	/* More fields than kept: walk the bytes again (known good). */
	if (*i == 0)
		pb_reader_init(r, p->data, p->len);
	if (!pb_next(r, spare))
		return false;
	(*i)++;
	*f = spare;
	return true;
}

/* Whether field number num belongs to the envelope (vp_packet says it all)
 * rather than to the packet's payload. */
bool vp_packet_is_envelope(uint32_t num);

/* ---- the sequence's state ----------------------------------------------- */

struct vp_seq_state {
	uint32_t generation; /* interning generation: +1 at each clear after
			      * the first packet */
	bool seen_any;       /* a packet has been on the sequence */
	bool valid;          /* incremental state valid (cleared, no loss
			      * since) */
	bool has_default_clock;
	uint32_t default_clock; /* TracePacketDefaults.timestamp_clock_id */
	uint64_t packets;       /* packets seen, skipped ones included */
	uint64_t losses;        /* packets that said previous_packet_dropped */
	uint64_t skipped;       /* packets that needed state it lacked */
};

/* What vp_seq_update tells the reader to do. */
enum {
	VP_SEQ_CLEARED = 1 << 0, /* forget the interned data and defaults */
	VP_SEQ_NEW_GENERATION = 1 << 1, /* ... and a new generation began */
	VP_SEQ_LOST = 1 << 2,    /* data were lost; the state is invalid */
	VP_SEQ_SKIP = 1 << 3,    /* the packet needs state that is invalid */
	VP_SEQ_DEFAULTS = 1 << 4, /* the packet sets new defaults */
	VP_SEQ_BAD_DEFAULTS = 1 << 5, /* ... which are malformed (taken as
				       * naming no clock) */
};

/* Applies the packet's envelope to its sequence's state.  Returns the
 * VP_SEQ_* events, in the order a reader acts on them. */
unsigned vp_seq_update_slow(struct vp_seq_state *s, const struct vp_packet *p);

static inline unsigned vp_seq_update(struct vp_seq_state *s,
				     const struct vp_packet *p)
{
	/* Most packets neither clear, lose, set defaults nor need state
	 * that may be gone: those only count. */
	if (!p->clears_state && !p->previous_packet_dropped &&
	    !p->defaults.data &&
	    (s->valid || !p->needs_state)) {
		s->seen_any = true;
		s->packets++;
		return 0;
	}
	return vp_seq_update_slow(s, p);
}

/* The clock of the packet's timestamp: its own, else its sequence's
 * default, else fallback (the trace's clock). */
static inline uint32_t vp_seq_packet_clock(const struct vp_seq_state *s,
					   const struct vp_packet *p,
					   uint32_t fallback)
{
	if (p->has_clock_id)
		return p->clock_id;
	if (s && s->has_default_clock)
		return s->default_clock;
	return fallback;
}

/* ---- ClockSnapshot ------------------------------------------------------ */

/* One clock of a ClockSnapshot, as written. */
struct vp_clock_reading {
	uint64_t id;
	uint64_t ts;      /* in the clock's units */
	uint64_t unit_ns; /* unit_multiplier_ns; 0 when absent (1 ns) */
	bool has_ts;
	bool incremental; /* is_incremental: ts is a delta from the last */
};

/* The clocks of a ClockSnapshot, one by one. */
struct vp_snapshot_iter {
	struct pb_reader r, cr;
	uint64_t primary; /* primary_trace_clock, when has_primary */
	bool has_primary;
	/* after vp_snapshot_next returned false on malformed bytes: the
	 * reader that failed (its base and err_off give the offset) and
	 * what it was reading; NULL at a clean end */
	const struct pb_reader *bad;
	const char *bad_what;
};

void vp_snapshot_begin(struct vp_snapshot_iter *it, const uint8_t *data,
		       size_t len);
/* The next clock, false after the last (it->bad says whether that was
 * malformed bytes).  primary_trace_clock is known once it returned false. */
bool vp_snapshot_next(struct vp_snapshot_iter *it, struct vp_clock_reading *c);

#endif
