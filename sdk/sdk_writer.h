/*
 * sdk_writer.h - trace writers: one sequence, one thread, one data source
 * instance; packets into chunks and chunks to the backend (sdk_writer.c
 * says how), the writer locks, and what happens to a thread's writers when
 * it exits.  The track event code and the generic data sources write
 * through it; the data source life cycle flushes and retires writers.
 *
 * Stop safety (the "writer lock" scheme): every writer has a lock that its
 * owner thread takes around each packet.  Another thread that must touch
 * the writer (flush: take its current chunk; stop: retire it) takes it
 * too, so it never sees a half-written packet, and a traced thread that
 * loses the race finds the writer retired when it gets the lock, and
 * writes nothing.  The lock is asymmetric (Dekker with membarrier): the
 * owner stores lock = 1 and then reads ctl, with no fence; the other
 * thread sets ctl = 1, runs membarrier(PRIVATE_EXPEDITED), which orders
 * the owner's accesses as a full fence would, and then waits for
 * lock == 0.  Either the owner's store is visible to it, or the owner
 * sees ctl and backs off until ctl is 0 again.  Without membarrier (old
 * kernel, seccomp) lock is an ordinary spin lock taken with an atomic
 * exchange by everyone.  A retired
 * writer is unlinked from its instance; only its owner thread frees it
 * (when it next traces, or at thread exit), so the owner's TLS pointer
 * never dangles.  Instances carry a generation (never reused), and a
 * thread's cached writer is used only while its generation matches.
 */
#ifndef VP_SDK_WRITER_H
#define VP_SDK_WRITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk_intern.h"
#include "sdk_state.h"

#define VP_INPROC_CHUNK_SIZE 4088u /* a 4 KiB page with one chunk */
#define VP_STALL_MAX_MS 3000u   /* a stalled writer gives up after this */
/* A track event sequence starts a new incremental-state generation after
 * this many bytes of chunks, so that a ring buffer that overwrote the
 * start of a generation still holds a decodable tail of each sequence. */
#define VP_GEN_MAX_BYTES (32u * 1024u)

/* A trace writer: one sequence, one thread, one data source instance. */
struct vp_writer {
	atomic_uint lock;         /* the owner is inside (or, without
				   * membarrier, anyone holds it) */
	atomic_uint ctl;          /* another thread holds the writer */
	bool retired;
	struct vp_ds_instance *inst;
	uint64_t inst_gen;
	pid_t tid;
	uint16_t writer_id;
	uint16_t producer_id;     /* in process: keeps (producer, writer) unique */
	uint32_t sequence_id;     /* in process: trusted_packet_sequence_id */
	uint32_t target_buffer;
	uint32_t exhausted_policy; /* the instance's, at creation */

	/* The chunk being written (chunk == NULL: none). */
	uint8_t *chunk;
	uint8_t *wptr;
	uint8_t *cend;
	uint32_t packets;
	uint32_t flags;
	uint8_t *last_frag;       /* length prefix of its last fragment */
	struct vp_smb_chunk smb_chunk;
	uint32_t next_chunk_id;
	uint32_t smb_cursor;

	/* Drops (SMB full). */
	bool dropping;
	bool prev_dropped;        /* the next packet says previous_packet_dropped */
	bool lost_state;          /* incremental state must be emitted again */
	uint32_t drops_since_retry;
	uint64_t last_retry_ns;
	uint64_t dropped_packets;
	uint64_t stalls;          /* times it waited for a free chunk */

	/* Incremental state (track event, and the generic first-packet flag). */
	bool ever_written;        /* first_packet_on_sequence pending if false */
	bool state_valid;
	uint32_t clear_gen_seen;
	uint64_t state_since_ns;
	size_t gen_bytes;         /* chunk bytes taken in this generation */
	bool ds_first_pending;    /* generic data sources */
	struct vp_intern names, cats, arg_names, counters;

	/* Packets larger than the space left (fragmented through here). */
	uint8_t *scratch;
	size_t scratch_cap;

	char thread_name[16];
	struct vp_writer *inst_next;   /* the instance's list (vp_sdk.mu) */
	struct vp_writer *thread_next; /* the owner thread's generic list */
	uint8_t *own_chunk;            /* in process: this writer's chunk */
};

/* Creates a writer for inst owned by the calling thread, or NULL (instance
 * not started, no writer id).  Takes vp_sdk.mu. */
struct vp_writer *vp_writer_create(struct vp_ds_instance *inst);
/* Frees a writer no other thread references (retired or never linked). */
void vp_writer_free(struct vp_writer *w);

/* True when membarrier(2) private expedited is available: then the owner
 * takes its writer with plain stores and the rare other thread pays for
 * the ordering with a membarrier (see "Stop safety" above). */
extern bool vp_asym_fences;
void vp_writer_lock_slow(struct vp_writer *w);

/* The owner thread takes its writer around one packet. */
static inline void vp_writer_lock(struct vp_writer *w)
{
	if (VP_LIKELY(vp_asym_fences)) {
		atomic_store_explicit(&w->lock, 1, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		if (VP_LIKELY(atomic_load_explicit(&w->ctl,
						   memory_order_acquire) == 0))
			return;
	} else if (VP_LIKELY(atomic_exchange_explicit(&w->lock, 1,
						      memory_order_acquire) ==
			     0)) {
		return;
	}
	vp_writer_lock_slow(w);
}

static inline void vp_writer_unlock(struct vp_writer *w)
{
	atomic_store_explicit(&w->lock, 0, memory_order_release);
}

/* Checks for membarrier support (once). */
void vp_writer_fences_init(void);

/* Under the writer lock: makes sure a chunk with room is there.  Returns
 * false (and counts a dropped packet) if no chunk could be had. */
bool vp_writer_ensure_chunk(struct vp_writer *w, uint64_t now_ns);
/* Under the writer lock: appends one whole packet, fragmenting it across
 * chunks as needed.  Returns false if (part of) it was dropped. */
bool vp_writer_write_packet(struct vp_writer *w, const uint8_t *p, size_t len,
			    uint64_t now_ns);

/* Ends a packet composed in place in w's chunk: its bytes are at
 * [w->wptr + VP_FRAGMENT_LEN_SIZE, end). */
static inline void vp_writer_commit_direct(struct vp_writer *w, uint8_t *end)
{
	uint8_t *hdr = w->wptr;
	vp_write_redundant_varint(
		hdr, (uint32_t)(end - hdr - VP_FRAGMENT_LEN_SIZE));
	w->last_frag = hdr;
	w->wptr = end;
	w->packets++;
}
/* Makes sure w->scratch holds n bytes (the slow path; mallocs). */
uint8_t *vp_writer_scratch(struct vp_writer *w, size_t n);
/* From any thread: commits what w has written so far. */
void vp_writer_flush(struct vp_writer *w);
/* From a control thread, under vp_sdk.mu: retires every writer of inst
 * (their last chunks committed) and unlinks them. */
void vp_instance_retire_writers(struct vp_ds_instance *inst);
/* Flushes every writer of inst (vp_sdk.mu held). */
void vp_instance_flush_writers(struct vp_ds_instance *inst);

/* Sets the pthread key of the calling thread so its writers are released
 * at thread exit. */
void vp_thread_attach(void);
/* Frees the calling thread's writers that have been retired. */
void vp_thread_free_retired_writers(void);

#endif
