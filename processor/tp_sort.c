/*
 * tp_sort.c - the event sorter between tokenizing and parsing (tp_sort.h).
 *
 * A queue is a list of chunks holding encoded events:
 *   varint zigzag(ts - previous ts) | varint (push order - previous) |
 *   kind byte | varint payload length | payload
 * Most queues are already in timestamp order; one that is not gets what is
 * left of it decoded, sorted by (ts, push order) and re-encoded before the
 * next extraction.  The merge
 * keeps a binary heap of queue heads.
 *
 * The merge breaks ties as Perfetto's sorter does.  Perfetto's sorter has
 * numbered streams (each machine's packets, each machine's track events,
 * each ftrace cpu's events of a kind ...), numbered in the order they were
 * made; it repeatedly takes the stream whose first event is the earliest
 * (the lowest number on a tie), then all its events up to the earliest
 * first event of the other streams, that one included.  Here a stream
 * (tp_sort_stream()) is one or more queues: one per packet sequence in a
 * machine's packet streams, so that a sequence's events, mostly in order,
 * sort cheaply; one alone for an ftrace lane (tp_sort_lane()).  Within a
 * stream events go by (timestamp, push order); a heap of each stream's
 * queues and a heap of the streams find the next one.
 *
 * Like Perfetto's, the sorter works in windows unless told to sort the
 * whole trace: after at least two all_data_sources_flushed service events,
 * a read_tracing_buffers_completed event hands on every event pushed
 * before the previous such window end (the data of the buffers read one
 * round earlier), while the tokenizer goes on pushing.  An event that
 * arrives older than one already handed on is then dropped and counted
 * (sorter_push_event_out_of_order), as Perfetto drops it.  Events with a
 * negative timestamp are dropped as they come
 * (trace_sorter_negative_timestamp_dropped).
 */
#include "tp_sort.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "u64map.h"
#include "vp_alloc.h"

/* A queue's chunks start small and double up to CHUNK_SIZE: a trace may
 * have a million queues (one per packet sequence) of one event each. */
#define CHUNK_SIZE (256u << 10)
#define FIRST_CHUNK_SIZE 128u
#define MAX_KINDS 255

struct chunk {
	struct chunk *next;
	size_t len, cap;
	uint8_t data[];
};

/* A queue is written at its tail and read at its head, and both go on
 * while the trace loads: a windowed extraction (see tp_sort_read_buffer)
 * reads what was pushed before while the tokenizer pushes more. */
struct queue {
	uint32_t stream;   /* the stream it is part of */
	struct chunk *head, *tail;
	int64_t last_ts;   /* of the last pushed event */
	uint64_t last_seq; /* push order of the last pushed event */
	uint64_t events;   /* pushed and not yet taken, the head included */
	bool unsorted;     /* an event was pushed before the one before it */
	bool dirty;        /* pushed to since the last extraction */
	bool has_head;     /* h_* is an event not yet taken */
	uint32_t hpos;     /* index in its stream's heap, or NOT_IN_HEAP */
	/* read side: the next undecoded event is at head->data + rd_pos, its
	 * deltas relative to rd_ts and rd_seq */
	size_t rd_pos;
	int64_t rd_ts;
	uint64_t rd_seq;
	/* the decoded head event */
	int64_t h_ts;
	uint64_t h_seq;
	uint8_t h_kind;
	const uint8_t *h_payload;
	size_t h_len;
};

#define NOT_IN_HEAP UINT32_MAX

/* One of Perfetto's sorter streams; its number (index) breaks ties. */
struct stream {
	uint32_t *heap; /* its queues with a head, by (ts, push order) */
	uint32_t n, cap;
	uint32_t tpos;  /* index in the sorter's heap, or NOT_IN_HEAP */
};

