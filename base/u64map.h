/*
 * u64map.h - open-addressing hash map from uint64_t keys to uint64_t values.
 *
 * Used for per-sequence state (keyed by trusted_packet_sequence_id) and for
 * interning tables (keyed by iid).  Values are plain integers; callers that
 * need records store an index into an array of their own.
 */
#ifndef VP_U64MAP_H
#define VP_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;
	size_t cap;   /* power of two, or 0 */
	size_t count;
};

void u64map_init(struct u64map *m);
void u64map_free(struct u64map *m);
void u64map_clear(struct u64map *m);
/* Returns true and sets *val when key is present. */
bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *val);
/* Inserts or overwrites.  Out of memory aborts (base/vp_alloc.h), unless
 * u64map_reserve made room first. */
void u64map_put(struct u64map *m, uint64_t key, uint64_t val);
/* Makes room for n more keys, so that the next n puts of new keys do not
 * allocate: 0, or -1 (out of memory; the map is unchanged). */
int u64map_reserve(struct u64map *m, size_t n);

#endif
