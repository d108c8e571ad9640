/*
 * ipc_frame.c - IPCFrame encoding, zero-copy decoding and stream reassembly
 * (see ipc_frame.h).
 */
#include "ipc_frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_client.h" /* VP_IPC_MAX_FRAME */

/* IPCFrame field numbers (IPCF_*, VP_IPC_MSG_*) are perfetto_fields.h's,
 * from protos/perfetto/ipc/ipc.proto. */

/* ---- decoding ------------------------------------------------------------ */

/* Fails the decode for field f of a message starting at `msg` inside the
 * frame starting at `frame`. */
static int bad_field(struct vp_error *err, const uint8_t *frame,
		     const struct pb_field *f, const char *what)
{
	return vp_errorf(err, "IPCFrame byte %zu: field %u of %s has wire type %u",
			 (size_t)(f->start - frame), f->num, what, f->wt);
}

static int bad_wire(struct vp_error *err, const uint8_t *frame,
		    const struct pb_reader *r, const char *what)
{
	return vp_errorf(err, "IPCFrame byte %zu: %s in %s",
			 (size_t)(r->base - frame) + r->err_off,
			 pb_err_str(r->err), what);
}

/* The scalar shapes a field may have; anything else is rejected. */
static bool want_varint(const struct pb_field *f)
{
	return f->wt == PB_WT_VARINT;
}

static bool want_len(const struct pb_field *f) { return f->wt == PB_WT_LEN; }

/* Decodes a message whose only field we read is one string (BindService,
 * RequestError) into *out_str. */
static int decode_one_string(const uint8_t *frame, const struct pb_field *m,
			     uint32_t num, const char *what,
			     struct vp_ipc_bytes *out_str, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, m->data, m->len);
	while (pb_next(&r, &f)) {
		if (f.num == num) {
			if (!want_len(&f))
				return bad_field(err, frame, &f, what);
			out_str->data = f.data;
			out_str->len = f.len;
		}
	}
	return r.err ? bad_wire(err, frame, &r, what) : 0;
}

static int check_method(const uint8_t *frame, const struct pb_field *m,
			struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	const char *what = "BindServiceReply.MethodInfo";

	pb_reader_init(&r, m->data, m->len);
	while (pb_next(&r, &f)) {
		if ((f.num == IPCF_METHOD_ID && !want_varint(&f)) ||
		    (f.num == IPCF_METHOD_NAME && !want_len(&f)))
			return bad_field(err, frame, &f, what);
	}
	return r.err ? bad_wire(err, frame, &r, what) : 0;
}

static int decode_bind_reply(const uint8_t *frame, const struct pb_field *m,
			     struct vp_ipc_frame *out, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	const char *what = "BindServiceReply";

	out->bind_reply.body.data = m->data;
	out->bind_reply.body.len = m->len;
	pb_reader_init(&r, m->data, m->len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case IPCF_BIND_REPLY_SUCCESS:
			if (!want_varint(&f))
				return bad_field(err, frame, &f, what);
			out->bind_reply.success = f.val != 0;
			break;
		case IPCF_BIND_REPLY_SERVICE_ID:
			if (!want_varint(&f))
				return bad_field(err, frame, &f, what);
			out->bind_reply.service_id = (uint32_t)f.val;
			break;
		case IPCF_BIND_REPLY_METHODS:
			if (!want_len(&f))
				return bad_field(err, frame, &f, what);
			if (check_method(frame, &f, err) < 0)
				return -1;
			out->bind_reply.n_methods++;
			break;
		default:
			break;
		}
	}
	return r.err ? bad_wire(err, frame, &r, what) : 0;
}

