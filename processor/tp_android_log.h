/*
 * tp_android_log.h - the android_log module (tp_android_log.c): logcat
 * entries into __intrinsic_logs (the logs and android_logs views).
 */
#ifndef VP_TP_ANDROID_LOG_H
#define VP_TP_ANDROID_LOG_H

#include <stdbool.h>

#include "pb_wire.h"
#include "tp_ctx.h"

void tp_alog_init(struct tp_ctx *ctx);
/* False when f is not TracePacket.android_log. */
bool tp_alog_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
		      const struct pb_field *f);
void tp_alog_free(struct tp_ctx *ctx);

#endif
