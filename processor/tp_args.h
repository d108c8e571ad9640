/*
 * tp_args.h - arg sets: the key/value bags slices, tracks, processes and
 * ftrace events point to through arg_set_id.
 *
 * A builder collects (flat_key, key, value) entries; tp_args_commit()
 * writes them to the args table and returns the set's id, which (as in
 * Perfetto) is the id of its first row.  Identical sets are stored once and
 * share an id.  An empty set has no id (-1, NULL in SQL).
 */
#ifndef VP_TP_ARGS_H
#define VP_TP_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

enum tp_arg_type {
	TP_ARG_INT,
	TP_ARG_UINT,
	TP_ARG_STRING,
	TP_ARG_REAL,
	TP_ARG_POINTER,
	TP_ARG_BOOL,
	TP_ARG_JSON,
	TP_ARG_NULL,
};

struct tp_arg {
	tp_str flat_key; /* key without [i] array indices */
	tp_str key;
	enum tp_arg_type type;
	int64_t i;  /* INT, UINT (as bits), POINTER, BOOL */
	double d;   /* REAL */
	tp_str s;   /* STRING, JSON */
};

struct tp_args_builder {
	struct tp_arg *v;
	size_t n, cap;
};

void tp_args_builder_init(struct tp_args_builder *b);
void tp_args_builder_free(struct tp_args_builder *b);
static inline void tp_args_builder_reset(struct tp_args_builder *b)
{
	b->n = 0;
}

/* Adds an entry; an entry with the same key replaces the earlier one. */
void tp_args_add(struct tp_args_builder *b, const struct tp_arg *a);
void tp_args_add_int(struct tp_args_builder *b, tp_str flat_key, tp_str key,
		     int64_t v);
void tp_args_add_uint(struct tp_args_builder *b, tp_str flat_key, tp_str key,
		      uint64_t v);
void tp_args_add_str(struct tp_args_builder *b, tp_str flat_key, tp_str key,
		     tp_str v);
void tp_args_add_real(struct tp_args_builder *b, tp_str flat_key, tp_str key,
		      double v);
void tp_args_add_bool(struct tp_args_builder *b, tp_str flat_key, tp_str key,
		      bool v);

/* Writes the set (if not already stored) and returns its id, or -1 when
 * the builder is empty.  The builder is left as it was. */
int64_t tp_args_commit(struct tp_ctx *ctx, const struct tp_args_builder *b);

/* The set of one int arg, key = v (a track's dimension, say): its id. */
int64_t tp_args_one_int(struct tp_ctx *ctx, const char *key, int64_t v);

/* Appends the entries of stored set `set_id` to b (for merging an end
 * event's args into its slice's set: load the old set, add, commit). */
void tp_args_load(struct tp_ctx *ctx, int64_t set_id, struct tp_args_builder *b);

/* Convenience: the value stored under key in set_id; false if absent. */
bool tp_args_find(struct tp_ctx *ctx, int64_t set_id, tp_str key,
		  struct tp_arg *out);

struct tp_args_state *tp_args_state_new(void);
void tp_args_state_free(struct tp_args_state *s);

#endif
