/*
 * vperfetto.h - the vperfetto tracing SDK for C programs (libvperfetto).
 *
 * A program defines its categories, initializes the SDK once, and traces:
 *
 *     VP_CATEGORY(rendering, "rendering", "Frames and draws");
 *
 *     int main(void) {
 *         struct vp_init_args a = { .backend = VP_BACKEND_SYSTEM };
 *         vp_init(&a);
 *         TRACE_EVENT_BEGIN(rendering, "DrawFrame", VP_ARG_UINT("frame", 7));
 *         ...
 *         TRACE_EVENT_END(rendering);
 *         TRACE_COUNTER(rendering, "queue_depth", 3);
 *         vp_shutdown();
 *     }
 *
 * Categories are off until a tracing session enables them through the
 * "track_event" data source's TrackEventConfig (enabled_categories /
 * disabled_categories, globs), with Perfetto's precedence: an exact name
 * in enabled, then an exact name in disabled, then a glob in enabled, then
 * a glob in disabled; a category nothing matches stays off (as in
 * Perfetto's C SDK).  A disabled event costs one load and one branch: the
 * macros test the category's `enabled` word before evaluating any
 * argument.  Tracing from signal handlers is not supported.
 *
 * Backends:
 *   VP_BACKEND_SYSTEM      connect to the tracing service (vtraced or
 *                          Perfetto's traced) on the producer socket
 *                          (PERFETTO_PRODUCER_SOCK_NAME or the default).
 *                          Writers write into shared memory; over vsock /
 *                          TCP chunks travel inline.  If the service is not
 *                          there yet the SDK keeps retrying in the
 *                          background; events are dropped meanwhile.
 *   VP_BACKEND_IN_PROCESS  no service: tracing starts at vp_init() with the
 *                          given categories and the trace file is written
 *                          at vp_shutdown() (or exit).
 *
 * Each thread writes through its own writer (one sequence per thread and
 * session), so tracing takes no lock on the fast path.  Names,
 * categories and annotation names are interned per sequence; incremental
 * state is cleared when the service asks and every clear_period_ms.  Each
 * sequence describes its process and thread tracks.  Everything buffered is
 * flushed on stop, on vp_flush() and at exit.
 *
 * Strings passed as event and annotation names must stay valid for the
 * life of the program (string literals): they are interned by address.
 * String annotation values are copied.
 */
#ifndef VPERFETTO_H
#define VPERFETTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ init */

enum vp_backend {
	VP_BACKEND_SYSTEM = 1,
	VP_BACKEND_IN_PROCESS = 2,
};

struct vp_init_args {
	enum vp_backend backend;
	/* Producer name seen by the service; default: the program name. */
	const char *producer_name;
	/* System backend: service address; default: the producer socket name
	 * (env or Perfetto's default).  "vsock://CID:PORT" and "host:port"
	 * work too (no shared memory). */
	const char *producer_socket;
	/* System backend: shared memory size and page size hints (KiB); 0 for
	 * the defaults (256 KiB, 4 KiB pages). */
	uint32_t shmem_size_kb;
	uint32_t shmem_page_size_kb;
	/* In-process backend: where the trace goes, the buffer (KiB, default
	 * 4096, ring buffer), and which categories are on (comma-separated
	 * globs, "-glob" to disable; NULL or "" means "*"). */
	const char *output_path;
	uint32_t buffer_size_kb;
	const char *categories;
	/* In-process backend: clear incremental state (re-emit interned
	 * names and track descriptors) every this many ms; 0: never.  (The
	 * system backend clears when the service asks, per the session's
	 * incremental_state_config.)  Added in 0.1; zero-initialized by
	 * designated initializers, so older callers are unaffected. */
	uint32_t clear_period_ms;
};

/* Starts the SDK.  Returns 0, or -1 with a message logged on stderr (bad
 * arguments, in-process output not writable), which shows when
 * VPERFETTO_LOG asks.  A system backend that cannot reach the service is
 * not an error: it keeps trying. */
int vp_init(const struct vp_init_args *args);
/* Flushes every writer (and, in process, writes the trace file). */
void vp_flush(void);
/* Flushes, tells the service we stop, and releases everything; after this
 * the macros are no-ops.  Called at exit if the program does not. */
void vp_shutdown(void);
/* True once connected to a service (system backend) or started (in
 * process). */
bool vp_is_connected(void);

/* ------------------------------------------------------------ categories */

