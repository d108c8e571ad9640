/*
 * tp_sort.h - orders events by timestamp between tokenizing and parsing.
 *
 * Events are pushed into queues (one per packet sequence, one per ftrace
 * cpu ...), which make up Perfetto's sorter streams.  Each queue stores its events as a compact byte stream:
 * timestamp and push-order deltas as varints, the kind, and the payload the
 * pushing module serialized.  A queue whose events arrive in order (the
 * usual case) is never sorted; one that does not is sorted (stably) before
 * the merge.  The merge (at the trace's end, tp_sort_drain(), or window by
 * window, tp_sort_read_buffer_event()) orders the queues' events as
 * Perfetto's sorter does and calls each event's parse callback, freeing
 * queue storage as it goes.
 */
#ifndef VP_TP_SORT_H
#define VP_TP_SORT_H

#include <stdbool.h>
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

/* A new stream: one of Perfetto's numbered sorter streams, its number
 * the count of streams made before it.  On equal timestamps the order
 * streams were made in decides (see tp_sort.c), so make them when
 * Perfetto makes its own. */
uint32_t tp_sort_stream(struct tp_sorter *s);

/* The queue for a caller-chosen 64-bit key, made on first use as a part of
 * the given stream (a stream may have many queues).  Keys used:
 * (machine << 32 | sequence id) for a sequence's packets, the same with
 * TP_QUEUE_TRACK_EVENT for its track events, TP_QUEUE_FTRACE | ... for
 * ftrace lanes. */
#define TP_QUEUE_FTRACE (1ull << 63)
#define TP_QUEUE_TRACK_EVENT (1ull << 62)
uint32_t tp_sort_queue(struct tp_sorter *s, uint64_t key, uint32_t stream);

/* The queue for a key that is a stream of its own (an ftrace cpu's events
 * of a kind): made with a new stream on first use. */
uint32_t tp_sort_lane(struct tp_sorter *s, uint64_t key);

void tp_sort_push(struct tp_sorter *s, uint32_t queue, int64_t ts,
		  uint8_t kind, const void *payload, size_t len);

/* Sort the whole trace at its end, ignoring the windows (Perfetto's
 * --full-sort). */
void tp_sort_set_full_sort(struct tp_sorter *s, bool full);
/* Switches to sorting the whole trace at its end, as Perfetto does when a
 * packet's clock cannot be converted yet; false when an event was handed
 * on already. */
bool tp_sort_try_full_sort(struct tp_sorter *s);

/* The tokenizer saw a TracingServiceEvent: all_data_sources_flushed or
 * read_tracing_buffers_completed.  The latter may hand on the events of
 * the window before (see tp_sort.c) through their callbacks. */
void tp_sort_flush_event(struct tp_sorter *s);
void tp_sort_read_buffer_event(struct tp_sorter *s, struct tp_ctx *ctx);

/* Runs every pushed event still held through its callback in order; the
 * sorter is empty afterwards. progress (may be NULL) is called now and
 * then with the fraction done. */
void tp_sort_drain(struct tp_sorter *s, struct tp_ctx *ctx,
		   void (*progress)(struct tp_ctx *, double));

/* Events dropped: pushed older than one already handed on, and pushed
 * with a negative timestamp. */
uint64_t tp_sort_dropped_out_of_order(const struct tp_sorter *s);
uint64_t tp_sort_dropped_negative(const struct tp_sorter *s);

/* The latest timestamp pushed so far, 0 before any (Perfetto's
 * max_timestamp(): a packet without a timestamp takes it). */
int64_t tp_sort_max_pushed(const struct tp_sorter *s);

uint64_t tp_sort_events(const struct tp_sorter *s);
size_t tp_sort_bytes(const struct tp_sorter *s);

#endif
