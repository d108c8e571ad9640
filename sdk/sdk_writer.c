/*
 * sdk_writer.c - trace writers: packets into chunks, chunks to the backend.
 *
 * A writer owns at most one chunk at a time.  It gets one from the shared
 * memory buffer (system backend), from a private arena laid out the same
 * way (shared memory emulation over vsock/TCP: the producer thread sends
 * the bytes inline), or uses a chunk of its own (in process: a finished
 * chunk is copied into the trace buffer at once).  Each packet becomes one
 * fragment per chunk it touches, each preceded by its 4-byte redundant
 * varint length.
 *
 * No patching: a packet's bytes are complete before they are copied into a
 * chunk (track events are composed in place only when the whole packet is
 * known to fit; anything bigger is composed in the writer's scratch buffer
 * first), so every fragment length is final when it is written and a chunk
 * is released only with final lengths.  A packet spanning chunks sets
 * LAST_PACKET_CONTINUES on one chunk and FIRST_PACKET_CONTINUES on the
 * next; chunks_to_patch and NEEDS_PATCHING are never needed.
 *
 * SMB full, as the instance's buffer_exhausted_policy says.  DROP (the
 * default): the packet is dropped and counted, the writer skips one
 * chunk_id so the service sees the gap, retries now and then (every 32
 * drops or 1 ms), and once it has a chunk again its next packet carries
 * previous_packet_dropped and its incremental state is emitted again.
 * STALL_THEN_DROP / STALL_THEN_ABORT: the writer first has the producer
 * thread commit what is queued and waits (yields, then sleeps of growing
 * length, its writer lock released) for the service to free a chunk; after
 * VP_STALL_MAX_MS it drops as above (and does not stall again until it
 * has a chunk), or aborts.  A stop or retirement ends the wait.  The
 * producer thread itself never stalls (it is the one that commits).
 *
 * A thread's writers are released when it exits (their last chunks handed
 * on), through a pthread key set when it first traces; writers retired
 * meanwhile are freed by their thread (sdk_writer.h: "Stop safety").
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event_loop.h"
#include "sdk_writer.h"
#include "vp_alloc.h"
#include "vp_log.h"

#define VP_RETRY_EVERY_DROPS 32u
#define VP_RETRY_EVERY_NS 1000000ull

bool vp_asym_fences;

static void vp_writer_release_chunk(struct vp_writer *w);

#define MEMBARRIER_QUERY 0
#define MEMBARRIER_PRIVATE_EXPEDITED (1 << 3)
#define MEMBARRIER_REGISTER_PRIVATE_EXPEDITED (1 << 4)

static long membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

static void fences_check(void)
{
	long cmds = membarrier(MEMBARRIER_QUERY);
	if (cmds < 0 || !(cmds & MEMBARRIER_PRIVATE_EXPEDITED))
		return;
	if (membarrier(MEMBARRIER_REGISTER_PRIVATE_EXPEDITED) != 0)
		return;
	if (getenv("VPERFETTO_NO_MEMBARRIER"))
		return; /* tests: the spin lock fallback */
	vp_asym_fences = true;
}

/* Decided once, before any writer exists, and never changed. */
void vp_writer_fences_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, fences_check);
}

static void relax(unsigned spins)
{
	if (spins < 128)
		__builtin_ia32_pause();
	else
		sched_yield();
}

void vp_writer_lock_slow(struct vp_writer *w)
{
	/* Held by a control thread releasing one chunk: short. */
	for (unsigned spins = 0;; spins++) {
		if (vp_asym_fences) {
			atomic_store_explicit(&w->lock, 0,
					      memory_order_release);
			while (atomic_load_explicit(&w->ctl,
						    memory_order_acquire))
				relax(spins++);
			atomic_store_explicit(&w->lock, 1,
					      memory_order_relaxed);
			atomic_signal_fence(memory_order_seq_cst);
			if (atomic_load_explicit(&w->ctl,
						 memory_order_acquire) == 0)
				return;
		} else if (atomic_load_explicit(&w->lock,
						memory_order_relaxed) == 0 &&
			   atomic_exchange_explicit(&w->lock, 1,
						    memory_order_acquire) == 0) {
			return;
		}
		relax(spins);
	}
}