struct tp_sorter {
	struct queue *q;
	uint32_t nq, capq;
	struct u64map keys; /* key -> queue index */
	tp_parse_fn fns[MAX_KINDS + 1];
	unsigned nkinds;
	uint64_t seq;       /* push order counter */
	struct stream *st;
	uint32_t nst, capst;
	uint64_t events;    /* pending */
	size_t bytes;
	/* the heap of streams with a queue with a head, by stream_less() */
	uint32_t *top;
	uint32_t ntop, captop;
	/* queues pushed to since the last extraction */
	uint32_t *dirty;
	uint32_t ndirty, capdirty;
	/* windowing, as Perfetto's sorter does it */
	bool full_sort;
	unsigned flushes;       /* since the last extraction */
	uint64_t window_end;    /* push order the next extraction stops at */
	int64_t latest_ts;      /* of the last event handed on */
	bool any_taken;
	uint64_t out_of_order;  /* events dropped: older than latest_ts */
	uint64_t negative_ts;   /* events dropped: a timestamp below 0 */
	uint64_t taken;         /* for progress */
	int64_t max_pushed;     /* the latest timestamp pushed (0: none) */
};

struct tp_sorter *tp_sorter_new(void)
{
	struct tp_sorter *s = vp_xcalloc(1, sizeof(*s));
	u64map_init(&s->keys);
	return s;
}

static void free_chunks(struct chunk *c)
{
	while (c) {
		struct chunk *n = c->next;
		free(c);
		c = n;
	}
}

void tp_sorter_free(struct tp_sorter *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nq; i++)
		free_chunks(s->q[i].head);
	free(s->q);
	for (uint32_t i = 0; i < s->nst; i++)
		free(s->st[i].heap);
	free(s->st);
	free(s->top);
	free(s->dirty);
	u64map_free(&s->keys);
	free(s);
}

uint8_t tp_sort_register(struct tp_sorter *s, tp_parse_fn fn)
{
	if (s->nkinds >= MAX_KINDS)
		abort(); /* a programming error, not bad input */
	s->fns[s->nkinds] = fn;
	return (uint8_t)s->nkinds++;
}

uint32_t tp_sort_stream(struct tp_sorter *s)
{
	if (s->nst == s->capst) {
		s->capst = s->capst ? s->capst * 2 : 16;
		s->st = vp_xrealloc(s->st, s->capst * sizeof(*s->st));
	}
	memset(&s->st[s->nst], 0, sizeof(s->st[s->nst]));
	s->st[s->nst].tpos = NOT_IN_HEAP;
	return s->nst++;
}

uint32_t tp_sort_lane(struct tp_sorter *s, uint64_t key)
{
	uint64_t v;
	if (u64map_get(&s->keys, key, &v))
		return (uint32_t)v;
	return tp_sort_queue(s, key, tp_sort_stream(s));
}

uint32_t tp_sort_queue(struct tp_sorter *s, uint64_t key, uint32_t stream)
{
	uint64_t v;
	if (u64map_get(&s->keys, key, &v))
		return (uint32_t)v;
	if (s->nq == s->capq) {
		s->capq = s->capq ? s->capq * 2 : 16;
		s->q = vp_xrealloc(s->q, s->capq * sizeof(*s->q));
	}
	if (stream >= s->nst)
		abort(); /* a programming error */
	memset(&s->q[s->nq], 0, sizeof(s->q[s->nq]));
	s->q[s->nq].hpos = NOT_IN_HEAP;
	s->q[s->nq].stream = stream;
	u64map_put(&s->keys, key, s->nq);
	return s->nq++;
}

void tp_sort_set_full_sort(struct tp_sorter *s, bool full)
{
	s->full_sort = full;
}

bool tp_sort_try_full_sort(struct tp_sorter *s)
{
	if (s->full_sort)
		return true;
	if (s->any_taken) /* too late: windows were handed on */
		return false;
	s->full_sort = true;
	return true;
}

static uint8_t *queue_reserve(struct tp_sorter *s, struct queue *q, size_t n)
{
	struct chunk *c = q->tail;
	if (!c || c->cap - c->len < n) {
		size_t cap = c ? c->cap * 2 : FIRST_CHUNK_SIZE;
		if (cap > CHUNK_SIZE)
			cap = CHUNK_SIZE;
		if (cap < n)
			cap = n;
		c = vp_xmalloc(sizeof(*c) + cap);
		c->next = NULL;
		c->len = 0;
		c->cap = cap;
		if (q->tail)
			q->tail->next = c;
		else
			q->head = c;
		q->tail = c;
		s->bytes += sizeof(*c) + cap;
	}
	return c->data + c->len;
}