static int decode_invoke(const uint8_t *frame, const struct pb_field *m,
			 struct vp_ipc_frame *out, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	const char *what = "InvokeMethod";

	pb_reader_init(&r, m->data, m->len);
	while (pb_next(&r, &f)) {
		bool ok = true;
		switch (f.num) {
		case IPCF_INVOKE_SERVICE_ID:
			ok = want_varint(&f);
			out->invoke.service_id = (uint32_t)f.val;
			break;
		case IPCF_INVOKE_METHOD_ID:
			ok = want_varint(&f);
			out->invoke.method_id = (uint32_t)f.val;
			break;
		case IPCF_INVOKE_ARGS:
			ok = want_len(&f);
			out->invoke.args.data = f.data;
			out->invoke.args.len = f.len;
			break;
		case IPCF_INVOKE_DROP_REPLY:
			ok = want_varint(&f);
			out->invoke.drop_reply = f.val != 0;
			break;
		default:
			break;
		}
		if (!ok)
			return bad_field(err, frame, &f, what);
	}
	return r.err ? bad_wire(err, frame, &r, what) : 0;
}

static int decode_reply(const uint8_t *frame, const struct pb_field *m,
			struct vp_ipc_frame *out, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	const char *what = "InvokeMethodReply";

	pb_reader_init(&r, m->data, m->len);
	while (pb_next(&r, &f)) {
		bool ok = true;
		switch (f.num) {
		case IPCF_REPLY_SUCCESS:
			ok = want_varint(&f);
			out->reply.success = f.val != 0;
			break;
		case IPCF_REPLY_HAS_MORE:
			ok = want_varint(&f);
			out->reply.has_more = f.val != 0;
			break;
		case IPCF_REPLY_PROTO:
			ok = want_len(&f);
			out->reply.reply.data = f.data;
			out->reply.reply.len = f.len;
			break;
		default:
			break;
		}
		if (!ok)
			return bad_field(err, frame, &f, what);
	}
	return r.err ? bad_wire(err, frame, &r, what) : 0;
}

static int decode_peer(const uint8_t *frame, const struct pb_field *m,
		       struct vp_ipc_frame *out, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	const char *what = "SetPeerIdentity";

	pb_reader_init(&r, m->data, m->len);
	while (pb_next(&r, &f)) {
		bool ok = true;
		switch (f.num) {
		case IPCF_PEER_PID:
			ok = want_varint(&f);
			out->peer.has_pid = true;
			out->peer.pid = (int32_t)(uint32_t)f.val;
			break;
		case IPCF_PEER_UID:
			ok = want_varint(&f);
			out->peer.has_uid = true;
			out->peer.uid = (int32_t)(uint32_t)f.val;
			break;
		case IPCF_PEER_MACHINE_ID_HINT:
			ok = want_len(&f);
			out->peer.machine_id_hint.data = f.data;
			out->peer.machine_id_hint.len = f.len;
			break;
		case IPCF_PEER_MACHINE_NAME:
			ok = want_len(&f);
			out->peer.machine_name.data = f.data;
			out->peer.machine_name.len = f.len;
			break;
		default:
			break;
		}
		if (!ok)
			return bad_field(err, frame, &f, what);
	}
	return r.err ? bad_wire(err, frame, &r, what) : 0;
}

static int decode_msg(const uint8_t *frame, const struct pb_field *m,
		      struct vp_ipc_frame *out, struct vp_error *err)
{
	if (!want_len(m))
		return bad_field(err, frame, m, "IPCFrame");
	/* A later member of the oneof replaces an earlier one. */
	memset(&out->bind_reply, 0, sizeof(*out) -
				    offsetof(struct vp_ipc_frame, bind_reply));
	out->msg = (enum vp_ipc_msg)m->num;
	switch (m->num) {
	case VP_IPC_MSG_BIND_SERVICE:
		return decode_one_string(frame, m, IPCF_BIND_SERVICE_NAME,
					 "BindService",
					 &out->bind.service_name, err);
	case VP_IPC_MSG_BIND_SERVICE_REPLY:
		return decode_bind_reply(frame, m, out, err);
	case VP_IPC_MSG_INVOKE_METHOD:
		return decode_invoke(frame, m, out, err);
	case VP_IPC_MSG_INVOKE_METHOD_REPLY:
		return decode_reply(frame, m, out, err);
	case VP_IPC_MSG_REQUEST_ERROR:
		return decode_one_string(frame, m, IPCF_ERROR_ERROR,
					 "RequestError",
					 &out->error.error, err);
	default:
		return decode_peer(frame, m, out, err);
	}
}

