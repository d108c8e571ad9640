/*
 * svc_state.h - what every file of vtraced stands on: the service's
 * objects (the service, its producers, buffers, sessions and data source
 * instances), its limits, and the helpers every file uses (logging, ids,
 * clocks).
 *
 * The files of service/, each .c with its header, bottom first.  Includes
 * go one way, up this list: a file includes the headers of files above
 * it, never of one below it.
 *   trace_filter     TraceConfig.trace_filter: the bytecode's table and
 *                    the filter a session's packets go through (on wire
 *                    alone)
 *   svc_state        the objects above, ids, logging, statistics
 *   packets          the packets the service writes itself (trace config,
 *                    system info, clock snapshots, service events, stats)
 *   session_read     reading a session out: service packets first, then
 *                    the buffers' packets with the trusted fields appended
 *                    (on packets)
 *   triggers         TraceConfig.trigger_config: its checks, which trigger
 *                    of a session a producer's activation matches, the
 *                    24-hour history, the triggers a session received
 *                    (on session_read)
 *   producer         a producer as the service drives it: the commands
 *                    to its data sources, its uncommitted chunks
 *   consumer         a consumer as the service answers it: the end of its
 *                    session, its events, ReadBuffers streaming
 *                    (on session_read)
 *   session          tracing sessions: config, buffers, data source
 *                    instances, start/flush/stop, timers, write_into_file,
 *                    what a trigger does to them
 *                    (on triggers, producer, consumer and below)
 *   producer_port    ProducerPort: producer connections and their calls
 *                    (data sources, shared memory, commits)
 *   consumer_port    ConsumerPort: consumer connections and their calls
 *                    (sessions, reads, detach/attach, queries)
 *                    (each on session and below)
 *   service.c        the service object: the IPC hosts, listening, the
 *                    clean shutdown (vp_service.h, on all of them)
 *
 * Everything runs on the service's loop thread.  Objects point at each other
 * (an instance at its producer, a session at its consumer); whoever goes away
 * first clears the pointers to it, so nothing dangles.
 */
#ifndef VP_SVC_STATE_H
#define VP_SVC_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "event_loop.h"
#include "ipc_host.h"
#include "pb_wire.h"
#include "shm_abi.h"
#include "trace_buffer.h"
#include "trace_filter.h"
#include "u64map.h"
#include "vp_error.h"
#include "vp_service.h"

#include "perfetto/config/config.pb-c.h"

/* Guardrails. */
#define SVC_MAX_SESSIONS 64u
/* A consumer uid's concurrent sessions, as traced caps them. */
#define SVC_MAX_SESSIONS_PER_UID 5u
/* What the sessions of uids other than the service's own may hold of
 * SVC_MAX_TOTAL_BUFFER_BYTES in all: the rest stays for its owner, so no
 * local user can lock it out of tracing by reserving the budget. */
#define SVC_OTHER_UIDS_BUFFER_BYTES (SVC_MAX_TOTAL_BUFFER_BYTES / 4 * 3)
/* Log lines a second, at most: a client that provokes one error per
 * message would otherwise flood the daemon's log (the rest is counted,
 * and the count said before the first line of a later second). */
#define SVC_LOG_LINES_PER_SEC 50u
/* The longest duration_ms a session may ask for: 7 days, as traced. */
#define SVC_MAX_DURATION_MS (7ull * 24 * 3600 * 1000)
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

/* flush_started / all_data_sources_flushed events kept unread, each (traced
 * keeps the last 64 of each). */
#define SVC_MAX_FLUSH_EVENTS 64u

/* Triggers.  A session keeps (and writes into its trace) the first
 * SVC_MAX_TRIGGERS_PER_SESSION it receives; later ones are only counted
 * (the first is the one that starts or stops it), so that a producer
 * repeating a trigger cannot grow it (traced keeps them all).  The
 * service remembers the last SVC_MAX_TRIGGER_HISTORY activations that
 * matched a session, for max_per_24_h (traced keeps every one of the
 * last 24 hours). */
