/*
 * tp_lanes.c - sets of interchangeable tracks (see tp_lanes.h).
 * Sets are few and small: a linear scan of a set's lanes is what Perfetto
 * does too.
 */
#include <stdlib.h>
#include <string.h>

#include "tp_lanes.h"
#include "u64map.h"

struct lane {
	int64_t cookie;
	uint32_t nest; /* slices open on the lane */
	int64_t track;
};

struct set {
	uint64_t key[4];
	struct lane *lanes;
	uint32_t nlanes, cap;
	uint32_t next; /* next set with the same hash + 1, or 0 */
};

struct tp_lanes {
	struct set *sets;
	uint32_t nsets, cap;
	struct u64map by_hash; /* hash of key -> first set + 1 */
};

struct tp_lanes *tp_lanes_new(void)
{
	struct tp_lanes *c = calloc(1, sizeof *c);
	if (!c)
		abort();
	u64map_init(&c->by_hash);
	return c;
}

void tp_lanes_free(struct tp_lanes *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->nsets; i++)
		free(c->sets[i].lanes);
	free(c->sets);
	u64map_free(&c->by_hash);
	free(c);
}

static uint64_t key_hash(const uint64_t key[4])
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < 4; i++) {
		h ^= key[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

uint32_t tp_lanes_set(struct tp_lanes *c, const uint64_t key[4])
{
	uint64_t h = key_hash(key), v;
	uint32_t last = UINT32_MAX;

	if (u64map_get(&c->by_hash, h, &v)) {
		for (uint32_t i = (uint32_t)v - 1;; i = c->sets[i].next - 1) {
			if (memcmp(c->sets[i].key, key, sizeof c->sets[i].key) == 0)
				return i;
			last = i;
			if (!c->sets[i].next)
				break;
		}
	}
	if (c->nsets == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		c->sets = realloc(c->sets, c->cap * sizeof *c->sets);
		if (!c->sets)
			abort();
	}
	uint32_t id = c->nsets++;
	struct set *s = &c->sets[id];
	memset(s, 0, sizeof *s);
	memcpy(s->key, key, sizeof s->key);
	if (last != UINT32_MAX)
		c->sets[last].next = id + 1;
	else
		u64map_put(&c->by_hash, h, (uint64_t)id + 1);
	return id;
}

static uint32_t new_lane(struct set *s, int64_t cookie)
{
	if (s->nlanes == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 4;
		s->lanes = realloc(s->lanes, s->cap * sizeof *s->lanes);
		if (!s->lanes)
			abort();
	}
	struct lane *l = &s->lanes[s->nlanes];
	l->cookie = cookie;
	l->nest = 0;
	l->track = -1;
	return s->nlanes++;
}

/* The lane of cookie; else an idle lane, adopted for it; else a new one. */
static uint32_t lane_for(struct set *s, int64_t cookie)
{
	for (uint32_t i = 0; i < s->nlanes; i++)
		if (s->lanes[i].cookie == cookie)
			return i;
	for (uint32_t i = 0; i < s->nlanes; i++) {
		if (s->lanes[i].nest == 0) {
			s->lanes[i].cookie = cookie;
			return i;
		}
	}
	return new_lane(s, cookie);
}

uint32_t tp_lanes_begin(struct tp_lanes *c, uint32_t set,
			   int64_t cookie)
{
	struct set *s = &c->sets[set];
	uint32_t i = lane_for(s, cookie);
	s->lanes[i].nest++;
	return i;
}

uint32_t tp_lanes_end(struct tp_lanes *c, uint32_t set, int64_t cookie)
{
	struct set *s = &c->sets[set];
	uint32_t i = lane_for(s, cookie);
	/* An end whose begin came before the trace did finds nothing open. */
	if (s->lanes[i].nest > 0)
		s->lanes[i].nest--;
	return i;
}

uint32_t tp_lanes_default(struct tp_lanes *c, uint32_t set)
{
	struct set *s = &c->sets[set];
	if (!s->nlanes)
		new_lane(s, 0);
	return 0;
}

int64_t *tp_lanes_track(struct tp_lanes *c, uint32_t set,
			   uint32_t lane)
{
	return &c->sets[set].lanes[lane].track;
}
