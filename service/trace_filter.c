/*
 * trace_filter.c - TraceConfig.trace_filter: Perfetto's filter bytecode
 * parsed into a bounded table, and the filter every packet a session reads
 * out goes through (trace_filter.h says what the bytecode is).
 *
 * The table: for each message, a count n of directly indexed fields (ids
 * below 128), n words of their state, then triples (first id, end id,
 * state) for larger ids; a state is TF_ALLOWED | what the field is (a
 * message index, a string field, a simple field).  A message's words
 * start at msg_off[i] and end at msg_off[i + 1].
 *
 * The bytecode comes from a consumer's config: it is checked whole before
 * it is used, and every size it implies is capped.
 */
#include <stdlib.h>
#include <string.h>

#include "trace_filter.h"
#include "vp_alloc.h"

enum {
	OP_END_OF_MESSAGE = 0,
	OP_SIMPLE_FIELD = 1,
	OP_SIMPLE_FIELD_RANGE = 2,
	OP_NESTED_FIELD = 3,
	OP_FILTER_STRING = 4,
	OP_FILTER_STRING_WITH_TYPE = 5,
};

#define TF_DIRECT_LIMIT 128u
#define TF_ALLOWED 0x80000000u
#define TF_SIMPLE 0x7fffffffu
#define TF_STRING 0x7ffffffeu
#define TF_STRING_TYPED 0x7fff0000u /* | the semantic type's low 16 bits */
/* protozero's bound on a length-delimited field; longer is an error. */
#define TF_MAX_LEN_FIELD (256u * 1024 * 1024)

struct u32vec {
	uint32_t *v;
	size_t n, cap;
};

static void u32_push(struct u32vec *a, uint32_t x)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 64;
		a->v = vp_xrealloc(a->v, a->cap * sizeof(*a->v));
	}
	a->v[a->n++] = x;
}

struct vp_trace_filter {
	uint32_t *words;
	size_t n_words;
	uint32_t *msg_off; /* n_msgs + 1 */
	uint32_t n_msgs;
	uint32_t root;     /* the message Trace.packet names */
};

/* ---- loading -------------------------------------------------------------- */

/* Unpacks the varints and checks the trailing checksum; false if a varint
 * is truncated or longer than 32 bits' worth, or the checksum is wrong
 * (or missing). */
static bool unpack_checked(const uint8_t *p, size_t len, struct u32vec *out)
{
	struct pb_packed_iter it;
	uint64_t h = 0xcbf29ce484222325ull, w;
	bool have = false;
	uint32_t last = 0;
	if (len == 0)
		return false;
	pb_packed_init(&it, p, len);
	while (pb_packed_next(&it, &w)) {
		if (have) { /* the word before is not the checksum */
			u32_push(out, last);
			for (int b = 0; b < 4; b++) {
				h ^= (last >> (8 * b)) & 0xff;
				h *= 0x100000001b3ull;
			}
		}
		last = (uint32_t)w; /* Perfetto reads each word as a uint32 */
		have = true;
	}
	if (it.bad || !have)
		return false;
	return (uint32_t)h == last;
}

struct overlay_entry {
	uint32_t msg, field, state;
};

/* The state an overlay entry's opcode gives its field, 0 if the opcode
 * cannot be in an overlay. */
static uint32_t overlay_state(uint32_t op, uint32_t arg)
{
	switch (op) {
	case OP_SIMPLE_FIELD:
		return TF_SIMPLE;
	case OP_FILTER_STRING:
		return TF_STRING;
	case OP_FILTER_STRING_WITH_TYPE:
		return TF_STRING_TYPED | (arg & 0xffff);
	default:
		return 0;
	}
}

