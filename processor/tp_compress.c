/*
 * tp_compress.c - sets of interchangeable slice tracks (see tp_compress.h).
 *
 * A set is found by a hash of its key words, the words themselves compared
 * (sets of one hash are chained); its lanes are kept in the order they were
 * made, which is their track_compressor_idx.  Sets are few and small: a
 * linear scan of a set's lanes is what Perfetto does too.
 */
#include "tp_compress.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tp_ctx.h"
#include "u64map.h"
#include "vp_alloc.h"

struct lane {
	bool scoped;     /* serves whole slices, else cookies */
	int64_t cookie;  /* the cookie that owns it (cookie lanes) */
	uint32_t nest;   /* open slices (cookie lanes) */
	int64_t ts_end;  /* end of its last slice (scoped lanes) */
	int64_t track;   /* -1 until a slice needs it */
};

struct cset {
	int64_t group; /* track_group_id of its tracks, -1 until one is made */
	uint64_t *key;
	size_t nkey;
	uint32_t next; /* next set with the same hash + 1, or 0 */
	struct lane *lanes;
	uint32_t n;
	size_t cap;
};

struct tp_compress {
	struct cset *sets;
	uint32_t n;
	size_t cap;
	struct u64map index; /* key hash -> first set + 1 */
	uint64_t *key;       /* the key of a set named by track spec */
	size_t keycap;
};

struct tp_compress *tp_compress_new(void)
{
	struct tp_compress *c = vp_xcalloc(1, sizeof(*c));
	u64map_init(&c->index);
	return c;
}

void tp_compress_free(struct tp_compress *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++) {
		free(c->sets[i].key);
		free(c->sets[i].lanes);
	}
	free(c->sets);
	free(c->key);
	u64map_free(&c->index);
	free(c);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

uint32_t tp_compress_set(struct tp_compress *c, const uint64_t *key,
			 size_t n)
{
	uint64_t h = mix(0x7c0, n), v;
	uint32_t last = UINT32_MAX;

	for (size_t i = 0; i < n; i++)
		h = mix(h, key[i]);
	if (u64map_get(&c->index, h, &v)) {
		for (uint32_t i = (uint32_t)v - 1;; i = c->sets[i].next - 1) {
			struct cset *set = &c->sets[i];
			if (set->nkey == n &&
			    memcmp(set->key, key, n * sizeof(*key)) == 0)
				return i;
			last = i;
			if (!set->next)
				break;
		}
	}
	VP_XGROW(c->sets, c->cap, (size_t)c->n + 1);
	uint32_t id = c->n++;
	struct cset *set = &c->sets[id];
	memset(set, 0, sizeof(*set));
	set->group = -1;
	set->key = vp_xmalloc(n ? n * sizeof(*key) : 1);
	if (n)
		memcpy(set->key, key, n * sizeof(*key));
	set->nkey = n;
	if (last != UINT32_MAX)
		c->sets[last].next = id + 1;
	else
		u64map_put(&c->index, h, (uint64_t)id + 1);
	return id;
}

static uint32_t lane_add(struct cset *set, bool scoped, int64_t cookie)
{
	VP_XGROW(set->lanes, set->cap, (size_t)set->n + 1);
	struct lane *l = &set->lanes[set->n];
	memset(l, 0, sizeof(*l));
	l->scoped = scoped;
	l->cookie = cookie;
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
	return lane_add(set, false, cookie);
}

uint32_t tp_compress_lane(struct tp_compress *c, uint32_t set,
			  enum tp_compress_use use, int64_t cookie)
{
	struct cset *cs = &c->sets[set];
	uint32_t i = cookie_lane(cs, cookie);
	struct lane *l = &cs->lanes[i];

	switch (use) {
	case TP_COMPRESS_BEGIN:
		l->nest++;
		break;
	case TP_COMPRESS_BEGIN_ONCE:
		l->nest = 1;
		break;
	case TP_COMPRESS_END:
		/* An end whose begin came before the trace did finds
		 * nothing open. */
		if (l->nest > 0)
			l->nest--;
		break;
	case TP_COMPRESS_INSTANT:
		/* opens and closes on the same lane: nothing stays open */
		break;
	}
	return i;
}

