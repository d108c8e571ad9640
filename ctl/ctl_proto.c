/*
 * ctl_proto.c - the guest control protocol's frames: encoding, payload
 * parsing and the resynchronizing stream decoder (layout in ctl_proto.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ctl_proto.h"
#include "pb_wire.h"

static const uint8_t magic[4] = {'V', 'P', 'C', 'T'};

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint32_t crc(const uint8_t *p, size_t n)
{
	uLong c = crc32(0L, Z_NULL, 0);
	/* zlib takes uInt lengths; frames are far below 4 GiB. */
	return (uint32_t)crc32(c, p, (uInt)n);
}

const char *vp_ctl_type_name(uint32_t type)
{
	static const char *const names[] = {
		[VP_CTL_HELLO] = "HELLO",     [VP_CTL_HELLO_REPLY] = "HELLO_REPLY",
		[VP_CTL_START] = "START",     [VP_CTL_STARTED] = "STARTED",
		[VP_CTL_STOP] = "STOP",       [VP_CTL_STOPPED] = "STOPPED",
		[VP_CTL_PULL] = "PULL",       [VP_CTL_DATA] = "DATA",
		[VP_CTL_END] = "END",         [VP_CTL_PING] = "PING",
		[VP_CTL_PONG] = "PONG",       [VP_CTL_ERROR] = "ERROR",
	};
	static _Thread_local char other[24];

	if (type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	snprintf(other, sizeof(other), "type %u", type);
	return other;
}

const char *vp_ctl_state_name(uint32_t state)
{
	switch (state) {
	case VP_CTL_IDLE: return "idle";
	case VP_CTL_RUNNING: return "running";
	case VP_CTL_STOPPING: return "stopping";
	case VP_CTL_ENDED: return "ended";
	case VP_CTL_FAILED: return "failed";
	}
	return "unknown";
}

/* ---- encoding ----------------------------------------------------------- */

static void put_str(struct pb_buf *b, uint32_t num, const char *s)
{
	if (s[0])
		pb_put_string(b, num, s);
}

/* The payload of m, by its type. */
static void encode_payload(const struct vp_ctl_msg *m, struct pb_buf *b)
{
	switch (m->type) {
	case VP_CTL_HELLO:
		pb_put_varint(b, VP_CTL_F_VERSION, m->version);
		put_str(b, VP_CTL_F_HOST_NAME, m->machine);
		break;
	case VP_CTL_HELLO_REPLY:
		pb_put_varint(b, VP_CTL_F_VERSION, m->version);
		put_str(b, VP_CTL_F_MACHINE, m->machine);
		put_str(b, VP_CTL_F_UNAME, m->uname);
		put_str(b, VP_CTL_F_CONSUMER, m->consumer);
		pb_put_varint(b, VP_CTL_F_CONSUMER_OK, m->consumer_ok);
		pb_put_varint(b, VP_CTL_F_STATE, m->state);
		pb_put_varint(b, VP_CTL_F_TRACE_SIZE, m->trace_size);
		break;
	case VP_CTL_START:
		pb_put_bytes(b, VP_CTL_F_CONFIG, m->bytes, m->bytes_len);
		put_str(b, VP_CTL_F_SESSION, m->session);
		if (m->start_key)
			pb_put_varint(b, VP_CTL_F_START_KEY, m->start_key);
		break;
	case VP_CTL_STARTED:
		pb_put_varint(b, VP_CTL_F_PID, m->pid);
		break;
	case VP_CTL_STOPPED:
		pb_put_varint(b, VP_CTL_F_SIZE, m->trace_size);
		pb_put_sint(b, VP_CTL_F_EXIT_STATUS, m->exit_status);
		break;
	case VP_CTL_PULL:
		pb_put_varint(b, VP_CTL_F_OFFSET, m->offset);
		pb_put_varint(b, VP_CTL_F_CHUNK, m->chunk);
		break;
	case VP_CTL_DATA:
		pb_put_varint(b, VP_CTL_F_OFFSET, m->offset);
		pb_put_bytes(b, VP_CTL_F_BYTES, m->bytes, m->bytes_len);
		break;
	case VP_CTL_END:
		pb_put_varint(b, VP_CTL_F_TOTAL, m->total);
		pb_put_varint(b, VP_CTL_F_CRC, m->crc);
		break;
	case VP_CTL_PONG:
		pb_put_varint(b, VP_CTL_F_STATE, m->state);
		pb_put_varint(b, VP_CTL_F_TRACE_SIZE, m->trace_size);
		pb_put_sint(b, VP_CTL_F_EXIT_STATUS, m->exit_status);
		put_str(b, VP_CTL_F_PONG_SESSION, m->session);
		put_str(b, VP_CTL_F_MESSAGE, m->text);
		break;
	case VP_CTL_ERROR:
		pb_put_varint(b, VP_CTL_F_REQUEST_TYPE, m->request_type);
		put_str(b, VP_CTL_F_ERROR_TEXT, m->text);
		break;
	default: /* STOP, PING: no fields */
		break;
	}
}

int vp_ctl_encode(const struct vp_ctl_msg *m, uint8_t **frame, size_t *len,
		  struct vp_error *err)
{
	struct pb_buf b;
	uint8_t hdr[VP_CTL_HEADER_SIZE];

	*frame = NULL;
	*len = 0;
	pb_buf_init(&b);
	encode_payload(m, &b);
	if (b.len > VP_CTL_MAX_PAYLOAD) {
		size_t n = b.len;
		pb_buf_free(&b);
		return vp_errorf(err, "%s: payload of %zu bytes exceeds the "
				 "limit of %u", vp_ctl_type_name(m->type), n,
				 VP_CTL_MAX_PAYLOAD);
	}
	size_t total = VP_CTL_HEADER_SIZE + b.len + VP_CTL_TRAILER_SIZE;
	uint8_t *out = malloc(total);
	if (!out) {
		pb_buf_free(&b);
		return vp_errorf(err, "out of memory");
	}
	memcpy(hdr, magic, sizeof(magic));
	hdr[4] = VP_CTL_VERSION;
	hdr[5] = m->type;
	hdr[6] = 0;
	hdr[7] = 0;
	put_le32(hdr + 8, m->id);
	put_le32(hdr + 12, (uint32_t)b.len);
	put_le32(hdr + 16, crc(hdr, 16));
	memcpy(out, hdr, sizeof(hdr));
	if (b.len)
		memcpy(out + VP_CTL_HEADER_SIZE, b.data, b.len);
	put_le32(out + VP_CTL_HEADER_SIZE + b.len,
		 crc(out + VP_CTL_HEADER_SIZE, b.len));
	pb_buf_free(&b);
	*frame = out;
	*len = total;
	return 0;
}

/* ---- payload parsing ---------------------------------------------------- */

/* Copies a LEN field into a fixed buffer, cut to fit, NUL-terminated. */
static void take_str(char *dst, size_t cap, const struct pb_field *f)
{
	size_t n = f->len < cap - 1 ? f->len : cap - 1;
	memcpy(dst, f->data, n);
	dst[n] = '\0';
	/* A NUL inside would silently cut the text; make it visible. */
	for (size_t i = 0; i < n; i++)
		if (dst[i] == '\0')
			dst[i] = '?';
}

/* One field of a payload of the given type. */
static int take_field(struct vp_ctl_msg *m, const struct pb_field *f)
{
	bool v = f->wt == PB_WT_VARINT, s = f->wt == PB_WT_LEN;

	switch (m->type) {
	case VP_CTL_HELLO:
	case VP_CTL_HELLO_REPLY:
		if (f->num == VP_CTL_F_VERSION && v)
			m->version = (uint32_t)f->val;
		else if (f->num == VP_CTL_F_MACHINE && s)
			take_str(m->machine, sizeof(m->machine), f);
		else if (f->num == VP_CTL_F_UNAME && s)
			take_str(m->uname, sizeof(m->uname), f);
		else if (f->num == VP_CTL_F_CONSUMER && s)
			take_str(m->consumer, sizeof(m->consumer), f);
		else if (f->num == VP_CTL_F_CONSUMER_OK && v)
			m->consumer_ok = f->val != 0;
		else if (f->num == VP_CTL_F_STATE && v)
			m->state = (uint32_t)f->val;
		else if (f->num == VP_CTL_F_TRACE_SIZE && v)
			m->trace_size = f->val;
		break;
	case VP_CTL_START:
		if (f->num == VP_CTL_F_CONFIG && s) {
			m->bytes = f->data;
			m->bytes_len = f->len;
		} else if (f->num == VP_CTL_F_SESSION && s) {
			take_str(m->session, sizeof(m->session), f);
		} else if (f->num == VP_CTL_F_START_KEY && v) {
			m->start_key = f->val;
		}
		break;
	case VP_CTL_STARTED:
		if (f->num == VP_CTL_F_PID && v)
			m->pid = (uint32_t)f->val;
		break;
	case VP_CTL_STOPPED:
	case VP_CTL_PONG:
		if (f->num == VP_CTL_F_SIZE && v && m->type == VP_CTL_STOPPED)
			m->trace_size = f->val;
		else if (f->num == VP_CTL_F_EXIT_STATUS && v)
			m->exit_status = (int32_t)pb_zigzag_decode(f->val);
		else if (f->num == VP_CTL_F_STATE && v)
			m->state = (uint32_t)f->val;
		else if (f->num == VP_CTL_F_TRACE_SIZE && v)
			m->trace_size = f->val;
		else if (f->num == VP_CTL_F_PONG_SESSION && s)
			take_str(m->session, sizeof(m->session), f);
		else if (f->num == VP_CTL_F_MESSAGE && s)
			take_str(m->text, sizeof(m->text), f);
		break;
	case VP_CTL_PULL:
		if (f->num == VP_CTL_F_OFFSET && v)
			m->offset = f->val;
		else if (f->num == VP_CTL_F_CHUNK && v)
			m->chunk = f->val > UINT32_MAX ? UINT32_MAX
						       : (uint32_t)f->val;
		break;
	case VP_CTL_DATA:
		if (f->num == VP_CTL_F_OFFSET && v) {
			m->offset = f->val;
		} else if (f->num == VP_CTL_F_BYTES && s) {
			m->bytes = f->data;
			m->bytes_len = f->len;
		}
		break;
	case VP_CTL_END:
		if (f->num == VP_CTL_F_TOTAL && v)
			m->total = f->val;
		else if (f->num == VP_CTL_F_CRC && v)
			m->crc = (uint32_t)f->val;
		break;
	case VP_CTL_ERROR:
		if (f->num == VP_CTL_F_REQUEST_TYPE && v)
			m->request_type = (uint32_t)f->val;
		else if (f->num == VP_CTL_F_ERROR_TEXT && s)
			take_str(m->text, sizeof(m->text), f);
		break;
	}
	return 0;
}

int vp_ctl_parse_payload(uint8_t type, uint32_t id, const uint8_t *p,
			 size_t n, struct vp_ctl_msg *m, struct vp_error *err)
{
	struct pb_reader rd;
	struct pb_field f;

	memset(m, 0, sizeof(*m));
	m->type = type;
	m->id = id;
	if (type < VP_CTL_HELLO || type > VP_CTL_ERROR)
		return vp_errorf(err, "unknown message type %u", type);
	pb_reader_init(&rd, p, n);
	while (pb_next(&rd, &f))
		take_field(m, &f);
	if (rd.err != PB_OK)
		return vp_errorf(err, "%s (id %u): malformed payload at byte "
				 "%zu of %zu: %s", vp_ctl_type_name(type), id,
				 (size_t)(rd.p - (const uint8_t *)p), n,
				 pb_err_str(rd.err));
	return 0;
}

/* ---- the stream decoder ------------------------------------------------- */

void vp_ctl_decoder_init(struct vp_ctl_decoder *d)
{
	memset(d, 0, sizeof(*d));
}

void vp_ctl_decoder_free(struct vp_ctl_decoder *d)
{
	free(d->buf);
	memset(d, 0, sizeof(*d));
}

/* The size of the frame buf starts with: 0 while more bytes are needed to
 * tell, -1 if buf cannot start a frame (bad magic, version, flags, header
 * CRC, or a length over the limit). */
static long frame_size(const uint8_t *buf, size_t len)
{
	size_t m = len < sizeof(magic) ? len : sizeof(magic);

	if (memcmp(buf, magic, m) != 0)
		return -1;
	if (len >= 5 && buf[4] != VP_CTL_VERSION)
		return -1;
	if (len < VP_CTL_HEADER_SIZE)
		return 0;
	if (buf[6] != 0 || buf[7] != 0)
		return -1;
	if (get_le32(buf + 16) != crc(buf, 16))
		return -1;
	uint32_t plen = get_le32(buf + 12);
	if (plen > VP_CTL_MAX_PAYLOAD)
		return -1;
	return (long)(VP_CTL_HEADER_SIZE + plen + VP_CTL_TRAILER_SIZE);
}

/* Drops the first byte of the buffer and every following byte that cannot
 * start a frame: the resynchronization step. */
static void drop_garbage(struct vp_ctl_decoder *d)
{
	size_t skip = 1;

	while (skip < d->len) {
		const uint8_t *q = memchr(d->buf + skip, magic[0],
					  d->len - skip);
		if (!q) {
			skip = d->len;
			break;
		}
		skip = (size_t)(q - d->buf);
		if (frame_size(q, d->len - skip) >= 0)
			break;
		skip++;
	}
	d->skipped_bytes += skip;
	memmove(d->buf, d->buf + skip, d->len - skip);
	d->len -= skip;
}

/* Makes room for want bytes in the buffer.  False when memory runs out. */
static bool reserve(struct vp_ctl_decoder *d, size_t want)
{
	if (d->cap >= want)
		return true;
	size_t cap = d->cap ? d->cap : 256;
	while (cap < want)
		cap *= 2;
	if (cap > VP_CTL_MAX_FRAME)
		cap = VP_CTL_MAX_FRAME;
	uint8_t *nb = realloc(d->buf, cap);
	if (!nb)
		return false;
	d->buf = nb;
	d->cap = cap;
	return true;
}

/* Looks at the buffered bytes: true when a checked frame of *size bytes
 * starts the buffer; false when more input is needed (*size: how many
 * bytes the buffer should hold to tell). */
static bool buffered_frame(struct vp_ctl_decoder *d, size_t *size)
{
	for (;;) {
		if (d->len == 0) {
			*size = VP_CTL_HEADER_SIZE;
			return false;
		}
		long fs = frame_size(d->buf, d->len);
		if (fs < 0) {
			drop_garbage(d);
			continue;
		}
		if (fs == 0) {
			*size = VP_CTL_HEADER_SIZE;
			return false;
		}
		*size = (size_t)fs;
		if (d->len < *size)
			return false;
		size_t plen = *size - VP_CTL_HEADER_SIZE - VP_CTL_TRAILER_SIZE;
		const uint8_t *pl = d->buf + VP_CTL_HEADER_SIZE;
		if (get_le32(pl + plen) == crc(pl, plen))
			return true;
		d->bad_frames++;
		drop_garbage(d);
	}
}

size_t vp_ctl_decode(struct vp_ctl_decoder *d, const uint8_t *p, size_t n,
		     struct vp_ctl_frame *f, bool *got)
{
	size_t used = 0, size;

	*got = false;
	if (d->consumed) {
		memmove(d->buf, d->buf + d->consumed, d->len - d->consumed);
		d->len -= d->consumed;
		d->consumed = 0;
	}
	while (!buffered_frame(d, &size)) {
		if (used == n)
			return used;
		size_t want = size - d->len;
		if (want > n - used)
			want = n - used;
		if (!reserve(d, d->len + want)) {
			/* Out of memory: drop what is buffered and go on;
			 * the peer's retry will get through. */
			d->skipped_bytes += d->len;
			d->len = 0;
			used += want;
			continue;
		}
		memcpy(d->buf + d->len, p + used, want);
		d->len += want;
		used += want;
	}
	f->type = d->buf[5];
	f->id = get_le32(d->buf + 8);
	f->payload = d->buf + VP_CTL_HEADER_SIZE;
	f->len = size - VP_CTL_HEADER_SIZE - VP_CTL_TRAILER_SIZE;
	d->consumed = size;
	d->frames++;
	*got = true;
	return used;
}