/* Any other thread (flush, stop, thread exit) takes the writer. */
static void vp_writer_ctl_lock(struct vp_writer *w)
{
	unsigned spins = 0;
	if (!vp_asym_fences) {
		vp_writer_lock_slow(w);
		return;
	}
	unsigned zero = 0;
	while (!atomic_compare_exchange_weak_explicit(
		&w->ctl, &zero, 1, memory_order_acquire, memory_order_relaxed)) {
		zero = 0;
		relax(spins++);
	}
	membarrier(MEMBARRIER_PRIVATE_EXPEDITED);
	while (atomic_load_explicit(&w->lock, memory_order_acquire))
		relax(spins++);
}

static void vp_writer_ctl_unlock(struct vp_writer *w)
{
	if (vp_asym_fences)
		atomic_store_explicit(&w->ctl, 0, memory_order_release);
	else
		atomic_store_explicit(&w->lock, 0, memory_order_release);
}

/* ------------------------------------------------------------ writer ids */

/* Writer ids (vp_sdk.mu held). */
static uint16_t vp_writer_id_alloc(void)
{
	for (uint32_t n = 0; n < VP_MAX_WRITER_ID; n++) {
		uint32_t id = vp_g.writer_id_next;
		vp_g.writer_id_next = id >= VP_MAX_WRITER_ID ? 1 : id + 1;
		if (id == VP_MAX_WRITER_ID)
			vp_g.writer_id_wraps++;
		if (id >= 1 && !vp_g.writer_id_used[id]) {
			vp_g.writer_id_used[id] = 1;
			return (uint16_t)id;
		}
	}
	return 0;
}

static void vp_writer_id_free(uint16_t id)
{
	if (id >= 1 && id <= VP_MAX_WRITER_ID)
		vp_g.writer_id_used[id] = 0;
}

/* ------------------------------------------------------- create / free */

struct vp_writer *vp_writer_create(struct vp_ds_instance *inst)
{
	struct vp_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->tid = vp_gettid();
	if (prctl(PR_GET_NAME, w->thread_name, 0, 0, 0) != 0)
		w->thread_name[0] = 0;
	w->thread_name[sizeof(w->thread_name) - 1] = 0;
	vp_intern_init(&w->names);
	vp_intern_init(&w->cats);
	vp_intern_init(&w->arg_names);
	vp_intern_init(&w->counters);
	w->ds_first_pending = true;

	pthread_mutex_lock(&vp_g.mu);
	int mode = atomic_load(&vp_g.mode);
	if (atomic_load(&inst->state) != VP_INST_STARTED ||
	    mode == VP_MODE_NONE)
		goto fail;
	if (mode == VP_MODE_INPROC) {
		w->own_chunk = malloc(VP_INPROC_CHUNK_SIZE);
		if (!w->own_chunk)
			goto fail;
	}
	w->writer_id = vp_writer_id_alloc();
	if (!w->writer_id)
		goto fail;
	w->producer_id = (uint16_t)(1 + vp_g.writer_id_wraps % 65535);
	w->sequence_id = ++vp_g.next_sequence_id;
	w->inst = inst;
	w->inst_gen = atomic_load(&inst->gen);
	w->target_buffer = inst->target_buffer;
	w->exhausted_policy = inst->exhausted_policy;
	w->clear_gen_seen = atomic_load(&inst->clear_gen);
	w->inst_next = inst->writers;
	inst->writers = w;
	if (mode != VP_MODE_INPROC)
		vp_backend_writer_added(w->writer_id, w->target_buffer);
	pthread_mutex_unlock(&vp_g.mu);
	return w;
fail:
	pthread_mutex_unlock(&vp_g.mu);
	vp_writer_free(w);
	return NULL;
}

