/*
 * seq_table.c - a trace's packet sequences and their readers' state (see
 * seq_table.h).
 */
#include "seq_table.h"

#include <stdlib.h>
#include <string.h>

#include "vp_alloc.h"

void seq_table_init(struct seq_table *t, size_t slot_size)
{
	memset(t, 0, sizeof(*t));
	u64map_init(&t->index);
	t->slot_size = slot_size ? slot_size : 1;
}

void seq_table_free(struct seq_table *t)
{
	u64map_free(&t->index);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

void *seq_table_find(const struct seq_table *t, uint64_t key)
{
	uint64_t i;

	if (key < SEQ_TABLE_SMALL)
		return t->small[key] ? seq_table_at(t, t->small[key] - 1) : NULL;
	if (t->have_last && t->last_key == key)
		return seq_table_at(t, t->last_slot);
	if (!u64map_get(&t->index, key, &i))
		return NULL;
	return seq_table_at(t, (size_t)i);
}

void *seq_table_get_slow(struct seq_table *t, uint64_t key, bool *made)
{
	uint64_t i;

	if (made)
		*made = false;
	if (t->have_last && t->last_key == key)
		return seq_table_at(t, t->last_slot);
	if (!u64map_get(&t->index, key, &i)) {
		vp_xgrow((void **)&t->slots, &t->cap, t->n + 1, t->slot_size);
		i = t->n++;
		memset(seq_table_at(t, (size_t)i), 0, t->slot_size);
		u64map_put(&t->index, key, i);
		if (made)
			*made = true;
	}
	if (key < SEQ_TABLE_SMALL) {
		t->small[key] = (uint32_t)i + 1;
	} else {
		t->have_last = true;
		t->last_key = key;
		t->last_slot = (size_t)i;
	}
	return seq_table_at(t, (size_t)i);
}
