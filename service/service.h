/*
 * service.h - the internal state of vtraced, shared by its source files.
 *
 *   service.c        the service object, listeners, ids, logging, stats
 *   producer_port.c  ProducerPort: producers, their data sources, shared
 *                    memory, async commands, commits
 *   consumer_port.c  ConsumerPort: consumers, ReadBuffers streaming,
 *                    detach/attach, queries
 *   session.c        tracing sessions: config, buffers, data source
 *                    instances, start/flush/stop, timers, write_into_file
 *   session_read.c   reading a session out: service packets first, then the
 *                    buffers' packets with the trusted fields appended
 *   packets.c        the packets the service writes itself (trace config,
 *                    system info, clock snapshots, service events, stats)
 *
 * Everything runs on the service's loop thread.  Objects point at each other
 * (an instance at its producer, a session at its consumer); whoever goes away
 * first clears the pointers to it, so nothing dangles.
 */
#ifndef VP_SERVICE_INTERNAL_H
#define VP_SERVICE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "event_loop.h"
#include "ipc_host.h"
#include "pb_wire.h"
#include "shm_abi.h"
#include "trace_buffer.h"
#include "u64map.h"
#include "vp_error.h"
#include "vp_service.h"

#include "perfetto/config/config.pb-c.h"

/* Guardrails. */
#define SVC_MAX_SESSIONS 64u
#define SVC_MAX_BUFFERS_PER_SESSION 32u
#define SVC_MAX_BUFFER_IDS 4096u /* global buffer ids 1..4095 */
#define SVC_MAX_TOTAL_BUFFER_BYTES (1ull << 30)
#define SVC_MAX_DATA_SOURCES_PER_PRODUCER 1024u
#define SVC_MAX_QUEUED_CMDS 4096u
#define SVC_MAX_NAME 256u

/* Defaults, as traced has them. */
#define SVC_DEFAULT_FLUSH_TIMEOUT_MS 5000u
#define SVC_DEFAULT_STOP_TIMEOUT_MS 5000u
#define SVC_DEFAULT_SNAPSHOT_MS 10000u
#define SVC_DEFAULT_FILE_PERIOD_MS 5000u
#define SVC_MIN_FILE_PERIOD_MS 100u
#define SVC_MIN_PERIODIC_MS 100u /* flush / clear / snapshot periods */

/* The trusted_packet_sequence_id of the packets the service writes; producer
 * sequences are numbered from 2. */
#define SVC_SERVICE_SEQ_ID 1u

/* ReadBuffers: slice size, reply size, and how much may wait on the socket
 * before the reader pauses for the consumer to catch up. */
#define SVC_READ_SLICE_MAX (32u << 10)
#define SVC_READ_REPLY_TARGET (96u << 10)
#define SVC_READ_TX_HIGH (1u << 20)
#define SVC_READ_TX_LOW (256u << 10)

struct vp_service;
struct vp_session;
struct vp_consumer;

/* A growable array of pointers. */
struct vp_ptrvec {
	void **v;
	size_t n, cap;
};
void vp_ptrvec_push(struct vp_ptrvec *pv, void *p);
/* Removes p (keeping order); false if absent. */
bool vp_ptrvec_remove(struct vp_ptrvec *pv, const void *p);
void vp_ptrvec_free(struct vp_ptrvec *pv);

/* ---- producers --------------------------------------------------------- */

/* A data source a producer registered. */
struct vp_svc_ds {
	char *name;
	uint64_t descriptor_id;
	bool will_notify_on_start;
	bool will_notify_on_stop;
	bool handles_incremental_state_clear;
	bool no_flush;
	uint8_t *descriptor; /* the DataSourceDescriptor as sent */
	size_t descriptor_len;
};

/* An async command waiting for the producer's GetAsyncCommand. */
struct vp_async_cmd {
	uint8_t *data;
	size_t len;
	int fd; /* not owned (the SMB fd), or -1 */
};

struct vp_producer {
	struct vp_service *svc;
	struct vp_ipc_conn *conn;
	uint16_t id;
	char *name;
	char *sdk_version;
	char machine_name[64];
	pid_t pid;
	uid_t uid;
	bool remote;      /* vsock/TCP: no shared memory */
	uint32_t machine_id;
	bool initialized;
	/* Copy the chunks it has not committed at flush, at stop and when
	 * it goes (InitializeConnection's smb_scraping_mode, else on). */
	bool smb_scraping;
	/* Shared memory. */
	uint32_t smb_size;
	uint32_t smb_page_size;
	bool has_smb;
	struct vp_smb smb;
	int smb_fd;
	bool setup_sent; /* SetupTracing queued */
	/* The GetAsyncCommand stream. */
	bool async_pending;
	uint64_t async_req;
	struct vp_async_cmd *queue;
	size_t n_queue, cap_queue;
	/* Registered data sources. */
	struct vp_svc_ds *ds;
	size_t n_ds, cap_ds;
	/* writer_id -> trusted_packet_sequence_id, and -> target buffer. */
	struct u64map writer_seq;
	struct u64map writer_buf;
	/* Commit validation cache. */
	uint16_t last_ok_buffer;
};

