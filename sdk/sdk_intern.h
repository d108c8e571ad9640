/*
 * sdk_intern.h - the interning tables of a sequence: what a trace writer
 * has interned (names, categories, annotation names, counter tracks), keyed
 * by address, cleared in O(1) at each new incremental-state generation.
 * Each writer has its own (sdk_writer.h); the track event code fills and
 * reads them (sdk_track_event.c).
 */
#ifndef VP_SDK_INTERN_H
#define VP_SDK_INTERN_H

#include <stdbool.h>
#include <stdint.h>

#include "sdk_state.h"

/* A string table keyed by address (names, categories, annotation names,
 * counter tracks).  Cleared in O(1) by bumping gen. */
struct vp_intern_ent {
	const void *key;
	const void *key2;
	uint64_t val;
	uint32_t gen;
};

struct vp_intern {
	struct vp_intern_ent *ents;
	uint32_t mask; /* capacity - 1 */
	uint32_t count;
	uint32_t gen;
	uint64_t next_iid;
};

/* Resets the intern tables of a writer. */
void vp_intern_init(struct vp_intern *t);
void vp_intern_free(struct vp_intern *t);
/* Forgets everything (a new generation). */
void vp_intern_clear(struct vp_intern *t);
/* Adds (k, k2) -> val.  Returns false if memory ran out (the caller then
 * cannot intern and drops the event). */
bool vp_intern_put(struct vp_intern *t, const void *k, const void *k2,
		   uint64_t val);

static inline uint32_t vp_intern_hash(const void *k, const void *k2)
{
	uint64_t x = (uint64_t)(uintptr_t)k ^
		     ((uint64_t)(uintptr_t)k2 * 0xff51afd7ed558ccdull);
	x *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(x >> 32);
}

/* The value stored for (k, k2) in this generation, or 0. */
static inline uint64_t vp_intern_get(const struct vp_intern *t, const void *k,
				     const void *k2)
{
	if (VP_UNLIKELY(!t->ents))
		return 0;
	for (uint32_t i = vp_intern_hash(k, k2) & t->mask;;
	     i = (i + 1) & t->mask) {
		const struct vp_intern_ent *e = &t->ents[i];
		if (e->gen != t->gen)
			return 0;
		if (e->key == k && e->key2 == k2)
			return e->val;
	}
}

#endif