void vp_writer_free(struct vp_writer *w)
{
	if (!w)
		return;
	vp_intern_free(&w->names);
	vp_intern_free(&w->cats);
	vp_intern_free(&w->arg_names);
	vp_intern_free(&w->counters);
	free(w->scratch);
	free(w->own_chunk);
	free(w);
}

uint8_t *vp_writer_scratch(struct vp_writer *w, size_t n)
{
	/* At least 1 KiB, so small packets do not grow it step by step. */
	if (VP_GROW(w->scratch, w->scratch_cap, n < 1024 ? 1024 : n) < 0)
		return NULL;
	return w->scratch;
}

/* -------------------------------------------------------------- chunks */

static bool writer_acquire_raw(struct vp_writer *w)
{
	int mode = atomic_load_explicit(&vp_g.mode, memory_order_acquire);

	if (mode == VP_MODE_INPROC) {
		if (!w->own_chunk)
			return false;
		w->chunk = w->own_chunk;
		w->cend = w->own_chunk + VP_INPROC_CHUNK_SIZE;
	} else if (mode == VP_MODE_SMB || mode == VP_MODE_EMULATED) {
		if (!vp_g.smb.base ||
		    !vp_smb_acquire_chunk_for_writing(
			    &vp_g.smb, vp_g.layout, w->writer_id,
			    w->next_chunk_id, &w->smb_cursor, &w->smb_chunk))
			return false;
		w->chunk = w->smb_chunk.begin;
		w->cend = w->smb_chunk.begin + w->smb_chunk.size;
	} else {
		return false;
	}
	struct vp_chunk_header h = {w->next_chunk_id, w->writer_id, 0};
	memcpy(w->chunk, &h, sizeof(h));
	w->next_chunk_id++;
	w->wptr = w->chunk + VP_SMB_CHUNK_HEADER_SIZE;
	w->packets = 0;
	w->last_frag = NULL;
	return true;
}

/* Asks the producer thread to commit what is queued, now. */
static void commit_now(void)
{
	if (atomic_load(&vp_g.mode) == VP_MODE_INPROC)
		return;
	pthread_mutex_lock(&vp_g.commit_mu);
	vp_backend_commit_wakeup(vp_g.commit_len, true);
	pthread_mutex_unlock(&vp_g.commit_mu);
}

/* True while w may keep waiting: not retired, its instance still the one
 * it was made for and still started. */
static bool writer_may_stall(const struct vp_writer *w)
{
	const struct vp_ds_instance *inst = w->inst;
	return !w->retired && inst &&
	       atomic_load(&inst->state) == VP_INST_STARTED &&
	       atomic_load(&inst->gen) == w->inst_gen;
}

/* The stall of BUFFER_EXHAUSTED_STALL_THEN_*: no chunk is free.  Makes sure
 * the completed chunks are committed, then waits, with the writer lock
 * released (w has no chunk, so a flush or stop on another thread has
 * nothing to wait for), until the service frees a chunk.  Gives up when
 * the writer is retired or its instance stops, or after VP_STALL_MAX_MS
 * (then STALL_THEN_ABORT aborts).  Returns true with a chunk. */
static bool writer_stall(struct vp_writer *w)
{
	uint64_t start = vp_loop_now_ms();
	unsigned delay_us = 20;

	w->stalls++;
	for (unsigned i = 0;; i++) {
		commit_now();
		vp_writer_unlock(w);
		if (i < 4) {
			sched_yield();
		} else {
			struct timespec ts = {0, (long)delay_us * 1000L};
			nanosleep(&ts, NULL);
			if (delay_us < 1000)
				delay_us *= 2;
		}
		vp_writer_lock(w);
		if (!writer_may_stall(w))
			return false;
		if (writer_acquire_raw(w))
			return true;
		if (vp_loop_now_ms() - start < VP_STALL_MAX_MS)
			continue;
		if (w->exhausted_policy == VP_EXHAUSTED_STALL_THEN_ABORT) {
			/* About to abort() as the policy asks: say why
			 * whatever the log level. */
			vp_log_fatal("writer %u (tid %d): no free chunk in "
				     "shared memory after %u ms "
				     "(BUFFER_EXHAUSTED_STALL_THEN_ABORT)",
				     w->writer_id, (int)w->tid,
				     VP_STALL_MAX_MS);
		}
		return false;
	}
}

