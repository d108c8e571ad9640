/*
 * tp_slices.c - builds the slice table from begin / end / complete events,
 * one stack of open slices per track, as Perfetto's SliceTracker does.
 *
 * Each stack entry remembers the slice's ts and dur (-1 while open) so that
 * closing finished complete / instant slices never reads the table.  Before
 * every event the stack is trimmed: finished slices whose end is at or
 * before the new timestamp are popped, and open slices left inside a
 * finished parent that ended before the event (partially overlapping
 * slices) are closed at the parent's end and counted as
 * misplaced_end_event.
 */
#include <stdlib.h>
#include <string.h>

#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_flows.h"
#include "tp_slices.h"
#include "tp_stats.h"
#include "vp_alloc.h"

struct slice_entry {
	uint32_t id;
	int64_t ts, dur;
	int64_t stack_id;
};

struct slice_stack {
	struct slice_entry *v;
	uint32_t n, cap;
	/* A legacy unnestable track (tp_slice_begin_unnestable): the begins
	 * it has seen, kept or not, and the last one's time. */
	bool unnestable;
	int64_t unnest_begins, unnest_last_ts;
};

struct tp_slices {
	struct u64map by_track; /* track -> stack index */
	struct slice_stack *stacks;
	size_t nstacks, capstacks;
	uint32_t last_track; /* one-entry cache of by_track */
	struct slice_stack *last_stack;
	struct tp_args_builder b;
};

struct tp_slices *tp_slices_new(void)
{
	struct tp_slices *s = vp_xcalloc(1, sizeof *s);
	u64map_init(&s->by_track);
	tp_args_builder_init(&s->b);
	return s;
}

void tp_slices_free(struct tp_slices *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nstacks; i++)
		free(s->stacks[i].v);
	free(s->stacks);
	u64map_free(&s->by_track);
	tp_args_builder_free(&s->b);
	free(s);
}

static struct slice_stack *stack_of(struct tp_slices *s, uint32_t track,
				    bool create)
{
	uint64_t v;

	if (s->last_stack && s->last_track == track)
		return s->last_stack;
	if (!u64map_get(&s->by_track, track, &v)) {
		if (!create)
			return NULL;
		if (s->nstacks == s->capstacks) {
			size_t cap = s->capstacks ? s->capstacks * 2 : 64;
			s->stacks = vp_xreallocarray(s->stacks, cap,
						     sizeof *s->stacks);
			s->capstacks = cap;
		}
		memset(&s->stacks[s->nstacks], 0, sizeof s->stacks[0]);
		v = s->nstacks++;
		u64map_put(&s->by_track, track, v);
	}
	s->last_track = track;
	s->last_stack = &s->stacks[v];
	return s->last_stack;
}

static void set_dur(struct tp_ctx *ctx, struct slice_entry *e, int64_t end)
{
	e->dur = end - e->ts;
	tp_set_int(tp_tab(ctx, TP_T_SLICE), TP_SLICE_dur, e->id, e->dur);
}

/* Pops finished slices that ended by ts (see the comment at the top). */
static void maybe_close_stack(struct tp_ctx *ctx, struct slice_stack *st,
			      int64_t ts, int64_t new_dur)
{
	bool open_child = false;

	for (int64_t i = (int64_t)st->n - 1; i >= 0; i--) {
		struct slice_entry *e = &st->v[i];
		if (e->dur < 0) {
			open_child = true;
			continue;
		}
		int64_t end = e->ts + e->dur;
		if (open_child) {
			if (ts <= end)
				continue;
			tp_stat_inc(ctx, "misplaced_end_event");
			for (int64_t j = (int64_t)st->n - 1; j > i; j--)
				if (st->v[j].dur < 0)
					set_dur(ctx, &st->v[j], end);
			st->n = (uint32_t)i;
			continue;
		}
		/* Intervals are closed on the left and open on the right,
		 * so a slice ending at ts is done - except that instants
		 * at one timestamp stack on each other, as in Perfetto. */
		if (end < ts || (end == ts && !(e->dur == 0 && new_dur == 0)))
			st->n = (uint32_t)i;
	}
}

