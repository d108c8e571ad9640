/*
 * trace_buffer.c - the central buffer of a tracing session (see
 * trace_buffer.h).
 *
 * Layout.  The buffer is one byte ring of records.  A record is a struct
 * tb_rec followed by the chunk payload (the bytes after the 8-byte chunk
 * header), padded to 8 bytes.  Records are allocated at the write offset
 * and retired at the head, so the ring always holds one contiguous run of
 * records, oldest first: [head, wr) or, once wrapped, [head, lap_end)
 * followed by [0, wr).  Making room pops the head record: a record that was
 * already read is just dropped, an unread one is overwritten (RING_BUFFER)
 * or stops the write (DISCARD).  Every chunk is copied exactly once.
 *
 * Index.  Each sequence (producer_id, writer_id) keeps its records in a
 * doubly linked list in chunk_id order (chunk ids wrap at 2^32, so they are
 * compared with wrap-around).  Chunks almost always arrive in order, so a
 * commit is an append; an out-of-order commit or a rewrite walks from the
 * nearer end of the list, a bounded number of steps.
 *
 * Reading.  The reader takes the oldest chunk of each sequence in turn,
 * fragment by fragment; a packet whose last fragment continues is joined
 * with the first fragments of the following chunks (read-ahead) once all
 * of them are in.  A chunk whose readable fragments are all consumed is
 * freed on the spot.
 *
 * Trust.  The chunk bytes come from a producer: fragment lengths are
 * checked when the chunk is copied in and again when read (a patch can
 * change them), and nothing here can index outside a record.
 */
#include "trace_buffer.h"

#include <stdlib.h>
#include <string.h>

#include "shm_abi.h"
#include "vp_alloc.h"
#include "u64map.h"

#define NONE UINT32_MAX
#define NO_SEQ UINT64_MAX /* u64map value of a released sequence */
#define REC_ALIGN 8u
#define MAX_WALK 4096u    /* list steps from each end when placing a chunk */
#define MAX_RING ((size_t)UINT32_MAX - 65535u)

/* tb_rec.state bits */
enum {
	REC_COMPLETE = 1,      /* the writer finished the chunk */
	REC_PATCH_PENDING = 2, /* unreadable until patched */
	REC_STARTED = 4,       /* the reader has begun this chunk */
	REC_LOSS_AT_END = 8,   /* truncated: what followed is lost */
	REC_WRITER_DROP = 16,  /* ends in the writer's drop marker */
};

struct tb_rec {
	uint32_t size;        /* bytes the record takes in the ring */
	uint32_t seq;         /* owning sequence slot; NONE once freed */
	uint32_t prev, next;  /* neighbours in the sequence (ring offsets) */
	uint32_t chunk_id;
	uint32_t payload_len; /* chunk bytes after the chunk header */
	uint32_t read_off;    /* payload offset of the next unread fragment */
	uint16_t n_frags;     /* fragments that may be read */
	uint16_t frags_read;
	uint8_t flags;        /* VP_CHUNK_* (LAST_PACKET_CONTINUES if it holds) */
	uint8_t state;        /* REC_* */
	uint8_t pad[6];
};
_Static_assert(sizeof(struct tb_rec) % REC_ALIGN == 0, "record alignment");

struct tb_seq {
	struct vp_tb_sequence_meta meta;
	uint32_t head, tail;   /* oldest and newest chunk, ring offsets */
	uint32_t last_read_id; /* chunk_id of the chunk the reader began last */
	uint32_t next_free;    /* free list of slots */
	uint16_t producer_id;
	uint16_t writer_id;
	bool in_use;
	bool any_read;      /* last_read_id is valid */
	bool lost;          /* the next packet read reports the loss */
	bool loss_counted;  /* ... already in trace_writer_packet_loss */
	bool first_pending; /* no packet read yet */
	bool gone;          /* its producer disconnected */
};

struct vp_trace_buffer {
	uint8_t *ring;
	uint32_t size;
	enum vp_fill_policy policy;
	uint32_t head;    /* oldest record */
	uint32_t wr;      /* where the next record goes */
	uint32_t lap_end; /* end of the records at the top, when wrapped */
	bool wrapped;
	uint32_t n_recs; /* records in the ring, freed ones included */
	size_t used;     /* bytes of unfreed records */

	struct tb_seq *seqs;
	uint32_t n_seqs;
	size_t cap_seqs;
	uint32_t free_seq;
	struct u64map seq_map; /* (producer_id << 16 | writer_id) -> slot */
	uint32_t read_seq;     /* slot the read pass is on */

	struct vp_tb_stats st;
};

/* ---- small helpers ---------------------------------------------------- */

static inline struct tb_rec *rec_at(const struct vp_trace_buffer *tb,
				    uint32_t off)
{
	return (struct tb_rec *)(void *)(tb->ring + off);
}

static inline uint8_t *rec_payload(struct tb_rec *r)
{
	return (uint8_t *)(r + 1);
}