static bool parse_overlay(const uint8_t *p, size_t len,
			  struct overlay_entry **out, size_t *n_out)
{
	struct u32vec w = {0};
	bool ok = unpack_checked(p, len, &w) && w.n % 3 == 0;
	size_t n = ok ? w.n / 3 : 0;
	struct overlay_entry *e = n ? vp_xcalloc(n, sizeof(*e)) : NULL;
	for (size_t i = 0; ok && i < n; i++) {
		e[i].msg = w.v[3 * i];
		e[i].field = w.v[3 * i + 1] >> 3;
		e[i].state = overlay_state(w.v[3 * i + 1] & 7, w.v[3 * i + 2]);
		if (!e[i].state)
			ok = false;
		/* Sorted by (message, field), no field twice. */
		else if (i > 0 && (e[i].msg < e[i - 1].msg ||
				   (e[i].msg == e[i - 1].msg &&
				    e[i].field <= e[i - 1].field)))
			ok = false;
	}
	free(w.v);
	if (!ok) {
		free(e);
		return false;
	}
	*out = e;
	*n_out = n;
	return true;
}

/* The message being built: its direct fields and its ranges. */
struct msg_build {
	uint32_t direct[TF_DIRECT_LIMIT];
	uint32_t n_direct; /* highest direct id set + 1 */
	struct u32vec ranges;
};

static void add_field(struct msg_build *m, uint32_t id, uint32_t state)
{
	if (id < TF_DIRECT_LIMIT) {
		m->direct[id] = TF_ALLOWED | state;
		if (id + 1 > m->n_direct)
			m->n_direct = id + 1;
		return;
	}
	/* A large id is a range of one. */
	u32_push(&m->ranges, id);
	u32_push(&m->ranges, id + 1);
	u32_push(&m->ranges, TF_ALLOWED | state);
}

struct loader {
	struct msg_build m;
	struct u32vec words, offs;
	const struct overlay_entry *ov;
	size_t n_ov, ov_i;
	uint32_t cur_msg;
};

/* Adds the overlay's entries of the current message before `field`; the
 * entry for `field` itself, if any, replaces the bytecode's state: its
 * state is returned (0: none). */
static uint32_t merge_overlay(struct loader *L, uint32_t field)
{
	while (L->ov_i < L->n_ov) {
		const struct overlay_entry *e = &L->ov[L->ov_i];
		if (e->msg > L->cur_msg ||
		    (e->msg == L->cur_msg && e->field > field))
			break;
		L->ov_i++;
		if (e->field == field)
			return e->state;
		add_field(&L->m, e->field, e->state);
	}
	return 0;
}

/* Closes the current message: false if two of its ranges overlap. */
static bool end_message(struct loader *L)
{
	struct msg_build *m = &L->m;
	merge_overlay(L, UINT32_MAX);
	for (size_t r = 0; r + 3 < m->ranges.n; r += 3)
		if (m->ranges.v[r + 3] < m->ranges.v[r + 1])
			return false;
	u32_push(&L->offs, (uint32_t)L->words.n);
	u32_push(&L->words, m->n_direct);
	for (uint32_t i = 0; i < m->n_direct; i++)
		u32_push(&L->words, m->direct[i]);
	for (size_t i = 0; i < m->ranges.n; i++)
		u32_push(&L->words, m->ranges.v[i]);
	memset(m->direct, 0, sizeof(m->direct));
	m->n_direct = 0;
	m->ranges.n = 0;
	L->cur_msg++;
	return true;
}

