/*
 * seq_table.h - a trace's packet sequences, by key (a
 * trusted_packet_sequence_id, with the machine in the high bits where
 * machines differ), each with a slot of its reader's own state.
 *
 * Every reader of packets keeps something per sequence: the merge's scan
 * its interned names, the rewrite its clocks and defaults, the processor
 * its interning generations.  Finding a sequence's slot, making it on
 * first sight and what makes the lookup cheap (a direct index for small
 * ids, which are most: a service numbers its writers from 1; a one-entry
 * cache for the others, since packets come in runs) are this, once.
 * Slots are zeroed when made and kept in the order first seen; a pointer
 * to one is valid until the next seq_table_get (the table may grow).
 */
#ifndef VP_SEQ_TABLE_H
#define VP_SEQ_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "u64map.h"

/* Keys below this are found by direct index. */
#define SEQ_TABLE_SMALL 256

struct seq_table {
	struct u64map index; /* key -> slot number, for every key */
	uint32_t small[SEQ_TABLE_SMALL]; /* key -> slot number + 1, or 0 */
	unsigned char *slots;
	size_t slot_size, n, cap;
	bool have_last;      /* one-entry cache: packets come in runs */
	uint64_t last_key;
	size_t last_slot;
};

void seq_table_init(struct seq_table *t, size_t slot_size);
void seq_table_free(struct seq_table *t);

/* The slot of key, made (zeroed) on first sight; *made says whether it
 * was (may be NULL).  seq_table_get_slow is its path for a key the
 * direct index does not hold. */
void *seq_table_get_slow(struct seq_table *t, uint64_t key, bool *made);
static inline void *seq_table_get(struct seq_table *t, uint64_t key,
				  bool *made)
{
	/* inline: a call per packet is a good part of a small one's cost */
	if (key < SEQ_TABLE_SMALL && t->small[key]) {
		if (made)
			*made = false;
		return t->slots + (size_t)(t->small[key] - 1) * t->slot_size;
	}
	return seq_table_get_slow(t, key, made);
}
/* The slot of key, or NULL if never seen. */
void *seq_table_find(const struct seq_table *t, uint64_t key);

static inline size_t seq_table_count(const struct seq_table *t)
{
	return t->n;
}

/* Slot i (0 <= i < count), in the order the sequences were first seen. */
static inline void *seq_table_at(const struct seq_table *t, size_t i)
{
	return t->slots + i * t->slot_size;
}

#endif
