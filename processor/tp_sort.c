/*
 * tp_sort.c - the event sorter between tokenizing and parsing (tp_sort.h).
 *
 * A queue is a list of chunks holding encoded events:
 *   varint zigzag(ts - previous ts) | varint (push order - previous) |
 *   kind byte | varint payload length | payload
 * Most queues are already in timestamp order; one that is not gets decoded,
 * sorted by (ts, push order) and re-encoded before the merge.  The merge
 * keeps a binary heap of queue heads.
 *
 * The merge breaks ties as Perfetto's sorter does.  Perfetto keeps one
 * queue for all packets and one per ftrace cpu stream, numbered in the
 * order they were made, and repeatedly takes the queue whose first event
 * is the earliest (the lowest number on a tie), then all its events up to
 * the earliest first event of the other queues, that one included.  Here
 * the packet sequences' queues together are Perfetto's packet queue
 * (rank 0: among them, push order decides), and each queue made with
 * tp_sort_lane() is one of its numbered queues (rank = its number): once
 * one is taken it goes on, on equal timestamps too, up to that bound.
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
#define FIRST_CHUNK_SIZE 256u
#define MAX_KINDS 255

struct chunk {
	struct chunk *next;
	size_t len, cap;
	uint8_t data[];
};

struct queue {
	uint32_t rank;     /* 0: a packet sequence; else tp_sort_lane order */
	struct chunk *head, *tail;
	int64_t last_ts;   /* of the last pushed event */
	uint64_t last_seq; /* push order of the last pushed event */
	uint64_t events;
	bool unsorted;
	/* read side */
	struct chunk *rd;
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

