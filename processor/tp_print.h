/*
 * tp_print.h - atrace's text in ftrace print and tracing_mark_write
 * events (tp_print.c), for tp_ftrace.c's parse stage.
 */
#ifndef VP_TP_PRINT_H
#define VP_TP_PRINT_H

#include <stdint.h>

#include "tp_ctx.h"
#include "tp_ftrace_msg.h"

/* A print event (FtraceEvent.print): its buf as atrace text. */
void tp_print_event(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		    int64_t pid, const struct msg *m);
/* A tracing_mark_write or a kernel look-alike, event id `id`. */
void tp_print_mark_write(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			 int64_t pid, uint32_t id, const struct msg *m);

#endif