/* Wrap-around order of chunk ids. */
static inline bool id_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline uint32_t rec_footprint(uint32_t payload_len)
{
	uint32_t n = (uint32_t)sizeof(struct tb_rec) + payload_len;
	return (n + REC_ALIGN - 1) & ~(REC_ALIGN - 1);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* Parses the fragment at payload offset off: its length prefix (a varint
 * of at most 4 bytes, normally the redundant 4-byte form) and its bytes,
 * which must end inside the payload.  Sets *data_off and *len. */
static inline bool frag_at(const uint8_t *p, uint32_t plen, uint32_t off,
			   uint32_t *data_off, uint32_t *len)
{
	uint32_t avail = plen - off, v;

	if (avail >= VP_FRAGMENT_LEN_SIZE && p[off + 3] < 0x80 &&
	    (p[off] & p[off + 1] & p[off + 2] & 0x80)) {
		v = (uint32_t)(p[off] & 0x7f) | (uint32_t)(p[off + 1] & 0x7f) << 7 |
		    (uint32_t)(p[off + 2] & 0x7f) << 14 |
		    (uint32_t)p[off + 3] << 21;
		off += VP_FRAGMENT_LEN_SIZE;
	} else {
		uint32_t max = avail < VP_FRAGMENT_LEN_SIZE ? avail
							    : VP_FRAGMENT_LEN_SIZE;
		uint32_t i;
		v = 0;
		for (i = 0; i < max; i++) {
			v |= (uint32_t)(p[off + i] & 0x7f) << (7 * i);
			if (p[off + i] < 0x80)
				break;
		}
		if (i == max)
			return false; /* no terminated varint in 4 bytes */
		off += i + 1;
	}
	if (v > plen - off)
		return false;
	*data_off = off;
	*len = v;
	return true;
}

/* Whether the fragment length at payload offset off is the writer's drop
 * marker (VP_FRAGMENT_DROP_PACKET as a 4-byte redundant varint). */
static bool is_drop_marker(const uint8_t *p, uint32_t plen, uint32_t off)
{
	return plen - off >= VP_FRAGMENT_LEN_SIZE && p[off] == 0xff &&
	       p[off + 1] == 0xff && p[off + 2] == 0xff && p[off + 3] == 0x7f;
}

/* Counts the fragments of a chunk that can be read: all `count` of a
 * complete chunk, all but the one being written of an incomplete one.
 * Returns false if a fragment is damaged (*n stops before it); *drop says
 * whether that fragment is the writer's drop marker rather than damage. */
static bool scan_fragments(const uint8_t *p, uint32_t plen, unsigned count,
			   bool complete, unsigned *n, bool *drop)
{
	unsigned want = complete ? count : (count ? count - 1 : 0);
	uint32_t off = 0, doff, len;

	*drop = false;
	for (*n = 0; *n < want; (*n)++) {
		if (!frag_at(p, plen, off, &doff, &len)) {
			*drop = is_drop_marker(p, plen, off);
			return false;
		}
		off = doff + len;
	}
	return true;
}

/* Moves past `n` fragments (already validated); returns the offset. */
static uint32_t skip_fragments(const uint8_t *p, uint32_t plen, unsigned n)
{
	uint32_t off = 0, doff, len;

	for (unsigned i = 0; i < n && frag_at(p, plen, off, &doff, &len); i++)
		off = doff + len;
	return off;
}

/* ---- sequences -------------------------------------------------------- */

static inline uint64_t seq_key(uint16_t producer_id, uint16_t writer_id)
{
	return (uint64_t)producer_id << 16 | writer_id;
}

static struct tb_seq *seq_find(struct vp_trace_buffer *tb,
			       uint16_t producer_id, uint16_t writer_id)
{
	uint64_t slot;

	if (!u64map_get(&tb->seq_map, seq_key(producer_id, writer_id), &slot) ||
	    slot == NO_SEQ)
		return NULL;
	return &tb->seqs[slot];
}

/* A free sequence slot, or NONE when out of memory.  The buffer runs in
 * vtraced, whose producers choose how many writers they have, and in the
 * SDK's in-process backend: neither may stop for it, the chunk is
 * discarded instead (vp_trace_buffer_copy_chunk). */
static uint32_t seq_new_slot(struct vp_trace_buffer *tb)
{
	if (tb->free_seq != NONE) {
		uint32_t slot = tb->free_seq;
		tb->free_seq = tb->seqs[slot].next_free;
		return slot;
	}
	if (tb->n_seqs >= NONE - 1 ||
	    VP_GROW(tb->seqs, tb->cap_seqs, tb->n_seqs + 1) < 0 ||
	    u64map_reserve(&tb->seq_map, 1) < 0)
		return NONE;
	return tb->n_seqs++;
}

static struct tb_seq *seq_get(struct vp_trace_buffer *tb,
			      uint16_t producer_id, uint16_t writer_id)
{
	struct tb_seq *seq = seq_find(tb, producer_id, writer_id);

	if (seq)
		return seq;
	uint32_t slot = seq_new_slot(tb);
	if (slot == NONE)
		return NULL;
	seq = &tb->seqs[slot];
	memset(seq, 0, sizeof(*seq));
	seq->head = seq->tail = NONE;
	seq->next_free = NONE;
	seq->producer_id = producer_id;
	seq->writer_id = writer_id;
	seq->in_use = true;
	seq->first_pending = true;
	u64map_put(&tb->seq_map, seq_key(producer_id, writer_id), slot);
	return seq;
}

/* Forgets a sequence whose producer is gone once it holds no chunk. */
static void seq_maybe_release(struct vp_trace_buffer *tb, struct tb_seq *seq)
{
	if (!seq->in_use || !seq->gone || seq->head != NONE)
		return;
	u64map_put(&tb->seq_map, seq_key(seq->producer_id, seq->writer_id),
		   NO_SEQ);
	seq->in_use = false;
	uint32_t slot = (uint32_t)(seq - tb->seqs);
	seq->next_free = tb->free_seq;
	tb->free_seq = slot;
}

static void seq_unlink(struct vp_trace_buffer *tb, struct tb_seq *seq,
		       struct tb_rec *r)
{
	if (r->prev != NONE)
		rec_at(tb, r->prev)->next = r->next;
	else
		seq->head = r->next;
	if (r->next != NONE)
		rec_at(tb, r->next)->prev = r->prev;
	else
		seq->tail = r->prev;
	r->prev = r->next = NONE;
}

/* Links the record at off after pred (NONE: as the oldest). */
static void seq_link_after(struct vp_trace_buffer *tb, struct tb_seq *seq,
			   uint32_t pred, uint32_t off)
{
	struct tb_rec *r = rec_at(tb, off);
	uint32_t next = pred == NONE ? seq->head : rec_at(tb, pred)->next;

	r->prev = pred;
	r->next = next;
	if (pred == NONE)
		seq->head = off;
	else
		rec_at(tb, pred)->next = off;
	if (next == NONE)
		seq->tail = off;
	else
		rec_at(tb, next)->prev = off;
}

/* Finds where chunk `id` belongs in seq: *match is the record holding that
 * id (or NONE) and *pred the record it goes after (NONE: first).  Walks
 * from the tail, then from the head, MAX_WALK steps each; false if it
 * gives up (a producer scattering chunk ids). */
static bool seq_place(struct vp_trace_buffer *tb, const struct tb_seq *seq,
		      uint32_t id, uint32_t *match, uint32_t *pred)
{
	uint32_t off = seq->tail, steps;

	*match = *pred = NONE;
	for (steps = 0; off != NONE && steps < MAX_WALK; steps++) {
		struct tb_rec *r = rec_at(tb, off);
		if (r->chunk_id == id) {
			*match = off;
			return true;
		}
		if (id_before(r->chunk_id, id)) {
			*pred = off;
			return true;
		}
		off = r->prev;
	}
	if (off == NONE)
		return true; /* older than every chunk held */
	uint32_t before = NONE;
	off = seq->head;
	for (steps = 0; off != NONE && steps < MAX_WALK; steps++) {
		struct tb_rec *r = rec_at(tb, off);
		if (r->chunk_id == id) {
			*match = off;
			return true;
		}
		if (id_before(id, r->chunk_id)) {
			*pred = before;
			return true;
		}
		before = off;
		off = r->next;
	}
	return false;
}

/* ---- the ring --------------------------------------------------------- */

static void ring_pop_head(struct vp_trace_buffer *tb)
{
	tb->head += rec_at(tb, tb->head)->size;
	tb->n_recs--;
	if (tb->wrapped && tb->head == tb->lap_end) {
		tb->st.padding_bytes_cleared += tb->size - tb->lap_end;
		tb->head = 0;
		tb->wrapped = false;
	}
	if (!tb->n_recs)
		tb->head = tb->wr = 0, tb->wrapped = false;
}

/* Marks a record freed: out of its sequence, its bytes no longer held. */
static void rec_kill(struct vp_trace_buffer *tb, struct tb_seq *seq,
		     struct tb_rec *r)
{
	seq_unlink(tb, seq, r);
	r->seq = NONE;
	tb->used -= r->size;
}

/* Pops the freed records at the head of the ring. */
static void ring_trim(struct vp_trace_buffer *tb)
{
	while (tb->n_recs && rec_at(tb, tb->head)->seq == NONE)
		ring_pop_head(tb);
}

/* Makes the head record go away; false if it must not (DISCARD). */
static bool ring_evict_head(struct vp_trace_buffer *tb)
{
	struct tb_rec *r = rec_at(tb, tb->head);

	if (r->seq != NONE) {
		if (tb->policy == VP_FILL_DISCARD)
			return false;
		struct tb_seq *seq = &tb->seqs[r->seq];
		tb->st.chunks_overwritten++;
		tb->st.bytes_overwritten += r->payload_len + VP_SMB_CHUNK_HEADER_SIZE;
		seq->lost = true;
		rec_kill(tb, seq, r);
		seq_maybe_release(tb, seq);
	}
	ring_pop_head(tb);
	return true;
}

/* Finds room for n bytes (n <= size) at the write offset, evicting the
 * oldest records as needed.  Returns the offset, or NONE. */
static uint32_t ring_alloc(struct vp_trace_buffer *tb, uint32_t n)
{
	for (;;) {
		if (!tb->wrapped) {
			if (tb->size - tb->wr >= n)
				return tb->wr;
			/* The top is too short: leave it as padding. */
			tb->st.padding_bytes_written += tb->size - tb->wr;
			tb->st.write_wrap_count++;
			tb->lap_end = tb->wr;
			tb->wr = 0;
			tb->wrapped = true;
			if (!tb->n_recs) {
				tb->head = 0;
				tb->wrapped = false;
			}
			continue;
		}
		if (tb->head - tb->wr >= n)
			return tb->wr;
		if (!ring_evict_head(tb))
			return NONE;
	}
}

/* ---- writing ---------------------------------------------------------- */

/* A chunk as parsed on its way in. */
struct tb_chunk {
	uint32_t id;
	uint16_t writer_id;
	unsigned count, flags;
	const uint8_t *payload;
	uint32_t plen;
	unsigned n_frags;
	bool complete, damaged;
	bool writer_drop; /* damaged by the writer's drop marker */
};

static void rec_fill(struct tb_rec *r, const struct tb_chunk *c)
{
	r->chunk_id = c->id;
	r->payload_len = c->plen;
	r->read_off = 0;
	r->n_frags = (uint16_t)c->n_frags;
	r->frags_read = 0;
	r->flags = (uint8_t)c->flags;
	r->state = 0;
	if (c->complete)
		r->state |= REC_COMPLETE;
	if (c->flags & VP_CHUNK_NEEDS_PATCHING)
		r->state |= REC_PATCH_PENDING;
	if (c->damaged)
		r->state |= REC_LOSS_AT_END;
	if (c->writer_drop)
		r->state |= REC_WRITER_DROP;
	memcpy(rec_payload(r), c->payload, c->plen);
}

/* Resumes reading of a rewritten chunk where its old copy was left. */
static void rec_resume(struct vp_trace_buffer *tb, struct tb_rec *r,
		       unsigned frags_read, uint8_t started)
{
	if (frags_read > r->n_frags) {
		tb->st.abi_violations++; /* the new copy lost fragments */
		frags_read = r->n_frags;
		r->state |= REC_LOSS_AT_END;
	}
	r->frags_read = (uint16_t)frags_read;
	r->read_off = skip_fragments(rec_payload(r), r->payload_len, frags_read);
	r->state |= started;
}

/* A chunk that cannot be stored: the sequence will report the loss. */
static int chunk_dropped(struct vp_trace_buffer *tb, struct tb_seq *seq)
{
	tb->st.chunks_discarded++;
	/* With nothing of the sequence before it, no chunk_id gap will show
	 * the loss when reading: flag it now. */
	if (seq->head == NONE && !seq->any_read)
		seq->lost = true;
	return -1;
}

static int insert_new(struct vp_trace_buffer *tb, struct tb_seq *seq,
		      const struct tb_chunk *c, unsigned frags_read,
		      uint8_t started)
{
	uint32_t n = rec_footprint(c->plen);

	if (n > tb->size)
		return chunk_dropped(tb, seq);
	uint32_t off = ring_alloc(tb, n);
	if (off == NONE)
		return chunk_dropped(tb, seq);
	struct tb_rec *r = rec_at(tb, off);
	r->size = n;
	r->seq = (uint32_t)(seq - tb->seqs);
	rec_fill(r, c);
	rec_resume(tb, r, frags_read, started);
	tb->wr = off + n;
	tb->n_recs++;
	tb->used += n;

	uint32_t match = NONE, pred = seq->tail;
	bool in_order = seq->tail == NONE ||
			id_before(rec_at(tb, seq->tail)->chunk_id, c->id);
	/* Out of order: eviction may have changed the list, so place it
	 * now. */
	if (!in_order &&
	    (!seq_place(tb, seq, c->id, &match, &pred) || match != NONE)) {
		tb->st.abi_violations++;
		r->seq = NONE;
		r->prev = r->next = NONE;
		tb->used -= n;
		ring_trim(tb);
		return -1;
	}
	seq_link_after(tb, seq, pred, off);
	if (!in_order)
		tb->st.chunks_committed_out_of_order++;
	tb->st.bytes_written += c->plen + VP_SMB_CHUNK_HEADER_SIZE;
	return 0;
}

/* Stores a chunk new to the buffer. */
static int insert_chunk(struct vp_trace_buffer *tb, struct tb_seq *seq,
			const struct tb_chunk *c)
{
	if (insert_new(tb, seq, c, 0, 0))
		return -1;
	tb->st.chunks_written++;
	return 0;
}

/* A chunk with the id of one still held replaces it; reading goes on
 * from where it was. */
static int rewrite(struct vp_trace_buffer *tb, struct tb_seq *seq,
		   uint32_t off, const struct tb_chunk *c)
{
	struct tb_rec *old = rec_at(tb, off);

	if ((old->state & REC_COMPLETE) && !c->complete)
		return 0; /* a stale partial copy of a finished chunk */
	tb->st.chunks_rewritten++;
	unsigned frags_read = old->frags_read;
	uint8_t started = old->state & REC_STARTED;
	if (rec_footprint(c->plen) <= old->size) {
		rec_fill(old, c);
		rec_resume(tb, old, frags_read, started);
		tb->st.bytes_written += c->plen + VP_SMB_CHUNK_HEADER_SIZE;
		return 0;
	}
	rec_kill(tb, seq, old);
	ring_trim(tb);
	return insert_new(tb, seq, c, frags_read, started);
}

static bool parse_chunk(struct vp_trace_buffer *tb, const uint8_t *chunk,
			size_t len, bool complete, struct tb_chunk *c)
{
	if (!chunk || len < VP_SMB_CHUNK_HEADER_SIZE ||
	    len > VP_SMB_MAX_PAGE_SIZE) {
		tb->st.abi_violations++;
		return false;
	}
	uint16_t packets = get_le16(chunk + 6);
	c->id = get_le32(chunk);
	c->writer_id = get_le16(chunk + 4);
	c->count = packets & VP_CHUNK_MAX_PACKETS;
	c->flags = (unsigned)(packets >> 10) &
		   (VP_CHUNK_FIRST_PACKET_CONTINUES |
		    VP_CHUNK_LAST_PACKET_CONTINUES | VP_CHUNK_NEEDS_PATCHING);
	c->payload = chunk + VP_SMB_CHUNK_HEADER_SIZE;
	c->plen = (uint32_t)(len - VP_SMB_CHUNK_HEADER_SIZE);
	c->complete = complete;
	c->damaged = !scan_fragments(c->payload, c->plen, c->count, complete,
				     &c->n_frags, &c->writer_drop);
	if (c->damaged && !c->writer_drop)
		tb->st.abi_violations++;
	/* The last fragment continues only if it is there to be read. */
	if (c->damaged || !complete || !c->count)
		c->flags &= ~VP_CHUNK_LAST_PACKET_CONTINUES;
	return true;
}

int vp_trace_buffer_copy_chunk(struct vp_trace_buffer *tb,
			       uint16_t producer_id,
			       const struct vp_tb_sequence_meta *meta,
			       const uint8_t *chunk, size_t len, bool complete)
{
	struct tb_chunk c;

	if (!parse_chunk(tb, chunk, len, complete, &c))
		return -1;
	struct tb_seq *seq = seq_get(tb, producer_id, c.writer_id);
	if (!seq) {
		tb->st.chunks_discarded++; /* out of memory */
		return -1;
	}
	if (meta)
		seq->meta = *meta;
	seq->gone = false; /* the producer id is in use again */

	/* The chunk read last, whole, and released, again: a copy the
	 * service scraped before its writer committed it.  Nothing new. */
	if (seq->any_read && c.id == seq->last_read_id &&
	    (seq->tail == NONE || rec_at(tb, seq->head)->chunk_id != c.id)) {
		tb->st.chunks_rewritten++;
		return 0;
	}
	if (seq->tail == NONE ||
	    id_before(rec_at(tb, seq->tail)->chunk_id, c.id))
		return insert_chunk(tb, seq, &c);

	uint32_t match, pred;
	if (!seq_place(tb, seq, c.id, &match, &pred)) {
		tb->st.abi_violations++;
		return -1;
	}
	if (match != NONE)
		return rewrite(tb, seq, match, &c);
	/* Older than a chunk the reader is already in: too late. */
	if (pred == NONE && (rec_at(tb, seq->head)->state & REC_STARTED))
		return chunk_dropped(tb, seq);
	return insert_chunk(tb, seq, &c);
}

/* ---- patching --------------------------------------------------------- */

int vp_trace_buffer_patch_chunk(struct vp_trace_buffer *tb,
				uint16_t producer_id, uint16_t writer_id,
				uint32_t chunk_id,
				const struct vp_tb_patch *patches,
				size_t n_patches, bool more_pending)
{
	struct tb_seq *seq = seq_find(tb, producer_id, writer_id);
	uint32_t match = NONE, pred;

	if (seq)
		seq_place(tb, seq, chunk_id, &match, &pred);
	if (match == NONE) {
		tb->st.patches_failed++;
		return -1;
	}
	struct tb_rec *r = rec_at(tb, match);
	for (size_t i = 0; i < n_patches; i++) {
		if (patches[i].offset > r->payload_len ||
		    r->payload_len - patches[i].offset < VP_TB_PATCH_SIZE) {
			tb->st.patches_failed++;
			return -1;
		}
	}
	for (size_t i = 0; i < n_patches; i++)
		memcpy(rec_payload(r) + patches[i].offset, patches[i].data,
		       VP_TB_PATCH_SIZE);
	if (more_pending)
		r->state |= REC_PATCH_PENDING;
	else
		r->state &= (uint8_t)~REC_PATCH_PENDING;
	tb->st.patches_succeeded++;
	return 0;
}

/* ---- reading ---------------------------------------------------------- */

/* Read-ahead outcome for a packet that continues on later chunks. */
enum { RA_WAIT, RA_FAIL, RA_OK };

/* Frees the oldest chunk of seq once it has nothing more to give. */
static void seq_release_done(struct vp_trace_buffer *tb, struct tb_seq *seq,
			     struct tb_rec *r)
{
	if (r->state & REC_WRITER_DROP) {
		/* Counted here: the writer may never send another packet. */
		if (!(seq->lost && seq->loss_counted))
			tb->st.trace_writer_packet_loss++;
		seq->loss_counted = true;
	}
	if (r->state & REC_LOSS_AT_END || !(r->state & REC_COMPLETE))
		seq->lost = true;
	tb->st.chunks_read++;
	tb->st.bytes_read += r->payload_len + VP_SMB_CHUNK_HEADER_SIZE;
	rec_kill(tb, seq, r);
	ring_trim(tb);
}

static bool rec_done(const struct tb_seq *seq, const struct tb_rec *r)
{
	return r->frags_read >= r->n_frags &&
	       ((r->state & REC_COMPLETE) || seq->gone);
}

static void rec_start(struct tb_seq *seq, struct tb_rec *r)
{
	if (seq->any_read && r->chunk_id != seq->last_read_id + 1)
		seq->lost = true; /* a chunk_id gap */
	seq->any_read = true;
	seq->last_read_id = r->chunk_id;
	r->state |= REC_STARTED;
}

static void emit_info(struct vp_trace_buffer *tb, struct tb_seq *seq,
		      struct vp_tb_packet_info *info)
{
	if (info) {
		info->meta = seq->meta;
		info->producer_id = seq->producer_id;
		info->writer_id = seq->writer_id;
		info->previous_packet_dropped = seq->lost;
		info->first_packet_on_sequence = seq->first_pending;
	}
	if (seq->lost && !seq->loss_counted)
		tb->st.trace_writer_packet_loss++;
	seq->lost = false;
	seq->loss_counted = false;
	seq->first_pending = false;
}

/* Room was reserved; n may be 0 on a still empty buffer. */
static inline void put_bytes(struct pb_buf *out, const uint8_t *p, size_t n)
{
	pb_put_raw_reserved(out, p, n);
}

/* Makes room for a packet of n bytes in out.  False when a soft pb_buf
 * (the SDK's in-process backend) has no memory for it: the packet is
 * dropped as a loss, which the next one of its sequence reports, and out
 * is usable again for the next. */
static bool packet_room(struct tb_seq *seq, struct pb_buf *out, size_t n)
{
	if (pb_buf_reserve(out, n))
		return true;
	seq->lost = true;
	out->failed = false; /* handled: this packet is not handed out */
	return false;
}

/* Checks that the packet starting with the last fragment of r (len bytes)
 * can be joined: the next chunks follow by id, continue the packet, and
 * are readable, up to one whose first fragment ends it (*end).  *total is
 * the packet size. */
static int read_ahead(struct vp_trace_buffer *tb, const struct tb_seq *seq,
		      struct tb_rec *r, uint32_t len, size_t *total,
		      uint32_t *end)
{
	int wait = seq->gone ? RA_FAIL : RA_WAIT;
	uint32_t doff, flen;

	*total = len;
	for (struct tb_rec *cur = r;;) {
		uint32_t off = cur->next;
		if (off == NONE)
			return wait;
		struct tb_rec *n = rec_at(tb, off);
		if (n->chunk_id != cur->chunk_id + 1 ||
		    !(n->flags & VP_CHUNK_FIRST_PACKET_CONTINUES) ||
		    (n->state & REC_STARTED))
			return RA_FAIL;
		if (n->state & REC_PATCH_PENDING)
			return wait;
		if (!n->n_frags)
			return (n->state & REC_COMPLETE) ? RA_FAIL : wait;
		if (!frag_at(rec_payload(n), n->payload_len, 0, &doff, &flen))
			return RA_FAIL;
		*total += flen;
		if (n->n_frags == 1 &&
		    (n->flags & VP_CHUNK_LAST_PACKET_CONTINUES)) {
			cur = n;
			continue;
		}
		*end = off;
		return RA_OK;
	}
}

/* Reads a packet that spans chunks, r holding its first fragment at
 * (doff, len).  Returns 1 with a packet, 0 to wait, -1 if it was dropped
 * (or empty): go on reading. */
static int read_multi(struct vp_trace_buffer *tb, struct tb_seq *seq,
		      struct tb_rec *r, uint32_t doff, uint32_t len,
		      struct pb_buf *out, struct vp_tb_packet_info *info)
{
	size_t total;
	uint32_t end;
	int ra = read_ahead(tb, seq, r, len, &total, &end);

	if (ra == RA_WAIT)
		return 0;
	r->frags_read++;
	r->read_off = doff + len;
	if (ra == RA_FAIL) {
		tb->st.readaheads_failed++;
		seq->lost = true;
		seq_release_done(tb, seq, r);
		return -1;
	}
	tb->st.readaheads_succeeded++;
	bool room = packet_room(seq, out, total);
	if (room)
		put_bytes(out, rec_payload(r) + doff, len);
	uint32_t off = r->next;
	seq_release_done(tb, seq, r);
	for (;;) {
		struct tb_rec *n = rec_at(tb, off);
		uint32_t d = 0, l = 0, next = n->next;
		frag_at(rec_payload(n), n->payload_len, 0, &d, &l);
		if (room)
			put_bytes(out, rec_payload(n) + d, l);
		rec_start(seq, n);
		n->frags_read = 1;
		n->read_off = d + l;
		if (off == end) {
			if (rec_done(seq, n))
				seq_release_done(tb, seq, n);
			break;
		}
		seq_release_done(tb, seq, n);
		off = next;
	}
	if (!total || !room)
		return -1;
	emit_info(tb, seq, info);
	return 1;
}

/* Reads the next packet of one sequence: 1, or 0 if none can be read
 * now. */
static int seq_read(struct vp_trace_buffer *tb, struct tb_seq *seq,
		    struct pb_buf *out, struct vp_tb_packet_info *info)
{
	uint32_t doff, len;

	while (seq->head != NONE) {
		struct tb_rec *r = rec_at(tb, seq->head);
		if (r->state & REC_PATCH_PENDING) {
			if (!seq->gone)
				return 0;
			r->state |= REC_LOSS_AT_END; /* never to be patched */
			seq_release_done(tb, seq, r);
			continue;
		}
		if (!(r->state & REC_STARTED))
			rec_start(seq, r);
		if (r->frags_read >= r->n_frags) {
			if (!rec_done(seq, r))
				return 0; /* waits for the rest of the chunk */
			seq_release_done(tb, seq, r);
			continue;
		}
		if (!frag_at(rec_payload(r), r->payload_len, r->read_off, &doff,
			     &len)) {
			/* Damaged since it was copied (a patch). */
			tb->st.abi_violations++;
			r->n_frags = r->frags_read;
			r->flags &= (uint8_t)~VP_CHUNK_LAST_PACKET_CONTINUES;
			r->state |= REC_LOSS_AT_END;
			continue;
		}
		unsigned idx = r->frags_read;
		if (idx == 0 && (r->flags & VP_CHUNK_FIRST_PACKET_CONTINUES)) {
			/* The packet's beginning is gone: skip the rest. */
			seq->lost = true;
			r->frags_read++;
			r->read_off = doff + len;
			continue;
		}
		if (idx + 1u == r->n_frags &&
		    (r->flags & VP_CHUNK_LAST_PACKET_CONTINUES)) {
			int ret = read_multi(tb, seq, r, doff, len, out, info);
			if (ret >= 0)
				return ret;
			continue;
		}
		r->frags_read++;
		r->read_off = doff + len;
		bool got = len && packet_room(seq, out, len);
		if (got) {
			put_bytes(out, rec_payload(r) + doff, len);
			emit_info(tb, seq, info);
		}
		if (rec_done(seq, r))
			seq_release_done(tb, seq, r);
		if (got)
			return 1;
		/* A zero-length fragment is padding (or a packet dropped for
		 * want of memory). */
	}
	return 0;
}

void vp_trace_buffer_begin_read(struct vp_trace_buffer *tb)
{
	tb->read_seq = 0;
}

int vp_trace_buffer_read_packet(struct vp_trace_buffer *tb,
				struct pb_buf *out,
				struct vp_tb_packet_info *info)
{
	for (; tb->read_seq < tb->n_seqs; tb->read_seq++) {
		struct tb_seq *seq = &tb->seqs[tb->read_seq];
		if (!seq->in_use || seq->head == NONE)
			continue;
		if (seq_read(tb, seq, out, info))
			return 1;
		seq_maybe_release(tb, seq);
	}
	return 0;
}

void vp_trace_buffer_packet_dropped(struct vp_trace_buffer *tb,
				    const struct vp_tb_packet_info *info)
{
	struct tb_seq *seq = seq_find(tb, info->producer_id, info->writer_id);
	if (seq && !seq->lost) {
		seq->lost = true;
		/* Not a loss of the writer's: it is counted where the caller
		 * dropped it (invalid_packets). */
		seq->loss_counted = true;
	}
}

/* ---- lifetime and accessors ------------------------------------------ */

int vp_trace_buffer_new(struct vp_trace_buffer **out, size_t size,
			enum vp_fill_policy policy, struct vp_error *err)
{
	*out = NULL;
	if (policy != VP_FILL_RING_BUFFER && policy != VP_FILL_DISCARD)
		return vp_errorf(err, "trace buffer: fill policy %d is not "
				 "RING_BUFFER (1) or DISCARD (2)", (int)policy);
	size &= ~(size_t)4095;
	if (size < 4096)
		size = 4096;
	if (size > MAX_RING)
		return vp_errorf(err, "trace buffer: %zu bytes is over the "
				 "limit of %zu", size, MAX_RING & ~(size_t)4095);
	/* An error, not an abort: the size is a consumer's (vtraced refuses
	 * the session) or an application's (vp_init fails). */
	struct vp_trace_buffer *tb = calloc(1, sizeof(*tb));
	if (!tb)
		return vp_errorf(err, "trace buffer: out of memory");
	tb->ring = malloc(size);
	if (!tb->ring) {
		free(tb);
		return vp_errorf(err, "trace buffer: out of memory for %zu "
				 "bytes", size);
	}
	tb->size = (uint32_t)size;
	tb->policy = policy;
	tb->free_seq = NONE;
	u64map_init(&tb->seq_map);
	tb->st.buffer_size = size;
	*out = tb;
	return 0;
}

void vp_trace_buffer_free(struct vp_trace_buffer *tb)
{
	if (!tb)
		return;
	u64map_free(&tb->seq_map);
	free(tb->seqs);
	free(tb->ring);
	free(tb);
}

struct vp_trace_buffer *vp_trace_buffer_clone(const struct vp_trace_buffer *tb)
{
	/* NULL, not an abort: a consumer's CloneSession fails, vtraced and
	 * the session cloned go on. */
	struct vp_trace_buffer *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	*c = *tb;
	c->ring = malloc(tb->size);
	c->seqs = tb->cap_seqs ? malloc(tb->cap_seqs * sizeof(*tb->seqs))
			       : NULL;
	const struct u64map *m = &tb->seq_map;
	u64map_init(&c->seq_map);
	if (m->cap) {
		c->seq_map.keys = malloc(m->cap * sizeof(*m->keys));
		c->seq_map.vals = malloc(m->cap * sizeof(*m->vals));
		c->seq_map.used = malloc(m->cap * sizeof(*m->used));
	}
	if (!c->ring || (tb->cap_seqs && !c->seqs) ||
	    (m->cap && (!c->seq_map.keys || !c->seq_map.vals ||
			!c->seq_map.used))) {
		free(c->seq_map.keys);
		free(c->seq_map.vals);
		free(c->seq_map.used);
		free(c->seqs);
		free(c->ring);
		free(c);
		return NULL;
	}
	memcpy(c->ring, tb->ring, tb->size);
	if (tb->cap_seqs)
		memcpy(c->seqs, tb->seqs, tb->cap_seqs * sizeof(*tb->seqs));
	if (m->cap) {
		memcpy(c->seq_map.keys, m->keys, m->cap * sizeof(*m->keys));
		memcpy(c->seq_map.vals, m->vals, m->cap * sizeof(*m->vals));
		memcpy(c->seq_map.used, m->used, m->cap * sizeof(*m->used));
		c->seq_map.cap = m->cap;
		c->seq_map.count = m->count;
	}
	return c;
}

void vp_trace_buffer_for_each_sequence(
	const struct vp_trace_buffer *tb,
	void (*fn)(void *ctx, uint16_t producer_id, uint16_t writer_id,
		   const struct vp_tb_sequence_meta *meta),
	void *ctx)
{
	for (uint32_t i = 0; i < tb->n_seqs; i++) {
		const struct tb_seq *seq = &tb->seqs[i];
		if (seq->in_use)
			fn(ctx, seq->producer_id, seq->writer_id, &seq->meta);
	}
}

void vp_trace_buffer_producer_gone(struct vp_trace_buffer *tb,
				   uint16_t producer_id)
{
	for (uint32_t i = 0; i < tb->n_seqs; i++) {
		struct tb_seq *seq = &tb->seqs[i];
		if (!seq->in_use || seq->producer_id != producer_id)
			continue;
		seq->gone = true;
		seq_maybe_release(tb, seq);
	}
}

void vp_trace_buffer_get_stats(const struct vp_trace_buffer *tb,
			       struct vp_tb_stats *out)
{
	*out = tb->st;
}

size_t vp_trace_buffer_used(const struct vp_trace_buffer *tb)
{
	return tb->used;
}

size_t vp_trace_buffer_size(const struct vp_trace_buffer *tb)
{
	return tb->size;
}

enum vp_fill_policy vp_trace_buffer_policy(const struct vp_trace_buffer *tb)
{
	return tb->policy;
}
