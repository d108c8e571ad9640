/*
 * sdk_internal.h - what the files of libvperfetto share: the SDK state,
 * data source instances, trace writers and the per-thread state.
 *
 * Structure:
 *   sdk_init.c         vp_init / vp_flush / vp_shutdown, the global state,
 *                      per-thread state and its destructor
 *   sdk_writer.c       trace writers: chunks, fragments, drops, flush
 *   sdk_track_event.c  categories, TrackEventConfig, interning, emit
 *   sdk_data_source.c  generic data sources and their instances
 *   sdk_system.c       the producer thread (system backend, over IPC)
 *   sdk_in_process.c   the in-process backend (trace buffer + file)
 *
 * Locks, outermost first: vp_sdk.mu (registry, instances, writer lists,
 * writer ids), then a writer's spin lock (vp_writer.lock), then the leaf
 * locks (vp_sdk.commit_mu, vp_sdk.tb_mu).  The emit path takes only the
 * writer lock of its own writer (uncontended unless the producer thread is
 * flushing or retiring that writer) and, once per chunk, a leaf lock.
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
#ifndef VP_SDK_INTERNAL_H
#define VP_SDK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vperfetto/vperfetto.h"
#include "shm_abi.h"
#include "trace_buffer.h"
#include "pb_wire.h"
#include "perfetto_fields.h"

#define VP_TE_MAX_INSTANCES 8   /* bits of vp_category.enabled in use */
#define VP_MAX_WRITER_ID 1023u  /* writer ids are 1..1023 per producer */
#define VP_MAX_ARGS 32          /* annotations per event beyond are ignored */
#define VP_INPROC_CHUNK_SIZE 4088u /* a 4 KiB page with one chunk */
#define VP_COMMIT_BATCH 4u      /* chunks that make the producer commit */
#define VP_COMMIT_DELAY_MS 20u  /* the longest a lone chunk waits */
#define VP_STALL_MAX_MS 3000u   /* a stalled writer gives up after this */
/* A track event sequence starts a new incremental-state generation after
 * this many bytes of chunks, so that a ring buffer that overwrote the
 * start of a generation still holds a decodable tail of each sequence. */
#define VP_GEN_MAX_BYTES (32u * 1024u)

#define VP_TLS __attribute__((tls_model("initial-exec"))) __thread
#define VP_LIKELY(x) __builtin_expect(!!(x), 1)
#define VP_UNLIKELY(x) __builtin_expect(!!(x), 0)

enum vp_mode {
	VP_MODE_NONE = 0,
	VP_MODE_SMB,      /* system backend, shared memory from the service */
	VP_MODE_EMULATED, /* system backend over vsock/TCP: chunks inline */
	VP_MODE_INPROC,   /* in-process backend: chunks into a trace buffer */
};

/* DataSourceConfig.buffer_exhausted_policy: what a writer does when no
 * chunk of shared memory is free. */
enum vp_exhausted_policy {
	/* drop and count (the default) */
	VP_EXHAUSTED_DROP = BUFFER_EXHAUSTED_DROP,
	/* wait, then abort() */
	VP_EXHAUSTED_STALL_THEN_ABORT = BUFFER_EXHAUSTED_STALL_THEN_ABORT,
	/* wait, then drop */
	VP_EXHAUSTED_STALL_THEN_DROP = BUFFER_EXHAUSTED_STALL_THEN_DROP,
};

enum vp_inst_state {
	VP_INST_FREE = 0,
	VP_INST_SETUP,
	VP_INST_STARTED,
	VP_INST_STOPPING,
};

/* A string table keyed by address (names, categories, annotation names,
 * counter tracks).  Cleared in O(1) by bumping gen. */
struct vp_intern_ent {
	const void *key;
	const void *key2;
	uint64_t val;
	uint32_t gen;
};

struct vp_intern {
	struct vp_intern_ent *ents;
	uint32_t mask; /* capacity - 1 */
	uint32_t count;
	uint32_t gen;
	uint64_t next_iid;
};

