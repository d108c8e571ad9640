/*
 * tp_memory.h - the kernel's memory ftrace events (rss_stat, ion, dma
 * heaps): process memory counters, heap counters and buffer slices.
 */
#ifndef VP_TP_MEMORY_H
#define VP_TP_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tp_ctx;

struct tp_memory *tp_memory_new(void);
void tp_memory_free(struct tp_memory *m);

/* Parses one ftrace event (payload field `id` of FtraceEvent, emitted by
 * thread `pid`) in timestamp order; false if it is not a memory event. */
bool tp_memory_ftrace(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t pid, uint32_t id, const uint8_t *data,
		      size_t len);

#endif