/* Whether w stalls instead of dropping: its policy says so, it is not
 * dropping already (after a stall gave up it drops until a chunk is free
 * again), it is not the producer thread, and there is a service. */
static bool writer_wants_stall(const struct vp_writer *w)
{
	if (w->exhausted_policy == VP_EXHAUSTED_DROP || w->dropping)
		return false;
	if (vp_thread_state()->no_stall)
		return false;
	int mode = atomic_load(&vp_g.mode);
	return mode == VP_MODE_SMB || mode == VP_MODE_EMULATED;
}

/* w has just taken a chunk (flags: its VP_CHUNK_* so far).  After a drop,
 * nothing continues into it, its first packet says previous_packet_dropped
 * and the incremental state is emitted again. */
static void writer_took_chunk(struct vp_writer *w, unsigned flags)
{
	w->flags = flags;
	if (w->dropping) {
		w->dropping = false;
		w->prev_dropped = true;
		w->lost_state = true;
		w->flags &= ~VP_CHUNK_FIRST_PACKET_CONTINUES;
	}
	/* Long generations end (see VP_GEN_MAX_BYTES). */
	w->gen_bytes += (size_t)(w->cend - w->chunk);
	if (w->gen_bytes >= VP_GEN_MAX_BYTES)
		w->state_valid = false;
}

/* w found no free chunk: it drops packets until it gets one again (see
 * writer_took_chunk).  It skips a chunk_id so that the service sees the
 * gap, unless the chunk it handed back carries the drop marker. */
static void writer_start_dropping(struct vp_writer *w, uint64_t now_ns,
				  bool loss_marked)
{
	w->dropping = true;
	if (!loss_marked)
		w->next_chunk_id++;
	w->last_retry_ns = now_ns;
	w->drops_since_retry = 0;
	commit_now();
}

/* Gets a chunk when w has none: drops, stalls or enters / stays in drop
 * mode, as the buffer_exhausted_policy says (loss_marked: see
 * writer_start_dropping). */
static bool writer_acquire(struct vp_writer *w, uint64_t now_ns, unsigned flags,
			   bool loss_marked)
{
	if (w->dropping) {
		if (++w->drops_since_retry < VP_RETRY_EVERY_DROPS &&
		    now_ns - w->last_retry_ns < VP_RETRY_EVERY_NS)
			return false;
		w->drops_since_retry = 0;
		w->last_retry_ns = now_ns;
	}
	if (!writer_acquire_raw(w) &&
	    !(writer_wants_stall(w) && writer_stall(w))) {
		if (w->retired)
			return false; /* stopped while stalled */
		if (!w->dropping)
			writer_start_dropping(w, now_ns, loss_marked);
		return false;
	}
	writer_took_chunk(w, flags);
	return true;
}

/* A chunk handed back while the writer takes the next one. */
struct held_chunk {
	uint8_t *chunk, *wptr, *cend, *last_frag;
	uint32_t packets, flags;
	struct vp_smb_chunk smb_chunk;
};

static void held_swap(struct vp_writer *w, struct held_chunk *h)
{
	struct held_chunk t = {w->chunk, w->wptr, w->cend, w->last_frag,
			       w->packets, w->flags, w->smb_chunk};
	w->chunk = h->chunk;
	w->wptr = h->wptr;
	w->cend = h->cend;
	w->last_frag = h->last_frag;
	w->packets = h->packets;
	w->flags = h->flags;
	w->smb_chunk = h->smb_chunk;
	*h = t;
}