/* ProducerPort (producer_port.c). */
/* Fills the ProducerPort description (methods, callbacks, ctx = s). */
void vp_producer_port_describe(struct vp_ipc_service *d,
			       struct vp_service *s);
struct vp_producer *vp_producer_by_id(struct vp_service *s, uint16_t id);
/* Commands to a producer's data sources. */
void vp_producer_setup_ds(struct vp_producer *p, uint64_t instance_id,
			  const uint8_t *cfg, size_t cfg_len);
void vp_producer_start_ds(struct vp_producer *p, uint64_t instance_id,
			  const uint8_t *cfg, size_t cfg_len);
void vp_producer_stop_ds(struct vp_producer *p, uint64_t instance_id);
void vp_producer_flush(struct vp_producer *p, const uint64_t *ids, size_t n,
		       uint64_t flush_id);
void vp_producer_clear_incremental(struct vp_producer *p,
				   const uint64_t *ids, size_t n);
const struct vp_svc_ds *vp_producer_find_ds(const struct vp_producer *p,
					    const char *name);
/* Copies into sess's buffers what p has written for them but not
 * committed (complete chunks whole, chunks being written up to their last
 * packet), leaving the chunks to the producer, as traced does after a flush
 * and at stop.  With `final`, a chunk of a writer whose buffer is not known
 * is counted as discarded (it can never be read). */
void vp_producer_scrape(struct vp_producer *p, struct vp_session *sess,
			bool final);

/* ---- sessions ---------------------------------------------------------- */

enum vp_ds_state {
	DS_CONFIGURED, /* SetupDataSource sent */
	DS_STARTING,   /* StartDataSource sent, waiting for the notification */
	DS_STARTED,
	DS_STOPPING,   /* StopDataSource sent, waiting for the notification */
	DS_STOPPED,
};

/* One data source of one producer, enabled for one session. */
struct vp_ds_instance {
	uint64_t id;
	struct vp_session *session;
	struct vp_producer *producer; /* NULL once the producer is gone */
	uint16_t producer_id;
	size_t cfg_index; /* in TraceConfig.data_sources */
	char *ds_name;
	uint8_t *config; /* DataSourceConfig with the service's fields set */
	size_t config_len;
	enum vp_ds_state state;
	bool will_notify_on_start;
	bool will_notify_on_stop;
	bool handles_incremental_state_clear;
	bool no_flush;
};

struct vp_svc_buffer {
	uint16_t id; /* global, what target_buffer names */
	struct vp_session *session;
	struct vp_trace_buffer *tb;
	size_t size;
};

typedef void (*vp_flush_done_fn)(struct vp_session *s, bool ok, void *ctx,
				 uint64_t arg);

/* A flush in flight: the producers that have not acked yet. */
struct vp_flush {
	uint64_t id;
	struct vp_session *session;
	uint16_t *pending;
	size_t n_pending;
	uint64_t timer;
	vp_flush_done_fn done;
	void *ctx;
	uint64_t arg;
};

enum vp_session_state {
	SESS_CONFIGURED, /* deferred_start: waiting for StartTracing */
	SESS_STARTED,
	SESS_DISABLING, /* final flush / stopping data sources */
	SESS_STOPPED,
};

