/*
 * tp_te_decode.c - a track event as the parser first sees it (see
 * tp_te_decode.h).
 *
 * Only the fields that decide where the event goes and what it becomes
 * are decoded here; args, flows and extra counters walk the bytes again
 * when there are any (has_debug, has_flows, nextra).
 */
#include <inttypes.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_ctx.h"
#include "tp_te_decode.h"
#include "tp_te_intern.h"
#include "tp_te_tokenize.h"

/* The payload header (tp_te_event.h); *pp moves past it. */
static bool read_header(struct tp_ctx *ctx, const uint8_t **pp,
			const uint8_t *end, struct ev *e)
{
	uint64_t v;
	uint32_t td;
	const uint8_t *p = *pp;

#define RD(x)                                   \
	do {                                    \
		if (!pb_read_varint(&p, end, &v)) \
			return false;           \
		x;                              \
	} while (0)
	RD(e->flags = (uint32_t)v);
	RD(e->seq_id = (uint32_t)v);
	RD(e->gen = (uint32_t)v);
	if (e->flags & F_MACHINE)
		RD(e->machine = (uint32_t)v);
	if (e->flags & F_THREAD_TS)
		RD(e->thread_ts = pb_zigzag_decode(v));
	if (e->flags & F_TIC)
		RD(e->tic = pb_zigzag_decode(v));
	if (e->flags & F_PIDTID) {
		RD(td = (uint32_t)v);
		const struct tp_te_seq_td *d = tp_te_seq_td(ctx, td);
		if (!d)
			return false;
		if (d->valid) {
			e->pid = d->pid;
			e->tid = d->tid;
		} else {
			e->flags &= ~(uint32_t)F_PIDTID;
		}
	}
	if (e->flags & F_DEFAULT_UUID)
		RD(e->default_uuid = v);
	if (e->flags & F_COUNTER) {
		if (end - p < 8)
			return false;
		memcpy(&e->counter, p, 8);
		p += 8;
	}
	if (e->flags & F_EXTRA) {
		RD(e->nextra = v);
		e->extra = p;
		for (uint64_t i = 0; i < e->nextra; i++) {
			if (!pb_read_varint(&p, end, &v) || end - p < 8)
				return false;
			p += 8;
		}
	}
#undef RD
	*pp = p;
	return true;
}

static void decode_legacy(const uint8_t *p, size_t len, struct legacy *le)
{
	struct pb_reader r;
	struct pb_field f;

	le->present = true;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case LE_NAME_IID: le->name_iid = f.val; break;
		case LE_PHASE:
			le->phase = (int32_t)f.val;
			le->has_phase = true;
			break;
		case LE_DURATION_US: le->duration_us = (int64_t)f.val; break;
		case LE_THREAD_DURATION_US:
			le->thread_duration_us = (int64_t)f.val;
			break;
		case LE_UNSCOPED_ID:
			le->has_unscoped_id = true;
			le->unscoped_id = f.val;
			break;
		case LE_LOCAL_ID:
			le->has_local_id = true;
			le->local_id = f.val;
			break;
		case LE_GLOBAL_ID:
			le->has_global_id = true;
			le->global_id = f.val;
			break;
		case LE_ID_SCOPE:
			if (f.wt == PB_WT_LEN) {
				le->id_scope = f.data;
				le->id_scope_len = f.len;
			}
			break;
		case LE_BIND_ID:
			le->has_bind_id = true;
			le->bind_id = f.val;
			break;
		case LE_BIND_TO_ENCLOSING:
			le->bind_to_enclosing = f.val != 0;
			break;
		case LE_FLOW_DIRECTION:
			le->has_flow_direction = true;
			le->flow_direction = f.val;
			break;
		case LE_INSTANT_EVENT_SCOPE:
			le->instant_event_scope = f.val;
			break;
		case LE_PID_OVERRIDE:
			le->has_pid_override = true;
			le->pid_override = (int32_t)f.val;
			break;
		case LE_TID_OVERRIDE:
			le->has_tid_override = true;
			le->tid_override = (int32_t)f.val;
			break;
		default: break;
		}
	}
}

