/*
 * tp_track_event.c - the track_event module (skeleton).
 */
#include "tp_modules.h"

void tp_te_init(struct tp_ctx *ctx) { (void)ctx; }
bool tp_te_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
		    const struct pb_field *f)
{
	(void)ctx; (void)pkt; (void)f;
	return false;
}
void tp_te_seq_reset(struct tp_ctx *ctx, struct tp_seq *seq) { (void)ctx; (void)seq; }
void tp_te_seq_free(struct tp_ctx *ctx, struct tp_seq *seq) { (void)ctx; (void)seq; }
void tp_te_finish(struct tp_ctx *ctx) { (void)ctx; }
void tp_te_free(struct tp_ctx *ctx) { (void)ctx; }
