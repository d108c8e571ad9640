/*
 * tp_te_intern.c - the strings a track event names (see tp_te_intern.h).
 *
 * Interned names are looked up for every event, and a trace uses few of
 * them, again and again: a direct-mapped cache in front of the
 * sequence's interned data saves the lookup and the decoding of the
 * entry.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_ctx.h"
#include "tp_seq.h"
#include "tp_te_intern.h"
#include "tp_te_state.h"
#include "vp_alloc.h"

#define CACHE_SIZE 1024

struct cache_ent {
	uint32_t gen, field;
	uint64_t iid;
	tp_str s;
};

struct tp_te_intern {
	struct cache_ent cache[CACHE_SIZE];
};

struct tp_te_intern *tp_te_intern_new(void)
{
	struct tp_te_intern *in = vp_xcalloc(1, sizeof *in);
	return in;
}

void tp_te_intern_free(struct tp_te_intern *in)
{
	free(in);
}

tp_str tp_te_intern_bytes(struct tp_ctx *ctx, const uint8_t *p, size_t n)
{
	return tp_intern(ctx->pool, (const char *)p,
			 strnlen((const char *)p, n));
}

/* The cache entry for (generation, field, iid): every input bit reaches
 * the slot index, so sequences (one generation each) do not evict each
 * other's names. */
static struct cache_ent *cache_slot(struct tp_te_intern *s, uint32_t gen,
				    uint32_t field, uint64_t iid)
{
	uint64_t h = (iid + 1) * 0x9e3779b97f4a7c15ull ^
		     ((uint64_t)gen + 1) * 0xc2b2ae3d27d4eb4full ^
		     (uint64_t)field * 0x165667b19e3779f9ull;
	h ^= h >> 31;
	h *= 0xff51afd7ed558ccdull;
	return &s->cache[(h >> 40) & (CACHE_SIZE - 1)];
}

tp_str tp_te_interned(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		      uint64_t iid)
{
	struct cache_ent *e = cache_slot(ctx->te->intern, gen, field, iid);

	if (e->s && e->gen == gen && e->field == field && e->iid == iid)
		return e->s;
	tp_str r = tp_interned_str(ctx, gen, field, iid, INTERNED_NAME);
	if (r) {
		e->gen = gen;
		e->field = field;
		e->iid = iid;
		e->s = r;
	}
	return r;
}

void tp_te_arg_key(char *out, size_t cap, const char *prefix,
		   const char *name, size_t len)
{
	if (!cap)
		return;
	len = strnlen(name, len);
	if (len > INT_MAX)
		len = INT_MAX;
	snprintf(out, cap, "%s.%.*s", prefix, (int)len, name);
	size_t end = strlen(out);
	for (size_t i = strlen(prefix) + 1; i < end; i++)
		if (out[i] == '.' || out[i] == '[' || out[i] == ']')
			out[i] = '_';
}

tp_str tp_te_interned_debug_key(struct tp_ctx *ctx, uint32_t gen,
				uint64_t iid)
{
	/* a field of its own in the cache: the key, not the name */
	const uint32_t field = 0x10000 | ID_DEBUG_ANNOTATION_NAMES;
	struct cache_ent *e = cache_slot(ctx->te->intern, gen, field, iid);

	if (e->s && e->gen == gen && e->field == field && e->iid == iid)
		return e->s;
	tp_str name = tp_interned_str(ctx, gen, ID_DEBUG_ANNOTATION_NAMES, iid,
				      INTERNED_NAME);
	if (!name)
		return 0;
	const char *n = tp_str_get(ctx->pool, name);
	size_t len = tp_str_len(ctx->pool, name);
	char *k = vp_xmalloc(len + 7);
	tp_te_arg_key(k, len + 7, "debug", n, len);
	tp_str r = tp_intern_cstr(ctx->pool, k);
	free(k);
	e->gen = gen;
	e->field = field;
	e->iid = iid;
	e->s = r;
	return r;
}