static void queue_append(struct tp_sorter *s, struct queue *q, int64_t ts,
			 uint64_t seq, uint8_t kind, const void *payload,
			 size_t len)
{
	size_t need = 3 * PB_MAX_VARINT_LEN + 1 + len;
	uint8_t *p = queue_reserve(s, q, need), *start = p;

	p += pb_encode_varint(p, pb_zigzag_encode((int64_t)((uint64_t)ts -
							    (uint64_t)q->last_ts)));
	p += pb_encode_varint(p, seq - q->last_seq);
	*p++ = kind;
	p += pb_encode_varint(p, len);
	if (len)
		memcpy(p, payload, len);
	p += len;
	q->tail->len += (size_t)(p - start);
	if (q->events && ts < q->last_ts)
		q->unsorted = true;
	q->last_ts = ts;
	q->last_seq = seq;
	q->events++;
}

void tp_sort_push(struct tp_sorter *s, uint32_t queue, int64_t ts,
		  uint8_t kind, const void *payload, size_t len)
{
	if (queue >= s->nq || kind >= s->nkinds)
		abort(); /* a programming error */
	if (ts < 0) { /* Perfetto drops these as they come */
		s->negative_ts++;
		return;
	}
	struct queue *q = &s->q[queue];
	if (ts > s->max_pushed)
		s->max_pushed = ts;
	queue_append(s, q, ts, ++s->seq, kind, payload, len);
	s->events++;
	if (!q->dirty) {
		q->dirty = true;
		if (s->ndirty == s->capdirty) {
			s->capdirty = s->capdirty ? s->capdirty * 2 : 64;
			s->dirty = vp_xrealloc(s->dirty,
					       s->capdirty * sizeof(*s->dirty));
		}
		s->dirty[s->ndirty++] = queue;
	}
}

/* ---- reading ---------------------------------------------------------- */

/* Decodes the next event of q into its h_* fields; false when q has none.
 * Chunks read to their end are freed, the tail too: the writer then starts
 * a new one, and both sides' deltas go on from the same last event. */
static bool reader_next(struct tp_sorter *s, struct queue *q)
{
	q->has_head = false;
	while (q->head && q->rd_pos >= q->head->len) {
		struct chunk *done = q->head;
		q->head = done->next;
		if (!q->head)
			q->tail = NULL;
		q->rd_pos = 0;
		s->bytes -= sizeof(*done) + done->cap;
		free(done);
	}
	if (!q->head)
		return false;
	const uint8_t *p = q->head->data + q->rd_pos;
	const uint8_t *end = q->head->data + q->head->len;
	uint64_t dts = 0, dseq = 0, len = 0;
	/* We wrote these bytes ourselves, so they decode. */
	pb_read_varint(&p, end, &dts);
	pb_read_varint(&p, end, &dseq);
	uint8_t kind = *p++;
	pb_read_varint(&p, end, &len);
	q->rd_ts = (int64_t)((uint64_t)q->rd_ts + (uint64_t)pb_zigzag_decode(dts));
	q->rd_seq += dseq;
	q->h_ts = q->rd_ts;
	q->h_seq = q->rd_seq;
	q->h_kind = kind;
	q->h_payload = p;
	q->h_len = (size_t)len;
	q->rd_pos = (size_t)(p + len - q->head->data);
	q->has_head = true;
	return true;
}

struct sort_item {
	int64_t ts;
	uint64_t seq;
	const uint8_t *payload;
	size_t len;
	uint8_t kind;
};

static bool item_less(const struct sort_item *a, const struct sort_item *b)
{
	return a->ts < b->ts || (a->ts == b->ts && a->seq < b->seq);
}

/* The first item of v[lo, hi) that x sorts before (all are sorted). */
static size_t first_after(const struct sort_item *v, size_t lo, size_t hi,
			  const struct sort_item *x)
{
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (item_less(x, &v[m]))
			hi = m;
		else
			lo = m + 1;
	}
	return lo;
}

