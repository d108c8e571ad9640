/*
 * sync_proto.c - encoding and resynchronizing decoding of the clock-sync
 * exchange frames (see sync_proto.h for the layout).
 */
#include <string.h>

#include "sync_proto.h"

static const uint8_t magic[4] = {'V', 'P', 'S', 'Y'};

#define HEADER_SIZE 8u

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void put_header(uint8_t *out, uint8_t type)
{
	memcpy(out, magic, sizeof(magic));
	out[4] = VP_SYNC_VERSION;
	out[5] = type;
	out[6] = 0;
	out[7] = 0;
}

size_t vp_sync_encode_request(uint8_t out[VP_SYNC_REQUEST_SIZE], uint64_t seq)
{
	put_header(out, VP_SYNC_REQUEST);
	put_le64(out + 8, seq);
	return VP_SYNC_REQUEST_SIZE;
}

size_t vp_sync_encode_reply(uint8_t out[VP_SYNC_REPLY_SIZE], uint64_t seq,
			    uint64_t host_counter)
{
	put_header(out, VP_SYNC_REPLY);
	put_le64(out + 8, seq);
	put_le64(out + 16, host_counter);
	return VP_SYNC_REPLY_SIZE;
}

void vp_sync_decoder_init(struct vp_sync_decoder *d)
{
	memset(d, 0, sizeof(*d));
}

/* The size of the frame buf starts with: 0 while more bytes are needed to
 * tell, -1 if buf cannot start a frame. */
static int frame_size(const uint8_t *buf, size_t len)
{
	size_t m = len < sizeof(magic) ? len : sizeof(magic);
	if (memcmp(buf, magic, m) != 0)
		return -1;
	if (len < HEADER_SIZE)
		return 0;
	if (buf[4] != VP_SYNC_VERSION || buf[6] != 0 || buf[7] != 0)
		return -1;
	if (buf[5] == VP_SYNC_REQUEST)
		return VP_SYNC_REQUEST_SIZE;
	if (buf[5] == VP_SYNC_REPLY)
		return VP_SYNC_REPLY_SIZE;
	return -1;
}

/* Drops the first byte of the buffer and any following bytes that cannot
 * start a frame: the resynchronization step. */
static void drop_garbage(struct vp_sync_decoder *d)
{
	size_t skip = 1;
	while (skip < d->len && frame_size(d->buf + skip, d->len - skip) < 0)
		skip++;
	d->skipped_bytes += skip;
	memmove(d->buf, d->buf + skip, d->len - skip);
	d->len -= skip;
}

size_t vp_sync_decode(struct vp_sync_decoder *d, const uint8_t *p, size_t n,
		      struct vp_sync_msg *msg, bool *got)
{
	size_t used = 0;

	*got = false;
	while (used < n) {
		d->buf[d->len++] = p[used++];
		int size = frame_size(d->buf, d->len);
		if (size < 0) {
			drop_garbage(d);
			continue;
		}
		if (size == 0 || d->len < (size_t)size)
			continue;
		msg->type = d->buf[5];
		msg->seq = get_le64(d->buf + 8);
		msg->host_counter =
			msg->type == VP_SYNC_REPLY ? get_le64(d->buf + 16) : 0;
		d->frames++;
		d->len = 0;
		*got = true;
		break;
	}
	return used;
}
