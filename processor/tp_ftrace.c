/*
 * tp_ftrace.c - ftrace event bundles (skeleton).
 */
#include "tp_modules.h"

void tp_ftrace_init(struct tp_ctx *ctx) { (void)ctx; }
bool tp_ftrace_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f)
{
	(void)ctx; (void)pkt; (void)f;
	return false;
}
void tp_ftrace_finish(struct tp_ctx *ctx) { (void)ctx; }
void tp_ftrace_free(struct tp_ctx *ctx) { (void)ctx; }