struct vp_te_config;
struct vp_writer;

/* One instance of a data source in one tracing session.  For track_event,
 * one of VP_TE_MAX_INSTANCES fixed slots. */
struct vp_ds_instance {
	struct vp_data_source *ds;
	uint64_t id;             /* the service's instance id */
	uint32_t target_buffer;
	uint32_t exhausted_policy; /* enum vp_exhausted_policy */
	_Atomic uint32_t state;  /* enum vp_inst_state */
	_Atomic uint64_t gen;    /* a new value at every setup; never reused */
	_Atomic uint32_t clear_gen; /* bumped to clear incremental state */
	uint64_t clear_period_ns;   /* in process: periodic clears (0: none) */
	int slot;                /* track_event slot, -1 for the others */
	uint8_t *config;         /* serialized DataSourceConfig */
	size_t config_len;
	struct vp_te_config *te; /* track_event: parsed TrackEventConfig */
	struct vp_writer *writers; /* under vp_sdk.mu */
	struct vp_ds_instance *next; /* the data source's pool */
};

struct vp_data_source {
	struct vp_data_source_desc desc; /* name is a copy */
	bool is_track_event;
	bool registered;          /* with the current service connection */
	struct vp_ds_instance *instances;
	struct vp_data_source *next;
};

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

/* A chunk queued for CommitData. */
struct vp_commit_entry {
	uint32_t page, chunk, target_buffer;
	uint8_t *begin; /* emulation: the bytes to send inline */
	size_t size;
};

struct vp_te_config {
	char **enabled;
	size_t n_enabled, cap_enabled;
	char **disabled;
	size_t n_disabled, cap_disabled;
};

struct vp_system;

struct vp_sdk {
	pthread_mutex_t mu;
	bool initialized;
	enum vp_backend backend;
	_Atomic int mode;        /* enum vp_mode: where chunks come from */
	atomic_bool connected;
	pid_t pid;
	char process_name[64];
	uint64_t process_uuid;
	char *producer_name;

	/* Data sources, track_event first. */
	struct vp_data_source track_event_ds;
	struct vp_ds_instance te_slots[VP_TE_MAX_INSTANCES];
	struct vp_data_source *sources;

	/* Writer ids 1..1023, handed out round robin. */
	uint8_t writer_id_used[VP_MAX_WRITER_ID + 1];
	uint32_t writer_id_next;
	uint32_t writer_id_wraps;
	uint32_t next_sequence_id;

	/* Shared memory (SMB) or the private arena of emulation mode. */
	struct vp_smb smb;
	uint8_t *arena;          /* emulation: private memory under smb */
	enum vp_page_layout layout;

	/* Chunks waiting for CommitData (system backend). */
	pthread_mutex_t commit_mu;
	struct vp_commit_entry *commit_q;
	size_t commit_len, commit_cap;
	bool commit_wakeup_posted;

	/* In process. */
	pthread_mutex_t tb_mu;
	struct vp_trace_buffer *tb;
	char *output_path;
	bool file_written;
	uint32_t clear_period_ms;

	struct vp_system *sys;
};

extern struct vp_sdk vp_g;

/* ---- sdk_init.c ---- */
pid_t vp_gettid(void);
/* Sets the pthread key of the calling thread so its writers are released
 * at thread exit. */
void vp_thread_attach(void);
/* Per-thread state. */
struct vp_thread_state {
	struct vp_writer *te[VP_TE_MAX_INSTANCES];
	struct vp_writer *ds_writers;
	bool attached;
	bool no_stall; /* the producer thread: must never wait for chunks */
};
extern VP_TLS struct vp_thread_state vp_tls;
static inline struct vp_thread_state *vp_thread_state(void)
{
	return &vp_tls;
}
/* A new, never reused, instance generation. */
uint64_t vp_next_gen(void);

/* ---- sdk_writer.c ---- */
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