/* Hands the held chunk over to the service; w keeps its own. */
static void held_release(struct vp_writer *w, struct held_chunk *h)
{
	held_swap(w, h);
	vp_writer_release_chunk(w);
	held_swap(w, h);
}

/* Replaces w's chunk, which is full (`continues`: in the middle of a
 * packet, which goes on in the next chunk).  As Perfetto's writers do, the
 * next chunk is taken before the current one is handed back: if none is
 * free (and the policy does not stall), the current chunk's last fragment
 * gets the drop marker, so the service counts the loss even if this writer
 * never gets another chunk.  That fragment is lost with the rest. */
static bool writer_next_chunk(struct vp_writer *w, uint64_t now_ns,
			      unsigned flags, bool continues)
{
	struct held_chunk old;

	if (continues)
		w->flags |= VP_CHUNK_LAST_PACKET_CONTINUES;
	if (atomic_load(&vp_g.mode) == VP_MODE_INPROC) {
		/* One chunk of its own, never short. */
		vp_writer_release_chunk(w);
		return writer_acquire(w, now_ns, flags, false);
	}
	memset(&old, 0, sizeof(old));
	held_swap(w, &old); /* w has no chunk now */
	if (writer_acquire_raw(w)) {
		held_release(w, &old);
		writer_took_chunk(w, flags);
		return true;
	}
	if (writer_wants_stall(w) || old.packets == 0 || !old.last_frag) {
		/* Handed back first: a stall waits for the service, which may
		 * want this chunk before it frees any. */
		held_release(w, &old);
		return writer_acquire(w, now_ns, flags, false);
	}
	vp_write_redundant_varint(old.last_frag, VP_FRAGMENT_DROP_PACKET);
	old.flags &= ~VP_CHUNK_LAST_PACKET_CONTINUES;
	if (!continues)
		w->dropped_packets++; /* a whole packet went with it */
	held_release(w, &old);
	/* Dropping from here on, even if a chunk were free now: the service
	 * will report the loss, so the next packet must start the state
	 * anew (writer_took_chunk). */
	writer_start_dropping(w, now_ns, true);
	return false;
}

/* In process: a finished chunk goes into the trace buffer at once, with
 * the identity the service would give it. */
static void inproc_chunk_done(struct vp_writer *w, const uint8_t *chunk,
			      size_t size)
{
	struct vp_tb_sequence_meta meta = {
		.sequence_id = w->sequence_id,
		.uid = (int32_t)getuid(),
		.pid = (int32_t)vp_g.pid,
		.machine_id = 0,
	};
	pthread_mutex_lock(&vp_g.tb_mu);
	if (vp_g.tb)
		vp_trace_buffer_copy_chunk(vp_g.tb, w->producer_id, &meta,
					   chunk, size, true);
	pthread_mutex_unlock(&vp_g.tb_mu);
}

static void commit_queue_push(struct vp_writer *w)
{
	struct vp_commit_entry e = {
		.page = w->smb_chunk.page,
		.chunk = w->smb_chunk.chunk,
		.target_buffer = w->target_buffer,
		.begin = w->smb_chunk.begin,
		.size = w->smb_chunk.size,
	};
	pthread_mutex_lock(&vp_g.commit_mu);
	if (VP_GROW(vp_g.commit_q, vp_g.commit_cap, vp_g.commit_len + 1) < 0) {
		pthread_mutex_unlock(&vp_g.commit_mu);
		return; /* the service scrapes it, or it is lost */
	}
	vp_g.commit_q[vp_g.commit_len++] = e;
	size_t total = vp_g.smb.num_pages *
		       vp_smb_chunks_per_layout(vp_g.layout);
	vp_backend_commit_wakeup(vp_g.commit_len,
				 vp_g.commit_len * 2 > total);
	pthread_mutex_unlock(&vp_g.commit_mu);
}