struct vp_category {
	/* Bit i set: instance slot i of the track_event data source has this
	 * category enabled.  Read by the macros; written by the SDK. */
	volatile uint32_t enabled;
	const char *name;
	const char *description;
	/* Filled by the SDK at registration. */
	uint32_t index;
	struct vp_category *next;
};

void vp_category_register(struct vp_category *cat);

/* Defines category `id` (a C identifier) with its name and description,
 * registered before main(). */
#define VP_CATEGORY(id, name_str, desc_str)                                  \
	struct vp_category vp_category_##id = {0, (name_str), (desc_str), 0,  \
					       0};                            \
	__attribute__((constructor)) static void vp_category_ctor_##id(void)  \
	{                                                                     \
		vp_category_register(&vp_category_##id);                      \
	}                                                                     \
	struct vp_category vp_category_##id

/* Declares a category defined in another file. */
#define VP_CATEGORY_EXTERN(id) extern struct vp_category vp_category_##id

/* The one load of the disabled path: relaxed atomic (a plain load on
 * every target), so race detectors see what it is. */
#define VP__CAT_ON(id) (__atomic_load_n(&vp_category_##id.enabled,           \
					__ATOMIC_RELAXED) != 0)

#define VP_CATEGORY_ENABLED(id) VP__CAT_ON(id)

/* ----------------------------------------------------------- annotations */

enum vp_arg_type {
	VP_ARG_TYPE_UINT = 1,
	VP_ARG_TYPE_INT,
	VP_ARG_TYPE_DOUBLE,
	VP_ARG_TYPE_STRING,
	VP_ARG_TYPE_BOOL,
};

struct vp_arg {
	const char *name; /* static string: interned by address */
	enum vp_arg_type type;
	union {
		uint64_t u;
		int64_t i;
		double d;
		const char *s; /* copied */
		bool b;
	} v;
};

#define VP_ARG_UINT(n, x)                                                   \
	((struct vp_arg){.name = (n), .type = VP_ARG_TYPE_UINT,             \
			 .v = {.u = (uint64_t)(x)}})
#define VP_ARG_INT(n, x)                                                    \
	((struct vp_arg){.name = (n), .type = VP_ARG_TYPE_INT,              \
			 .v = {.i = (int64_t)(x)}})
#define VP_ARG_DOUBLE(n, x)                                                 \
	((struct vp_arg){.name = (n), .type = VP_ARG_TYPE_DOUBLE,           \
			 .v = {.d = (double)(x)}})
#define VP_ARG_STRING(n, x)                                                 \
	((struct vp_arg){.name = (n), .type = VP_ARG_TYPE_STRING,           \
			 .v = {.s = (x)}})
#define VP_ARG_BOOL(n, x)                                                   \
	((struct vp_arg){.name = (n), .type = VP_ARG_TYPE_BOOL,             \
			 .v = {.b = (bool)(x)}})

/* ---------------------------------------------------------- track events */

enum vp_event_type {
	VP_EVENT_SLICE_BEGIN = 1,
	VP_EVENT_SLICE_END = 2,
	VP_EVENT_INSTANT = 3,
	VP_EVENT_COUNTER = 4,
};

/* The slow path behind the macros.  ts_ns 0 means "now" (CLOCK_BOOTTIME).
 * name may be NULL for SLICE_END. */
void vp_track_event_emit(struct vp_category *cat, enum vp_event_type type,
			 const char *name, uint64_t ts_ns,
			 const struct vp_arg *args, size_t n_args);
/* Counters: a counter track per (category, name) under the process. */
void vp_track_event_counter(struct vp_category *cat, const char *name,
			    uint64_t ts_ns, int64_t ivalue, double dvalue,
			    bool is_double);

/* Internal: an argument array with a leading placeholder, so that an empty
 * argument list still compiles ({0} then nothing). */
