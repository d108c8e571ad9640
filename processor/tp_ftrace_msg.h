/*
 * tp_ftrace_msg.h - an ftrace event's message decoded flat, for the
 * modules that read ftrace events (tp_ftrace.c and those it hands events
 * to): one walk over the fields, then each read by number.  Event
 * messages are small and flat, and every field number they use is below
 * 32.
 */
#ifndef VP_TP_FTRACE_MSG_H
#define VP_TP_FTRACE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "tp_ctx.h"

/* A decoded flat message: the last value of each field number < 32. */
struct msg {
	uint32_t present;
	uint64_t val[32];
	const uint8_t *data[32];
	size_t len[32];
};

static inline void msg_decode(struct msg *m, const uint8_t *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;

	m->present = 0;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num >= 32)
			continue;
		m->present |= 1u << f.num;
		m->val[f.num] = f.val;
		m->data[f.num] = f.data;
		m->len[f.num] = f.len;
	}
}

static inline bool has(const struct msg *m, unsigned n)
{
	return m->present >> n & 1;
}

static inline uint64_t u64(const struct msg *m, unsigned n)
{
	return has(m, n) ? m->val[n] : 0;
}

/* int32 / int64 fields are plain varints (two's complement). */
static inline int64_t i64(const struct msg *m, unsigned n)
{
	return (int64_t)u64(m, n);
}

static inline int32_t i32(const struct msg *m, unsigned n)
{
	return (int32_t)(uint32_t)u64(m, n);
}

static inline tp_str str(struct tp_ctx *ctx, const struct msg *m, unsigned n)
{
	if (!has(m, n) || !m->data[n])
		return 0;
	return tp_intern(ctx->pool, (const char *)m->data[n], m->len[n]);
}

#endif