/* Under the writer lock: finishes the current chunk and hands it on. */
static void vp_writer_release_chunk(struct vp_writer *w)
{
	if (!w->chunk)
		return;
	int mode = atomic_load(&vp_g.mode);
	if (mode == VP_MODE_INPROC) {
		struct vp_chunk_header h;
		memcpy(&h, w->chunk, sizeof(h));
		h.packets = vp_chunk_packets_word(w->packets, w->flags);
		memcpy(w->chunk, &h, sizeof(h));
		if (w->packets)
			inproc_chunk_done(w, w->chunk,
					  (size_t)(w->wptr - w->chunk));
	} else {
		vp_smb_release_chunk_as_complete(&vp_g.smb, &w->smb_chunk,
						 w->packets, w->flags);
		commit_queue_push(w);
	}
	w->chunk = NULL;
	w->packets = 0;
	w->flags = 0;
}

bool vp_writer_ensure_chunk(struct vp_writer *w, uint64_t now_ns)
{
	bool ok;

	if (w->chunk && w->packets < VP_CHUNK_MAX_PACKETS &&
	    w->cend - w->wptr >= (ptrdiff_t)(VP_FRAGMENT_LEN_SIZE + 16))
		return true;
	if (w->chunk)
		ok = writer_next_chunk(w, now_ns, 0, false);
	else
		ok = writer_acquire(w, now_ns, 0, false);
	if (!ok)
		w->dropped_packets++;
	return ok;
}

/* Appends a and then b as one packet. */
static bool writer_write_2(struct vp_writer *w, const uint8_t *a, size_t na,
			   const uint8_t *b, size_t nb, uint64_t now_ns)
{
	if (w->chunk && (w->packets >= VP_CHUNK_MAX_PACKETS ||
			 w->cend - w->wptr <= (ptrdiff_t)VP_FRAGMENT_LEN_SIZE)) {
		if (!writer_next_chunk(w, now_ns, 0, false)) {
			w->dropped_packets++;
			return false;
		}
	} else if (!w->chunk && !writer_acquire(w, now_ns, 0, false)) {
		w->dropped_packets++;
		return false;
	}
	for (;;) {
		size_t avail = (size_t)(w->cend - w->wptr) -
			       VP_FRAGMENT_LEN_SIZE;
		size_t left = na + nb;
		size_t n = left < avail ? left : avail;
		uint8_t *p = w->wptr + VP_FRAGMENT_LEN_SIZE;
		vp_write_redundant_varint(w->wptr, (uint32_t)n);
		w->last_frag = w->wptr;
		size_t from_a = n < na ? n : na;
		memcpy(p, a, from_a);
		a += from_a;
		na -= from_a;
		if (n > from_a) {
			memcpy(p + from_a, b, n - from_a);
			b += n - from_a;
			nb -= n - from_a;
		}
		w->wptr = p + n;
		w->packets++;
		if (na + nb == 0)
			return true;
		if (!writer_next_chunk(w, now_ns,
				       VP_CHUNK_FIRST_PACKET_CONTINUES, true)) {
			/* The rest is lost; the drop marker or the chunk_id
			 * gap tells. */
			w->dropped_packets++;
			return false;
		}
	}
}

bool vp_writer_write_packet(struct vp_writer *w, const uint8_t *p, size_t len,
			    uint64_t now_ns)
{
	/* Fields appended to the packet: TracePacket.previous_packet_dropped
	 * = 1 after a drop, and first_packet_on_sequence = true on the
	 * writer's first packet, as Perfetto's TraceWriter writes it.  (Track
	 * events set the latter in their own first packet.) */
	static const uint8_t dropped[] = {0xd0, 0x02, 0x01};
	static const uint8_t first[] = {0xb8, 0x05, 0x01};
	uint8_t extra[sizeof(dropped) + sizeof(first)];
	size_t n = 0;

	if (w->prev_dropped && w->chunk) {
		w->prev_dropped = false;
		memcpy(extra + n, dropped, sizeof(dropped));
		n += sizeof(dropped);
	}
	if (!w->ever_written) {
		memcpy(extra + n, first, sizeof(first));
		n += sizeof(first);
	}
	/* (If the writer recovers from a drop inside this call, the next
	 * packet carries the flag.) */
	if (!writer_write_2(w, p, len, n ? extra : NULL, n, now_ns))
		return false;
	w->ever_written = true;
	return true;
}