static int64_t stack_hash(int64_t parent, tp_str cat, tp_str name)
{
	uint64_t h = (uint64_t)parent * 0x100000001b3ull;
	h ^= cat;
	h *= 0x100000001b3ull;
	h ^= name;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	return (int64_t)(h & 0x7fffffffffffffffull);
}

/* Slices a track may have open inside each other (Perfetto's
 * SliceTracker::kMaxDepth): one more is dropped and counted. */
#define SLICE_MAX_DEPTH 512

static int64_t push_slice(struct tp_ctx *ctx, uint32_t track, int64_t ts,
			  int64_t dur, tp_str category, tp_str name,
			  int64_t arg_set_id)
{
	struct slice_stack *st = stack_of(ctx->slices, track, true);
	struct tp_table *t = tp_tab(ctx, TP_T_SLICE);

	maybe_close_stack(ctx, st, ts, dur);
	if (st->n >= SLICE_MAX_DEPTH) {
		tp_stat_inc(ctx, "slice_max_depth_exceeded");
		return -1;
	}

	uint32_t row = tp_table_add_row(t);
	tp_set_int(t, TP_SLICE_ts, row, ts);
	tp_set_int(t, TP_SLICE_dur, row, dur);
	tp_set_int(t, TP_SLICE_track_id, row, track);
	if (category)
		tp_set_str(t, TP_SLICE_category, row, category);
	if (name)
		tp_set_str(t, TP_SLICE_name, row, name);
	tp_set_int(t, TP_SLICE_depth, row, st->n);
	int64_t parent_stack = 0;
	if (st->n) {
		struct slice_entry *p = &st->v[st->n - 1];
		tp_set_int(t, TP_SLICE_parent_id, row, p->id);
		parent_stack = p->stack_id;
	}
	int64_t sid = stack_hash(parent_stack, category, name);
	tp_set_int(t, TP_SLICE_stack_id, row, sid);
	tp_set_int(t, TP_SLICE_parent_stack_id, row, parent_stack);
	if (arg_set_id >= 0)
		tp_set_int(t, TP_SLICE_arg_set_id, row, arg_set_id);

	if (st->n == st->cap) {
		uint32_t cap = st->cap ? st->cap * 2 : 8;
		struct slice_entry *v = vp_xrealloc(st->v, cap * sizeof *v);
		st->v = v;
		st->cap = cap;
	}
	st->v[st->n++] = (struct slice_entry){ row, ts, dur, sid };
	tp_flows_slice_pushed(ctx, track, row);
	return row;
}

int64_t tp_slice_begin(struct tp_ctx *ctx, uint32_t track, int64_t ts,
		       tp_str category, tp_str name, int64_t arg_set_id)
{
	return push_slice(ctx, track, ts, -1, category, name, arg_set_id);
}

int64_t tp_slice_complete(struct tp_ctx *ctx, uint32_t track, int64_t ts,
			  int64_t dur, tp_str category, tp_str name,
			  int64_t arg_set_id)
{
	if (dur < 0)
		dur = 0;
	return push_slice(ctx, track, ts, dur, category, name, arg_set_id);
}

int64_t tp_slice_begin_unnestable(struct tp_ctx *ctx, uint32_t track,
				  int64_t ts, tp_str name, int64_t arg_set_id)
{
	struct slice_stack *st = stack_of(ctx->slices, track, true);

	st->unnestable = true;
	st->unnest_begins++;
	st->unnest_last_ts = ts;
	if (st->n)
		return -1;
	return push_slice(ctx, track, ts, -1, 0, name, arg_set_id);
}

/* The innermost open slice matching category / name (0: any). */
static int64_t find_open(struct tp_ctx *ctx, struct slice_stack *st,
			 tp_str category, tp_str name)
{
	struct tp_table *t = tp_tab(ctx, TP_T_SLICE);

	for (int64_t i = (int64_t)st->n - 1; i >= 0; i--) {
		const struct slice_entry *e = &st->v[i];
		if (e->dur >= 0)
			continue;
		if (category &&
		    tp_get_str(t, TP_SLICE_category, e->id) != category)
			continue;
		if (name) {
			tp_str other = tp_get_str(t, TP_SLICE_name, e->id);
			if (other && other != name)
				continue;
		}
		return i;
	}
	return -1;
}

