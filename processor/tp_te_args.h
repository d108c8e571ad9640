/*
 * tp_te_args.h - the args of a track event: its debug annotations (nested
 * values, dicts, arrays, legacy JSON), its Chrome histogram sample, its
 * legacy source id, the thread of its sequence when its track is not a
 * thread's, its legacy phase; and the {event.category, event.name} sets
 * of Perfetto's proto content analysis.
 */
#ifndef VP_TP_TE_ARGS_H
#define VP_TP_TE_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_args.h"
#include "tp_te_event.h"

struct tp_te_args *tp_te_args_new(struct tp_ctx *ctx);
void tp_te_args_free(struct tp_te_args *a);

/* Whether the event has any args. */
bool tp_te_event_has_args(const struct ev *e);
/* Builds the args of an event into b (emptied first), in Perfetto's
 * order; async_phase: the event is a legacy async one. */
void tp_te_build_args(struct tp_ctx *ctx, const struct ev *e,
		      bool async_phase, struct tp_args_builder *b);
/* The arg set of an event (-1 if empty). */
int64_t tp_te_event_args(struct tp_ctx *ctx, const struct ev *e,
			 bool async_phase);
/* The key of the sequence's thread arg, legacy_event.passthrough_utid. */
tp_str tp_te_passthrough_key(struct tp_ctx *ctx);

/* Notes the event's (category, name) for the content analysis sets. */
void tp_te_note_annotation(struct tp_ctx *ctx, const struct ev *e);
/* After the parse: writes those sets, in order of first use. */
void tp_te_args_finish(struct tp_ctx *ctx);

#endif