struct vp_session {
	struct vp_service *svc;
	uint64_t id;
	struct vp_consumer *consumer; /* NULL while detached */
	char *detach_key;
	uid_t uid;
	Perfetto__Protos__TraceConfig *cfg;
	uint8_t *cfg_raw; /* the TraceConfig bytes, for the trace_config packet */
	size_t cfg_raw_len;
	enum vp_session_state state;
	struct vp_svc_buffer **bufs;
	size_t n_bufs;
	struct vp_ptrvec instances;
	struct vp_ptrvec flushes;
	/* Timers (0: none). */
	uint64_t t_duration, t_flush_period, t_clear, t_snapshot, t_file,
		t_stop, t_disable_flush;
	/* EnableTracing is answered when the session ends. */
	bool enable_pending;
	uint64_t enable_req;
	/* write_into_file */
	int file_fd;
	uint64_t file_bytes;
	char file_error[160]; /* why the output file could not be written */
	uint64_t max_file_size;
	/* Service packets waiting to be read, each framed as Trace.packet. */
	struct pb_buf pending;
	size_t pending_off; /* read up to here */
	uint32_t primary_clock; /* 0: not set (BOOTTIME) */
	bool service_events;
	bool clock_snapshots;
	bool all_started;
	bool read_completed_emitted;
	bool stop_requested_flush; /* disabling began with a flush */
	/* Stats. */
	uint64_t flushes_requested, flushes_succeeded, flushes_failed;
	int final_flush_outcome; /* TraceStats.FinalFlushOutcome */
	uint64_t invalid_packets;
	/* Shutdown bookkeeping. */
	bool free_when_stopped;
	/* TracePacket.trace_uuid and CloneSessionResponse's uuid. */
	uint64_t uuid[2];
	/* A snapshot made by CloneSession: stopped, read by its consumer. */
	bool cloned;
	int64_t start_realtime_ns; /* 0 until started */
	bool provenance_emitted;
	/* vp_session_free is running: flush callbacks run with ok false and
	 * must not act on the session. */
	bool freeing;
	/* write_into_file: flush the producers before each write, or flush
	 * every effective_flush_ms (0: as the config says), as traced's
	 * write_flush_mode has it. */
	bool flush_on_write;
	bool file_flush_pending;
	uint32_t effective_flush_ms;
	/* Flush events waiting in `pending`: [0] started, [1] flushed. */
	uint32_t flush_events[2];
};

int vp_session_create(struct vp_service *s, struct vp_consumer *c,
		      uint64_t request_id, const uint8_t *args, size_t len,
		      int file_fd, struct vp_error *err);
void vp_session_start(struct vp_session *sess);
/* Ends the session: optionally a flush first, then stop the data sources
 * and wait for them, then the end packets, the file drain and the
 * EnableTracing reply. */
void vp_session_disable(struct vp_session *sess, bool flush_first);
void vp_session_free(struct vp_session *sess);
/* CloneSession: a stopped copy of src (config, buffers as they are now)
 * owned by consumer c, which reads it as its session. */
int vp_session_clone(struct vp_session *src, struct vp_consumer *c,
		     struct vp_error *err);
/* Starts a flush of every data source of the session. */
void vp_session_flush(struct vp_session *sess, uint32_t timeout_ms,
		      vp_flush_done_fn done, void *ctx, uint64_t arg);
struct vp_session *vp_session_by_id(struct vp_service *s, uint64_t id);
bool vp_session_alive(struct vp_service *s, const struct vp_session *sess);

/* Hooks from the producer side. */
void vp_sessions_on_ds_registered(struct vp_service *s,
				  struct vp_producer *p,
				  const struct vp_svc_ds *ds);
void vp_sessions_on_ds_unregistered(struct vp_service *s,
				    struct vp_producer *p, const char *name);
void vp_sessions_on_producer_gone(struct vp_service *s,
				  struct vp_producer *p);
void vp_sessions_on_ds_started(struct vp_service *s, struct vp_producer *p,
			       uint64_t instance_id);
void vp_sessions_on_ds_stopped(struct vp_service *s, struct vp_producer *p,
			       uint64_t instance_id);
void vp_sessions_on_flush_ack(struct vp_service *s, struct vp_producer *p,
			      uint64_t flush_id);
/* True if p has an instance in the session owning buffer_id. */
bool vp_producer_may_write(struct vp_service *s, struct vp_producer *p,
			   uint16_t buffer_id);
struct vp_svc_buffer *vp_buffer_by_id(struct vp_service *s, uint16_t id);

/* ---- reading a session (session_read.c) --------------------------------- */

enum vp_reader_stage {
	RD_SERVICE_PACKETS,
	RD_BUFFERS,
	RD_TAIL,
	RD_DONE,
};

struct vp_session_reader {
	struct vp_session *session;
	enum vp_reader_stage stage;
	size_t buf_idx;
	bool buf_begun;
	uint64_t buf_bytes; /* read from the current buffer by this reader */
	bool with_stats;     /* trace_stats at the end */
	int tail_step;
	struct pb_buf pkt;   /* the current packet */
};

/* False if a producer packet does not parse at its top level or carries a
 * field only the service may write (see session_read.c). */
bool vp_producer_packet_valid(const uint8_t *p, size_t len);

void vp_session_reader_init(struct vp_session_reader *r,
			    struct vp_session *sess, bool with_stats);
void vp_session_reader_fini(struct vp_session_reader *r);
/* The next packet (a TracePacket, without the Trace framing) in r->pkt.
 * Returns 1, or 0 at the end. */