#define VP__ARGS(...) (&((const struct vp_arg[]){{0}, ##__VA_ARGS__})[1])
#define VP__NARGS(...)                                                      \
	(sizeof((const struct vp_arg[]){{0}, ##__VA_ARGS__}) /              \
		 sizeof(struct vp_arg) -                                    \
	 1)

#define VP__EVENT(cat, type, name, ts, ...)                                 \
	do {                                                                \
		if (__builtin_expect(VP__CAT_ON(cat), 0))    \
			vp_track_event_emit(&vp_category_##cat, (type),     \
					    (name), (ts),                   \
					    VP__ARGS(__VA_ARGS__),          \
					    VP__NARGS(__VA_ARGS__));        \
	} while (0)

#define TRACE_EVENT_BEGIN(cat, name, ...)                                   \
	VP__EVENT(cat, VP_EVENT_SLICE_BEGIN, name, 0, ##__VA_ARGS__)
#define TRACE_EVENT_END(cat, ...)                                           \
	VP__EVENT(cat, VP_EVENT_SLICE_END, NULL, 0, ##__VA_ARGS__)
#define TRACE_EVENT_INSTANT(cat, name, ...)                                 \
	VP__EVENT(cat, VP_EVENT_INSTANT, name, 0, ##__VA_ARGS__)
/* The same with an explicit CLOCK_BOOTTIME timestamp in ns. */
#define TRACE_EVENT_BEGIN_AT(cat, name, ts, ...)                            \
	VP__EVENT(cat, VP_EVENT_SLICE_BEGIN, name, ts, ##__VA_ARGS__)
#define TRACE_EVENT_END_AT(cat, ts, ...)                                    \
	VP__EVENT(cat, VP_EVENT_SLICE_END, NULL, ts, ##__VA_ARGS__)
#define TRACE_EVENT_INSTANT_AT(cat, name, ts, ...)                          \
	VP__EVENT(cat, VP_EVENT_INSTANT, name, ts, ##__VA_ARGS__)

#define TRACE_COUNTER(cat, name, value)                                     \
	do {                                                                \
		if (__builtin_expect(VP__CAT_ON(cat), 0))    \
			vp_track_event_counter(&vp_category_##cat, (name),  \
					       0, (int64_t)(value), 0,      \
					       false);                      \
	} while (0)
#define TRACE_COUNTER_DOUBLE(cat, name, value)                              \
	do {                                                                \
		if (__builtin_expect(VP__CAT_ON(cat), 0))    \
			vp_track_event_counter(&vp_category_##cat, (name),  \
					       0, 0, (double)(value), true);\
	} while (0)

/* --------------------------------------------------------- data sources */

/* A generic data source: the host clock producer, the guest agent and the
 * probes are built on it.  Callbacks run on the SDK's producer thread (in
 * process: on the thread that calls vp_init / vp_shutdown).  `config` is the
 * serialized DataSourceConfig the session gave this instance. */
struct vp_data_source;
struct vp_ds_instance;

struct vp_data_source_desc {
	const char *name; /* e.g. "vperfetto.clock_sync" */
	bool handles_incremental_state_clear;
	void *ctx;
	void (*on_setup)(void *ctx, struct vp_ds_instance *inst,
			 const uint8_t *config, size_t len);
	void (*on_start)(void *ctx, struct vp_ds_instance *inst,
			 const uint8_t *config, size_t len);
	/* After on_stop returns the instance's writers are flushed and the
	 * instance is gone; do not use it from other threads after that. */
	void (*on_stop)(void *ctx, struct vp_ds_instance *inst);
	void (*on_flush)(void *ctx, struct vp_ds_instance *inst);
	void (*on_clear_incremental_state)(void *ctx,
					   struct vp_ds_instance *inst);
};

/* Registers a data source with the service (now, or once connected). Call
 * after vp_init().  Returns NULL with a message on stderr on error. */
struct vp_data_source *vp_data_source_register(
	const struct vp_data_source_desc *desc);

/* Writes one TracePacket (its serialized fields, without the outer
 * Trace.packet tag) through the calling thread's writer for this instance.
 * The service adds the trusted fields.  Thread-safe.  Returns 0, or -1 if
 * the instance is stopped or the packet was dropped (no buffer space). */
int vp_ds_write_packet(struct vp_ds_instance *inst, const void *packet,
		       size_t len);
/* Commits what the calling thread has written for this instance. */
void vp_ds_flush(struct vp_ds_instance *inst);
/* The id the service gave this instance, and the session's buffer. */
uint64_t vp_ds_instance_id(const struct vp_ds_instance *inst);
/* The trusted_packet_sequence_id of the calling thread's writer is not
 * known to the producer (the service assigns it); packets that need
 * per-sequence state should set SEQ_INCREMENTAL_STATE_CLEARED on their
 * first packet, which this tells: true once per thread and instance (and
 * again after incremental state is cleared). */
bool vp_ds_first_packet_on_sequence(struct vp_ds_instance *inst);

/* Calls fn for every running instance of ds (any thread). */
typedef void (*vp_ds_trace_fn)(struct vp_ds_instance *inst, void *ctx);
void vp_data_source_trace(struct vp_data_source *ds, vp_ds_trace_fn fn,
			  void *ctx);

/* Current time on CLOCK_BOOTTIME in ns, the SDK's timestamp clock. */
uint64_t vp_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif
