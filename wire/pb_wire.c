/*
 * pb_wire.c - protobuf wire scanner and writer (see pb_wire.h).
 */
#include "pb_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vp_alloc.h"

bool pb_read_varint_slow(const uint8_t **pp, const uint8_t *end,
			 uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (p >= end)
			return false;
		uint8_t byte = *p++;
		/* The tenth byte may only carry the top bit of a 64-bit value. */
		if (shift == 63 && byte > 1)
			return false;
		v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			*pp = p;
			*out = v;
			return true;
		}
	}
	return false;
}

static bool fail(struct pb_reader *r, const uint8_t *at, enum pb_err e)
{
	r->err = e;
	r->err_off = (size_t)(at - r->base);
	r->p = r->end; /* further calls return false */
	return false;
}

bool pb_next_slow(struct pb_reader *r, struct pb_field *f)
{
	const uint8_t *start = r->p;
	const uint8_t *p = start;
	uint64_t tag;

	if (r->err != PB_OK || p >= r->end)
		return false;
	if (!pb_read_varint(&p, r->end, &tag)) {
		/* Distinguish a cut-off tag from an over-long one. */
		bool cut = (size_t)(r->end - start) < PB_MAX_VARINT_LEN &&
			   (r->end[-1] & 0x80);
		return fail(r, start, cut ? PB_ERR_TRUNCATED : PB_ERR_VARINT);
	}
	if ((tag >> 3) == 0 || (tag >> 3) > PB_MAX_FIELD_NUMBER)
		return fail(r, start, PB_ERR_FIELD_NUMBER);

	f->num = (uint32_t)(tag >> 3);
	f->wt = (uint8_t)(tag & 7);
	f->start = start;
	f->data = NULL; /* set below: the payload, or an empty slice */
	f->len = 0;
	f->val = 0;

	switch (f->wt) {
	case PB_WT_VARINT: {
		const uint8_t *q = p;
		if (!pb_read_varint(&p, r->end, &f->val)) {
			bool cut = (size_t)(r->end - q) < PB_MAX_VARINT_LEN &&
				   (r->end[-1] & 0x80);
			return fail(r, start, cut ? PB_ERR_TRUNCATED : PB_ERR_VARINT);
		}
		break;
	}
	case PB_WT_FIXED64:
		if (r->end - p < 8)
			return fail(r, start, PB_ERR_TRUNCATED);
		memcpy(&f->val, p, 8); /* little-endian hosts only (x86-64, arm64) */
		p += 8;
		break;
	case PB_WT_FIXED32: {
		uint32_t v32;
		if (r->end - p < 4)
			return fail(r, start, PB_ERR_TRUNCATED);
		memcpy(&v32, p, 4);
		f->val = v32;
		p += 4;
		break;
	}
	case PB_WT_LEN: {
		uint64_t len;
		if (!pb_read_varint(&p, r->end, &len))
			return fail(r, start, PB_ERR_TRUNCATED);
		if (len > (uint64_t)(r->end - p))
			return fail(r, start, PB_ERR_TRUNCATED);
		f->data = p;
		f->len = (size_t)len;
		p += len;
		break;
	}
	default:
		return fail(r, start, PB_ERR_WIRETYPE);
	}
	if (!f->data)
		f->data = p;
	f->end = p;
	r->p = p;
	return true;
}

const char *pb_err_str(enum pb_err e)
{
	switch (e) {
	case PB_OK:
		return "ok";
	case PB_ERR_TRUNCATED:
		return "field runs past the end of its message";
	case PB_ERR_VARINT:
		return "malformed varint";
	case PB_ERR_WIRETYPE:
		return "invalid wire type";
	case PB_ERR_FIELD_NUMBER:
		return "invalid field number";
	}
	return "unknown error";
}

/* ---- writer ----------------------------------------------------------- */

void pb_buf_init(struct pb_buf *b)
{
	*b = (struct pb_buf){0};
}

void pb_buf_init_soft(struct pb_buf *b)
{
	*b = (struct pb_buf){.soft = true};
}

void pb_buf_free(struct pb_buf *b)
{
	bool soft = b->soft;
	free(b->data);
	*b = (struct pb_buf){.soft = soft};
}

bool pb_buf_grow(struct pb_buf *b, size_t extra)
{
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra) {
		if (cap > SIZE_MAX / 2) {
			cap = SIZE_MAX;
			goto fail;
		}
		cap *= 2;
	}
	uint8_t *d = realloc(b->data, cap);
	if (!d)
		goto fail;
	b->data = d;
	b->cap = cap;
	return true;
fail:
	if (!b->soft)
		vp_oom(cap);
	b->failed = true;
	return false;
}

void pb_put_raw(struct pb_buf *b, const void *p, size_t len)
{
	if (!len || !pb_buf_reserve(b, len))
		return;
	pb_put_raw_reserved(b, p, len);
}

void pb_put_sint(struct pb_buf *b, uint32_t num, int64_t v)
{
	pb_put_varint(b, num, pb_zigzag_encode(v));
}

void pb_put_fixed64(struct pb_buf *b, uint32_t num, uint64_t v)
{
	pb_put_tag(b, num, PB_WT_FIXED64);
	pb_put_raw(b, &v, 8);
}

void pb_put_fixed32(struct pb_buf *b, uint32_t num, uint32_t v)
{
	pb_put_tag(b, num, PB_WT_FIXED32);
	pb_put_raw(b, &v, 4);
}

void pb_put_double(struct pb_buf *b, uint32_t num, double v)
{
	uint64_t bits;
	memcpy(&bits, &v, 8);
	pb_put_fixed64(b, num, bits);
}

void pb_put_bytes(struct pb_buf *b, uint32_t num, const void *p, size_t len)
{
	pb_put_tag(b, num, PB_WT_LEN);
	pb_put_raw_varint(b, len);
	pb_put_raw(b, p, len);
}

void pb_put_string(struct pb_buf *b, uint32_t num, const char *s)
{
	pb_put_bytes(b, num, s, strlen(s));
}

/* The body is written after a 5-byte hole (room for lengths up to 2^35);
 * pb_end_nested() encodes the real length and slides the body back. */
#define PB_NESTED_HOLE 5

size_t pb_begin_nested(struct pb_buf *b, uint32_t num)
{
	pb_put_tag(b, num, PB_WT_LEN);
	if (!pb_buf_reserve(b, PB_NESTED_HOLE))
		return b->len; /* failed: pb_end_nested does nothing */
	size_t mark = b->len;
	b->len += PB_NESTED_HOLE;
	return mark;
}

void pb_end_nested(struct pb_buf *b, size_t mark)
{
	if (b->failed)
		return; /* the message is dropped whole; its marks may be off */
	size_t body = mark + PB_NESTED_HOLE;
	size_t len = b->len - body;
	uint8_t tmp[PB_MAX_VARINT_LEN];
	size_t n = pb_encode_varint(tmp, len);

	memcpy(b->data + mark, tmp, n);
	if (n < PB_NESTED_HOLE)
		memmove(b->data + mark + n, b->data + body, len);
	b->len = mark + n + len;
}
