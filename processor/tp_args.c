/*
 * tp_args.c - arg set builder and the deduplicated args table (tp_args.h).
 */
#include "tp_args.h"

#include <stdlib.h>
#include <string.h>

#include "tp_ctx.h"
#include "vp_alloc.h"

struct tp_args_state {
	uint32_t *slots;  /* set id + 1; 0 = empty */
	uint32_t *hashes;
	uint32_t nslots;  /* power of two */
	uint32_t count;
	tp_str type_names[TP_ARG_NULL + 1];
};

static const char *const type_name[] = {
	[TP_ARG_INT] = "int",         [TP_ARG_UINT] = "uint",
	[TP_ARG_STRING] = "string",   [TP_ARG_REAL] = "real",
	[TP_ARG_POINTER] = "pointer", [TP_ARG_BOOL] = "bool",
	[TP_ARG_JSON] = "json",       [TP_ARG_NULL] = "null",
};

struct tp_args_state *tp_args_state_new(void)
{
	struct tp_args_state *s = vp_xcalloc(1, sizeof(*s));
	return s;
}

void tp_args_state_free(struct tp_args_state *s)
{
	if (!s)
		return;
	free(s->slots);
	free(s->hashes);
	free(s);
}

void tp_args_builder_init(struct tp_args_builder *b)
{
	memset(b, 0, sizeof(*b));
}

void tp_args_builder_free(struct tp_args_builder *b)
{
	free(b->v);
	memset(b, 0, sizeof(*b));
}

void tp_args_add(struct tp_args_builder *b, const struct tp_arg *a)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->v[i].key == a->key) {
			b->v[i] = *a;
			return;
		}
	}
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 8;
		b->v = vp_xrealloc(b->v, b->cap * sizeof(*b->v));
	}
	b->v[b->n++] = *a;
}

static void add_simple(struct tp_args_builder *b, tp_str flat, tp_str key,
		       enum tp_arg_type type, int64_t i, double d, tp_str s)
{
	struct tp_arg a = {.flat_key = flat, .key = key, .type = type,
			   .i = i, .d = d, .s = s};
	tp_args_add(b, &a);
}

void tp_args_add_int(struct tp_args_builder *b, tp_str flat, tp_str key,
		     int64_t v)
{
	add_simple(b, flat, key, TP_ARG_INT, v, 0, 0);
}

void tp_args_add_uint(struct tp_args_builder *b, tp_str flat, tp_str key,
		      uint64_t v)
{
	add_simple(b, flat, key, TP_ARG_UINT, (int64_t)v, 0, 0);
}

void tp_args_add_str(struct tp_args_builder *b, tp_str flat, tp_str key,
		     tp_str v)
{
	add_simple(b, flat, key, TP_ARG_STRING, 0, 0, v);
}

void tp_args_add_real(struct tp_args_builder *b, tp_str flat, tp_str key,
		      double v)
{
	add_simple(b, flat, key, TP_ARG_REAL, 0, v, 0);
}

void tp_args_add_bool(struct tp_args_builder *b, tp_str flat, tp_str key,
		      bool v)
{
	add_simple(b, flat, key, TP_ARG_BOOL, v ? 1 : 0, 0, 0);
}

/* ---- storage ---------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t arg_value_bits(const struct tp_arg *a)
{
	uint64_t u;
	switch (a->type) {
	case TP_ARG_REAL:
		memcpy(&u, &a->d, sizeof(u));
		return u;
	case TP_ARG_STRING:
	case TP_ARG_JSON:
		return a->s;
	case TP_ARG_NULL:
		return 0;
	default:
		return (uint64_t)a->i;
	}
}

static uint32_t set_hash(const struct tp_args_builder *b)
{
	uint64_t h = b->n;
	for (size_t i = 0; i < b->n; i++) {
		const struct tp_arg *a = &b->v[i];
		h = mix(h, (uint64_t)a->flat_key << 32 | a->key);
		h = mix(h, a->type);
		h = mix(h, arg_value_bits(a));
	}
	return (uint32_t)(h >> 32);
}

/* Reads row r of the args table into *a. */
static void row_to_arg(struct tp_ctx *ctx, uint32_t r, struct tp_arg *a)
{
	struct tp_table *t = tp_tab(ctx, TP_T_ARGS);
	struct tp_args_state *s = ctx->args;
	tp_str ty = tp_get_str(t, TP_ARGS_value_type, r);

	memset(a, 0, sizeof(*a));
	a->flat_key = tp_get_str(t, TP_ARGS_flat_key, r);
	a->key = tp_get_str(t, TP_ARGS_key, r);
	a->type = TP_ARG_NULL;
	for (int i = 0; i <= TP_ARG_NULL; i++)
		if (s->type_names[i] == ty)
			a->type = (enum tp_arg_type)i;
	a->i = tp_get_int(t, TP_ARGS_int_value, r);
	a->d = tp_get_real(t, TP_ARGS_real_value, r);
	a->s = tp_get_str(t, TP_ARGS_string_value, r);
}

/* Whether row r of the args table holds arg a: the columns compared in
 * place (this runs for every arg of every set that is a duplicate). */
