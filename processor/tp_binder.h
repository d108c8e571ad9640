/*
 * tp_binder.h - the ftrace events Perfetto turns into slices through a
 * tracker with state: binder transactions (a slice per call and reply,
 * a flow between them) and i2c transfers (a slice per transfer, named
 * after its adapter).
 */
#ifndef VP_TP_BINDER_H
#define VP_TP_BINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tp_ctx;
struct tp_binder;

struct tp_binder *tp_binder_new(void);
void tp_binder_free(struct tp_binder *b);

/* One event (id: its FtraceEvent field, data: the payload, pid: the
 * thread that wrote it); false if id is none of the events above. */
bool tp_binder_parse(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t pid, uint32_t id, const uint8_t *data,
		     size_t len);

#endif
