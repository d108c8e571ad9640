/*
 * ftrace_encode.c - raw ftrace records to FtraceEvent / CompactSched
 * protos, and bundles to TracePacket bodies (see ftrace_encode.h).
 */
#include <stdlib.h>
#include <string.h>

#include "ftrace_encode.h"
#include "perfetto_fields.h"
#include "vp_alloc.h"

/* Field numbers (TracePacket, FtraceEventBundle, CompactSched,
 * FtraceEvent and its payloads) are perfetto_fields.h's, from protos/.
 * The offsets below are the kernel's record layout, not Perfetto's. */

/* The common fields every record starts with. */
#define COMMON_FLAGS_OFF 2
#define COMMON_PID_OFF 4
#define COMMON_SIZE 8
#define MAX_EVENT_ID 65535u

/* ---- the table ------------------------------------------------------- */

void ft_event_free(struct ft_event *ev)
{
	if (!ev)
		return;
	for (uint32_t i = 0; i < ev->nfields; i++)
		free(ev->fields[i].name);
	free(ev->fields);
	free(ev->name);
	free(ev);
}

int ft_table_add(struct ft_table *t, struct ft_event *ev)
{
	if (ev->id > MAX_EVENT_ID)
		return -1;
	if (!t->by_id || ev->id > t->max_id) {
		uint32_t n = ev->id + 1;
		struct ft_event **p = vp_xreallocarray(t->by_id, n, sizeof *p);
		uint32_t old = t->by_id ? t->max_id + 1 : 0;
		memset(p + old, 0, (n - old) * sizeof *p);
		t->by_id = p;
		t->max_id = ev->id;
	}
	if (t->by_id[ev->id])
		return -1;
	t->by_id[ev->id] = ev;
	return 0;
}

void ft_table_free(struct ft_table *t)
{
	if (t->by_id)
		for (uint32_t i = 0; i <= t->max_id; i++)
			ft_event_free(t->by_id[i]);
	free(t->by_id);
	t->by_id = NULL;
	t->max_id = 0;
}

/* ---- reading fields -------------------------------------------------- */

static uint64_t rd_uint(const uint8_t *p, uint32_t size)
{
	switch (size) {
	case 1:
		return p[0];
	case 2: {
		uint16_t v;
		memcpy(&v, p, 2);
		return v;
	}
	case 4: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	}
}

static int64_t sign_extend(uint64_t v, uint32_t size)
{
	if (size >= 8)
		return (int64_t)v;
	unsigned shift = 64 - size * 8;
	return (int64_t)(v << shift) >> shift;
}

/* Integer field: false if it does not fit in the record. */
static bool field_num(const struct ft_field *f, const uint8_t *d, size_t len,
		      uint64_t *out)
{
	if (f->loc != FT_LOC_FIXED ||
	    !(f->size == 1 || f->size == 2 || f->size == 4 || f->size == 8))
		return false;
	if (f->offset > len || f->size > len - f->offset)
		return false;
	uint64_t v = rd_uint(d + f->offset, f->size);
	if (f->vtype == FT_V_INT)
		v = (uint64_t)sign_extend(v, f->size);
	*out = v;
	return true;
}

/* String field: its bytes up to the first NUL; false if it does not fit. */
static bool field_str(const struct ft_field *f, const uint8_t *d, size_t len,
		      const uint8_t **s, size_t *slen)
{
	size_t off, n;

	if (f->offset > len)
		return false;
	switch (f->loc) {
	case FT_LOC_FIXED:
		if (f->size > len - f->offset)
			return false;
		off = f->offset;
		n = f->size;
		break;
	case FT_LOC_TAIL:
		off = f->offset;
		n = len - f->offset;
		break;
	case FT_LOC_DYNAMIC:
	case FT_LOC_DYNAMIC_REL: {
		if (len - f->offset < 4)
			return false;
		uint32_t w = (uint32_t)rd_uint(d + f->offset, 4);
		off = w & 0xffff;
		n = w >> 16;
		if (f->loc == FT_LOC_DYNAMIC_REL)
			off += (size_t)f->offset + 4;
		if (off > len || n > len - off)
			return false;
		break;
	}
	default:
		return false;
	}
	const uint8_t *nul = memchr(d + off, 0, n);
	*s = d + off;
	*slen = nul ? (size_t)(nul - (d + off)) : n;
	return true;
}