/* The first item of v[lo, hi) that does not sort before x. */
static size_t first_not_before(const struct sort_item *v, size_t lo,
			       size_t hi, const struct sort_item *x)
{
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (item_less(&v[m], x))
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* Merges the sorted neighbours v[lo, mid) and v[mid, hi) in place,
 * stable.  Only where they overlap moves: the left items that sort after
 * the right's first are set aside in tmp and merged with the right items
 * that sort before the left's last. */
static void merge_neighbours(struct sort_item *v, struct sort_item *tmp,
			     size_t lo, size_t mid, size_t hi)
{
	if (lo == mid || mid == hi || !item_less(&v[mid], &v[mid - 1]))
		return; /* already in order */
	size_t a = first_after(v, lo, mid, &v[mid]);
	size_t b = first_not_before(v, mid, hi, &v[mid - 1]);
	size_t nl = mid - a, i = 0, j = mid, k = a;
	memcpy(tmp, v + a, nl * sizeof(*v));
	/* k never passes j: what is written was read already */
	while (i < nl && j < b)
		v[k++] = item_less(&v[j], &tmp[i]) ? v[j++] : tmp[i++];
	while (i < nl)
		v[k++] = tmp[i++];
}

/* Sorts v (n items) in place, stable, with tmp (n items) as room.  A
 * queue that needs sorting is mostly in order already: long runs in time
 * order (one per ftrace bundle, say) that overlap a little at their ends.
 * So the runs it has are merged pairwise, pass after pass, and of each
 * pair only the overlap moves: a pass costs the overlaps, not n. */
static void merge_sort(struct sort_item *v, struct sort_item *tmp, size_t n)
{
	if (n < 2)
		return;
	/* run starts, then n: runs[r] .. runs[r + 1] is run r */
	size_t *runs = vp_xmalloc((n + 1) * sizeof(*runs));
	size_t nr = 0;
	runs[nr++] = 0;
	for (size_t k = 1; k < n; k++)
		if (item_less(&v[k], &v[k - 1]))
			runs[nr++] = k;
	runs[nr] = n; /* nr runs */
	while (nr > 1) {
		size_t out = 0;
		for (size_t r = 0; r < nr; r += 2) {
			if (r + 1 < nr)
				merge_neighbours(v, tmp, runs[r], runs[r + 1],
						 runs[r + 2]);
			runs[out++] = runs[r];
		}
		runs[out] = n;
		nr = out;
	}
	free(runs);
}

/* Sorts what is left of an out-of-order queue (the decoded head, if any,
 * and all after it): decode, sort, re-encode, decode the new head. */
static void queue_sort(struct tp_sorter *s, struct queue *q)
{
	size_t n = q->events, i = 0;
	struct sort_item *v = vp_xmalloc((n + 1) * sizeof(*v));
	struct sort_item *tmp = vp_xmalloc((n + 1) * sizeof(*tmp));
	struct chunk *old = q->head;
	int64_t ts = q->rd_ts;
	uint64_t seq = q->rd_seq;

	if (q->has_head)
		v[i++] = (struct sort_item){q->h_ts, q->h_seq, q->h_payload,
					    q->h_len, q->h_kind};
	/* Read without freeing: walk the chunks by hand. */
	for (struct chunk *c = old; c; c = c->next) {
		const uint8_t *p = c->data, *end = c->data + c->len;
		if (c == old)
			p += q->rd_pos;
		while (p < end && i < n) {
			uint64_t dts = 0, dseq = 0, len = 0;
			pb_read_varint(&p, end, &dts);
			pb_read_varint(&p, end, &dseq);
			uint8_t kind = *p++;
			pb_read_varint(&p, end, &len);
			ts = (int64_t)((uint64_t)ts +
				       (uint64_t)pb_zigzag_decode(dts));
			seq += dseq;
			v[i++] = (struct sort_item){ts, seq, p, (size_t)len,
						    kind};
			p += len;
		}
	}
	merge_sort(v, tmp, i);
	free(tmp);
	q->head = q->tail = NULL;
	q->rd_pos = 0;
	q->rd_ts = 0;
	q->rd_seq = 0;
	q->last_ts = 0;
	q->last_seq = 0;
	q->events = 0;
	q->unsorted = false;
	q->has_head = false;
	for (size_t k = 0; k < i; k++)
		queue_append(s, q, v[k].ts, v[k].seq, v[k].kind, v[k].payload,
			     v[k].len);
	free(v);
	for (struct chunk *c = old; c;) {
		struct chunk *nx = c->next;
		s->bytes -= sizeof(*c) + c->cap;
		free(c);
		c = nx;
	}
	reader_next(s, q);
}

/* ---- the heaps --------------------------------------------------------- */

/* Within a stream: by head timestamp, then push order. */
static bool queue_less(const struct tp_sorter *s, uint32_t a, uint32_t b)
{
	const struct queue *x = &s->q[a], *y = &s->q[b];
	if (x->h_ts != y->h_ts)
		return x->h_ts < y->h_ts;
	return x->h_seq < y->h_seq;
}

/* Between streams: by their first event's timestamp, then their number. */
static bool stream_less(const struct tp_sorter *s, uint32_t a, uint32_t b)
{
	int64_t ta = s->q[s->st[a].heap[0]].h_ts;
	int64_t tb = s->q[s->st[b].heap[0]].h_ts;
	return ta != tb ? ta < tb : a < b;
}

/* One binary heap of indices: h[0..n), its position index kept in
 * pos(item), ordered by less().  Both heaps are one of these. */
struct heap_ops {
	bool (*less)(const struct tp_sorter *, uint32_t, uint32_t);
	uint32_t *(*pos)(struct tp_sorter *, uint32_t);
};

static uint32_t *queue_pos(struct tp_sorter *s, uint32_t qi)
{
	return &s->q[qi].hpos;
}

static uint32_t *stream_pos(struct tp_sorter *s, uint32_t si)
{
	return &s->st[si].tpos;
}

static const struct heap_ops QUEUES = {queue_less, queue_pos};
static const struct heap_ops STREAMS = {stream_less, stream_pos};

static void heap_swap(struct tp_sorter *s, const struct heap_ops *o,
		      uint32_t *h, uint32_t i, uint32_t j)
{
	uint32_t t = h[i];
	h[i] = h[j];
	h[j] = t;
	*o->pos(s, h[i]) = i;
	*o->pos(s, h[j]) = j;
}

static void heap_down(struct tp_sorter *s, const struct heap_ops *o,
		      uint32_t *h, uint32_t n, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && o->less(s, h[l], h[m]))
			m = l;
		if (r < n && o->less(s, h[r], h[m]))
			m = r;
		if (m == i)
			return;
		heap_swap(s, o, h, i, m);
		i = m;
	}
}

