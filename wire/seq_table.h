/*
 * seq_table.h - a trace's packet sequences, by key (a
 * trusted_packet_sequence_id, with the machine in the high bits where
 * machines differ), each with a slot of its reader's own state.
 *
 * Every reader of packets keeps something per sequence: the merge's scan
 * its interned names, the rewrite its clocks and defaults, the processor
 * its interning generations.  Finding a sequence's slot, making it on
 * first sight and the one-entry cache that makes a run of packets of one
 * sequence cheap are this, once.  Slots are zeroed when made and kept in
 * the order first seen; a pointer to one is valid until the next
 * seq_table_get (the table may grow).
 */
#ifndef VP_SEQ_TABLE_H
#define VP_SEQ_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "u64map.h"

struct seq_table {
	struct u64map index; /* key -> slot number */
	unsigned char *slots;
	size_t slot_size, n, cap;
	bool have_last;      /* one-entry cache: packets come in runs */
	uint64_t last_key;
	size_t last_slot;
};

void seq_table_init(struct seq_table *t, size_t slot_size);
void seq_table_free(struct seq_table *t);

/* The slot of key, made (zeroed) on first sight; *made says whether it
 * was (may be NULL). */
void *seq_table_get(struct seq_table *t, uint64_t key, bool *made);
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
