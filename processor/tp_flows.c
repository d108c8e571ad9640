/*
 * tp_flows.c - the flow table (see tp_flows.h).
 */
#include <stdlib.h>
#include <string.h>

#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_flows.h"
#include "tp_stats.h"
#include "vp_alloc.h"

struct v1_key {
	uint64_t source;
	tp_str cat, name;
};

struct pending {
	uint32_t track;
	uint64_t id;
};

struct tp_flows {
	struct u64map last;      /* flow id -> slice + 1 (0: closed) */
	struct u64map v1_ids;    /* hash of v1 key -> index + 1 in v1 */
	struct v1_key *v1;       /* by v1 flow id */
	uint64_t nv1, capv1;
	struct pending *pend;    /* v1 ends waiting for a slice */
	size_t npend, cappend;
	struct tp_args_builder b;
};

struct tp_flows *tp_flows_new(void)
{
	struct tp_flows *f = vp_xcalloc(1, sizeof *f);
	u64map_init(&f->last);
	u64map_init(&f->v1_ids);
	tp_args_builder_init(&f->b);
	return f;
}

void tp_flows_free(struct tp_flows *f)
{
	if (!f)
		return;
	u64map_free(&f->last);
	u64map_free(&f->v1_ids);
	free(f->v1);
	free(f->pend);
	tp_args_builder_free(&f->b);
	free(f);
}

static bool last_slice(struct tp_ctx *ctx, uint64_t id, uint32_t *slice)
{
	uint64_t v;
	if (!u64map_get(&ctx->flows->last, id, &v) || !v)
		return false;
	*slice = (uint32_t)(v - 1);
	return true;
}

bool tp_flow_active(struct tp_ctx *ctx, uint64_t id)
{
	uint32_t s;
	return last_slice(ctx, id, &s);
}

static void insert_flow(struct tp_ctx *ctx, uint64_t id, uint32_t out,
			uint32_t in)
{
	struct tp_flows *f = ctx->flows;
	struct tp_table *t = tp_tab(ctx, TP_T_FLOW);
	uint32_t row = tp_table_add_row(t);
	tp_set_int(t, TP_FLOW_slice_out, row, out);
	tp_set_int(t, TP_FLOW_slice_in, row, in);
	tp_set_int(t, TP_FLOW_trace_id, row, (int64_t)id);
	if (id < f->nv1) {
		tp_str kn = tp_s(ctx, "name"), kc = tp_s(ctx, "cat");
		tp_args_builder_reset(&f->b);
		if (f->v1[id].name)
			tp_args_add_str(&f->b, kn, kn, f->v1[id].name);
		if (f->v1[id].cat)
			tp_args_add_str(&f->b, kc, kc, f->v1[id].cat);
		int64_t set = tp_args_commit(ctx, &f->b);
		if (set >= 0)
			tp_set_int(t, TP_FLOW_arg_set_id, row, set);
	}
}

void tp_flow_link(struct tp_ctx *ctx, uint32_t out, uint32_t in)
{
	struct tp_table *t = tp_tab(ctx, TP_T_FLOW);
	uint32_t row = tp_table_add_row(t);

	tp_set_int(t, TP_FLOW_slice_out, row, out);
	tp_set_int(t, TP_FLOW_slice_in, row, in);
}

/* The earlier of the two slices is the source; on a tie the one the flow
 * was at. */
static void insert_ordered(struct tp_ctx *ctx, uint64_t id, uint32_t prev,
			   uint32_t slice)
{
	struct tp_table *s = tp_tab(ctx, TP_T_SLICE);
	int64_t pts = tp_get_int(s, TP_SLICE_ts, prev);
	int64_t nts = tp_get_int(s, TP_SLICE_ts, slice);
	if (pts > nts)
		insert_flow(ctx, id, slice, prev);
	else
		insert_flow(ctx, id, prev, slice);
}

void tp_flow_begin(struct tp_ctx *ctx, uint64_t id, int64_t slice)
{
	if (slice < 0) {
		tp_stat_inc(ctx, "flow_no_enclosing_slice");
		return;
	}
	if (tp_flow_active(ctx, id)) {
		tp_stat_inc(ctx, "flow_duplicate_id");
		return;
	}
	u64map_put(&ctx->flows->last, id, (uint64_t)slice + 1);
}

void tp_flow_step(struct tp_ctx *ctx, uint64_t id, int64_t slice)
{
	uint32_t prev;
	if (slice < 0) {
		tp_stat_inc(ctx, "flow_no_enclosing_slice");
		return;
	}
	if (!last_slice(ctx, id, &prev)) {
		tp_stat_inc(ctx, "flow_step_without_start");
		return;
	}
	insert_ordered(ctx, id, prev, (uint32_t)slice);
	u64map_put(&ctx->flows->last, id, (uint64_t)slice + 1);
}

void tp_flow_end(struct tp_ctx *ctx, uint64_t id, int64_t slice, bool close)
{
	uint32_t prev;
	if (slice < 0) {
		tp_stat_inc(ctx, "flow_no_enclosing_slice");
		return;
	}
	if (!last_slice(ctx, id, &prev)) {
		tp_stat_inc(ctx, "flow_end_without_start");
		return;
	}
	if (close)
		u64map_put(&ctx->flows->last, id, 0);
	insert_ordered(ctx, id, prev, (uint32_t)slice);
}

void tp_flow_end_pending(struct tp_ctx *ctx, uint32_t track, uint64_t id)
{
	struct tp_flows *f = ctx->flows;
	if (f->npend == f->cappend) {
		size_t cap = f->cappend ? f->cappend * 2 : 8;
		struct pending *p = vp_xrealloc(f->pend, cap * sizeof *p);
		f->pend = p;
		f->cappend = cap;
	}
	f->pend[f->npend++] = (struct pending){ track, id };
}

void tp_flows_slice_pushed(struct tp_ctx *ctx, uint32_t track, uint32_t slice)
{
	struct tp_flows *f = ctx->flows;
	size_t j = 0;
	if (!f || f->npend == 0)
		return;
	for (size_t i = 0; i < f->npend; i++) {
		if (f->pend[i].track != track) {
			f->pend[j++] = f->pend[i];
			continue;
		}
		/* Perfetto takes the flow's last slice without checking that
		 * the flow is active: an unknown flow starts at slice 0 (and
		 * becomes known).  Kept as it is. */
		uint64_t id = f->pend[i].id;
		uint32_t out = 0;
		if (!last_slice(ctx, id, &out)) {
			out = 0;
			u64map_put(&f->last, id, 1);
		}
		insert_flow(ctx, id, out, slice);
	}
	f->npend = j;
}

static uint64_t v1_hash(uint64_t source, tp_str cat, tp_str name)
{
	uint64_t h = source * 0x9e3779b97f4a7c15ull;
	h ^= (uint64_t)cat * 0xff51afd7ed558ccdull;
	h = (h << 31 | h >> 33) ^ name;
	return h * 0xc4ceb9fe1a85ec53ull;
}

uint64_t tp_flow_v1_id(struct tp_ctx *ctx, uint64_t source, tp_str cat,
		       tp_str name)
{
	struct tp_flows *f = ctx->flows;
	uint64_t h = v1_hash(source, cat, name), v;
	/* open addressing on the hash: step through h, h + 1 ... */
	for (uint64_t k = h;; k++) {
		if (!u64map_get(&f->v1_ids, k, &v))
			break;
		struct v1_key *e = &f->v1[v - 1];
		if (e->source == source && e->cat == cat && e->name == name)
			return v - 1;
	}
	uint64_t k = h;
	while (u64map_get(&f->v1_ids, k, &v))
		k++;
	if (f->nv1 == f->capv1) {
		uint64_t cap = f->capv1 ? f->capv1 * 2 : 16;
		struct v1_key *n = vp_xrealloc(f->v1, cap * sizeof *n);
		f->v1 = n;
		f->capv1 = cap;
	}
	f->v1[f->nv1] = (struct v1_key){ source, cat, name };
	u64map_put(&f->v1_ids, k, f->nv1 + 1);
	return f->nv1++;
}
