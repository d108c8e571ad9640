/*
 * tp_seq.h - what the processor keeps per packet sequence, for the loader
 * (tp_load.c) and the modules that read packets (track events, ftrace,
 * system packets).
 *
 * A sequence is a (machine, trusted_packet_sequence_id) pair.  Its state,
 * as Perfetto's tokenizer keeps it:
 *  - interning generations: a new one at each SEQ_INCREMENTAL_STATE_CLEARED,
 *    holding the interned_data messages written in it (by field and iid)
 *    and the sequence's TracePacketDefaults;
 *  - sequence-scoped clocks (ids 64..127): their unit multipliers and, for
 *    incremental ones, the last value;
 *  - the conversion of a packet's timestamp, in any clock, to trace time.
 * Generation 0 holds the packets of no sequence.
 */
#ifndef VP_TP_SEQ_H
#define VP_TP_SEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_ctx.h"

struct tp_seqs;

struct tp_seqs *tp_seqs_new(void);
/* Frees every sequence and generation (modules free their per-sequence
 * state first, through tp_seq_visit). */
void tp_seqs_free(struct tp_seqs *s);

/* ---- for the loader --------------------------------------------------- */

/* The state of sequence id on machine, made on first sight (with a
 * generation and a sorter queue of its own). */
struct tp_seq *tp_seq_get(struct tp_ctx *ctx, uint32_t machine, uint32_t id);
/* The sorter queue of the sequence's track events (Perfetto sorts them in
 * a stream apart from the machine's other packets). */
uint32_t tp_seq_te_queue(struct tp_ctx *ctx, struct tp_seq *s);
/* A new, empty interning generation. */
uint32_t tp_seq_new_gen(struct tp_ctx *ctx);
/* Stores an InternedData message's entries in generation gen. */
void tp_seq_intern_data(struct tp_ctx *ctx, uint32_t gen,
			const uint8_t *data, size_t len);
/* Stores TracePacketDefaults as generation gen's defaults (for
 * track_event_defaults; the default clock is the sequence's st). */
void tp_seq_set_defaults(struct tp_ctx *ctx, uint32_t gen,
			 const uint8_t *data, size_t len);
/* A ClockSnapshot on pkt: the clock graph, the sequence's scoped and
 * incremental clocks, the clock_snapshot table. */
void tp_seq_clock_snapshot(struct tp_ctx *ctx, struct tp_packet *pkt,
			   const uint8_t *data, size_t len);
/* Resolves pkt->raw_ts (in pkt->clock_id, through the sequence's scoped
 * and incremental clocks) into pkt->ts; false if it cannot, counting the
 * failure's clock_sync_failure_* stat only when count_failure (before the
 * end of the file Perfetto defers such a packet instead, tp_load.c). */
bool tp_seq_packet_time(struct tp_ctx *ctx, struct tp_packet *pkt,
			bool count_failure);

/* ---- for the modules -------------------------------------------------- */

/* The interned message (InternedData field `field`, e.g. 2 for
 * event_names) with this iid in generation gen: its serialized bytes.
 * False when unknown, counted in interned_data_tokenizer_errors: call it
 * where Perfetto looks the iid up, not to probe. */
bool tp_interned(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		 uint64_t iid, const uint8_t **data, size_t *len);
/* The `name` / `str` string field (number name_field) of that interned
 * message, interned in the pool; 0 when unknown. */
tp_str tp_interned_str(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		       uint64_t iid, uint32_t name_field);
/* The sequence's TracePacketDefaults bytes in generation gen (len 0 if
 * none). */
void tp_packet_defaults(struct tp_ctx *ctx, uint32_t gen,
			const uint8_t **data, size_t *len);

/* The state of sequence seq_id on machine, or NULL if never seen. */
struct tp_seq *tp_seq_find(struct tp_ctx *ctx, uint32_t machine,
			   uint32_t seq_id);
/* Calls fn for every sequence seen. */
void tp_seq_visit(struct tp_ctx *ctx, void (*fn)(void *, struct tp_seq *),
		  void *arg);

/* Whether pkt has a trusted_packet_sequence_id other than 0.  Every packet
 * has a sequence (0 when the field is absent, as Perfetto's reader has
 * it: interning and track events work there), but clocks 64..127 are
 * scoped to a real sequence and are refused on 0. */
static inline bool tp_pkt_scoped_ok(const struct tp_packet *pkt)
{
	return pkt->seq && pkt->seq->id;
}

/* Converts a timestamp of clock_id (a builtin or sequence-scoped id as
 * written in the trace) seen on packet pkt to trace time, counting
 * Perfetto's clock_sync_failure_* stat of the reason when it cannot. */
bool tp_to_trace_time(struct tp_ctx *ctx, const struct tp_packet *pkt,
		      uint32_t clock_id, int64_t ts, int64_t *out);

#endif
