/*
 * tp_te_slices.c - what a track event becomes on its track (see
 * tp_te_slices.h).
 *
 * The args of a begun slice are kept in a pending slot until its end (at
 * most MAX_PENDING at once; beyond, they are committed at the begin and
 * loaded again at the end), so that the end's args merge into one set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_slices.h"
#include "tp_states.h"
#include "tp_te_args.h"
#include "tp_te_decode.h"
#include "tp_te_slices.h"
#include "tp_te_state.h"
#include "vp_alloc.h"

#define MAX_PENDING 4096 /* open slices whose args wait for their end */

/* Args of an open slice, committed when it ends (as Perfetto does), so
 * that end-event args merge into one set. */
struct pending {
	uint32_t slice;
	uint32_t next_free;
	uint32_t active_pos;
	bool used;
	struct tp_args_builder b;
};

struct tp_te_slices {
	uint32_t *active; /* pending slots in use, most recent last */
	size_t nactive, capactive;
	struct pending *pending;
	size_t npending, cappending;
	uint32_t free_pending; /* free slot list head + 1 */
	struct tp_args_builder b, b2;
};

static struct tp_te_slices *SL(struct tp_ctx *ctx)
{
	return ctx->te->slices;
}

struct tp_te_slices *tp_te_slices_new(void)
{
	struct tp_te_slices *s = vp_xcalloc(1, sizeof *s);
	tp_args_builder_init(&s->b);
	tp_args_builder_init(&s->b2);
	return s;
}

void tp_te_slices_free(struct tp_te_slices *s)
{
	if (!s)
		return;
	free(s->active);
	for (size_t i = 0; i < s->npending; i++)
		tp_args_builder_free(&s->pending[i].b);
	free(s->pending);
	tp_args_builder_free(&s->b);
	tp_args_builder_free(&s->b2);
	free(s);
}

/* ---- pending slice args ------------------------------------------------- */

static uint32_t pending_new(struct tp_ctx *ctx, uint32_t slice)
{
	struct tp_te_slices *s = SL(ctx);
	uint32_t slot;

	if (s->free_pending) {
		slot = s->free_pending - 1;
		s->free_pending = s->pending[slot].next_free;
	} else {
		if (s->npending == s->cappending) {
			size_t cap = s->cappending ? s->cappending * 2 : 64;
			s->pending = vp_xreallocarray(s->pending, cap,
						      sizeof *s->pending);
			s->cappending = cap;
		}
		slot = (uint32_t)s->npending++;
		tp_args_builder_init(&s->pending[slot].b);
	}
	struct pending *p = &s->pending[slot];
	p->slice = slice;
	p->used = true;
	p->next_free = 0;
	tp_args_builder_reset(&p->b);
	if (s->nactive == s->capactive) {
		size_t cap = s->capactive ? s->capactive * 2 : 64;
		uint32_t *a = vp_xrealloc(s->active, cap * sizeof *a);
		s->active = a;
		s->capactive = cap;
	}
	p->active_pos = (uint32_t)s->nactive;
	s->active[s->nactive++] = slot;
	return slot;
}

static void commit_pending(struct tp_ctx *ctx, uint32_t slot)
{
	struct tp_te_slices *s = SL(ctx);
	struct pending *p = &s->pending[slot];
	int64_t id = tp_args_commit(ctx, &p->b);

	if (id >= 0)
		tp_set_int(tp_tab(ctx, TP_T_SLICE), TP_SLICE_arg_set_id,
			   p->slice, id);
	uint32_t last = s->active[--s->nactive];
	s->active[p->active_pos] = last;
	s->pending[last].active_pos = p->active_pos;
	p->used = false;
	p->next_free = s->free_pending;
	s->free_pending = slot + 1;
}

/* Open slices are few and usually end in reverse order: search back. */
static bool pending_find(struct tp_ctx *ctx, uint32_t slice, uint32_t *slot)
{
	struct tp_te_slices *s = SL(ctx);
	for (size_t i = s->nactive; i-- > 0;)
		if (s->pending[s->active[i]].slice == slice) {
			*slot = s->active[i];
			return true;
		}
	return false;
}