uint32_t tp_compress_lane_first(struct tp_compress *c, uint32_t set)
{
	struct cset *cs = &c->sets[set];
	if (!cs->n)
		lane_add(cs, false, 0);
	return 0;
}

int64_t *tp_compress_lane_track(struct tp_compress *c, uint32_t set,
				uint32_t lane)
{
	return &c->sets[set].lanes[lane].track;
}

void tp_compress_mark_track(struct tp_ctx *ctx, struct tp_compress *c,
			    uint32_t set, uint32_t track)
{
	struct cset *cs = &c->sets[set];
	if (cs->group < 0) /* one number for all sets of the load */
		cs->group = ctx->track_groups++;
	tp_set_int(tp_tab(ctx, TP_T_TRACK), TP_TRACK_track_group_id, track,
		   cs->group);
}

/* ---- by track spec ---------------------------------------------------- */

static void key_put(struct tp_compress *c, size_t *n, uint64_t v)
{
	if (*n == c->keycap) {
		c->keycap = c->keycap ? c->keycap * 2 : 32;
		c->key = vp_xrealloc(c->key, c->keycap * sizeof(*c->key));
	}
	c->key[(*n)++] = v;
}

/* The set of s and dims: their fields that name it, as key words. */
static uint32_t spec_set(struct tp_compress *c, const struct tp_track_spec *s,
			 const struct tp_args_builder *dims)
{
	size_t n = 0;

	key_put(c, &n, s->machine);
	key_put(c, &n, s->type);
	key_put(c, &n, s->event_type);
	key_put(c, &n, (uint64_t)s->utid);
	key_put(c, &n, (uint64_t)s->upid);
	for (size_t i = 0; dims && i < dims->n; i++) {
		const struct tp_arg *a = &dims->v[i];
		uint64_t d;
		memcpy(&d, &a->d, sizeof(d));
		key_put(c, &n, a->key);
		key_put(c, &n, (uint64_t)a->type);
		key_put(c, &n, (uint64_t)a->i);
		key_put(c, &n, a->s);
		key_put(c, &n, d);
	}
	return tp_compress_set(c, c->key, n);
}

/* The track of lane i of set, made the first time from s, dims and i. */
static uint32_t spec_track(struct tp_ctx *ctx, uint32_t set, uint32_t i,
			   const struct tp_track_spec *s,
			   const struct tp_args_builder *dims)
{
	int64_t *t = tp_compress_lane_track(ctx->compress, set, i);
	if (*t >= 0)
		return (uint32_t)*t;
	struct tp_args_builder b;
	tp_args_builder_init(&b);
	for (size_t j = 0; dims && j < dims->n; j++)
		tp_args_add(&b, &dims->v[j]);
	tp_str k = tp_s(ctx, "track_compressor_idx");
	tp_args_add_int(&b, k, k, (int64_t)i);
	struct tp_track_spec spec = *s;
	spec.dimension_arg_set_id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	*t = tp_track_new(ctx, &spec);
	tp_compress_mark_track(ctx, ctx->compress, set, (uint32_t)*t);
	return (uint32_t)*t;
}

uint32_t tp_compress_track(struct tp_ctx *ctx, const struct tp_track_spec *s,
			   const struct tp_args_builder *dims,
			   enum tp_compress_use use, int64_t cookie)
{
	uint32_t set = spec_set(ctx->compress, s, dims);
	uint32_t i = tp_compress_lane(ctx->compress, set, use, cookie);
	return spec_track(ctx, set, i, s, dims);
}

uint32_t tp_compress_scoped(struct tp_ctx *ctx, const struct tp_track_spec *s,
			    const struct tp_args_builder *dims, int64_t ts,
			    int64_t dur)
{
	uint32_t set = spec_set(ctx->compress, s, dims);
	struct cset *cs = &ctx->compress->sets[set];
	uint32_t i;

	for (i = 0; i < cs->n; i++)
		if (cs->lanes[i].scoped && cs->lanes[i].ts_end <= ts)
			break;
	if (i == cs->n)
		i = lane_add(cs, true, 0);
	cs->lanes[i].ts_end = ts + dur;
	return spec_track(ctx, set, i, s, dims);
}
