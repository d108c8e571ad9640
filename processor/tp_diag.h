/*
 * tp_diag.h - trace diagnostics: checks of the trace's own TraceConfig for
 * settings known to hurt the trace (a tiny ftrace buffer, unfiltered
 * syscalls, a DISCARD buffer while streaming ...), written to Perfetto's
 * __intrinsic_trace_diagnostics table, one row per finding.
 */
#ifndef VP_TP_DIAG_H
#define VP_TP_DIAG_H

#include <stddef.h>
#include <stdint.h>

struct tp_ctx;

struct tp_diag *tp_diag_new(void);
void tp_diag_free(struct tp_diag *d);

/* Keeps a copy of a TracePacket.trace_config of machine `machine` (the
 * last one of a machine replaces the ones before, as in Perfetto). */
void tp_diag_set_config(struct tp_ctx *ctx, uint32_t machine,
			const uint8_t *data, size_t len);

/* Runs every rule over each machine's config and fills the table.  Called
 * once, after the parse, when stats and metadata are known. */
void tp_diag_finish(struct tp_ctx *ctx);

#endif