/* Any other thread (flush, stop, thread exit) takes the writer. */
void vp_writer_ctl_lock(struct vp_writer *w);
void vp_writer_ctl_unlock(struct vp_writer *w);
/* Checks for membarrier support (once). */
void vp_writer_fences_init(void);

/* Under the writer lock: makes sure a chunk with room is there.  Returns
 * false (and counts a dropped packet) if no chunk could be had. */
bool vp_writer_ensure_chunk(struct vp_writer *w, uint64_t now_ns);
/* Under the writer lock: appends one whole packet, fragmenting it across
 * chunks as needed.  Returns false if (part of) it was dropped. */
bool vp_writer_write_packet(struct vp_writer *w, const uint8_t *p, size_t len,
			    uint64_t now_ns);
/* Under the writer lock: finishes the current chunk and hands it on. */
void vp_writer_release_chunk(struct vp_writer *w);

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
/* Writer ids (vp_sdk.mu held). */
uint16_t vp_writer_id_alloc(void);
void vp_writer_id_free(uint16_t id);

/* ---- sdk_track_event.c ---- */
void vp_te_init_slots(void);
/* Parses a TrackEventConfig / an in-process category list. */
struct vp_te_config *vp_te_config_from_ds_config(const uint8_t *cfg,
						  size_t len);
struct vp_te_config *vp_te_config_from_list(const char *list);
void vp_te_config_free(struct vp_te_config *c);
bool vp_te_config_enables(const struct vp_te_config *c, const char *name);
/* Sets / clears the slot's bit in every category (vp_sdk.mu held). */
void vp_te_apply_slot(int slot, bool on);
/* The registered categories (a list through ->next). */
struct vp_category *vp_te_categories(void);
int vp_te_slot_alloc(void);
/* Resets the intern tables of a writer. */
void vp_intern_init(struct vp_intern *t);
void vp_intern_free(struct vp_intern *t);
uint64_t vp_mix64(uint64_t x);

/* ---- sdk_data_source.c ---- */
/* An instance starts / stops (any backend; vp_sdk.mu NOT held). */
struct vp_ds_instance *vp_instance_setup(struct vp_data_source *ds,
					 uint64_t id, const uint8_t *cfg,
					 size_t len);
void vp_instance_start(struct vp_ds_instance *inst);
void vp_instance_stop(struct vp_ds_instance *inst);
void vp_instance_clear_incremental_state(struct vp_ds_instance *inst);
struct vp_data_source *vp_data_source_find(const char *name);
struct vp_ds_instance *vp_instance_find(uint64_t id);
void vp_stop_all_instances(void);
void vp_flush_all_writers(void);
void vp_data_sources_free(void);
/* The target_buffer of a serialized DataSourceConfig. */
uint32_t vp_ds_config_target_buffer(const uint8_t *cfg, size_t len);
/* Its buffer_exhausted_policy (VP_EXHAUSTED_DROP when unset or unknown). */
uint32_t vp_ds_config_exhausted_policy(const uint8_t *cfg, size_t len);

/* ---- sdk_system.c ---- */
int vp_system_start(const struct vp_init_args *args);
void vp_system_flush(void);
void vp_system_stop(void);
/* A writer was created: RegisterTraceWriter (and the reverse). */
void vp_system_writer_added(uint16_t writer_id, uint32_t target_buffer);
void vp_system_writer_removed(uint16_t writer_id);
/* A data source was registered after connecting. */
void vp_system_data_source_added(struct vp_data_source *ds);
/* The commit queue grew to n entries (commit_mu held by the caller). */
void vp_system_commit_wakeup(size_t n, bool urgent);

/* ---- sdk_in_process.c ---- */
int vp_inproc_start(const struct vp_init_args *args);
void vp_inproc_chunk_done(struct vp_writer *w, const uint8_t *chunk,
			  size_t size);
int vp_inproc_write_file(void);
void vp_inproc_stop(void);

#endif