int vp_ipc_frame_decode(const uint8_t *buf, size_t len,
			struct vp_ipc_frame *f, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field fld;

	memset(f, 0, sizeof(*f));
	pb_reader_init(&r, buf, len);
	while (pb_next(&r, &fld)) {
		if (fld.num == IPCF_REQUEST_ID) {
			if (!want_varint(&fld))
				return bad_field(err, buf, &fld, "IPCFrame");
			f->request_id = fld.val;
		} else if (fld.num >= VP_IPC_MSG_BIND_SERVICE &&
			   fld.num <= VP_IPC_MSG_SET_PEER_IDENTITY) {
			if (decode_msg(buf, &fld, f, err) < 0)
				return -1;
		}
		/* data_for_testing (1) and unknown fields are skipped. */
	}
	if (r.err)
		return bad_wire(err, buf, &r, "IPCFrame");
	return 0;
}

void vp_ipc_methods_begin(const struct vp_ipc_frame *f,
			  struct vp_ipc_method_iter *it)
{
	if (f->msg == VP_IPC_MSG_BIND_SERVICE_REPLY)
		pb_reader_init(&it->r, f->bind_reply.body.data,
			       f->bind_reply.body.len);
	else
		pb_reader_init(&it->r, NULL, 0);
}

bool vp_ipc_methods_next(struct vp_ipc_method_iter *it, uint32_t *id,
			 struct vp_ipc_bytes *name)
{
	struct pb_field f, g;

	while (pb_next(&it->r, &f)) {
		if (f.num != IPCF_BIND_REPLY_METHODS || f.wt != PB_WT_LEN)
			continue;
		struct pb_reader m;
		pb_reader_init(&m, f.data, f.len);
		*id = 0;
		name->data = NULL;
		name->len = 0;
		while (pb_next(&m, &g)) {
			if (g.num == IPCF_METHOD_ID && g.wt == PB_WT_VARINT)
				*id = (uint32_t)g.val;
			else if (g.num == IPCF_METHOD_NAME &&
				 g.wt == PB_WT_LEN) {
				name->data = g.data;
				name->len = g.len;
			}
		}
		return true;
	}
	return false;
}

bool vp_ipc_bytes_eq(struct vp_ipc_bytes b, const char *s)
{
	size_t n = strlen(s);
	return b.len == n && (n == 0 || memcmp(b.data, s, n) == 0);
}

/* ---- encoding ------------------------------------------------------------ */

size_t vp_ipc_frame_begin(struct pb_buf *b, uint64_t request_id)
{
	size_t mark = b->len;
	if (!pb_buf_reserve(b, VP_IPC_FRAME_HDR))
		return mark; /* a soft buffer failed: vp_ipc_frame_end skips */
	b->len += VP_IPC_FRAME_HDR;
	pb_put_varint(b, IPCF_REQUEST_ID, request_id);
	return mark;
}

void vp_ipc_frame_end(struct pb_buf *b, size_t bookmark)
{
	if (pb_buf_failed(b))
		return; /* dropped whole by its sender */
	size_t n = b->len - bookmark - VP_IPC_FRAME_HDR;
	uint8_t *p = b->data + bookmark;
	p[0] = (uint8_t)n;
	p[1] = (uint8_t)(n >> 8);
	p[2] = (uint8_t)(n >> 16);
	p[3] = (uint8_t)(n >> 24);
}

void vp_ipc_put_bind(struct pb_buf *b, const char *service_name)
{
	size_t m = pb_begin_nested(b, VP_IPC_MSG_BIND_SERVICE);
	pb_put_string(b, IPCF_BIND_SERVICE_NAME, service_name);
	pb_end_nested(b, m);
}

size_t vp_ipc_put_bind_reply_begin(struct pb_buf *b, bool success,
				   uint32_t service_id)
{
	size_t m = pb_begin_nested(b, VP_IPC_MSG_BIND_SERVICE_REPLY);
	pb_put_varint(b, IPCF_BIND_REPLY_SUCCESS, success);
	if (success)
		pb_put_varint(b, IPCF_BIND_REPLY_SERVICE_ID, service_id);
	return m;
}

