/*
 * tp_system.c - system probes and service packets (skeleton).
 */
#include "tp_modules.h"

void tp_system_init(struct tp_ctx *ctx) { (void)ctx; }
bool tp_system_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt, const struct pb_field *f) { (void)ctx; (void)pkt; (void)f; return false; }
void tp_system_finish(struct tp_ctx *ctx) { (void)ctx; }
void tp_system_free(struct tp_ctx *ctx) { (void)ctx; }