static void heap_up(struct tp_sorter *s, const struct heap_ops *o,
		    uint32_t *h, uint32_t i)
{
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (!o->less(s, h[i], h[parent]))
			return;
		heap_swap(s, o, h, i, parent);
		i = parent;
	}
}

/* Puts item x in the heap, or moves it to its place if its key changed. */
static void heap_place(struct tp_sorter *s, const struct heap_ops *o,
		       uint32_t **h, uint32_t *n, uint32_t *cap, uint32_t x)
{
	uint32_t *pos = o->pos(s, x);
	if (*pos == NOT_IN_HEAP) {
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 4;
			*h = vp_xrealloc(*h, (size_t)*cap * sizeof(**h));
		}
		*pos = (*n)++;
		(*h)[*pos] = x;
	}
	uint32_t i = *o->pos(s, x);
	heap_down(s, o, *h, *n, i);
	heap_up(s, o, *h, *o->pos(s, x));
}

/* Takes the item at index i out of the heap. */
static void heap_remove(struct tp_sorter *s, const struct heap_ops *o,
			uint32_t *h, uint32_t *n, uint32_t i)
{
	*o->pos(s, h[i]) = NOT_IN_HEAP;
	if (--*n == i)
		return;
	h[i] = h[*n];
	*o->pos(s, h[i]) = i;
	heap_down(s, o, h, *n, i);
	heap_up(s, o, h, *o->pos(s, h[i]));
}

/* Brings the queues pushed to since the last extraction into the heaps:
 * a queue that went out of order is sorted (its head may come earlier),
 * one without a head gets one. */
