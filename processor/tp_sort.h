/*
 * tp_sort.h - orders events by timestamp between tokenizing and parsing.
 *
 * Events are pushed into queues (one per packet sequence, one per ftrace
 * cpu ...).  Each queue stores its events as a compact byte stream:
 * timestamp and push-order deltas as varints, the kind, and the payload the
 * pushing module serialized.  A queue whose events arrive in order (the
 * usual case) is never sorted; one that does not is sorted (stably) before
 * the merge.  tp_sort_drain() merges all queues by (timestamp, push order)
 * and calls each event's parse callback, freeing queue storage as it goes.
 */
#ifndef VP_TP_SORT_H
#define VP_TP_SORT_H

#include <stddef.h>
#include <stdint.h>

struct tp_ctx;

/* Called in timestamp order with the payload as pushed. */
typedef void (*tp_parse_fn)(struct tp_ctx *ctx, int64_t ts,
			    const uint8_t *payload, size_t len);

struct tp_sorter *tp_sorter_new(void);
void tp_sorter_free(struct tp_sorter *s);

/* Registers a parse callback; returns its kind (at most 255 kinds). */
uint8_t tp_sort_register(struct tp_sorter *s, tp_parse_fn fn);

/* The queue for a caller-chosen 64-bit key (created on first use).
 * Keys used: (machine << 32 | sequence id) for packet sequences, and
 * TP_QUEUE_FTRACE | machine << 32 | cpu for ftrace cpus. */
#define TP_QUEUE_FTRACE (1ull << 63)
uint32_t tp_sort_queue(struct tp_sorter *s, uint64_t key);

/* The same for a queue that stands for one of Perfetto's numbered sorter
 * queues (an ftrace cpu's stream): it gets the next rank when made, which
 * breaks timestamp ties with the other queues as Perfetto's order of
 * making them does (see tp_sort.c). */
uint32_t tp_sort_lane(struct tp_sorter *s, uint64_t key);

void tp_sort_push(struct tp_sorter *s, uint32_t queue, int64_t ts,
		  uint8_t kind, const void *payload, size_t len);

/* Runs every pushed event through its callback in order; the sorter is
 * empty afterwards. progress (may be NULL) is called now and then with the
 * fraction done. */
void tp_sort_drain(struct tp_sorter *s, struct tp_ctx *ctx,
		   void (*progress)(struct tp_ctx *, double));

uint64_t tp_sort_events(const struct tp_sorter *s);
size_t tp_sort_bytes(const struct tp_sorter *s);

#endif