/* Builds the table from the checked words. */
static enum vp_tf_load build(struct loader *L, const uint32_t *w, size_t n)
{
	uint32_t max_nested = 0;
	bool at_end = true;
	for (size_t i = 0; i < n; i++) {
		uint32_t op = w[i] & 7, id = w[i] >> 3, state;
		bool has_arg = i + 1 < n;
		at_end = op == OP_END_OF_MESSAGE;
		if (id == 0 && op != OP_END_OF_MESSAGE)
			return TF_LOAD_INVALID;
		switch (op) {
		case OP_END_OF_MESSAGE:
			if (L->cur_msg >= TF_MAX_MESSAGES)
				return TF_LOAD_TOO_LARGE;
			if (!end_message(L))
				return TF_LOAD_INVALID;
			continue;
		case OP_SIMPLE_FIELD_RANGE: {
			if (!has_arg)
				return TF_LOAD_INVALID;
			/* uint32 arithmetic, as Perfetto's: a range that
			 * wraps is empty. */
			uint32_t end = id + w[++i];
			for (; id < end && id < TF_DIRECT_LIMIT; id++)
				add_field(&L->m, id, TF_SIMPLE);
			if (id < end) {
				u32_push(&L->m.ranges, id);
				u32_push(&L->m.ranges, end);
				u32_push(&L->m.ranges, TF_ALLOWED | TF_SIMPLE);
			}
			continue;
		}
		case OP_SIMPLE_FIELD:
			state = TF_SIMPLE;
			break;
		case OP_FILTER_STRING:
			state = TF_STRING;
			break;
		case OP_FILTER_STRING_WITH_TYPE:
			if (!has_arg)
				return TF_LOAD_INVALID;
			state = TF_STRING_TYPED | (w[++i] & 0xffff);
			break;
		case OP_NESTED_FIELD:
			if (!has_arg)
				return TF_LOAD_INVALID;
			state = w[++i];
			if (state > max_nested)
				max_nested = state;
			break;
		default:
			return TF_LOAD_INVALID;
		}
		uint32_t up = merge_overlay(L, id);
		add_field(&L->m, id, up ? up : state);
	}
	if (!at_end || L->ov_i != L->n_ov)
		return TF_LOAD_INVALID;
	/* Every nested index names a message (index 0, Trace itself, is
	 * always there). */
	if (max_nested > 0 && max_nested >= L->cur_msg)
		return TF_LOAD_INVALID;
	u32_push(&L->offs, (uint32_t)L->words.n);
	return TF_LOAD_OK;
}

struct vp_trace_filter *vp_trace_filter_new(const uint8_t *bytecode,
					    size_t len,
					    const uint8_t *overlay,
					    size_t overlay_len,
					    enum vp_tf_load *why)
{
	struct loader L;
	struct u32vec w = {0};
	enum vp_tf_load res = TF_LOAD_INVALID;
	memset(&L, 0, sizeof(L));
	if (len > TF_MAX_BYTECODE_BYTES || overlay_len > TF_MAX_BYTECODE_BYTES) {
		*why = TF_LOAD_TOO_LARGE;
		return NULL;
	}
	if (!unpack_checked(bytecode, len, &w))
		goto out;
	if (overlay && overlay_len &&
	    !parse_overlay(overlay, overlay_len,
			   (struct overlay_entry **)&L.ov, &L.n_ov))
		goto out;
	res = build(&L, w.v, w.n);
out:
	free(w.v);
	free((void *)L.ov);
	free(L.m.ranges.v);
	struct vp_trace_filter *f = NULL;
	if (res == TF_LOAD_OK) {
		f = vp_xcalloc(1, sizeof(*f));
		f->words = L.words.v;
		f->n_words = L.words.n;
		f->msg_off = L.offs.v;
		f->n_msgs = (uint32_t)(L.offs.n - 1);
		/* Filtering starts at Trace.packet. */
		struct vp_tf_query q = vp_trace_filter_query(f, 0, 1);
		if (q.allowed && q.nested) {
			f->root = q.nested_index;
			return f;
		}
		res = TF_LOAD_NO_ROOT;
		vp_trace_filter_free(f);
		*why = res;
		return NULL;
	}
	free(L.words.v);
	free(L.offs.v);
	*why = res;
	return NULL;
}

void vp_trace_filter_free(struct vp_trace_filter *f)
{
	if (!f)
		return;
	free(f->words);
	free(f->msg_off);
	free(f);
}

uint32_t vp_trace_filter_messages(const struct vp_trace_filter *f)
{
	return f->n_msgs;
}

struct vp_tf_query vp_trace_filter_query(const struct vp_trace_filter *f,
					 uint32_t msg, uint32_t field)
{
	struct vp_tf_query q = {0};
	uint32_t state = 0;
	if (msg >= f->n_msgs)
		return q;
	const uint32_t *w = f->words + f->msg_off[msg];
	const uint32_t *end = f->words + f->msg_off[msg + 1];
	uint32_t n_direct = *w++;
	if (field < n_direct) {
		state = w[field];
	} else {
		for (w += n_direct; w + 2 < end; w += 3)
			if (field >= w[0] && field < w[1]) {
				state = w[2];
				break;
			}
	}
	uint32_t what = state & ~TF_ALLOWED;
	q.allowed = (state & TF_ALLOWED) != 0;
	q.nested = what < TF_STRING_TYPED;
	q.string_field = what >= TF_STRING_TYPED && what <= TF_STRING;
	q.nested_index = q.nested ? what : 0;
	return q;
}

