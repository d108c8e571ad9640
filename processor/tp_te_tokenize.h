/*
 * tp_te_tokenize.h - the track_event module in file order (tokenize):
 * what a packet sequence's earlier packets decide for its events
 * (thread descriptors, delta timestamps, defaults, incremental
 * counters), written into each event's sorter payload (tp_te_event.h),
 * and the range of interest.  Its entry points, tp_te_tokenize() and the
 * sequence callbacks, are the loader's (tp_modules.h).
 */
#ifndef VP_TP_TE_TOKENIZE_H
#define VP_TP_TE_TOKENIZE_H

#include <stdbool.h>
#include <stdint.h>

struct tp_ctx;

/* kind_event: the sorter kind the events' payloads are pushed as. */
struct tp_te_tok *tp_te_tok_new(uint8_t kind_event);
void tp_te_tok_free(struct tp_te_tok *t);

/* A sequence's thread descriptor within one generation.  Events read it
 * when parsed, not when tokenized: a descriptor later in the same
 * generation holds for the events before it too, as Perfetto's shared
 * incremental state does. */
struct tp_te_seq_td {
	bool valid;
	int64_t pid, tid;
};
/* The descriptor of slot `slot` (an event's payload header names it);
 * NULL when there is no such slot. */
const struct tp_te_seq_td *tp_te_seq_td(struct tp_ctx *ctx, uint32_t slot);

/* Whether ts is before the trace's range of interest (its events are
 * dropped). */
bool tp_te_before_roi(struct tp_ctx *ctx, int64_t ts);

#endif
