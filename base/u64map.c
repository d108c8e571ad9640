/* u64map.c - linear-probing hash map (see u64map.h). */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

#include "vp_alloc.h"

static uint64_t mix(uint64_t k)
{
	/* splitmix64 finaliser: spreads sequential ids across the table */
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	return k ^ (k >> 31);
}

void u64map_init(struct u64map *m)
{
	memset(m, 0, sizeof(*m));
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	u64map_init(m);
}

void u64map_clear(struct u64map *m)
{
	if (m->cap)
		memset(m->used, 0, m->cap);
	m->count = 0;
}

static size_t find(const struct u64map *m, uint64_t key, bool *found)
{
	size_t mask = m->cap - 1, i = mix(key) & mask;

	while (m->used[i]) {
		if (m->keys[i] == key) {
			*found = true;
			return i;
		}
		i = (i + 1) & mask;
	}
	*found = false;
	return i;
}

bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *val)
{
	bool found;

	if (!m->count)
		return false;
	size_t i = find(m, key, &found);
	if (found)
		*val = m->vals[i];
	return found;
}

static void grow(struct u64map *m)
{
	struct u64map old = *m;
	size_t cap = old.cap ? old.cap * 2 : 16;

	/* Only the tools use the map (the service's buffers, the probes,
	 * the processor): out of memory stops them (vp_alloc.h). */
	m->keys = vp_xreallocarray(NULL, cap, sizeof(uint64_t));
	m->vals = vp_xreallocarray(NULL, cap, sizeof(uint64_t));
	m->used = vp_xcalloc(cap, 1);
	m->cap = cap;
	m->count = 0;
	for (size_t i = 0; i < old.cap; i++)
		if (old.used[i])
			u64map_put(m, old.keys[i], old.vals[i]);
	free(old.keys);
	free(old.vals);
	free(old.used);
}

void u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	bool found;

	if ((m->count + 1) * 4 > m->cap * 3)
		grow(m);
	size_t i = find(m, key, &found);
	if (!found) {
		m->used[i] = 1;
		m->keys[i] = key;
		m->count++;
	}
	m->vals[i] = val;
}