/* Next index of array `prefix` (key text before '[') in b. */
static unsigned next_array_index(struct tp_ctx *ctx,
				 const struct tp_args_builder *b,
				 const char *prefix, size_t plen)
{
	unsigned next = 0;
	for (size_t i = 0; i < b->n; i++) {
		const char *k = tp_str_get(ctx->pool, b->v[i].key);
		if (!k || strncmp(k, prefix, plen) != 0 || k[plen] != '[')
			continue;
		unsigned idx = (unsigned)strtoul(k + plen + 1, NULL, 10);
		if (idx + 1 > next)
			next = idx + 1;
	}
	return next;
}

/* Merges end-event args (e_b) into the pending set of the slice: array
 * entries continue after the existing ones, the passthrough utid of the
 * begin stays. */
static void merge_end_args(struct tp_ctx *ctx, struct tp_args_builder *into,
			   const struct tp_args_builder *eb)
{
	tp_str passthrough = tp_te_passthrough_key(ctx);
	size_t base_n = into->n;
	struct tp_args_builder orig = { into->v, base_n, base_n };

	for (size_t i = 0; i < eb->n; i++) {
		struct tp_arg a = eb->v[i];
		if (a.key == passthrough) {
			bool have = false;
			for (size_t j = 0; j < into->n; j++)
				if (into->v[j].key == passthrough)
					have = true;
			if (have)
				continue;
		}
		const char *k = tp_str_get(ctx->pool, a.key);
		const char *br = k ? strchr(k, '[') : NULL;
		if (br) {
			size_t plen = (size_t)(br - k);
			unsigned base = next_array_index(ctx, &orig, k, plen);
			if (base) {
				char buf[TE_KEY_MAX];
				unsigned idx =
					(unsigned)strtoul(br + 1, NULL, 10);
				const char *rest = strchr(br, ']');
				snprintf(buf, sizeof buf, "%.*s[%u]%s",
					 (int)plen, k, idx + base,
					 rest ? rest + 1 : "");
				a.key = tp_s(ctx, buf);
			}
		}
		tp_args_add(into, &a);
		orig.v = into->v; /* may have moved */
	}
}

void tp_te_slices_finish(struct tp_ctx *ctx)
{
	struct tp_te_slices *s = SL(ctx);
	while (s->nactive)
		commit_pending(ctx, s->active[s->nactive - 1]);
}

/* ---- slices ------------------------------------------------------------- */

int64_t tp_te_slice_begin(struct tp_ctx *ctx, const struct ev *e,
			  uint32_t track, int64_t ts, bool async)
{
	struct tp_te_slices *s = SL(ctx);
	int64_t slice = tp_slice_begin(ctx, track, ts, e->category_id,
				       e->name_id, -1);

	if (slice < 0)
		return -1;

	if (tp_te_event_has_args(e)) {
		if (s->nactive < MAX_PENDING) {
			uint32_t slot = pending_new(ctx, (uint32_t)slice);
			tp_te_build_args(ctx, e, async, &s->pending[slot].b);
		} else {
			int64_t id = tp_te_event_args(ctx, e, async);
			if (id >= 0)
				tp_set_int(tp_tab(ctx, TP_T_SLICE),
					   TP_SLICE_arg_set_id,
					   (uint32_t)slice, id);
		}
	}
	if (e->flags & F_THREAD_TS)
		tp_slice_set_thread_ts(ctx, (uint32_t)slice, e->thread_ts);
	return slice;
}