static bool decode_event(struct ev *e)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, e->te, e->te_len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TE_TYPE:
			e->has_type = true;
			e->type = f.val;
			break;
		case TE_TRACK_UUID:
			e->has_track_uuid = true;
			e->track_uuid = f.val;
			break;
		case TE_NAME_IID:
			e->name_iid = f.val;
			e->has_name_iid = true;
			break;
		case TE_NAME:
			if (f.wt == PB_WT_LEN) {
				e->name = f.data;
				e->name_len = f.len;
				e->has_name = true;
			}
			break;
		case TE_LOG_MESSAGE:
			if (f.wt == PB_WT_LEN) {
				e->log_message = f.data;
				e->log_message_len = f.len;
			}
			break;
		case TE_SOURCE_LOCATION_IID:
			e->has_source_location_iid = true;
			e->source_location_iid = f.val;
			e->has_reflected = true;
			break;
		case TE_SOURCE_LOCATION:
			e->has_reflected = true;
			break;
		case TE_CORRELATION_ID:
			e->has_correlation_id = true;
			e->correlation_id = f.val;
			break;
		case TE_CORRELATION_ID_STR:
			if (f.wt == PB_WT_LEN) {
				e->correlation_id_str = f.data;
				e->correlation_id_str_len = f.len;
			}
			break;
		case TE_CORRELATION_ID_STR_IID:
			e->has_correlation_id_str_iid = true;
			e->correlation_id_str_iid = f.val;
			break;
		case TE_CATEGORY_IIDS:
			if (f.wt == PB_WT_VARINT) {
				if (!e->ncat_iids)
					e->cat_iid = f.val;
				e->ncat_iids++;
			} else if (f.wt == PB_WT_LEN) {
				struct pb_packed_iter it;
				uint64_t v;
				pb_packed_init(&it, f.data, f.len);
				while (pb_packed_next(&it, &v)) {
					if (!e->ncat_iids)
						e->cat_iid = v;
					e->ncat_iids++;
				}
			}
			break;
		case TE_CATEGORIES:
			if (f.wt == PB_WT_LEN) {
				if (!e->ncats) {
					e->cat = f.data;
					e->cat_len = f.len;
				}
				e->ncats++;
			}
			break;
		case TE_DEBUG_ANNOTATIONS: e->has_debug = true; break;
		case TE_CHROME_HISTOGRAM_SAMPLE:
			if (f.wt == PB_WT_LEN) {
				e->histogram = f.data;
				e->histogram_len = f.len;
			}
			break;
		case TE_LEGACY_EVENT:
			if (f.wt == PB_WT_LEN)
				decode_legacy(f.data, f.len, &e->le);
			break;
		case TE_FLOW_IDS:
		case TE_FLOW_IDS_OLD:
		case TE_TERMINATING_FLOW_IDS:
		case TE_TERMINATING_FLOW_IDS_OLD:
			e->has_flows = true;
			break;
		default: break;
		}
	}
	return r.err == PB_OK;
}

/* Categories joined with ',' (the multi-category slow path). */
static tp_str join_categories(struct tp_ctx *ctx, const struct ev *e)
{
	struct pb_reader r;
	struct pb_field f;
	char buf[4096];
	size_t n = 0;

	pb_reader_init(&r, e->te, e->te_len);
	while (pb_next(&r, &f)) {
		const char *s = NULL;
		size_t l = 0;
		uint64_t iids[64];
		size_t ni = 0;
		if (f.num == TE_CATEGORIES && f.wt == PB_WT_LEN && !e->ncat_iids) {
			s = (const char *)f.data;
			l = strnlen(s, f.len);
		} else if (f.num == TE_CATEGORY_IIDS && f.wt == PB_WT_VARINT) {
			iids[ni++] = f.val;
		} else if (f.num == TE_CATEGORY_IIDS && f.wt == PB_WT_LEN) {
			struct pb_packed_iter it;
			uint64_t v;
			pb_packed_init(&it, f.data, f.len);
			while (pb_packed_next(&it, &v) && ni < 64)
				iids[ni++] = v;
		} else {
			continue;
		}
		for (size_t k = 0; k <= ni; k++) {
			if (k < ni) {
				tp_str c = tp_te_interned(ctx, e->gen,
							  ID_EVENT_CATEGORIES,
							  iids[k]);
				if (!c)
					continue;
				s = tp_str_get(ctx->pool, c);
				l = tp_str_len(ctx->pool, c);
			} else if (ni) {
				break;
			}
			if (!s)
				continue;
			if (n && n < sizeof buf)
				buf[n++] = ',';
			if (l > sizeof buf - n)
				l = sizeof buf - n;
			memcpy(buf + n, s, l);
			n += l;
		}
	}
	return n ? tp_intern(ctx->pool, buf, n) : 0;
}