int vp_session_reader_next(struct vp_session_reader *r);
/* Call after the reader paused (the buffers may have changed). */
void vp_session_reader_resume(struct vp_session_reader *r);

/* ---- packets the service writes (packets.c) ----------------------------- */

/* Each builds one whole TracePacket, the service's trusted fields
 * included, into out (replacing its contents). */
void vp_pkt_trace_config(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_system_info(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_clock_snapshot(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_trace_uuid(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_trace_stats(struct vp_session *sess, struct pb_buf *out);
/* A synchronization marker (at the start and with each periodic clock
 * snapshot, as traced writes them). */
void vp_pkt_sync_marker(struct vp_session *sess, struct pb_buf *out);
/* TraceProvenance: the sequences each buffer holds (at the first read). */
void vp_pkt_trace_provenance(struct vp_session *sess, struct pb_buf *out);
/* TracingServiceEvent with `field` (TSE_*) set to true. */
void vp_pkt_service_event(struct vp_session *sess, uint32_t field,
			  struct pb_buf *out);
/* TraceStats of the session, as nested field `field` of b. */
void vp_write_trace_stats(struct vp_session *sess, struct pb_buf *b,
			  uint32_t field);
/* Queues a packet built above for the next read of the session. */
void vp_session_push_packet(struct vp_session *sess,
			    const struct pb_buf *pkt);

/* flush_started / all_data_sources_flushed events kept unread, each (traced
 * keeps the last 64 of each). */
#define SVC_MAX_FLUSH_EVENTS 64u

/* ---- consumers (consumer_port.c) ---------------------------------------- */

struct vp_read_op {
	bool active;
	uint64_t request_id;
	struct vp_session_reader rd;
	struct pb_buf reply;
	size_t reply_slices;
};

struct vp_consumer {
	struct vp_service *svc;
	struct vp_ipc_conn *conn;
	pid_t pid;
	uid_t uid;
	struct vp_session *session;
	bool observing;
	uint64_t observe_req;
	bool observe_all_started;
	bool observe_instances;
	bool clone_pending; /* CloneSession waits for its source's flush */
	struct vp_read_op read;
};

/* Fills the ConsumerPort description (methods, callbacks, ctx = s). */
void vp_consumer_port_describe(struct vp_ipc_service *d,
			       struct vp_service *s);
/* The session ended: answer EnableTracing. */
void vp_consumer_session_ended(struct vp_consumer *c, struct vp_session *s,
			       const char *error);
/* Every data source of the consumer's session started. */
void vp_consumer_all_started(struct vp_consumer *c);
/* The session is going away: stop a ReadBuffers reading it. */
void vp_consumer_abort_read(struct vp_consumer *c, struct vp_session *s);

/* ---- the service (service.c) -------------------------------------------- */

struct vp_machine {
	char key[128];
	uint32_t id;
};

struct vp_service {
	struct vp_loop *loop;
	uid_t uid;
	pid_t pid;
	struct vp_ipc_service producer_desc;
	struct vp_ipc_service consumer_desc;
	struct vp_ipc_host *producer_host;
	struct vp_ipc_host *consumer_host;
	struct vp_ipc_group *conn_group; /* limits of both hosts */
	struct vp_ptrvec producers;
	struct vp_ptrvec consumers;
	struct vp_ptrvec sessions;
	struct vp_svc_buffer *buffers[SVC_MAX_BUFFER_IDS];
	uint16_t next_buffer_id;
	uint64_t total_buffer_bytes;
	uint16_t next_producer_id;
	uint64_t next_session_id;
	uint64_t next_instance_id;
	uint64_t next_flush_id;
	uint32_t next_sequence_id;
	uint32_t next_machine_id;
	struct vp_machine *machines;
	size_t n_machines, cap_machines;
	uint8_t *scratch; /* VP_SMB_MAX_PAGE_SIZE: chunk copies */
	struct vp_service_stats stats;
	/* Shutdown. */
	bool shutting_down;
	void (*shutdown_done)(void *ctx);
	void *shutdown_ctx;
	uint64_t t_shutdown;
};

void vp_svc_log(struct vp_service *s, bool error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
uint32_t vp_svc_machine_id(struct vp_service *s, const char *key);
uint32_t vp_svc_new_sequence_id(struct vp_service *s);
/* Called when a session is freed: finishes a pending shutdown. */
void vp_svc_check_shutdown(struct vp_service *s);
/* Nanoseconds on a clock. */
uint64_t vp_svc_clock_ns(int clk);
char *vp_svc_strndup(const char *s, size_t max);

#endif