void vp_ipc_put_bind_reply_method(struct pb_buf *b, uint32_t id,
				  const char *name)
{
	size_t m = pb_begin_nested(b, IPCF_BIND_REPLY_METHODS);
	pb_put_varint(b, IPCF_METHOD_ID, id);
	pb_put_string(b, IPCF_METHOD_NAME, name);
	pb_end_nested(b, m);
}

void vp_ipc_put_bind_reply_end(struct pb_buf *b, size_t bookmark)
{
	pb_end_nested(b, bookmark);
}

void vp_ipc_put_invoke(struct pb_buf *b, uint32_t service_id,
		       uint32_t method_id, const void *args, size_t len,
		       bool drop_reply)
{
	size_t m = pb_begin_nested(b, VP_IPC_MSG_INVOKE_METHOD);
	pb_put_varint(b, IPCF_INVOKE_SERVICE_ID, service_id);
	pb_put_varint(b, IPCF_INVOKE_METHOD_ID, method_id);
	pb_put_bytes(b, IPCF_INVOKE_ARGS, args, len);
	if (drop_reply)
		pb_put_varint(b, IPCF_INVOKE_DROP_REPLY, 1);
	pb_end_nested(b, m);
}

void vp_ipc_put_invoke_reply(struct pb_buf *b, bool success, bool has_more,
			     const void *reply, size_t len)
{
	size_t m = pb_begin_nested(b, VP_IPC_MSG_INVOKE_METHOD_REPLY);
	pb_put_varint(b, IPCF_REPLY_SUCCESS, success);
	if (has_more)
		pb_put_varint(b, IPCF_REPLY_HAS_MORE, 1);
	pb_put_bytes(b, IPCF_REPLY_PROTO, reply, len);
	pb_end_nested(b, m);
}

void vp_ipc_put_request_error(struct pb_buf *b, const char *msg)
{
	size_t m = pb_begin_nested(b, VP_IPC_MSG_REQUEST_ERROR);
	pb_put_string(b, IPCF_ERROR_ERROR, msg ? msg : "");
	pb_end_nested(b, m);
}

void vp_ipc_put_peer_identity(struct pb_buf *b, int32_t pid, int32_t uid,
			      const char *machine_id_hint,
			      const char *machine_name)
{
	size_t m = pb_begin_nested(b, VP_IPC_MSG_SET_PEER_IDENTITY);
	/* int32: negative values are sign-extended to ten bytes. */
	pb_put_varint(b, IPCF_PEER_PID, (uint64_t)(int64_t)pid);
	pb_put_varint(b, IPCF_PEER_UID, (uint64_t)(int64_t)uid);
	if (machine_id_hint)
		pb_put_string(b, IPCF_PEER_MACHINE_ID_HINT, machine_id_hint);
	if (machine_name)
		pb_put_string(b, IPCF_PEER_MACHINE_NAME, machine_name);
	pb_end_nested(b, m);
}

/* ---- reassembly ---------------------------------------------------------- */

#define RX_MIN_SPACE 1024u
#define RX_INITIAL_CAP (16u << 10)
#define RX_SHRINK_CAP (1u << 20)

void vp_ipc_rx_init(struct vp_ipc_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	rx->max_frame = VP_IPC_MAX_FRAME;
}

void vp_ipc_rx_free(struct vp_ipc_rx *rx)
{
	for (int i = 0; i < rx->n_fds; i++)
		close(rx->fds[i]);
	free(rx->buf);
	memset(rx, 0, sizeof(*rx));
}

static uint32_t read_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* Moves the unconsumed bytes to the front of the buffer. */
static void rx_compact(struct vp_ipc_rx *rx)
{
	if (rx->head == 0)
		return;
	size_t keep = rx->len - rx->head;
	if (keep)
		memmove(rx->buf, rx->buf + rx->head, keep);
	rx->base_off += rx->head;
	rx->head = 0;
	rx->len = keep;
	if (keep == 0 && rx->cap > RX_SHRINK_CAP) {
		/* Give back the memory of a one-off huge frame. */
		free(rx->buf);
		rx->buf = NULL;
		rx->cap = 0;
	}
}