/* An event's one interned category; one that is not there reads
 * "unknown(<iid>)", as Perfetto names it (in a list of several, such a
 * category is left out instead). */
static tp_str single_category(struct tp_ctx *ctx, const struct ev *e)
{
	tp_str c = tp_te_interned(ctx, e->gen, ID_EVENT_CATEGORIES,
				  e->cat_iid);
	if (c)
		return c;
	return tp_intern_fmt(ctx->pool, "unknown(%" PRIu64 ")", e->cat_iid);
}

static void resolve_names(struct tp_ctx *ctx, struct ev *e)
{
	if (e->ncat_iids + e->ncats > 1)
		e->category_id = join_categories(ctx, e);
	else if (e->ncat_iids)
		e->category_id = single_category(ctx, e);
	else if (e->ncats)
		e->category_id = tp_te_intern_bytes(ctx, e->cat, e->cat_len);

	/* Perfetto looks a name_iid up even beside a name (the format's
	 * oneof aside): an unknown one leaves the event unnamed; a zero
	 * iid, the legacy event's iid, then the name. */
	uint64_t iid = e->name_iid ? e->name_iid : e->le.name_iid;
	if (iid)
		e->name_id = tp_te_interned(ctx, e->gen, ID_EVENT_NAMES, iid);
	else if (e->has_name)
		e->name_id = tp_te_intern_bytes(ctx, e->name, e->name_len);
}

tp_str tp_te_state_name(struct tp_ctx *ctx, const struct ev *e)
{
	/* a state's name: any name_iid given, zero too, else the name */
	if (e->has_name_iid)
		return e->name_iid ? e->name_id
				   : tp_te_interned(ctx, e->gen, ID_EVENT_NAMES,
						    0);
	return e->has_name ? tp_te_intern_bytes(ctx, e->name, e->name_len)
			   : 0;
}

bool tp_te_decode(struct tp_ctx *ctx, const uint8_t *p, size_t len,
		  struct ev *e)
{
	const uint8_t *end = p + len;

	memset(e, 0, sizeof *e);
	if (!read_header(ctx, &p, end, e))
		return false;
	e->te = p;
	e->te_len = (size_t)(end - p);
	if (!decode_event(e))
		return false;
	resolve_names(ctx, e);
	return true;
}

int32_t tp_te_phase(const struct ev *e)
{
	if (e->le.has_phase)
		return e->le.phase;
	switch (e->type) {
	case TE_TYPE_SLICE_BEGIN: return e->has_utid ? 'B' : 'b';
	case TE_TYPE_SLICE_END: return e->has_utid ? 'E' : 'e';
	case TE_TYPE_INSTANT: return e->has_utid ? 'i' : 'n';
	case TE_TYPE_COUNTER: return 'C';
	default: return 0;
	}
}

bool tp_te_async_phase(int32_t ph)
{
	return ph == 'b' || ph == 'e' || ph == 'n' || ph == 'S' || ph == 'F' ||
	       ph == 'T' || ph == 'p';
}

enum use tp_te_event_use(const struct ev *e)
{
	if (e->has_type && e->type == TE_TYPE_COUNTER)
		return USE_OTHER;
	switch (tp_te_phase(e)) {
	case 'B': case 'b': case 'S':
		return USE_BEGIN;
	case 'E': case 'e': case 'F':
		return USE_END;
	case 'i': case 'I': case 'R': case 'n': case 'T': case 'p':
		return USE_INSTANT;
	default:
		return USE_OTHER;
	}
}
