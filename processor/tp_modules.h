/*
 * tp_modules.h - the entry points of the modules that understand packet
 * contents.  The loader calls init once, tokenize for each data field of a
 * packet it does not handle itself (returning false means "not mine"), and
 * finish once after the sorted parse stage.
 */
#ifndef VP_TP_MODULES_H
#define VP_TP_MODULES_H

#include <stdbool.h>

#include "pb_wire.h"
#include "tp_ctx.h"

/* track_event, track_descriptor, thread/process descriptors, legacy and
 * streaming-profile timestamps (tp_track_event.c; tokenize and the
 * sequence callbacks in tp_te_tokenize.c). */
void tp_te_init(struct tp_ctx *ctx);
bool tp_te_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
		    const struct pb_field *f);
/* The loader calls this when a sequence's incremental state is cleared. */
void tp_te_seq_reset(struct tp_ctx *ctx, struct tp_seq *seq);
/* ... and when packets of the sequence were lost before this one. */
void tp_te_seq_lost(struct tp_ctx *ctx, struct tp_seq *seq);
void tp_te_seq_free(struct tp_ctx *ctx, struct tp_seq *seq);
void tp_te_finish(struct tp_ctx *ctx);
/* A packet of sequence seq_id said it is the first the sequence wrote. */
void tp_te_first_packet(struct tp_ctx *ctx, uint32_t seq_id);
void tp_te_free(struct tp_ctx *ctx);

/* ftrace_events, ftrace_stats, process_tree, process_stats
 * (tp_ftrace.c, tp_process.c). */
void tp_ftrace_init(struct tp_ctx *ctx);
bool tp_ftrace_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f);
void tp_ftrace_finish(struct tp_ctx *ctx);
/* The machine's ftrace kept its kernel buffer from before tracing started
 * (FtraceStats.preserve_ftrace_buffer): its events before the start are
 * kept too. */
void tp_ftrace_preserve_buffer(struct tp_ctx *ctx, uint32_t machine);
void tp_ftrace_free(struct tp_ctx *ctx);

/* sys_stats, system_info, trace_stats, trace_config, service_event,
 * triggers, chrome metadata, cpu_info, trace_uuid, trace_attributes,
 * initial_display_state ... (tp_system.c). */
void tp_system_init(struct tp_ctx *ctx);
bool tp_system_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f);
void tp_system_finish(struct tp_ctx *ctx);
void tp_system_free(struct tp_ctx *ctx);

/* concurrent_session_event: the other tracing sessions, as state tracks
 * (tp_sessions.c). */
void tp_sessions_init(struct tp_ctx *ctx);
bool tp_sessions_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  const struct pb_field *f);
void tp_sessions_free(struct tp_ctx *ctx);

#endif