struct tp_sorter {
	struct queue *q;
	uint32_t nq, capq;
	struct u64map keys; /* key -> queue index */
	tp_parse_fn fns[MAX_KINDS + 1];
	unsigned nkinds;
	uint64_t seq;       /* push order counter */
	uint32_t nlanes;    /* ranks given */
	uint64_t events;    /* pending */
	size_t bytes;
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
		free_chunks(s->q[i].rd ? s->q[i].rd : s->q[i].head);
	free(s->q);
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

uint32_t tp_sort_lane(struct tp_sorter *s, uint64_t key)
{
	uint32_t n = s->nq, q = tp_sort_queue(s, key);

	if (q == n) /* made now */
		s->q[q].rank = ++s->nlanes;
	return q;
}

uint32_t tp_sort_queue(struct tp_sorter *s, uint64_t key)
{
	uint64_t v;
	if (u64map_get(&s->keys, key, &v))
		return (uint32_t)v;
	if (s->nq == s->capq) {
		s->capq = s->capq ? s->capq * 2 : 16;
		s->q = vp_xrealloc(s->q, s->capq * sizeof(*s->q));
	}
	memset(&s->q[s->nq], 0, sizeof(s->q[s->nq]));
	u64map_put(&s->keys, key, s->nq);
	return s->nq++;
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
	queue_append(s, &s->q[queue], ts, ++s->seq, kind, payload, len);
	s->events++;
}

/* ---- reading ---------------------------------------------------------- */

static void reader_start(struct queue *q)
{
	q->rd = q->head;
	q->rd_pos = 0;
	q->rd_ts = 0;
	q->rd_seq = 0;
	q->head = q->tail = NULL;
}

/* Decodes the next event of q into its h_* fields; false at the end.
 * Chunks already read are freed. */
static bool reader_next(struct tp_sorter *s, struct queue *q)
{
	while (q->rd && q->rd_pos >= q->rd->len) {
		struct chunk *done = q->rd;
		q->rd = done->next;
		q->rd_pos = 0;
		s->bytes -= sizeof(*done) + done->cap;
		free(done);
	}
	if (!q->rd)
		return false;
	const uint8_t *p = q->rd->data + q->rd_pos;
	const uint8_t *end = q->rd->data + q->rd->len;
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
	q->rd_pos = (size_t)(p + len - q->rd->data);
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

/* Sorts an out-of-order queue: decode, sort, re-encode. */
static void queue_sort(struct tp_sorter *s, struct queue *q)
{
	size_t n = q->events, i = 0;
	struct sort_item *v = vp_xmalloc((n + 1) * sizeof(*v));
	struct sort_item *tmp = vp_xmalloc((n + 1) * sizeof(*tmp));
	struct chunk *old = q->head;
	reader_start(q);
	/* Read without freeing: walk the chunks by hand. */
	for (struct chunk *c = old; c; c = c->next) {
		const uint8_t *p = c->data, *end = c->data + c->len;
		while (p < end && i < n) {
			uint64_t dts = 0, dseq = 0, len = 0;
			pb_read_varint(&p, end, &dts);
			pb_read_varint(&p, end, &dseq);
			uint8_t kind = *p++;
			pb_read_varint(&p, end, &len);
			q->rd_ts = (int64_t)((uint64_t)q->rd_ts +
					     (uint64_t)pb_zigzag_decode(dts));
			q->rd_seq += dseq;
			v[i++] = (struct sort_item){q->rd_ts, q->rd_seq, p,
						    (size_t)len, kind};
			p += len;
		}
	}
	merge_sort(v, tmp, i);
	free(tmp);
	q->rd = NULL;
	q->last_ts = 0;
	q->last_seq = 0;
	q->events = 0;
	q->unsorted = false;
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
}

/* Heap of queue indices ordered by their head event: its timestamp, then
 * the queue's rank, then push order. */
static bool head_less(const struct tp_sorter *s, uint32_t a, uint32_t b)
{
	const struct queue *x = &s->q[a], *y = &s->q[b];
	if (x->h_ts != y->h_ts)
		return x->h_ts < y->h_ts;
	if (x->rank != y->rank)
		return x->rank < y->rank;
	return x->h_seq < y->h_seq;
}

static void heap_down(const struct tp_sorter *s, uint32_t *h, uint32_t n,
		      uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && head_less(s, h[l], h[m]))
			m = l;
		if (r < n && head_less(s, h[r], h[m]))
			m = r;
		if (m == i)
			return;
		uint32_t t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

void tp_sort_drain(struct tp_sorter *s, struct tp_ctx *ctx,
		   void (*progress)(struct tp_ctx *, double))
{
	uint32_t *heap = vp_xmalloc(((size_t)s->nq + 1) * sizeof(*heap));
	uint32_t n = 0;
	uint64_t total = s->events, done = 0;
	for (uint32_t i = 0; i < s->nq; i++) {
		struct queue *q = &s->q[i];
		if (q->unsorted)
			queue_sort(s, q);
		reader_start(q);
		if (reader_next(s, q))
			heap[n++] = i;
	}
	for (uint32_t i = n / 2; i-- > 0;)
		heap_down(s, heap, n, i);
	while (n) {
		struct queue *q = &s->q[heap[0]];
		/* A lane goes on up to the earliest head of the others (the
		 * smaller of the root's children); the packet queues take one
		 * event at a time, their order being the heap's. */
		int64_t bound = INT64_MIN;
		if (q->rank) {
			bound = INT64_MAX;
			for (uint32_t c = 1; c <= 2 && c < n; c++)
				if (s->q[heap[c]].h_ts < bound)
					bound = s->q[heap[c]].h_ts;
		}
		bool more;
		do {
			s->fns[q->h_kind](ctx, q->h_ts, q->h_payload, q->h_len);
			if (progress && (++done & 0xfffff) == 0)
				progress(ctx, (double)done /
						      (double)(total ? total : 1));
			more = reader_next(s, q);
		} while (more && q->h_ts <= bound);
		if (!more)
			heap[0] = heap[--n];
		heap_down(s, heap, n, 0);
	}
	free(heap);
	for (uint32_t i = 0; i < s->nq; i++) {
		free_chunks(s->q[i].rd);
		memset(&s->q[i], 0, sizeof(s->q[i]));
	}
	s->events = 0;
}

uint64_t tp_sort_events(const struct tp_sorter *s)
{
	return s->events;
}

size_t tp_sort_bytes(const struct tp_sorter *s)
{
	return s->bytes;
}
