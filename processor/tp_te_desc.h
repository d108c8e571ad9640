/*
 * tp_te_desc.h - descriptors in timestamp order: TrackDescriptors and the
 * legacy Thread- and ProcessDescriptor packets are pushed to the sorter at
 * tokenize and, at parse, name their processes and threads (and give
 * Chrome's process args and thread types).
 */
#ifndef VP_TP_TE_DESC_H
#define VP_TP_TE_DESC_H

#include <stddef.h>
#include <stdint.h>

struct tp_ctx;
struct tp_packet;

/* What a pushed descriptor is. */
enum { TE_DESC_TRACK = 'D', TE_DESC_THREAD = 'T', TE_DESC_PROCESS = 'P' };

/* kind: the sorter kind descriptors are pushed as (its callback
 * tp_te_desc_parse). */
struct tp_te_desc_state *tp_te_desc_new(uint8_t kind);
void tp_te_desc_free(struct tp_te_desc_state *d);

/* Pushes descriptor p of packet pkt, at the packet's time. */
void tp_te_desc_push(struct tp_ctx *ctx, const struct tp_packet *pkt,
		     uint8_t what, const uint8_t *p, size_t len);
/* The sorter's callback: applies a pushed descriptor. */
void tp_te_desc_parse(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
		      size_t len);

#endif
