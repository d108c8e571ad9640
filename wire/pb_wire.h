/*
 * pb_wire.h - bounds-checked, zero-copy protobuf wire scanner and writer.
 *
 * The scanner walks the fields of one serialized message without copying:
 * each pb_field points into the caller's buffer.  Every read is checked
 * against the end of the buffer; on malformed input pb_next() returns false
 * and records an error code and the offset (relative to the buffer start
 * given to pb_reader_init) of the first bad byte.
 *
 * The writer appends fields to a growable pb_buf.  Nested messages are
 * written with pb_begin_nested()/pb_end_nested(), which back-patch the
 * length once the body is known.
 *
 * Neither side knows any schema: field numbers are the caller's business.
 */
#ifndef VP_PB_WIRE_H
#define VP_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum pb_wiretype {
	PB_WT_VARINT = 0,
	PB_WT_FIXED64 = 1,
	PB_WT_LEN = 2,
	PB_WT_SGROUP = 3, /* deprecated groups: rejected as malformed */
	PB_WT_EGROUP = 4,
	PB_WT_FIXED32 = 5,
};

enum pb_err {
	PB_OK = 0,
	PB_ERR_TRUNCATED,    /* a field runs past the end of the buffer */
	PB_ERR_VARINT,       /* varint longer than 10 bytes or overflows 64 bits */
	PB_ERR_WIRETYPE,     /* wire type 3, 4, 6 or 7 */
	PB_ERR_FIELD_NUMBER, /* field number 0 or above 2^29-1 */
};

#define PB_MAX_FIELD_NUMBER ((1u << 29) - 1)
#define PB_MAX_VARINT_LEN 10

/* A field as found on the wire; all pointers refer to the scanned buffer. */
struct pb_field {
	uint32_t num;          /* field number */
	uint8_t wt;            /* enum pb_wiretype */
	uint64_t val;          /* VARINT, FIXED64, FIXED32 value (zero-extended) */
	const uint8_t *data;   /* LEN payload; for the other wire types an
				* empty slice at the end of the field, never
				* NULL, so (data, len) is always a valid range */
	size_t len;            /* LEN payload length (0 for the others) */
	const uint8_t *start;  /* first byte of the tag */
	const uint8_t *end;    /* one past the last byte of the field */
};

struct pb_reader {
	const uint8_t *base; /* start of the buffer, for error offsets */
	const uint8_t *p;    /* next byte to read */
	const uint8_t *end;
	enum pb_err err;
	size_t err_off; /* offset of the bad field from base */
};


/* The general case of pb_read_varint(). */
bool pb_read_varint_slow(const uint8_t **p, const uint8_t *end, uint64_t *out);

/* Decodes one varint at *p, advancing *p.  Returns false when truncated or
 * over-long (nothing is advanced then).  Inline, with one bound computed
 * up front instead of a check per byte. */
#define PB_INLINE static inline __attribute__((always_inline))

PB_INLINE bool pb_read_varint(const uint8_t **pp, const uint8_t *end,
			      uint64_t *out)
{
	const uint8_t *p = *pp;

	if (p < end && *p < 0x80) {
		*out = *p;
		*pp = p + 1;
		return true;
	}
	if (p >= end)
		return false;
	/* Two and three bytes (values below 2^21: most lengths, deltas and
	 * ids) without the loop's shifts by a variable count. */
	if (end - p >= 3) {
		uint64_t b0 = *p & 0x7f, b1 = p[1];
		if (b1 < 0x80) {
			*out = b0 | b1 << 7;
			*pp = p + 2;
			return true;
		}
		uint64_t b2 = p[2];
		if (b2 < 0x80) {
			*out = b0 | (b1 & 0x7f) << 7 | b2 << 14;
			*pp = p + 3;
			return true;
		}
	}
	/* Bounded by the end of the buffer or ten bytes, whichever is first:
	 * no per-byte end check. */
	size_t max = (size_t)(end - p) < PB_MAX_VARINT_LEN ? (size_t)(end - p)
							   : PB_MAX_VARINT_LEN;
	uint64_t v = 0;
	for (unsigned i = 0; i < max; i++) {
		uint8_t b = p[i];
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (b < 0x80) {
			if (i == PB_MAX_VARINT_LEN - 1 && b > 1)
				return false;
			*out = v;
			*pp = p + i + 1;
			return true;
		}
	}
	return false;
}