int64_t tp_te_slice_end(struct tp_ctx *ctx, const struct ev *e,
			uint32_t track, int64_t ts, bool async)
{
	struct tp_te_slices *s = SL(ctx);
	int64_t slice = tp_slice_end(ctx, track, ts, e->category_id,
				     e->name_id, -1);
	uint32_t slot;

	if (slice < 0)
		return -1;
	tp_te_build_args(ctx, e, async, &s->b);
	if (pending_find(ctx, (uint32_t)slice, &slot)) {
		merge_end_args(ctx, &s->pending[slot].b, &s->b);
		commit_pending(ctx, slot);
	} else if (s->b.n) {
		struct tp_table *t = tp_tab(ctx, TP_T_SLICE);
		uint32_t sl = (uint32_t)slice;
		int64_t id;
		if (!tp_is_null(t, TP_SLICE_arg_set_id, sl)) {
			tp_args_builder_reset(&s->b2);
			tp_args_load(ctx,
				     tp_get_int(t, TP_SLICE_arg_set_id, sl),
				     &s->b2);
			merge_end_args(ctx, &s->b2, &s->b);
			id = tp_args_commit(ctx, &s->b2);
		} else {
			id = tp_args_commit(ctx, &s->b);
		}
		if (id >= 0)
			tp_set_int(t, TP_SLICE_arg_set_id, sl, id);
	}
	if (e->flags & F_THREAD_TS)
		tp_slice_end_thread_ts(ctx, (uint32_t)slice, e->thread_ts);
	return slice;
}

int64_t tp_te_slice_complete(struct tp_ctx *ctx, const struct ev *e,
			     uint32_t track, int64_t ts, bool async)
{
	int64_t dur;

	if (mul_overflow_us(e->le.duration_us, &dur) || dur < 0)
		return -1;
	int64_t slice = tp_slice_complete(ctx, track, ts, dur, e->category_id,
					  e->name_id,
					  tp_te_event_args(ctx, e, async));
	if (slice < 0)
		return -2;
	if (e->flags & F_THREAD_TS) {
		int64_t tdur = 0;
		tp_slice_set_thread_ts(ctx, (uint32_t)slice, e->thread_ts);
		if (!mul_overflow_us(e->le.thread_duration_us, &tdur))
			tp_slice_end_thread_ts(ctx, (uint32_t)slice,
					       e->thread_ts + tdur);
	}
	return slice;
}

int64_t tp_te_slice_instant(struct tp_ctx *ctx, const struct ev *e,
			    uint32_t track, int64_t ts, bool async)
{
	int64_t slice = tp_slice_complete(ctx, track, ts, 0, e->category_id,
					  e->name_id,
					  tp_te_event_args(ctx, e, async));
	if (slice >= 0 && (e->flags & F_THREAD_TS))
		tp_slice_set_thread_ts(ctx, (uint32_t)slice, e->thread_ts);
	return slice;
}

/* ---- states ------------------------------------------------------------- */

/* A state event sets the value of its state track (its name; none ends
 * the open state); its args go to the state it opens or continues. */
void tp_te_state_event(struct tp_ctx *ctx, const struct ev *e,
		       const struct res *r, uint32_t track, int64_t ts)
{
	struct tp_te_slices *s = SL(ctx);
	struct tp_table *t = tp_tab(ctx, TP_T_STATE);
	bool repeated;

	if (!r || !r->is_state) {
		parser_error(ctx);
		return;
	}
	tp_str name = tp_te_state_name(ctx, e);
	int64_t row = tp_state_update(ctx, track, ts, name, e->category_id,
				      &repeated);
	if (row < 0 || !name)
		return;
	tp_te_build_args(ctx, e, false, &s->b2);
	if (!s->b2.n)
		return;
	struct tp_args_builder *into = &s->b;
	tp_args_builder_reset(into);
	if (repeated && !tp_is_null(t, TP_STATE_arg_set_id, (uint32_t)row))
		tp_args_load(ctx, tp_get_int(t, TP_STATE_arg_set_id,
					     (uint32_t)row), into);
	merge_end_args(ctx, into, &s->b2);
	int64_t id = tp_args_commit(ctx, into);
	if (id >= 0)
		tp_set_int(t, TP_STATE_arg_set_id, (uint32_t)row, id);
}