static const struct ft_field *field_by_proto(const struct ft_event *ev,
					     uint32_t proto)
{
	for (uint32_t i = 0; i < ev->nfields; i++)
		if (ev->fields[i].proto == proto)
			return &ev->fields[i];
	return NULL;
}

static uint64_t num_or_zero(const struct ft_event *ev, uint32_t proto,
			    const uint8_t *d, size_t len)
{
	const struct ft_field *f = field_by_proto(ev, proto);
	uint64_t v = 0;
	if (!f || f->vtype == FT_V_STR || !field_num(f, d, len, &v))
		return 0;
	return v;
}

/* ---- bundles --------------------------------------------------------- */

void ft_bundle_init(struct ft_bundle *b, bool compact_enabled)
{
	memset(b, 0, sizeof *b);
	pb_buf_init(&b->events);
	pb_buf_init(&b->errors);
	for (size_t i = 0; i < sizeof b->col / sizeof b->col[0]; i++)
		pb_buf_init(&b->col[i]);
	b->compact_enabled = compact_enabled;
}

void ft_bundle_reset(struct ft_bundle *b)
{
	pb_buf_reset(&b->events);
	pb_buf_reset(&b->errors);
	for (size_t i = 0; i < sizeof b->col / sizeof b->col[0]; i++)
		pb_buf_reset(&b->col[i]);
	b->last_switch_ts = b->last_waking_ts = 0;
	b->n_switch = b->n_waking = 0;
	b->n_intern = 0;
	b->n_events = 0;
	b->first_ts = b->last_ts = 0;
	b->lost_events = false;
}

void ft_bundle_free(struct ft_bundle *b)
{
	pb_buf_free(&b->events);
	pb_buf_free(&b->errors);
	for (size_t i = 0; i < sizeof b->col / sizeof b->col[0]; i++)
		pb_buf_free(&b->col[i]);
}

size_t ft_bundle_size(const struct ft_bundle *b)
{
	size_t n = b->events.len + b->errors.len + b->n_intern * 18;
	for (size_t i = 0; i < sizeof b->col / sizeof b->col[0]; i++)
		n += b->col[i].len;
	return n;
}

void ft_bundle_add_error(struct ft_bundle *b, uint64_t ts, int status)
{
	size_t m = pb_begin_nested(&b->errors, FB_ERROR);
	pb_put_varint(&b->errors, FERR_TIMESTAMP, ts);
	pb_put_varint(&b->errors, FERR_STATUS, (uint64_t)status);
	pb_end_nested(&b->errors, m);
}

/* Index of comm in the bundle's intern table, or -1 if it is full. */
static int intern(struct ft_bundle *b, const uint8_t *s, size_t n)
{
	if (n > sizeof b->intern[0])
		n = sizeof b->intern[0];
	for (uint32_t i = 0; i < b->n_intern; i++)
		if (b->intern_len[i] == n && memcmp(b->intern[i], s, n) == 0)
			return (int)i;
	if (b->n_intern == FT_INTERN_MAX)
		return -1;
	memcpy(b->intern[b->n_intern], s, n);
	b->intern_len[b->n_intern] = (uint8_t)n;
	return (int)b->n_intern++;
}

static int intern_field(struct ft_bundle *b, const struct ft_event *ev,
			uint32_t proto, const uint8_t *d, size_t len)
{
	const struct ft_field *f = field_by_proto(ev, proto);
	const uint8_t *s = (const uint8_t *)"";
	size_t n = 0;
	if (f && f->vtype == FT_V_STR && !field_str(f, d, len, &s, &n)) {
		s = (const uint8_t *)"";
		n = 0;
	}
	return intern(b, s, n);
}

