/* u64map.c - linear-probing hash map (see u64map.h). */
#include "u64map.h"

#include <stdint.h>
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

/* Rehashes m into cap slots: 0, or -1 (out of memory, m unchanged). */
static int rehash(struct u64map *m, size_t cap)
{
	struct u64map old = *m;
	uint64_t *keys = cap <= SIZE_MAX / sizeof(uint64_t)
				 ? malloc(cap * sizeof(uint64_t))
				 : NULL;
	uint64_t *vals = keys ? malloc(cap * sizeof(uint64_t)) : NULL;
	uint8_t *used = vals ? calloc(cap, 1) : NULL;

	if (!used) {
		free(keys);
		free(vals);
		return -1;
	}
	*m = (struct u64map){keys, vals, used, cap, 0};
	for (size_t i = 0; i < old.cap; i++)
		if (old.used[i])
			u64map_put(m, old.keys[i], old.vals[i]);
	free(old.keys);
	free(old.vals);
	free(old.used);
	return 0;
}

/* The capacity that holds count entries under the 3/4 load limit. */
static size_t cap_for(const struct u64map *m, size_t count)
{
	size_t cap = m->cap ? m->cap : 16;
	while (count * 4 > cap * 3) {
		if (cap > SIZE_MAX / 8)
			return 0;
		cap *= 2;
	}
	return cap;
}

int u64map_reserve(struct u64map *m, size_t n)
{
	if (m->count > SIZE_MAX / 8 - n)
		return -1;
	if ((m->count + n) * 4 <= m->cap * 3)
		return 0;
	size_t cap = cap_for(m, m->count + n);
	return cap ? rehash(m, cap) : -1;
}

void u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	bool found = false;
	size_t i = m->cap ? find(m, key, &found) : 0;

	if (!found && (m->count + 1) * 4 > m->cap * 3) {
		/* The tools' policy: out of memory stops them (vp_alloc.h);
		 * code that must not stop calls u64map_reserve first, and
		 * overwriting a key never allocates. */
		if (u64map_reserve(m, 1) < 0)
			vp_oom((m->cap ? m->cap * 2 : 16) * 17);
		i = find(m, key, &found);
	}
	if (!found) {
		m->used[i] = 1;
		m->keys[i] = key;
		m->count++;
	}
	m->vals[i] = val;
}