static void heap_take_pushed(struct tp_sorter *s)
{
	for (uint32_t k = 0; k < s->ndirty; k++) {
		uint32_t qi = s->dirty[k];
		struct queue *q = &s->q[qi];
		struct stream *st = &s->st[q->stream];
		q->dirty = false;
		if (q->unsorted)
			queue_sort(s, q);
		else if (!q->has_head)
			reader_next(s, q);
		if (!q->has_head)
			continue;
		heap_place(s, &QUEUES, &st->heap, &st->n, &st->cap, qi);
		heap_place(s, &STREAMS, &s->top, &s->ntop, &s->captop,
			   q->stream);
	}
	s->ndirty = 0;
}

/* ---- extraction ------------------------------------------------------- */

/* Hands on the events pushed before push number `end`, in order, as
 * Perfetto's sorter extracts them: take the stream whose first event is
 * earliest (the lowest number on a tie), then its events up to the
 * earliest first event of the other streams, that one included; stop at
 * the first event taken in this order that was pushed at or after `end`.
 * An event older than one handed on before (possible only across windows)
 * is dropped and counted, as Perfetto counts
 * sorter_push_event_out_of_order. */
static void extract_until(struct tp_sorter *s, struct tp_ctx *ctx,
			  uint64_t end,
			  void (*progress)(struct tp_ctx *, double))
{
	uint64_t total = s->events;

	heap_take_pushed(s);
	while (s->ntop) {
		uint32_t si = s->top[0];
		struct stream *st = &s->st[si];
		uint32_t qi = st->heap[0];
		struct queue *q = &s->q[qi];
		if (q->h_seq >= end)
			break;
		/* the other streams' earliest event: the smaller of the
		 * root's children */
		int64_t bound = INT64_MAX;
		for (uint32_t c = 1; c <= 2 && c < s->ntop; c++) {
			int64_t t = s->q[s->st[s->top[c]].heap[0]].h_ts;
			if (t < bound)
				bound = t;
		}
		for (;;) {
			if (s->any_taken && q->h_ts < s->latest_ts) {
				s->out_of_order++;
			} else {
				s->any_taken = true;
				s->latest_ts = q->h_ts;
				s->fns[q->h_kind](ctx, q->h_ts, q->h_payload,
						  q->h_len);
			}
			q->events--;
			s->events--;
			if (progress && (++s->taken & 0xfffff) == 0)
				progress(ctx, 1.0 - (double)s->events /
						      (double)(total ? total : 1));
			if (reader_next(s, q))
				heap_down(s, &QUEUES, st->heap, st->n, 0);
			else
				heap_remove(s, &QUEUES, st->heap, &st->n, 0);
			if (!st->n)
				break;
			qi = st->heap[0];
			q = &s->q[qi];
			if (q->h_ts > bound || q->h_seq >= end)
				break;
		}
		if (st->n)
			heap_down(s, &STREAMS, s->top, s->ntop, 0);
		else
			heap_remove(s, &STREAMS, s->top, &s->ntop, 0);
	}
}

void tp_sort_flush_event(struct tp_sorter *s)
{
	s->flushes++;
}

void tp_sort_read_buffer_event(struct tp_sorter *s, struct tp_ctx *ctx)
{
	if (s->full_sort || s->flushes < 2)
		return;
	extract_until(s, ctx, s->window_end, NULL);
	s->window_end = s->seq + 1;
	s->flushes = 0;
}

void tp_sort_drain(struct tp_sorter *s, struct tp_ctx *ctx,
		   void (*progress)(struct tp_ctx *, double))
{
	extract_until(s, ctx, UINT64_MAX, progress);
	s->window_end = s->seq + 1;
	s->flushes = 0;
}

int64_t tp_sort_max_pushed(const struct tp_sorter *s)
{
	return s->max_pushed;
}

uint64_t tp_sort_events(const struct tp_sorter *s)
{
	return s->events;
}

size_t tp_sort_bytes(const struct tp_sorter *s)
{
	return s->bytes;
}

uint64_t tp_sort_dropped_out_of_order(const struct tp_sorter *s)
{
	return s->out_of_order;
}

uint64_t tp_sort_dropped_negative(const struct tp_sorter *s)
{
	return s->negative_ts;
}