/* sched_switch into the CompactSched columns; false if the intern table
 * is full (the caller encodes the event in full instead). */
static bool compact_switch(struct ft_bundle *b, const struct ft_event *ev,
			   uint64_t ts, const uint8_t *d, size_t len)
{
	int idx = intern_field(b, ev, SS_NEXT_COMM, d, len);
	if (idx < 0)
		return false;
	pb_put_raw_varint(&b->col[CSCHED_SWITCH_TIMESTAMP],
			  b->n_switch ? ts - b->last_switch_ts : ts);
	pb_put_raw_varint(&b->col[CSCHED_SWITCH_PREV_STATE],
			  num_or_zero(ev, SS_PREV_STATE, d, len));
	pb_put_raw_varint(&b->col[CSCHED_SWITCH_NEXT_PID],
			  num_or_zero(ev, SS_NEXT_PID, d, len));
	pb_put_raw_varint(&b->col[CSCHED_SWITCH_NEXT_PRIO],
			  num_or_zero(ev, SS_NEXT_PRIO, d, len));
	pb_put_raw_varint(&b->col[CSCHED_SWITCH_NEXT_COMM_INDEX],
			  (uint64_t)idx);
	b->last_switch_ts = ts;
	b->n_switch++;
	return true;
}

static bool compact_waking(struct ft_bundle *b, const struct ft_event *ev,
			   uint64_t ts, const uint8_t *d, size_t len)
{
	int idx = intern_field(b, ev, SW_COMM, d, len);
	if (idx < 0)
		return false;
	pb_put_raw_varint(&b->col[CSCHED_WAKING_TIMESTAMP],
			  b->n_waking ? ts - b->last_waking_ts : ts);
	pb_put_raw_varint(&b->col[CSCHED_WAKING_PID],
			  num_or_zero(ev, SW_PID, d, len));
	pb_put_raw_varint(&b->col[CSCHED_WAKING_TARGET_CPU],
			  num_or_zero(ev, SW_TARGET_CPU, d, len));
	pb_put_raw_varint(&b->col[CSCHED_WAKING_PRIO],
			  num_or_zero(ev, SW_PRIO, d, len));
	pb_put_raw_varint(&b->col[CSCHED_WAKING_COMM_INDEX], (uint64_t)idx);
	pb_put_raw_varint(&b->col[CSCHED_WAKING_COMMON_FLAGS],
			  d[COMMON_FLAGS_OFF]);
	b->last_waking_ts = ts;
	b->n_waking++;
	return true;
}

/* The typed payload: each field that fits, under its proto number. */
static void put_typed(struct pb_buf *o, const struct ft_event *ev,
		      const uint8_t *d, size_t len)
{
	size_t m = pb_begin_nested(o, ev->proto_id);
	for (uint32_t i = 0; i < ev->nfields; i++) {
		const struct ft_field *f = &ev->fields[i];
		if (f->vtype == FT_V_STR) {
			const uint8_t *s;
			size_t n;
			if (field_str(f, d, len, &s, &n))
				pb_put_bytes(o, f->proto, s, n);
		} else {
			uint64_t v;
			if (field_num(f, d, len, &v))
				pb_put_varint(o, f->proto, v);
		}
	}
	pb_end_nested(o, m);
}

