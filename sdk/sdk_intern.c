/*
 * sdk_intern.c - the interning tables of a sequence (see sdk_intern.h):
 * open addressing, linear probing, entries of an older generation count
 * as empty.
 */
#include <stdlib.h>
#include <string.h>

#include "sdk_intern.h"

#define VP_INTERN_INIT_CAP 64u

void vp_intern_init(struct vp_intern *t)
{
	t->ents = calloc(VP_INTERN_INIT_CAP, sizeof(*t->ents));
	t->mask = t->ents ? VP_INTERN_INIT_CAP - 1 : 0;
	t->count = 0;
	t->gen = 1;
	t->next_iid = 1;
}

void vp_intern_free(struct vp_intern *t)
{
	free(t->ents);
	t->ents = NULL;
}

void vp_intern_clear(struct vp_intern *t)
{
	t->count = 0;
	t->next_iid = 1;
	if (++t->gen == 0) {
		if (t->ents)
			memset(t->ents, 0, (t->mask + 1) * sizeof(*t->ents));
		t->gen = 1;
	}
}

static void intern_insert(struct vp_intern *t, const void *k, const void *k2,
			  uint64_t val)
{
	for (uint32_t i = vp_intern_hash(k, k2) & t->mask;;
	     i = (i + 1) & t->mask) {
		struct vp_intern_ent *e = &t->ents[i];
		if (e->gen != t->gen) {
			*e = (struct vp_intern_ent){k, k2, val, t->gen};
			t->count++;
			return;
		}
	}
}

bool vp_intern_put(struct vp_intern *t, const void *k, const void *k2,
		   uint64_t val)
{
	if (!t->ents || (t->count + 1) * 2 > t->mask + 1) {
		uint32_t cap = t->ents ? 2 * (t->mask + 1) : VP_INTERN_INIT_CAP;
		struct vp_intern_ent *old = t->ents;
		uint32_t old_cap = t->ents ? t->mask + 1 : 0;
		struct vp_intern_ent *n = calloc(cap, sizeof(*n));
		if (!n)
			return false;
		uint32_t gen = t->gen;
		t->ents = n;
		t->mask = cap - 1;
		t->count = 0;
		for (uint32_t i = 0; i < old_cap; i++)
			if (old[i].gen == gen)
				intern_insert(t, old[i].key, old[i].key2,
					      old[i].val);
		free(old);
	}
	intern_insert(t, k, k2, val);
	return true;
}
