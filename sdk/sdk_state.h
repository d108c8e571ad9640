/*
 * sdk_state.h - what every file of libvperfetto stands on: the one global
 * state, data sources and their instances, the per-thread state, and the
 * calls into the system backend that the layers under it make.
 *
 * The files of sdk/, each .c with its header, bottom first.  Includes go
 * one way, up this list: a file includes the headers of files above it,
 * never of one below it.
 *   sdk_state        the global state (vp_g), the per-thread state,
 *                    clocks and hashes, the backend ops
 *   sdk_intern       the interning tables of a sequence
 *   sdk_writer       trace writers: chunks, fragments, drops, flush, the
 *                    writer locks, a thread's writers at its exit
 *                    (stands on sdk_state, sdk_intern)
 *   sdk_track_event  categories, TrackEventConfig, interning, emit
 *                    (on sdk_writer and below)
 *   sdk_data_source  generic data sources; the setup / start / stop /
 *                    clear life cycle of every instance
 *                    (on sdk_track_event and below)
 *   sdk_system       the producer thread (system backend, over IPC)
 *   sdk_in_process   the in-process backend (trace buffer + file)
 *                    (each on sdk_data_source and below)
 *   sdk_init.c       vp_init / vp_flush / vp_shutdown (on all of them)
 * The writers and data sources still tell the producer thread things
 * (a writer added, chunks to commit): through vp_backend_ops, which
 * sdk_system.c installs when it starts, not by calling it.
 *
 * Locks, outermost first: vp_sdk.mu (registry, instances, writer lists,
 * writer ids), then a writer's spin lock (vp_writer.lock, sdk_writer.h),
 * then the leaf locks (vp_sdk.commit_mu, vp_sdk.tb_mu).  The emit path
 * takes only the writer lock of its own writer (uncontended unless the
 * producer thread is flushing or retiring that writer) and, once per
 * chunk, a leaf lock.
 */
#ifndef VP_SDK_STATE_H
#define VP_SDK_STATE_H

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

struct vp_te_config; /* sdk_track_event.h */
struct vp_writer;    /* sdk_writer.h */
struct vp_system;    /* sdk_system.c */

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

/* A chunk queued for CommitData. */
struct vp_commit_entry {
	uint32_t page, chunk, target_buffer;
	uint8_t *begin; /* emulation: the bytes to send inline */
	size_t size;
};

/* What the writers and the data sources tell the system backend's
 * producer thread.  sdk_system.c installs its ops when it first starts
 * and never removes them (its functions check that it runs); before
 * that, and in a process that only ever traces in process, nobody is
 * told. */
struct vp_backend_ops {
	/* A writer was created: RegisterTraceWriter (and the reverse). */
	void (*writer_added)(uint16_t writer_id, uint32_t target_buffer);
	void (*writer_removed)(uint16_t writer_id);
	/* A data source was registered after connecting. */
	void (*data_source_added)(struct vp_data_source *ds);
	/* The commit queue grew to n entries (commit_mu held by the
	 * caller). */
	void (*commit_wakeup)(size_t n, bool urgent);
};

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
	_Atomic(const struct vp_backend_ops *) backend_ops;
};

extern struct vp_sdk vp_g;

/* The system backend's ops, or NULL while there is none. */
static inline const struct vp_backend_ops *vp_backend_ops(void)
{
	return atomic_load_explicit(&vp_g.backend_ops, memory_order_acquire);
}

static inline void vp_backend_writer_added(uint16_t writer_id,
					   uint32_t target_buffer)
{
	const struct vp_backend_ops *ops = vp_backend_ops();
	if (ops)
		ops->writer_added(writer_id, target_buffer);
}

static inline void vp_backend_writer_removed(uint16_t writer_id)
{
	const struct vp_backend_ops *ops = vp_backend_ops();
	if (ops)
		ops->writer_removed(writer_id);
}

static inline void vp_backend_data_source_added(struct vp_data_source *ds)
{
	const struct vp_backend_ops *ops = vp_backend_ops();
	if (ops)
		ops->data_source_added(ds);
}

static inline void vp_backend_commit_wakeup(size_t n, bool urgent)
{
	const struct vp_backend_ops *ops = vp_backend_ops();
	if (ops)
		ops->commit_wakeup(n, urgent);
}

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

pid_t vp_gettid(void);
/* (vp_now_ns, the clock of every packet, is public: vperfetto.h.) */
/* A 64-bit mixer (uuids of tracks and of the process). */
uint64_t vp_mix64(uint64_t x);

#endif
