/*
 * fuzz_host_sync.c - libFuzzer target for the sync endpoint's request
 * handling: any bytes a guest sends, in reads whose sizes come from the
 * input (up to SYNC_CONN_READ_MAX, as the endpoint reads), go through
 * sync_conn_feed() exactly as the endpoint feeds them, and the guest takes
 * its replies in pieces of any size, as a socket may write them
 * (sync_conn_consumed() with a count that need not end on a frame).
 *
 * What must hold: the guest, decoding the byte stream it was sent, sees
 * only whole, well-formed replies, one for every request answered; the
 * queue never grows past its buffer; a guest that keeps reading never has
 * a reply dropped.
 *
 * Input: a script of steps.  Step byte s:
 *   s & 0x80 clear: a read of s bytes (0..127) of the input that follows;
 *   s == 0x80..0xbf: a read of ((s & 0x3f) << 8 | next byte) bytes;
 *   s == 0xc0..0xff: the guest takes (s & 0x3f) * 7 + 1 bytes of replies.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sync_endpoint.h"
#include "sync_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sync_conn conn;

struct guest {
	struct vp_sync_decoder dec; /* the guest's view of the reply stream */
	uint64_t replies;
};

/* The guest takes up to n bytes of queued replies (a short write). */
static void guest_take(struct guest *g, struct sync_conn *c, size_t n)
{
	size_t queued = c->out_len - c->out_off;
	if (n > queued)
		n = queued;
	const uint8_t *p = c->out + c->out_off;
	size_t left = n;
	while (left > 0) {
		struct vp_sync_msg m;
		bool got;
		size_t used = vp_sync_decode(&g->dec, p, left, &m, &got);
		p += used;
		left -= used;
		if (got) {
			if (m.type != VP_SYNC_REPLY)
				abort();
			g->replies++;
		}
	}
	if (g->dec.skipped_bytes)
		abort(); /* the stream of replies is not frames */
	sync_conn_consumed(c, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sync_conn *c = &conn;
	struct guest g;
	uint64_t answered = 0;
	size_t i = 0;

	memset(&g, 0, sizeof(g));
	vp_sync_decoder_init(&g.dec);
	sync_conn_init(c);
	while (i < size) {
		uint8_t s = data[i++];
		if (s >= 0xc0) {
			guest_take(&g, c, (size_t)(s & 0x3f) * 7 + 1);
			continue;
		}
		size_t len = s;
		if (s & 0x80) {
			len = (size_t)(s & 0x3f) << 8;
			if (i < size)
				len |= data[i++];
		}
		if (len > size - i)
			len = size - i;
		if (len > SYNC_CONN_READ_MAX)
			len = SYNC_CONN_READ_MAX;
		/* The endpoint reads only with room for a whole read; until
		 * then it waits for the guest to take its replies. */
		while (sync_conn_room(c) < SYNC_CONN_READ_ROOM)
			guest_take(&g, c, sizeof(c->out));
		answered += sync_conn_feed(c, data + i, len, i);
		i += len;
		if (c->out_len > sizeof(c->out) || c->out_off > c->out_len ||
		    c->dropped)
			abort();
	}
	if (answered != c->served)
		abort();
	/* The guest takes the rest: every reply arrives whole. */
	guest_take(&g, c, sizeof(c->out));
	if (g.replies != c->served || g.dec.len != 0 || c->out_len != 0 ||
	    sync_conn_room(c) != SYNC_CONN_MAX_REPLIES)
		abort();
	return 0;
}