uint8_t *vp_ipc_rx_space(struct vp_ipc_rx *rx, size_t *avail)
{
	rx_compact(rx);
	size_t want = RX_MIN_SPACE;
	if (rx->len >= VP_IPC_FRAME_HDR) {
		/* Room for the rest of the frame being received, when its
		 * length is sane (an insane one fails in vp_ipc_rx_next). */
		uint32_t flen = read_le32(rx->buf);
		if (flen <= rx->max_frame) {
			size_t total = (size_t)flen + VP_IPC_FRAME_HDR;
			if (total > rx->len && total - rx->len > want)
				want = total - rx->len;
		}
	}
	if (rx->cap - rx->len < want) {
		/* The frame's length is the peer's to choose (up to
		 * max_frame): running out of memory for it fails this stream,
		 * not the program (the service, the SDK's application). */
		size_t cap = rx->cap ? rx->cap : RX_INITIAL_CAP;
		while (cap - rx->len < want)
			cap *= 2;
		uint8_t *n = realloc(rx->buf, cap);
		if (!n) {
			*avail = 0;
			return NULL;
		}
		rx->buf = n;
		rx->cap = cap;
	}
	*avail = rx->cap - rx->len;
	return rx->buf + rx->len;
}

void vp_ipc_rx_commit(struct vp_ipc_rx *rx, size_t n)
{
	if (n > rx->cap - rx->len)
		n = rx->cap - rx->len;
	rx->len += n;
}

int vp_ipc_rx_feed(struct vp_ipc_rx *rx, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len > 0) {
		size_t avail;
		uint8_t *dst = vp_ipc_rx_space(rx, &avail);
		if (!dst)
			return -1;
		size_t n = len < avail ? len : avail;
		memcpy(dst, p, n);
		vp_ipc_rx_commit(rx, n);
		p += n;
		len -= n;
	}
	return 0;
}

int vp_ipc_rx_add_fds(struct vp_ipc_rx *rx, const int *fds, int n,
		      struct vp_error *err)
{
	uint64_t at = rx->base_off + rx->len;
	if (n < 0 || n > VP_IPC_RX_MAX_FDS - rx->n_fds) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		return vp_errorf(err,
				 "stream offset %llu: %d passed fds with %d "
				 "already waiting (at most %d)",
				 (unsigned long long)at, n, rx->n_fds,
				 VP_IPC_RX_MAX_FDS);
	}
	for (int i = 0; i < n; i++) {
		rx->fds[rx->n_fds] = fds[i];
		rx->fd_at[rx->n_fds] = at;
		rx->n_fds++;
	}
	return 0;
}

/* Hands the fds that arrived by stream offset `end` to the frame. */
static void rx_take_fds(struct vp_ipc_rx *rx, uint64_t end,
			struct vp_ipc_rx_frame *out)
{
	int k = 0;
	out->n_fds = 0;
	for (int i = 0; i < rx->n_fds; i++) {
		if (rx->fd_at[i] <= end) {
			out->fds[out->n_fds++] = rx->fds[i];
		} else {
			rx->fds[k] = rx->fds[i];
			rx->fd_at[k] = rx->fd_at[i];
			k++;
		}
	}
	rx->n_fds = k;
}

int vp_ipc_rx_next(struct vp_ipc_rx *rx, struct vp_ipc_rx_frame *out,
		   struct vp_error *err)
{
	uint64_t off = rx->base_off + rx->head;

	if (rx->failed)
		return vp_errorf(err, "stream offset %llu: stream already "
				      "failed",
				 (unsigned long long)off);
	size_t have = rx->len - rx->head;
	if (have < VP_IPC_FRAME_HDR)
		return 0;
	uint32_t flen = read_le32(rx->buf + rx->head);
	if (flen > rx->max_frame) {
		rx->failed = true;
		return vp_errorf(err,
				 "stream offset %llu: frame length %u exceeds "
				 "the limit of %zu bytes",
				 (unsigned long long)off, flen, rx->max_frame);
	}
	if (have - VP_IPC_FRAME_HDR < flen)
		return 0;
	out->data = rx->buf + rx->head + VP_IPC_FRAME_HDR;
	out->len = flen;
	out->offset = off;
	rx->head += VP_IPC_FRAME_HDR + (size_t)flen;
	rx_take_fds(rx, rx->base_off + rx->head, out);
	return 1;
}