/* The general case of pb_next(), which also reports errors. */
bool pb_next_slow(struct pb_reader *r, struct pb_field *f);

/* Reads the next field into *f.  Returns false at the end of the buffer
 * (r->err == PB_OK) or on malformed input (r->err != PB_OK).
 * Inline fast path for a one-byte tag (fields 1..15) of a varint or a
 * length-delimited field; anything else, and any error, goes through
 * pb_next_slow(). */
PB_INLINE bool pb_next(struct pb_reader *r, struct pb_field *f)
{
	const uint8_t *p = r->p, *q = p;
	uint64_t tag, v;

	if (p >= r->end)
		return false; /* the end of the message (or of a failed scan) */
	if (pb_read_varint(&q, r->end, &tag) && tag >= 0x08 &&
	    tag <= ((uint64_t)PB_MAX_FIELD_NUMBER << 3 | 7)) {
		uint8_t wt = tag & 7;
		if (wt == PB_WT_VARINT && pb_read_varint(&q, r->end, &v)) {
			f->num = (uint32_t)(tag >> 3);
			f->wt = wt;
			f->start = p;
			f->val = v;
			f->data = q;
			f->len = 0;
			f->end = r->p = q;
			return true;
		}
		if (wt == PB_WT_LEN && pb_read_varint(&q, r->end, &v) &&
		    v <= (uint64_t)(r->end - q)) {
			f->num = (uint32_t)(tag >> 3);
			f->wt = wt;
			f->start = p;
			f->val = 0;
			f->data = q;
			f->len = (size_t)v;
			f->end = r->p = q + v;
			return true;
		}
	}
	return pb_next_slow(r, f);
}

const char *pb_err_str(enum pb_err e);

/* ---- (pointer, length) ranges ------------------------------------------
 *
 * Every (p, n) pair in this code base may be (NULL, 0): an empty pb_buf,
 * an absent field.  C makes NULL + 0 and memcpy(dst, NULL, 0) undefined
 * (clang's UBSan reports both), so arithmetic and copies on such ranges go
 * through these helpers. */

/* p + n, defined for (NULL, 0). */
static inline const uint8_t *pb_ptr_add(const uint8_t *p, size_t n)
{
	return n ? p + n : p;
}

/* Starts a scan of (buf, len).  Inline: a reader made and read at once
 * would otherwise wait on stores made in another function. */
static inline void pb_reader_init(struct pb_reader *r, const void *buf,
				  size_t len)
{
	r->base = buf;
	r->p = buf;
	r->end = pb_ptr_add(buf, len); /* no arithmetic on NULL */
	r->err = PB_OK;
	r->err_off = 0;
}

/* memcpy() that accepts (NULL, NULL, 0). */
static inline void pb_copy(void *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n);
}

/* Iterator over a packed repeated varint field (a LEN payload). */
struct pb_packed_iter {
	const uint8_t *p, *end;
	bool bad; /* set when a varint was truncated */
};

static inline void pb_packed_init(struct pb_packed_iter *it, const uint8_t *data,
				  size_t len)
{
	it->p = data;
	it->end = pb_ptr_add(data, len);
	it->bad = false;
}

/* Returns false at the end or on a malformed element (then it->bad). */
PB_INLINE bool pb_packed_next(struct pb_packed_iter *it, uint64_t *out)
{
	if (it->p >= it->end)
		return false;
	if (!pb_read_varint(&it->p, it->end, out)) {
		it->bad = true;
		it->p = it->end;
		return false;
	}
	return true;
}