/* ---- filtering ------------------------------------------------------------ */

/* Writes v into exactly n bytes at p (continuation bits on all but the
 * last): the nested length keeps its field's size, as traced writes it. */
static void put_varint_padded(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)((v & 0x7f) | (i + 1 < n ? 0x80 : 0));
		v >>= 7;
	}
}

static bool filter_msg(const struct vp_trace_filter *f, uint32_t msg,
		       const uint8_t *p, const uint8_t *end,
		       struct pb_buf *out, unsigned depth)
{
	if (depth > TF_MAX_DEPTH)
		return false;
	while (p < end) {
		uint64_t tag, v;
		if (!pb_read_varint(&p, end, &tag))
			return false;
		uint32_t wt = (uint32_t)(tag & 7), id = (uint32_t)(tag >> 3);
		/* Field 0 is not a field: the packet is broken. */
		if (id == 0)
			return false;
		struct vp_tf_query q = vp_trace_filter_query(f, msg, id);
		bool simple = q.allowed && !q.nested && !q.string_field;
		switch (wt) {
		case PB_WT_VARINT:
			if (!pb_read_varint(&p, end, &v))
				return false;
			if (simple) {
				pb_put_raw_varint(out, tag);
				pb_put_raw_varint(out, v);
			}
			break;
		case PB_WT_FIXED64:
		case PB_WT_FIXED32: {
			size_t n = wt == PB_WT_FIXED64 ? 8 : 4;
			if ((size_t)(end - p) < n)
				return false;
			if (simple) {
				pb_put_raw_varint(out, tag);
				pb_put_raw(out, p, n);
			}
			p += n;
			break;
		}
		case PB_WT_LEN: {
			if (!pb_read_varint(&p, end, &v) || v > TF_MAX_LEN_FIELD ||
			    v > (uint64_t)(end - p))
				return false;
			if (q.allowed && q.nested && v > 0) {
				size_t lsz = pb_varint_size(v);
				pb_put_raw_varint(out, tag);
				size_t at = out->len;
				uint8_t zero[PB_MAX_VARINT_LEN] = {0};
				pb_put_raw(out, zero, lsz);
				if (!filter_msg(f, q.nested_index, p, p + v,
						out, depth + 1))
					return false;
				put_varint_padded(out->data + at,
						  out->len - at - lsz, lsz);
			} else if (q.allowed) {
				/* A string, bytes (string fields pass as
				 * they are: no string rules), an empty
				 * message. */
				pb_put_raw_varint(out, tag);
				pb_put_raw_varint(out, v);
				pb_put_raw(out, p, (size_t)v);
			}
			p += v;
			break;
		}
		default: /* groups and wire types 6, 7 */
			return false;
		}
	}
	return true;
}

bool vp_trace_filter_packet(const struct vp_trace_filter *f,
			    const uint8_t *in, size_t len, struct pb_buf *out)
{
	pb_buf_reset(out);
	if (filter_msg(f, f->root, in, in + len, out, 0))
		return true;
	pb_buf_reset(out);
	return false;
}

/* ---- statistics ----------------------------------------------------------- */

void vp_filter_stats_discarded(struct vp_filter_stats *st, size_t buf_idx,
			       uint64_t bytes)
{
	if (buf_idx >= st->n_discarded) {
		st->discarded_per_buffer =
			vp_xrealloc(st->discarded_per_buffer,
				    (buf_idx + 1) * sizeof(uint64_t));
		for (size_t i = st->n_discarded; i <= buf_idx; i++)
			st->discarded_per_buffer[i] = 0;
		st->n_discarded = buf_idx + 1;
	}
	st->discarded_per_buffer[buf_idx] += bytes;
}

void vp_filter_stats_free(struct vp_filter_stats *st)
{
	free(st->discarded_per_buffer);
	memset(st, 0, sizeof(*st));
}