static bool row_equals(const struct tp_args_state *s, struct tp_table *t,
		       uint32_t r, const struct tp_arg *a)
{
	if (tp_get_str(t, TP_ARGS_flat_key, r) != a->flat_key ||
	    tp_get_str(t, TP_ARGS_key, r) != a->key ||
	    tp_get_str(t, TP_ARGS_value_type, r) != s->type_names[a->type])
		return false;
	switch (a->type) {
	case TP_ARG_REAL: {
		double d = tp_get_real(t, TP_ARGS_real_value, r);
		return memcmp(&d, &a->d, sizeof(d)) == 0;
	}
	case TP_ARG_STRING:
	case TP_ARG_JSON:
		return tp_get_str(t, TP_ARGS_string_value, r) == a->s;
	case TP_ARG_NULL:
		return true;
	default:
		return tp_get_int(t, TP_ARGS_int_value, r) == a->i;
	}
}

static bool set_equals(struct tp_ctx *ctx, uint32_t set_id,
		       const struct tp_args_builder *b)
{
	struct tp_table *t = tp_tab(ctx, TP_T_ARGS);
	for (size_t i = 0; i < b->n; i++) {
		uint32_t r = set_id + (uint32_t)i;
		if (r >= t->nrows ||
		    tp_get_int(t, TP_ARGS_arg_set_id, r) != set_id ||
		    !row_equals(ctx->args, t, r, &b->v[i]))
			return false;
	}
	uint32_t r = set_id + (uint32_t)b->n;
	return r >= t->nrows || tp_get_int(t, TP_ARGS_arg_set_id, r) != set_id;
}

static void slots_grow(struct tp_args_state *s)
{
	uint32_t n = s->nslots ? s->nslots * 2 : 1024;
	uint32_t *slots = vp_xcalloc(n, sizeof(*slots));
	uint32_t *hashes = vp_xcalloc(n, sizeof(*hashes));
	for (uint32_t i = 0; i < s->nslots; i++) {
		if (!s->slots[i])
			continue;
		uint32_t j = s->hashes[i] & (n - 1);
		while (slots[j])
			j = (j + 1) & (n - 1);
		slots[j] = s->slots[i];
		hashes[j] = s->hashes[i];
	}
	free(s->slots);
	free(s->hashes);
	s->slots = slots;
	s->hashes = hashes;
	s->nslots = n;
}

static void write_row(struct tp_ctx *ctx, uint32_t set_id,
		      const struct tp_arg *a)
{
	struct tp_table *t = tp_tab(ctx, TP_T_ARGS);
	uint32_t r = tp_table_add_row(t);

	tp_set_int(t, TP_ARGS_arg_set_id, r, set_id);
	tp_set_str(t, TP_ARGS_flat_key, r, a->flat_key);
	tp_set_str(t, TP_ARGS_key, r, a->key);
	tp_set_str(t, TP_ARGS_value_type, r, ctx->args->type_names[a->type]);
	switch (a->type) {
	case TP_ARG_REAL:
		tp_set_real(t, TP_ARGS_real_value, r, a->d);
		break;
	case TP_ARG_STRING:
	case TP_ARG_JSON:
		tp_set_str(t, TP_ARGS_string_value, r, a->s);
		break;
	case TP_ARG_NULL:
		break;
	default:
		tp_set_int(t, TP_ARGS_int_value, r, a->i);
		break;
	}
}

int64_t tp_args_one_int(struct tp_ctx *ctx, const char *key, int64_t v)
{
	struct tp_args_builder b;
	tp_str k = tp_s(ctx, key);

	tp_args_builder_init(&b);
	tp_args_add_int(&b, k, k, v);
	int64_t id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return id;
}

int64_t tp_args_commit(struct tp_ctx *ctx, const struct tp_args_builder *b)
{
	struct tp_args_state *s = ctx->args;
	struct tp_table *t = tp_tab(ctx, TP_T_ARGS);

	if (b->n == 0)
		return -1;
	if (!s->type_names[0])
		for (int i = 0; i <= TP_ARG_NULL; i++)
			s->type_names[i] = tp_s(ctx, type_name[i]);
	if ((uint64_t)(s->count + 1) * 4 >= (uint64_t)s->nslots * 3)
		slots_grow(s);
	uint32_t h = set_hash(b);
	uint32_t j = h & (s->nslots - 1);
	while (s->slots[j]) {
		if (s->hashes[j] == h && set_equals(ctx, s->slots[j] - 1, b))
			return s->slots[j] - 1;
		j = (j + 1) & (s->nslots - 1);
	}
	uint32_t set_id = t->nrows;
	for (size_t i = 0; i < b->n; i++)
		write_row(ctx, set_id, &b->v[i]);
	s->slots[j] = set_id + 1;
	s->hashes[j] = h;
	s->count++;
	return set_id;
}

void tp_args_load(struct tp_ctx *ctx, int64_t set_id, struct tp_args_builder *b)
{
	struct tp_table *t = tp_tab(ctx, TP_T_ARGS);
	if (set_id < 0 || set_id >= t->nrows)
		return;
	for (uint32_t r = (uint32_t)set_id;
	     r < t->nrows && tp_get_int(t, TP_ARGS_arg_set_id, r) == set_id;
	     r++) {
		struct tp_arg a;
		row_to_arg(ctx, r, &a);
		tp_args_add(b, &a);
	}
}

bool tp_args_find(struct tp_ctx *ctx, int64_t set_id, tp_str key,
		  struct tp_arg *out)
{
	struct tp_table *t = tp_tab(ctx, TP_T_ARGS);
	if (set_id < 0 || set_id >= t->nrows)
		return false;
	for (uint32_t r = (uint32_t)set_id;
	     r < t->nrows && tp_get_int(t, TP_ARGS_arg_set_id, r) == set_id;
	     r++) {
		if (tp_get_str(t, TP_ARGS_key, r) == key) {
			row_to_arg(ctx, r, out);
			return true;
		}
	}
	return false;
}
