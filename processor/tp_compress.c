/*
 * tp_compress.c - shared sets of async slice tracks (see tp_compress.h).
 *
 * A set is found by a 64-bit hash of what names it; its lanes are kept in
 * the order they were made, which is their track_compressor_idx.  A lane
 * serves either cookies (begin / end pairs) or whole slices (scoped), never
 * both, as in Perfetto.
 */
#include "tp_compress.h"

#include <stdlib.h>
#include <string.h>

#include "tp_ctx.h"
#include "u64map.h"

struct lane {
	bool scoped;     /* serves whole slices, else cookies */
	int64_t cookie;  /* the cookie that owns it (cookie lanes) */
	uint32_t nest;   /* open slices (cookie lanes) */
	int64_t ts_end;  /* end of its last slice (scoped lanes) */
	int64_t track;   /* -1 until a slice needs it */
};

struct cset {
	struct lane *lanes;
	uint32_t n, cap;
};

struct tp_compress {
	struct cset *sets;
	uint32_t n, cap;
	struct u64map index; /* key hash -> set index + 1 */
};

struct tp_compress *tp_compress_new(void)
{
	struct tp_compress *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	u64map_init(&c->index);
	return c;
}

void tp_compress_free(struct tp_compress *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++)
		free(c->sets[i].lanes);
	free(c->sets);
	u64map_free(&c->index);
	free(c);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t set_hash(const struct tp_track_spec *s,
			 const struct tp_args_builder *dims)
{
	uint64_t h = mix(0x7c0, s->machine);
	h = mix(h, s->type);
	h = mix(h, s->event_type);
	h = mix(h, (uint64_t)s->utid);
	h = mix(h, (uint64_t)s->upid);
	for (size_t i = 0; dims && i < dims->n; i++) {
		const struct tp_arg *a = &dims->v[i];
		uint64_t d;
		memcpy(&d, &a->d, sizeof(d));
		h = mix(h, a->key);
		h = mix(h, (uint64_t)a->type);
		h = mix(h, (uint64_t)a->i);
		h = mix(h, a->s);
		h = mix(h, d);
	}
	return h;
}

static struct cset *set_get(struct tp_ctx *ctx, const struct tp_track_spec *s,
			    const struct tp_args_builder *dims)
{
	struct tp_compress *c = ctx->compress;
	uint64_t h = set_hash(s, dims), v;
	if (u64map_get(&c->index, h, &v))
		return &c->sets[v - 1];
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		void *p = realloc(c->sets, c->cap * sizeof(*c->sets));
		if (!p)
			abort();
		c->sets = p;
	}
	struct cset *set = &c->sets[c->n++];
	memset(set, 0, sizeof(*set));
	u64map_put(&c->index, h, c->n);
	return set;
}

static uint32_t lane_add(struct cset *set, bool scoped)
{
	if (set->n == set->cap) {
		set->cap = set->cap ? set->cap * 2 : 4;
		void *p = realloc(set->lanes, set->cap * sizeof(*set->lanes));
		if (!p)
			abort();
		set->lanes = p;
	}
	struct lane *l = &set->lanes[set->n];
	memset(l, 0, sizeof(*l));
	l->scoped = scoped;
	l->track = -1;
	return set->n++;
}

/* The lane of cookie: the one it owns, else the first idle cookie lane
 * (which it then owns), else a new one. */
static uint32_t cookie_lane(struct cset *set, int64_t cookie)
{
	for (uint32_t i = 0; i < set->n; i++)
		if (!set->lanes[i].scoped && set->lanes[i].cookie == cookie)
			return i;
	for (uint32_t i = 0; i < set->n; i++)
		if (!set->lanes[i].scoped && set->lanes[i].nest == 0) {
			set->lanes[i].cookie = cookie;
			return i;
		}
	uint32_t i = lane_add(set, false);
	set->lanes[i].cookie = cookie;
	return i;
}

static uint32_t lane_track(struct tp_ctx *ctx, struct cset *set, uint32_t i,
			   const struct tp_track_spec *s,
			   const struct tp_args_builder *dims)
{
	struct lane *l = &set->lanes[i];
	if (l->track >= 0)
		return (uint32_t)l->track;
	struct tp_args_builder b;
	tp_args_builder_init(&b);
	for (size_t j = 0; dims && j < dims->n; j++)
		tp_args_add(&b, &dims->v[j]);
	tp_str k = tp_s(ctx, "track_compressor_idx");
	tp_args_add_uint(&b, k, k, i);
	struct tp_track_spec spec = *s;
	spec.dimension_arg_set_id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	l->track = tp_track_new(ctx, &spec);
	return (uint32_t)l->track;
}

uint32_t tp_compress_begin(struct tp_ctx *ctx, const struct tp_track_spec *s,
			   const struct tp_args_builder *dims, int64_t cookie,
			   bool saturating)
{
	struct cset *set = set_get(ctx, s, dims);
	uint32_t i = cookie_lane(set, cookie);
	struct lane *l = &set->lanes[i];
	if (saturating)
		l->nest = 1;
	else
		l->nest++;
	return lane_track(ctx, set, i, s, dims);
}

uint32_t tp_compress_end(struct tp_ctx *ctx, const struct tp_track_spec *s,
			 const struct tp_args_builder *dims, int64_t cookie)
{
	struct cset *set = set_get(ctx, s, dims);
	uint32_t i = cookie_lane(set, cookie);
	/* an end whose begin came before the trace leaves nest at 0 */
	if (set->lanes[i].nest > 0)
		set->lanes[i].nest--;
	return lane_track(ctx, set, i, s, dims);
}

uint32_t tp_compress_scoped(struct tp_ctx *ctx, const struct tp_track_spec *s,
			    const struct tp_args_builder *dims, int64_t ts,
			    int64_t dur)
{
	struct cset *set = set_get(ctx, s, dims);
	uint32_t i;
	for (i = 0; i < set->n; i++)
		if (set->lanes[i].scoped && set->lanes[i].ts_end <= ts)
			break;
	if (i == set->n)
		i = lane_add(set, true);
	set->lanes[i].ts_end = ts + dur;
	return lane_track(ctx, set, i, s, dims);
}