static inline int64_t pb_zigzag_decode(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static inline uint64_t pb_zigzag_encode(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* ---- writer ----------------------------------------------------------- */

/* A growable output buffer.  In the tools, allocation failure aborts the
 * process (base/vp_alloc.h): every caller would otherwise have to unwind
 * a half-built message.  A buffer of the SDK (and of the IPC client it
 * links) is made with pb_buf_init_soft(): there a failed allocation sets
 * `failed`, the writes after it that do not fit are skipped, and the
 * caller checks pb_buf_failed() before using the bytes (a message left
 * half-built is dropped, never sent). */
struct pb_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	bool soft;   /* fail with `failed` instead of aborting */
	bool failed; /* since the last reset: a write was lost */
};

void pb_buf_init(struct pb_buf *b);
void pb_buf_init_soft(struct pb_buf *b);
void pb_buf_free(struct pb_buf *b);
static inline void pb_buf_reset(struct pb_buf *b)
{
	b->len = 0;
	b->failed = false;
}
static inline bool pb_buf_failed(const struct pb_buf *b) { return b->failed; }
/* Grows the buffer (the rare case of pb_buf_reserve).  False only for a
 * soft buffer, which is then marked failed. */
bool pb_buf_grow(struct pb_buf *b, size_t extra);

/* Makes room for extra bytes; false (soft buffers only) when there is
 * none: the caller must not write. */
PB_INLINE bool pb_buf_reserve(struct pb_buf *b, size_t extra)
{
	if (b->cap - b->len < extra)
		return pb_buf_grow(b, extra);
	return true;
}

/* Encodes v at p (which must have room for 10 bytes); returns bytes used. */
PB_INLINE size_t pb_encode_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Appends p[0..len); (NULL, 0) appends nothing. */
void pb_put_raw(struct pb_buf *b, const void *p, size_t len);

/* Appends p[0..len) where pb_buf_reserve() has made room; (NULL, 0) is
 * fine, on an empty buffer too. */
PB_INLINE void pb_put_raw_reserved(struct pb_buf *b, const void *p, size_t len)
{
	if (len) {
		memcpy(b->data + b->len, p, len);
		b->len += len;
	}
}

PB_INLINE void pb_put_raw_varint(struct pb_buf *b, uint64_t v)
{
	if (!pb_buf_reserve(b, PB_MAX_VARINT_LEN))
		return;
	b->len += pb_encode_varint(b->data + b->len, v);
}

PB_INLINE void pb_put_tag(struct pb_buf *b, uint32_t num, enum pb_wiretype wt)
{
	pb_put_raw_varint(b, ((uint64_t)num << 3) | (uint64_t)wt);
}

PB_INLINE void pb_put_varint(struct pb_buf *b, uint32_t num, uint64_t v)
{
	if (!pb_buf_reserve(b, 2 * PB_MAX_VARINT_LEN))
		return;
	b->len += pb_encode_varint(b->data + b->len, ((uint64_t)num << 3));
	b->len += pb_encode_varint(b->data + b->len, v);
}

void pb_put_sint(struct pb_buf *b, uint32_t num, int64_t v); /* zigzag */
void pb_put_fixed64(struct pb_buf *b, uint32_t num, uint64_t v);
void pb_put_fixed32(struct pb_buf *b, uint32_t num, uint32_t v);
void pb_put_double(struct pb_buf *b, uint32_t num, double v);
void pb_put_bytes(struct pb_buf *b, uint32_t num, const void *p, size_t len);
void pb_put_string(struct pb_buf *b, uint32_t num, const char *s);

/* Opens a nested LEN field; returns a bookmark for pb_end_nested().
 * Nests arbitrarily; the length is back-patched in its minimal encoding. */
size_t pb_begin_nested(struct pb_buf *b, uint32_t num);
void pb_end_nested(struct pb_buf *b, size_t bookmark);

/* Number of bytes the varint encoding of v takes. */
static inline size_t pb_varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* A nested LEN field whose length is about known in advance (a message
 * re-encoded with small changes): the hole left for the length is as
 * long as the guess's varint, so pb_end_sized() slides the body only when
 * the real length's varint is longer or shorter.  The bytes written are
 * pb_begin_nested()'s and pb_end_nested()'s. */
struct pb_sized {
	size_t mark; /* where the length goes */
	size_t hole; /* bytes left for it */
};

PB_INLINE struct pb_sized pb_begin_sized(struct pb_buf *b, uint32_t num,
					 size_t guess)
{
	struct pb_sized s;

	pb_put_tag(b, num, PB_WT_LEN);
	s.hole = pb_varint_size(guess);
	pb_buf_reserve(b, s.hole);
	s.mark = b->len;
	b->len += s.hole;
	return s;
}

PB_INLINE void pb_end_sized(struct pb_buf *b, struct pb_sized s)
{
	size_t body = s.mark + s.hole;
	size_t len = b->len - body;
	size_t n = pb_varint_size(len);

	if (n != s.hole) {
		if (n > s.hole)
			pb_buf_reserve(b, n - s.hole);
		memmove(b->data + s.mark + n, b->data + body, len);
		b->len = s.mark + n + len;
	}
	pb_encode_varint(b->data + s.mark, len);
}


#endif