static void merge_args(struct tp_ctx *ctx, uint32_t slice, int64_t end_args)
{
	struct tp_table *t = tp_tab(ctx, TP_T_SLICE);
	struct tp_args_builder *b = &ctx->slices->b;

	if (end_args < 0)
		return;
	if (tp_is_null(t, TP_SLICE_arg_set_id, slice)) {
		tp_set_int(t, TP_SLICE_arg_set_id, slice, end_args);
		return;
	}
	tp_args_builder_reset(b);
	tp_args_load(ctx, tp_get_int(t, TP_SLICE_arg_set_id, slice), b);
	tp_args_load(ctx, end_args, b);
	int64_t id = tp_args_commit(ctx, b);
	if (id >= 0)
		tp_set_int(t, TP_SLICE_arg_set_id, slice, id);
}

/* What an unnestable track's slice carries when it ends: the track's
 * begins so far and the time of the last, all of them (Perfetto's
 * counts are the track's, never reset). */
static int64_t unnestable_args(struct tp_ctx *ctx,
			       const struct slice_stack *st)
{
	struct tp_args_builder a;
	tp_str kc = tp_s(ctx, "legacy_unnestable_begin_count");
	tp_str kt = tp_s(ctx, "legacy_unnestable_last_begin_ts");

	tp_args_builder_init(&a);
	tp_args_add_int(&a, kc, kc, st->unnest_begins);
	tp_args_add_int(&a, kt, kt, st->unnest_last_ts);
	int64_t set = tp_args_commit(ctx, &a);
	tp_args_builder_free(&a);
	return set;
}

int64_t tp_slice_end(struct tp_ctx *ctx, uint32_t track, int64_t ts,
		     tp_str category, tp_str name, int64_t end_args)
{
	struct slice_stack *st = stack_of(ctx->slices, track, false);

	/* No open slice to end (it began before the trace, say): ignored,
	 * as Perfetto's SliceTracker does; misplaced_end_event only counts
	 * the slices an end cuts short (maybe_close_stack). */
	if (!st)
		return -1;
	maybe_close_stack(ctx, st, ts, -1);
	int64_t i = find_open(ctx, st, category, name);
	if (i < 0)
		return -1;
	struct slice_entry *e = &st->v[i];
	uint32_t id = e->id;
	set_dur(ctx, e, ts);
	merge_args(ctx, id, end_args);
	if (st->unnestable)
		merge_args(ctx, id, unnestable_args(ctx, st));
	if (i == (int64_t)st->n - 1)
		st->n--;
	return id;
}

int64_t tp_slice_add_args(struct tp_ctx *ctx, uint32_t track,
			  tp_str category, tp_str name, int64_t args)
{
	struct slice_stack *st = stack_of(ctx->slices, track, false);

	if (!st)
		return -1;
	int64_t i = find_open(ctx, st, category, name);
	if (i < 0)
		return -1;
	merge_args(ctx, st->v[i].id, args);
	return st->v[i].id;
}

int64_t tp_slice_top(struct tp_ctx *ctx, uint32_t track)
{
	struct slice_stack *st = stack_of(ctx->slices, track, false);
	if (!st || !st->n)
		return -1;
	return st->v[st->n - 1].id;
}

void tp_slice_set_thread_ts(struct tp_ctx *ctx, uint32_t slice,
			    int64_t thread_ts)
{
	struct tp_table *t = tp_tab(ctx, TP_T_SLICE);
	if (slice >= t->nrows)
		return;
	tp_set_int(t, TP_SLICE_thread_ts, slice, thread_ts);
	if (tp_get_int(t, TP_SLICE_dur, slice) == 0)
		tp_set_int(t, TP_SLICE_thread_dur, slice, 0);
}

void tp_slice_end_thread_ts(struct tp_ctx *ctx, uint32_t slice,
			    int64_t thread_ts)
{
	struct tp_table *t = tp_tab(ctx, TP_T_SLICE);
	if (slice >= t->nrows || tp_is_null(t, TP_SLICE_thread_ts, slice))
		return;
	tp_set_int(t, TP_SLICE_thread_dur, slice,
		   thread_ts - tp_get_int(t, TP_SLICE_thread_ts, slice));
}