/* ---------------------------------------------------- control threads */

void vp_writer_flush(struct vp_writer *w)
{
	vp_writer_ctl_lock(w);
	if (!w->retired && w->chunk && w->packets > 0)
		vp_writer_release_chunk(w);
	vp_writer_ctl_unlock(w);
}

void vp_instance_flush_writers(struct vp_ds_instance *inst)
{
	for (struct vp_writer *w = inst->writers; w; w = w->inst_next)
		vp_writer_flush(w);
}

void vp_instance_retire_writers(struct vp_ds_instance *inst)
{
	struct vp_writer *w = inst->writers;
	inst->writers = NULL;
	while (w) {
		struct vp_writer *next = w->inst_next;
		uint16_t id = w->writer_id;
		int mode = atomic_load(&vp_g.mode);

		vp_writer_ctl_lock(w);
		if (w->chunk)
			vp_writer_release_chunk(w);
		w->retired = true;
		w->inst_next = NULL;
		vp_writer_ctl_unlock(w);
		/* From here on w belongs to its owner thread alone. */
		vp_writer_id_free(id);
		if (mode != VP_MODE_INPROC && mode != VP_MODE_NONE)
			vp_backend_writer_removed(id);
		w = next;
	}
}

/* -------------------------------------------------------- thread exit */

static pthread_key_t g_thread_key;
static pthread_once_t g_thread_key_once = PTHREAD_ONCE_INIT;

/* Releases one writer of an exiting thread: its last chunk goes on. */
static void release_thread_writer(struct vp_writer *w)
{
	pthread_mutex_lock(&vp_g.mu);
	if (!w->retired) {
		struct vp_ds_instance *inst = w->inst;
		for (struct vp_writer **pp = &inst->writers; *pp;
		     pp = &(*pp)->inst_next)
			if (*pp == w) {
				*pp = w->inst_next;
				break;
			}
		int mode = atomic_load(&vp_g.mode);
		vp_writer_ctl_lock(w);
		if (w->chunk)
			vp_writer_release_chunk(w);
		w->retired = true;
		vp_writer_ctl_unlock(w);
		vp_writer_id_free(w->writer_id);
		if (mode != VP_MODE_INPROC && mode != VP_MODE_NONE)
			vp_backend_writer_removed(w->writer_id);
	}
	pthread_mutex_unlock(&vp_g.mu);
	vp_writer_free(w);
}

static void thread_state_release(struct vp_thread_state *t)
{
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++) {
		if (t->te[i])
			release_thread_writer(t->te[i]);
		t->te[i] = NULL;
	}
	while (t->ds_writers) {
		struct vp_writer *w = t->ds_writers;
		t->ds_writers = w->thread_next;
		release_thread_writer(w);
	}
}

static void thread_exit(void *arg)
{
	thread_state_release(arg);
}

static void make_thread_key(void)
{
	pthread_key_create(&g_thread_key, thread_exit);
}

void vp_thread_attach(void)
{
	if (vp_tls.attached)
		return;
	pthread_once(&g_thread_key_once, make_thread_key);
	pthread_setspecific(g_thread_key, &vp_tls);
	vp_tls.attached = true;
}

void vp_thread_free_retired_writers(void)
{
	struct vp_thread_state *t = &vp_tls;
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++) {
		struct vp_writer *w = t->te[i];
		if (w && w->retired) {
			vp_writer_free(w);
			t->te[i] = NULL;
		}
	}
	for (struct vp_writer **pp = &t->ds_writers; *pp;) {
		struct vp_writer *w = *pp;
		if (w->retired) {
			*pp = w->thread_next;
			vp_writer_free(w);
		} else {
			pp = &w->thread_next;
		}
	}
}
