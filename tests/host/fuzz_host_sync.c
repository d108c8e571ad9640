/*
 * fuzz_host_sync.c - libFuzzer target for the sync endpoint's request
 * handling: any bytes a guest sends, in reads whose sizes come from the
 * input, go through sync_conn_feed() exactly as the endpoint feeds them;
 * every queued reply must be a well-formed reply frame, counts must add
 * up, and the queue never overflows.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sync_endpoint.h"
#include "sync_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sync_conn conn;

/* Drains the reply queue, checking each frame. */
static void drain(struct sync_conn *c, uint64_t *replies)
{
	struct vp_sync_decoder d;
	vp_sync_decoder_init(&d);
	size_t off = c->out_off;
	while (off < c->out_len) {
		struct vp_sync_msg m;
		bool got;
		off += vp_sync_decode(&d, c->out + off, c->out_len - off, &m,
				      &got);
		if (!got || m.type != VP_SYNC_REPLY)
			abort();
		(*replies)++;
	}
	if (d.skipped_bytes || d.len)
		abort();
	sync_conn_consumed(c, c->out_len - c->out_off);
	if (c->out_len != 0 || sync_conn_room(c) != SYNC_CONN_MAX_REPLIES)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sync_conn *c = &conn;
	uint64_t answered = 0, replies = 0;
	size_t i = 0;

	sync_conn_init(c);
	while (i < size) {
		/* A length byte, then that many bytes as one read. */
		size_t len = data[i++];
		if (len > size - i)
			len = size - i;
		if (len > SYNC_CONN_READ_MAX)
			abort();
		/* The endpoint reads only with room for a whole read. */
		if (sync_conn_room(c) < SYNC_CONN_READ_ROOM)
			drain(c, &replies);
		answered += sync_conn_feed(c, data + i, len, i);
		i += len;
		if (c->out_len > sizeof(c->out) || c->dropped)
			abort();
		/* Sometimes the client takes part of its replies. */
		if (len & 1 && c->out_len > c->out_off)
			sync_conn_consumed(c, (c->out_len - c->out_off) / 2);
	}
	if (answered != c->served)
		abort();
	(void)replies;
	return 0;
}
