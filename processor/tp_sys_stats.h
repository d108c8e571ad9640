/*
 * tp_sys_stats.h - the processor's SysStats module (tp_sys_stats.c), which
 * tp_system.c hands sys_stats packets and the page size of system_info.
 */
#ifndef VP_TP_SYS_STATS_H
#define VP_TP_SYS_STATS_H

#include <stdint.h>

#include "pb_wire.h"
#include "tp_ctx.h"

struct tp_sys_stats *tp_sys_stats_new(void);
void tp_sys_stats_free(struct tp_sys_stats *s);

/* The kernel's page size (system_info.page_size; 4096 until told). */
void tp_sys_stats_page_size(struct tp_ctx *ctx, uint32_t page_size);

/* A TracePacket.sys_stats field: its counters, at the packet's time. */
void tp_sys_stats_parse(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f);

#endif