#define SVC_MAX_TRIGGERS_PER_SESSION 32u
#define SVC_MAX_TRIGGER_HISTORY 1024u

struct vp_service;
struct vp_session;
struct vp_consumer;  /* consumer.h */
struct vp_async_cmd; /* producer.c */

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
	struct vp_async_cmd *queue; /* producer.c */
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

/* A trigger a session received: TracePacket.trigger's fields and when. */
struct vp_trigger_rec {
	uint64_t boot_ns;
	char *name; /* the config's TriggerConfig.Trigger.name */
	char *producer_name;
	int32_t producer_uid;
	uint32_t stop_delay_ms;
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
	/* duration_ms as applied: the config's, or trigger_config's
	 * (STOP_TRACING: trigger_timeout_ms; START_TRACING: the stop_delay_ms
	 * of the trigger that started it), as traced rewrites it. */
	uint32_t duration_ms;
	/* trigger_config: START_TRACING, the wait for a trigger
	 * (trigger_timeout_ms); STOP_TRACING, the stop_delay_ms after the
	 * first one. */
	uint64_t t_trigger;
	/* The triggers received (the first SVC_MAX_TRIGGERS_PER_SESSION),
	 * and how many in all: none yet, the session reads as empty. */
	struct vp_trigger_rec *triggers;
	size_t n_triggers;
	uint64_t triggers_received;
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
	/* TraceConfig.trace_filter (NULL: none): every packet read out goes
	 * through it but the trace_stats packet, which is counted as if it
	 * passed whole (traced's FilterStats). */
	struct vp_trace_filter *filter;
	struct vp_filter_stats filter_stats;
	struct pb_buf filter_out; /* the filtered packet */
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

/* ---- the service -------------------------------------------------------- */

struct vp_machine {
	char key[128];
	uint32_t id;
};

/* An activation of a trigger that matched a session (max_per_24_h). */
struct vp_trigger_seen {
	uint64_t boot_ns;
	uint64_t name_hash;
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
	/* TraceConfig.lockdown_mode: set, only producers of the service's
	 * own uid connect and get data sources (until a config clears it) */
	bool lockdown;
	uint16_t next_producer_id;
	uint64_t next_session_id;
	uint64_t next_instance_id;
	uint64_t next_flush_id;
	uint32_t next_sequence_id;
	uint32_t next_machine_id;
	struct vp_machine *machines;
	size_t n_machines, cap_machines;
	/* The last activations that matched a session, oldest first from
	 * trigger_history_head (a ring; triggers.c). */
	struct vp_trigger_seen trigger_history[SVC_MAX_TRIGGER_HISTORY];
	size_t trigger_history_head, n_trigger_history;
	uint8_t *scratch; /* VP_SMB_MAX_PAGE_SIZE: chunk copies */
	struct vp_service_stats stats;
	/* vp_svc_log's rate limit: the second being counted, its lines,
	 * and the lines left out since the last one said */
	int64_t log_second;
	unsigned log_lines;
	uint64_t log_suppressed;
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
/* Ends a shutdown (vp_service_shutdown): calls its done callback, once,
 * if one waits.  When every session stopped, or when they took too long. */
void vp_svc_finish_shutdown(struct vp_service *s);
/* Nanoseconds on a clock. */
uint64_t vp_svc_clock_ns(int clk);
char *vp_svc_strndup(const char *s, size_t max);
/* Does the POSIX extended regex pattern match the whole of name?  A
 * pattern that does not compile matches nothing. */
bool vp_svc_regex_full_match(const char *pattern, const char *name);
/* Does pattern compile (as vp_svc_regex_full_match uses it)? */
bool vp_svc_regex_valid(const char *pattern);
struct vp_svc_buffer *vp_buffer_by_id(struct vp_service *s, uint16_t id);
/* (vp_service_get_stats, declared in vp_service.h, is svc_state.c's too:
 * the packets the service writes carry its counters.) */

#endif