/* GenericFtraceEvent: the name and each field as name + value. */
static void put_generic(struct pb_buf *o, const struct ft_event *ev,
			const uint8_t *d, size_t len)
{
	size_t m = pb_begin_nested(o, FE_GENERIC);
	pb_put_string(o, GEN_EVENT_NAME, ev->name ? ev->name : "");
	for (uint32_t i = 0; i < ev->nfields; i++) {
		const struct ft_field *f = &ev->fields[i];
		const uint8_t *s;
		size_t n;
		uint64_t v;
		if (f->vtype == FT_V_STR) {
			if (!field_str(f, d, len, &s, &n))
				continue;
			size_t fm = pb_begin_nested(o, GEN_FIELD);
			pb_put_string(o, GENF_NAME, f->name ? f->name : "");
			pb_put_bytes(o, GENF_STR, s, n);
			pb_end_nested(o, fm);
		} else {
			if (!field_num(f, d, len, &v))
				continue;
			size_t fm = pb_begin_nested(o, GEN_FIELD);
			pb_put_string(o, GENF_NAME, f->name ? f->name : "");
			pb_put_varint(o, f->vtype == FT_V_INT ? GENF_INT
							       : GENF_UINT, v);
			pb_end_nested(o, fm);
		}
	}
	pb_end_nested(o, m);
}

enum ft_encode_result ft_encode_record(const struct ft_table *t,
				       struct ft_bundle *b, uint64_t ts,
				       const uint8_t *data, size_t len)
{
	if (len < COMMON_SIZE)
		return FT_ENC_INVALID;
	uint32_t id = (uint32_t)rd_uint(data, 2);
	if (!t->by_id || id > t->max_id || !t->by_id[id])
		return FT_ENC_UNKNOWN;
	const struct ft_event *ev = t->by_id[id];

	if (!b->n_events)
		b->first_ts = ts;
	b->last_ts = ts;
	b->n_events++;

	if (b->compact_enabled && ev->compact == FT_COMPACT_SWITCH &&
	    compact_switch(b, ev, ts, data, len))
		return FT_ENC_OK;
	if (b->compact_enabled && ev->compact == FT_COMPACT_WAKING &&
	    compact_waking(b, ev, ts, data, len))
		return FT_ENC_OK;

	struct pb_buf *o = &b->events;
	size_t m = pb_begin_nested(o, FB_EVENT);
	pb_put_varint(o, FE_TIMESTAMP, ts);
	pb_put_varint(o, FE_PID,
		      (uint32_t)rd_uint(data + COMMON_PID_OFF, 4));
	/* common_flags only goes into CompactSched: traced_probes never
	 * writes FtraceEvent.common_flags, and Perfetto's trace processor
	 * would make an extra nameless ftrace_event row of each. */
	if (ev->proto_id == FE_GENERIC)
		put_generic(o, ev, data, len);
	else
		put_typed(o, ev, data, len);
	pb_end_nested(o, m);
	return FT_ENC_OK;
}

static void put_compact(const struct ft_bundle *b, struct pb_buf *out)
{
	size_t m = pb_begin_nested(out, FB_COMPACT_SCHED);
	for (uint32_t num = 1; num < sizeof b->col / sizeof b->col[0];
	     num++) {
		if (num == CSCHED_INTERN_TABLE) {
			for (uint32_t i = 0; i < b->n_intern; i++)
				pb_put_bytes(out, CSCHED_INTERN_TABLE,
					     b->intern[i], b->intern_len[i]);
			continue;
		}
		if (b->col[num].len)
			pb_put_bytes(out, num, b->col[num].data,
				     b->col[num].len);
	}
	pb_end_nested(out, m);
}

void ft_bundle_packet(const struct ft_bundle *b, uint32_t cpu,
		      uint64_t prev_end_ts, struct pb_buf *out)
{
	pb_buf_reset(out);
	pb_put_varint(out, TP_TIMESTAMP, b->n_events ? b->first_ts
						       : prev_end_ts);
	size_t m = pb_begin_nested(out, TP_FTRACE_EVENTS);
	pb_put_varint(out, FB_CPU, cpu);
	if (b->events.len)
		pb_put_raw(out, b->events.data, b->events.len);
	if (b->lost_events)
		pb_put_varint(out, FB_LOST_EVENTS, 1);
	if (b->n_switch || b->n_waking)
		put_compact(b, out);
	if (b->errors.len)
		pb_put_raw(out, b->errors.data, b->errors.len);
	pb_put_varint(out, FB_PREVIOUS_BUNDLE_END_TIMESTAMP, prev_end_ts);
	pb_end_nested(out, m);
}
