/*
 * test_service.c - vtraced in-process: the service runs on a loop thread
 * with its sockets in a mkdtemp directory, and the test drives it with a
 * fake producer (IPC client + shared memory written by hand) and a fake
 * consumer (EnableTracing with a protobuf-c TraceConfig, ReadBuffers).
 *
 * Every wait has a deadline; a test that does not see what it expects fails
 * instead of hanging.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "event_loop.h"
#include "ipc_frame.h"
#include "ipc_client.h"
#include "ipc_sock.h"
#include "pb_wire.h"
#include "perfetto_fields.h"
#include "shm_abi.h"
#include "vp_service.h"

#include "perfetto/config/config.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/ipc/ipc.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"
#include "vp_log.h"

#define WAIT_MS 8000
#define DS_NAME "test.ds"
#define WRITER 1

/* ---- the service on its thread ------------------------------------------- */

struct svc {
	struct vp_loop *loop;
	struct vp_service *svc;
	pthread_t thread;
	char dir[64];
	char psock[128];
	char csock[128];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stats_ready;
	struct vp_service_stats stats;
};

static void *svc_run(void *arg)
{
	struct svc *t = arg;
	vp_loop_run(t->loop);
	return NULL;
}

static struct svc *svc_start_tcp(char *tcp_addr, size_t tcp_size);

static struct svc *svc_start(void)
{
	return svc_start_tcp(NULL, 0);
}

/* With tcp_addr, also listens for remote producers on a loopback port. */
static struct svc *svc_start_tcp(char *tcp_addr, size_t tcp_size)
{
	struct svc *t = calloc(1, sizeof(*t));
	struct vp_error err;
	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/vtraced-test-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->psock, sizeof(t->psock), "%s/producer.sock", t->dir);
	snprintf(t->csock, sizeof(t->csock), "%s/consumer.sock", t->dir);
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	assert_int_equal(vp_loop_new(&t->loop, &err), 0);
	struct vp_service_opts o = {0};
	if (getenv("VTRACED_TEST_VERBOSE"))
		vp_log_init("test_service", VP_LOG_INFO);
	assert_int_equal(vp_service_new(&t->svc, t->loop, &o, &err), 0);
	assert_int_equal(vp_service_listen_producer(t->svc, t->psock, &err), 0);
	assert_int_equal(vp_service_listen_consumer(t->svc, t->csock, &err), 0);
	for (int i = 0; tcp_addr && i < 50; i++) {
		snprintf(tcp_addr, tcp_size, "127.0.0.1:%d",
			 20000 + (getpid() * 7 + i * 131) % 40000);
		if (vp_service_listen_producer(t->svc, tcp_addr, &err) == 0)
			break;
		assert_true(i < 49);
	}
	assert_int_equal(pthread_create(&t->thread, NULL, svc_run, t), 0);
	return t;
}

static void svc_stop(struct svc *t)
{
	vp_loop_quit(t->loop);
	pthread_join(t->thread, NULL);
	vp_service_free(t->svc);
	vp_loop_free(t->loop);
	unlink(t->psock);
	unlink(t->csock);
	rmdir(t->dir);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}

static void stats_task(void *ctx)
{
	struct svc *t = ctx;
	pthread_mutex_lock(&t->mu);
	vp_service_get_stats(t->svc, &t->stats);
	t->stats_ready = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* The service's counters, read on its own thread. */
static struct vp_service_stats svc_stats(struct svc *t)
{
	pthread_mutex_lock(&t->mu);
	t->stats_ready = false;
	pthread_mutex_unlock(&t->mu);
	vp_loop_post_threadsafe(t->loop, stats_task, t);
	pthread_mutex_lock(&t->mu);
	while (!t->stats_ready)
		pthread_cond_wait(&t->cv, &t->mu);
	struct vp_service_stats st = t->stats;
	pthread_mutex_unlock(&t->mu);
	return st;
}

/* ---- the fake producer ----------------------------------------------------- */

struct producer {
	struct vp_ipc_client *cli;
	bool has_smb;
	struct vp_smb smb;
	uint32_t cursor;
	uint64_t instance_id;
	uint32_t target_buffer;
	int n_setup_tracing;
	int n_setup;
	int n_start;
	int n_stop;
	int n_flush;
	int n_clear;
	bool auto_ack_flush;
	bool notify_on_stop;
	bool gone;
	bool remote;
	bool emulation; /* InitializeConnectionResponse.use_shmem_emulation */
	uint32_t next_chunk_id;
};

static void producer_cmd(void *ctx, const struct vp_ipc_reply *r)
{
	struct producer *p = ctx;
	if (r->disconnected || !r->success) {
		p->gone = r->disconnected;
		if (r->fd >= 0)
			close(r->fd);
		return;
	}
	Perfetto__Protos__GetAsyncCommandResponse *m =
		perfetto__protos__get_async_command_response__unpack(
			NULL, r->len, r->data);
	assert_non_null(m);
	switch (m->cmd_case) {
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING: {
		struct vp_error err;
		p->n_setup_tracing++;
		if (p->remote) { /* no shared memory across machines */
			assert_true(r->fd < 0);
			break;
		}
		assert_true(r->fd >= 0);
		uint32_t page = m->setup_tracing->shared_buffer_page_size_kb;
		assert_int_equal(vp_smb_map(&p->smb, r->fd, page * 1024u, &err),
				 0);
		close(r->fd);
		p->has_smb = true;
		break;
	}
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE:
		p->instance_id = m->setup_data_source->new_instance_id;
		assert_non_null(m->setup_data_source->config);
		assert_string_equal(m->setup_data_source->config->name,
				    DS_NAME);
		assert_true(m->setup_data_source->config->has_tracing_session_id);
		p->target_buffer =
			m->setup_data_source->config->target_buffer;
		p->n_setup++;
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
		assert_int_equal(m->start_data_source->new_instance_id,
				 p->instance_id);
		p->n_start++;
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE:
		p->n_stop++;
		if (p->notify_on_stop) {
			Perfetto__Protos__NotifyDataSourceStoppedRequest n =
				PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
			uint8_t buf[32];
			n.has_data_source_id = true;
			n.data_source_id = m->stop_data_source->instance_id;
			size_t len =
				perfetto__protos__notify_data_source_stopped_request__pack(
					&n, buf);
			assert_int_equal(vp_ipc_client_invoke(
						 p->cli, "NotifyDataSourceStopped",
						 buf, len, -1, NULL, NULL, NULL),
					 0);
		}
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
		p->n_flush++;
		if (p->auto_ack_flush) {
			Perfetto__Protos__CommitDataRequest c =
				PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
			uint8_t buf[32];
			c.has_flush_request_id = true;
			c.flush_request_id = m->flush->request_id;
			size_t len = perfetto__protos__commit_data_request__pack(
				&c, buf);
			assert_int_equal(vp_ipc_client_invoke(p->cli,
							      "CommitData", buf,
							      len, -1, NULL,
							      NULL, NULL),
					 0);
		}
		break;
	case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE:
		p->n_clear++;
		break;
	default:
		break;
	}
	perfetto__protos__get_async_command_response__free_unpacked(m, NULL);
}

static void producer_call(struct producer *p, const char *method,
			  const void *args, size_t len)
{
	struct vp_error err;
	uint8_t *reply = NULL;
	size_t rlen = 0;
	int rc = vp_ipc_client_call(p->cli, method, args, len, &reply, &rlen,
				    NULL, WAIT_MS, &err);
	if (rc != 0)
		fail_msg("%s: %s", method, err.msg);
	free(reply);
}

/* InitializeConnection's smb_scraping_mode for the next producer (0: not
 * sent). */
static int g_scraping_mode;

static struct producer *producer_connect_to(const char *addr,
					    const char *name,
					    bool notify_on_stop, bool remote)
{
	struct producer *p = calloc(1, sizeof(*p));
	struct vp_error err;
	assert_non_null(p);
	p->auto_ack_flush = true;
	p->notify_on_stop = notify_on_stop;
	p->next_chunk_id = 1;
	p->remote = remote;
	assert_int_equal(vp_ipc_client_connect(&p->cli, addr, WAIT_MS, &err),
			 0);
	if (remote)
		assert_int_equal(vp_ipc_client_set_peer_identity(
					 p->cli, 4242, 4343, "guest-machine-1",
					 "guest", &err),
				 0);
	assert_int_equal(vp_ipc_client_bind(p->cli, "ProducerPort", WAIT_MS,
					    &err),
			 0);

	Perfetto__Protos__InitializeConnectionRequest ic =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
	ic.producer_name = (char *)name;
	ic.has_shared_memory_size_hint_bytes = true;
	ic.shared_memory_size_hint_bytes = 64 * 1024;
	if (g_scraping_mode) {
		ic.has_smb_scraping_mode = true;
		ic.smb_scraping_mode =
			(Perfetto__Protos__InitializeConnectionRequest__ProducerSMBScrapingMode)
				g_scraping_mode;
	}
	uint8_t buf[256];
	size_t len = perfetto__protos__initialize_connection_request__pack(&ic,
									   buf);
	uint8_t *reply = NULL;
	size_t rlen = 0;
	assert_int_equal(vp_ipc_client_call(p->cli, "InitializeConnection", buf,
					    len, &reply, &rlen, NULL, WAIT_MS,
					    &err),
			 0);
	Perfetto__Protos__InitializeConnectionResponse *icr =
		perfetto__protos__initialize_connection_response__unpack(
			NULL, rlen, reply);
	assert_non_null(icr);
	p->emulation = icr->has_use_shmem_emulation && icr->use_shmem_emulation;
	perfetto__protos__initialize_connection_response__free_unpacked(icr,
									NULL);
	free(reply);

	Perfetto__Protos__DataSourceDescriptor d =
		PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
	d.name = DS_NAME;
	d.has_will_notify_on_stop = notify_on_stop;
	d.will_notify_on_stop = notify_on_stop;
	Perfetto__Protos__RegisterDataSourceRequest rd =
		PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
	rd.data_source_descriptor = &d;
	len = perfetto__protos__register_data_source_request__pack(&rd, buf);
	producer_call(p, "RegisterDataSource", buf, len);

	assert_int_equal(vp_ipc_client_invoke(p->cli, "GetAsyncCommand", NULL,
					      0, -1, producer_cmd, p, &err),
			 0);
	return p;
}

static struct producer *producer_connect(struct svc *t, const char *name,
					 bool notify_on_stop)
{
	return producer_connect_to(t->psock, name, notify_on_stop, false);
}

static void producer_close(struct producer *p)
{
	if (p->has_smb)
		vp_smb_unmap(&p->smb);
	if (p->cli)
		vp_ipc_client_close(p->cli);
	free(p);
}

struct frag {
	const uint8_t *data;
	size_t len;
};

/* Writes fragments into a fresh chunk of the SMB.  The chunk is left
 * COMPLETE (release) or BEING_WRITTEN. */
static struct vp_smb_chunk producer_chunk(struct producer *p,
					  enum vp_page_layout layout,
					  const struct frag *frags, size_t n,
					  unsigned flags, bool release)
{
	struct vp_smb_chunk c;
	assert_true(p->has_smb);
	assert_true(vp_smb_acquire_chunk_for_writing(&p->smb, layout, WRITER,
						     p->next_chunk_id++,
						     &p->cursor, &c));
	size_t off = VP_SMB_CHUNK_HEADER_SIZE;
	for (size_t i = 0; i < n; i++) {
		assert_true(off + VP_FRAGMENT_LEN_SIZE + frags[i].len <=
			    c.size);
		vp_write_redundant_varint(c.begin + off,
					  (uint32_t)frags[i].len);
		memcpy(c.begin + off + VP_FRAGMENT_LEN_SIZE, frags[i].data,
		       frags[i].len);
		off += VP_FRAGMENT_LEN_SIZE + frags[i].len;
	}
	if (release)
		vp_smb_release_chunk_as_complete(&p->smb, &c, (unsigned)n,
						 flags);
	else /* the count as a writer keeps it while writing */
		memcpy(c.begin + 6,
		       &(uint16_t){vp_chunk_packets_word((unsigned)n, flags)},
		       2);
	return c;
}

static void producer_commit(struct producer *p, const struct vp_smb_chunk *cs,
			    size_t n, uint32_t target_buffer)
{
	Perfetto__Protos__CommitDataRequest c =
		PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove m[16];
	Perfetto__Protos__CommitDataRequest__ChunksToMove *mp[16];
	assert_true(n <= 16);
	for (size_t i = 0; i < n; i++) {
		perfetto__protos__commit_data_request__chunks_to_move__init(
			&m[i]);
		m[i].has_page = m[i].has_chunk = m[i].has_target_buffer = true;
		m[i].page = cs[i].page;
		m[i].chunk = cs[i].chunk;
		m[i].target_buffer = target_buffer;
		mp[i] = &m[i];
	}
	c.n_chunks_to_move = n;
	c.chunks_to_move = mp;
	uint8_t buf[1024];
	size_t len = perfetto__protos__commit_data_request__pack(&c, buf);
	producer_call(p, "CommitData", buf, len);
}

/* A test packet: timestamp n and a for_testing payload of `pad` bytes. */
static void make_packet(struct pb_buf *b, uint64_t n, size_t pad)
{
	pb_buf_reset(b);
	pb_put_varint(b, TP_TIMESTAMP, n);
	uint8_t *payload = malloc(pad ? pad : 1);
	assert_non_null(payload);
	memset(payload, (int)('a' + n % 26), pad);
	pb_put_bytes(b, 900, payload, pad);
	free(payload);
}

/* ---- the fake consumer ------------------------------------------------------ */

struct consumer {
	struct vp_ipc_client *cli;
	bool enable_done;
	bool enable_disabled;
	char enable_error[256];
	bool read_done;
	struct pb_buf partial;
	struct pb_buf trace; /* Trace: 0x0a len packet ... */
	size_t n_packets;
	size_t max_reply;
};

static struct consumer *consumer_connect(struct svc *t)
{
	struct consumer *c = calloc(1, sizeof(*c));
	struct vp_error err;
	assert_non_null(c);
	pb_buf_init(&c->partial);
	pb_buf_init(&c->trace);
	assert_int_equal(vp_ipc_client_connect(&c->cli, t->csock, WAIT_MS, &err),
			 0);
	assert_int_equal(vp_ipc_client_bind(c->cli, "ConsumerPort", WAIT_MS,
					    &err),
			 0);
	return c;
}

static void consumer_close(struct consumer *c)
{
	if (c->cli)
		vp_ipc_client_close(c->cli);
	pb_buf_free(&c->partial);
	pb_buf_free(&c->trace);
	free(c);
}

static void on_enable(void *ctx, const struct vp_ipc_reply *r)
{
	struct consumer *c = ctx;
	c->enable_done = true;
	if (!r->success)
		return;
	Perfetto__Protos__EnableTracingResponse *m =
		perfetto__protos__enable_tracing_response__unpack(NULL, r->len,
								  r->data);
	assert_non_null(m);
	c->enable_disabled = m->disabled;
	if (m->error)
		snprintf(c->enable_error, sizeof(c->enable_error), "%s",
			 m->error);
	perfetto__protos__enable_tracing_response__free_unpacked(m, NULL);
}

struct cfg_opts {
	uint32_t size_kb;
	bool discard;
	uint32_t duration_ms;
	bool write_into_file;
	uint32_t file_write_period_ms;
	bool deferred_start;
	const char *producer_filter;
	bool trace_all_machines;
	const char *unique_session_name;
	int write_flush_mode;
};

static void consumer_enable(struct consumer *c, const struct cfg_opts *o,
			    int fd)
{
	Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
	Perfetto__Protos__TraceConfig__BufferConfig buf =
		PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
	Perfetto__Protos__TraceConfig__BufferConfig *bufs[1] = {&buf};
	Perfetto__Protos__DataSourceConfig dsc =
		PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
	Perfetto__Protos__TraceConfig__DataSource ds =
		PERFETTO__PROTOS__TRACE_CONFIG__DATA_SOURCE__INIT;
	Perfetto__Protos__TraceConfig__DataSource *dss[1] = {&ds};
	char *filter[1] = {(char *)o->producer_filter};
	buf.has_size_kb = true;
	buf.size_kb = o->size_kb ? o->size_kb : 256;
	if (o->discard) {
		buf.has_fill_policy = true;
		buf.fill_policy =
			PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD;
	}
	dsc.name = DS_NAME;
	ds.config = &dsc;
	if (o->producer_filter) {
		ds.n_producer_name_filter = 1;
		ds.producer_name_filter = filter;
	}
	cfg.n_buffers = 1;
	cfg.buffers = bufs;
	cfg.n_data_sources = 1;
	cfg.data_sources = dss;
	if (o->duration_ms) {
		cfg.has_duration_ms = true;
		cfg.duration_ms = o->duration_ms;
	}
	if (o->write_into_file) {
		cfg.has_write_into_file = cfg.write_into_file = true;
		cfg.has_file_write_period_ms = true;
		cfg.file_write_period_ms = o->file_write_period_ms;
	}
	if (o->deferred_start)
		cfg.has_deferred_start = cfg.deferred_start = true;
	if (o->trace_all_machines)
		cfg.has_trace_all_machines = cfg.trace_all_machines = true;
	cfg.unique_session_name = (char *)o->unique_session_name;
	if (o->write_flush_mode) {
		cfg.has_write_flush_mode = true;
		cfg.write_flush_mode =
			(Perfetto__Protos__TraceConfig__WriteFlushMode)
				o->write_flush_mode;
	}
	Perfetto__Protos__EnableTracingRequest req =
		PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
	req.trace_config = &cfg;
	uint8_t out[1024];
	size_t len = perfetto__protos__enable_tracing_request__pack(&req, out);
	struct vp_error err;
	c->enable_done = false;
	assert_int_equal(vp_ipc_client_invoke(c->cli, "EnableTracing", out, len,
					      fd, on_enable, c, &err),
			 0);
}

static void on_read(void *ctx, const struct vp_ipc_reply *r)
{
	struct consumer *c = ctx;
	if (!r->success) {
		c->read_done = true;
		return;
	}
	if (r->len > c->max_reply)
		c->max_reply = r->len;
	Perfetto__Protos__ReadBuffersResponse *m =
		perfetto__protos__read_buffers_response__unpack(NULL, r->len,
								r->data);
	assert_non_null(m);
	for (size_t i = 0; i < m->n_slices; i++) {
		const Perfetto__Protos__ReadBuffersResponse__Slice *s =
			m->slices[i];
		assert_true(s->data.len <= 32u * 1024u);
		pb_put_raw(&c->partial, s->data.data, s->data.len);
		if (s->has_last_slice_for_packet && s->last_slice_for_packet) {
			pb_put_bytes(&c->trace, 1, c->partial.data,
				     c->partial.len);
			pb_buf_reset(&c->partial);
			c->n_packets++;
		}
	}
	perfetto__protos__read_buffers_response__free_unpacked(m, NULL);
	if (!r->has_more)
		c->read_done = true;
}

static void consumer_simple(struct consumer *c, const char *method)
{
	struct vp_error err;
	uint8_t *reply = NULL;
	size_t rlen = 0;
	if (vp_ipc_client_call(c->cli, method, NULL, 0, &reply, &rlen, NULL,
			       WAIT_MS, &err) != 0)
		fail_msg("%s: %s", method, err.msg);
	free(reply);
}

struct flush_wait {
	bool *done;
	bool ok;
};

static void on_flush(void *ctx, const struct vp_ipc_reply *r)
{
	struct flush_wait *fw = ctx;
	fw->ok = r->success;
	*fw->done = true;
}

/* ---- pumping --------------------------------------------------------------- */

/* Polls the clients until *flag or the deadline. */
static bool pump_until(struct producer *p, struct consumer *c,
		       const bool *flag, int ms)
{
	uint64_t end = vp_loop_now_ms() + (uint64_t)ms;
	while (!*flag) {
		if (vp_loop_now_ms() >= end)
			return false;
		if (p && p->cli && vp_ipc_client_poll(p->cli, 5, NULL) < 0) {
			vp_ipc_client_close(p->cli);
			p->cli = NULL;
		}
		if (c && c->cli)
			vp_ipc_client_poll(c->cli, 5, NULL);
	}
	return true;
}

static bool pump_count(struct producer *p, struct consumer *c,
		       const int *count, int want, int ms)
{
	uint64_t end = vp_loop_now_ms() + (uint64_t)ms;
	while (*count < want) {
		if (vp_loop_now_ms() >= end)
			return false;
		if (p && p->cli)
			vp_ipc_client_poll(p->cli, 5, NULL);
		if (c && c->cli)
			vp_ipc_client_poll(c->cli, 5, NULL);
	}
	return true;
}

static void consumer_read(struct producer *p, struct consumer *c)
{
	struct vp_error err;
	c->read_done = false;
	assert_int_equal(vp_ipc_client_invoke(c->cli, "ReadBuffers", NULL, 0,
					      -1, on_read, c, &err),
			 0);
	assert_true(pump_until(p, c, &c->read_done, WAIT_MS));
}

/* A session with the producer set up and started. */
static void start_session(struct producer *p, struct consumer *c,
			  const struct cfg_opts *o)
{
	consumer_enable(c, o, -1);
	assert_true(pump_count(p, c, &p->n_start, 1, WAIT_MS));
	assert_true(p->has_smb != p->remote);
	assert_int_equal(p->n_setup_tracing, 1);
	assert_int_equal(p->n_setup, 1);
	assert_true(p->target_buffer > 0);
}

static void stop_and_read(struct producer *p, struct consumer *c)
{
	consumer_simple(c, "DisableTracing");
	assert_true(pump_until(p, c, &c->enable_done, WAIT_MS));
	assert_true(c->enable_disabled);
	assert_string_equal(c->enable_error, "");
	consumer_read(p, c);
}

/* ---- looking at the trace ---------------------------------------------------- */

struct pkt_view {
	const uint8_t *data;
	size_t len;
};

/* The i-th packet of a Trace, or false. */
static bool trace_packet(const uint8_t *trace, size_t len, size_t i,
			 struct pkt_view *out)
{
	struct pb_reader r;
	struct pb_field f;
	size_t k = 0;
	pb_reader_init(&r, trace, len);
	while (pb_next(&r, &f)) {
		assert_int_equal(f.num, 1);
		if (k++ == i) {
			out->data = f.data;
			out->len = f.len;
			return true;
		}
	}
	assert_int_equal(r.err, PB_OK);
	return false;
}

/* The last value of a varint field at the top level of a packet. */
static bool pkt_varint(const struct pkt_view *v, uint32_t num, uint64_t *out)
{
	struct pb_reader r;
	struct pb_field f;
	bool found = false;
	pb_reader_init(&r, v->data, v->len);
	while (pb_next(&r, &f))
		if (f.num == num && f.wt == PB_WT_VARINT) {
			*out = f.val;
			found = true;
		}
	return found;
}

static bool pkt_has(const struct pkt_view *v, uint32_t num)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, v->data, v->len);
	while (pb_next(&r, &f))
		if (f.num == num)
			return true;
	return false;
}

/* Finds the producer packet with timestamp ts (it has field 900). */
static bool find_test_packet(const struct pb_buf *trace, uint64_t ts,
			     struct pkt_view *out)
{
	struct pkt_view v = {0};
	for (size_t i = 0; trace_packet(trace->data, trace->len, i, &v); i++) {
		uint64_t t;
		if (pkt_has(&v, 900) && pkt_varint(&v, TP_TIMESTAMP, &t) &&
		    t == ts) {
			*out = v;
			return true;
		}
	}
	return false;
}

static size_t count_test_packets(const struct pb_buf *trace)
{
	struct pkt_view v = {0};
	size_t n = 0;
	for (size_t i = 0; trace_packet(trace->data, trace->len, i, &v); i++)
		n += pkt_has(&v, 900);
	return n;
}

static bool find_field_packet(const struct pb_buf *trace, uint32_t num,
			      struct pkt_view *out)
{
	struct pkt_view v = {0};
	for (size_t i = 0; trace_packet(trace->data, trace->len, i, &v); i++)
		if (pkt_has(&v, num)) {
			*out = v;
			return true;
		}
	return false;
}

/* A varint inside the nested message `outer` of a packet (first match;
 * for repeated messages, the idx-th occurrence). */
static bool nested_varint(const struct pkt_view *v, uint32_t outer,
			  size_t idx, uint32_t inner, uint64_t *out)
{
	struct pb_reader r, r2;
	struct pb_field f, g;
	size_t k = 0;
	pb_reader_init(&r, v->data, v->len);
	while (pb_next(&r, &f)) {
		if (f.num != outer || f.wt != PB_WT_LEN || k++ != idx)
			continue;
		pb_reader_init(&r2, f.data, f.len);
		while (pb_next(&r2, &g))
			if (g.num == inner && g.wt == PB_WT_VARINT) {
				*out = g.val;
				return true;
			}
	}
	return false;
}

/* TraceStats.buffer_stats[0].<field> from the trace_stats packet. */
static uint64_t buffer_stat(const struct pb_buf *trace, uint32_t field)
{
	struct pkt_view v = {0}, stats;
	assert_true(find_field_packet(trace, TP_TRACE_STATS, &v));
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, v.data, v.len);
	while (pb_next(&r, &f))
		if (f.num == TP_TRACE_STATS)
			break;
	stats.data = f.data;
	stats.len = f.len;
	uint64_t val = 0;
	nested_varint(&stats, 1, 0, field, &val);
	return val;
}

/* The packet bytes as the producer wrote them, then only trusted fields. */
static void check_trusted_suffix(const struct pkt_view *v,
				 const struct pb_buf *orig)
{
	assert_true(v->len > orig->len);
	assert_memory_equal(v->data, orig->data, orig->len);
	struct pkt_view tail = {v->data + orig->len, v->len - orig->len};
	struct pb_reader r;
	struct pb_field f;
	bool uid = false, pid = false, seq = false;
	pb_reader_init(&r, tail.data, tail.len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TP_TRUSTED_UID:
			assert_int_equal(f.val, getuid());
			uid = true;
			break;
		case TP_TRUSTED_PID:
			assert_int_equal(f.val, getpid());
			pid = true;
			break;
		case TP_TRUSTED_PACKET_SEQUENCE_ID:
			assert_true(f.val >= 2);
			seq = true;
			break;
		case TP_PREVIOUS_PACKET_DROPPED:
			break;
		default:
			fail_msg("unexpected field %u after the packet", f.num);
		}
	}
	assert_int_equal(r.err, PB_OK);
	assert_true(uid && pid && seq);
}

/* ---- tests ------------------------------------------------------------------- */

/* Packets arrive byte-identical with the trusted fields appended, a packet
 * split over two chunks is joined, and the service's own packets are
 * there. */
static void test_roundtrip(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "fake-producer", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 256};
	start_session(p, c, &o);

	struct pb_buf a, b, big;
	pb_buf_init(&a);
	pb_buf_init(&b);
	pb_buf_init(&big);
	make_packet(&a, 1001, 10);
	make_packet(&b, 1002, 20);
	make_packet(&big, 1003, 1500); /* over two DIV_4 chunks */
	size_t half = big.len / 2;
	struct frag f1[3] = {{a.data, a.len}, {b.data, b.len},
			     {big.data, half}};
	struct frag f2[1] = {{big.data + half, big.len - half}};
	struct vp_smb_chunk cs[2];
	cs[0] = producer_chunk(p, VP_PAGE_DIV_2, f1, 3,
			       VP_CHUNK_LAST_PACKET_CONTINUES, true);
	cs[1] = producer_chunk(p, VP_PAGE_DIV_2, f2, 1,
			       VP_CHUNK_FIRST_PACKET_CONTINUES, true);
	producer_commit(p, cs, 2, p->target_buffer);
	/* The chunks went back to the producer. */
	assert_int_equal(vp_smb_chunk_state(&p->smb, cs[0].page, cs[0].chunk),
			 VP_CHUNK_FREE);

	stop_and_read(p, c);
	struct pkt_view v = {0};
	assert_true(find_test_packet(&c->trace, 1001, &v));
	check_trusted_suffix(&v, &a);
	uint64_t seq_a = 0, seq_b = 0;
	assert_true(pkt_varint(&v, TP_TRUSTED_PACKET_SEQUENCE_ID, &seq_a));
	assert_true(find_test_packet(&c->trace, 1002, &v));
	check_trusted_suffix(&v, &b);
	assert_true(pkt_varint(&v, TP_TRUSTED_PACKET_SEQUENCE_ID, &seq_b));
	assert_int_equal(seq_a, seq_b);
	assert_true(find_test_packet(&c->trace, 1003, &v));
	check_trusted_suffix(&v, &big);
	assert_int_equal(count_test_packets(&c->trace), 3);

	/* The service's packets, on sequence 1. */
	uint64_t seq;
	assert_true(find_field_packet(&c->trace, TP_TRACE_CONFIG, &v));
	assert_true(pkt_varint(&v, TP_TRUSTED_PACKET_SEQUENCE_ID, &seq));
	assert_int_equal(seq, 1);
	assert_true(find_field_packet(&c->trace, TP_CLOCK_SNAPSHOT, &v));
	assert_true(find_field_packet(&c->trace, TP_SYSTEM_INFO, &v));
	assert_true(find_field_packet(&c->trace, TP_SERVICE_EVENT, &v));
	assert_true(find_field_packet(&c->trace, TP_TRACE_UUID, &v));
	assert_true(find_field_packet(&c->trace, TP_TRACE_STATS, &v));
	assert_true(buffer_stat(&c->trace, 2) >= 2); /* chunks_written */
	assert_int_equal(p->n_stop, 1);

	pb_buf_free(&a);
	pb_buf_free(&b);
	pb_buf_free(&big);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* A producer cannot set trusted_uid (or machine_id) itself: such packets
 * are dropped and counted. */
static void test_forged_trusted_uid(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "forger", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);

	struct pb_buf good, forged, forged2;
	pb_buf_init(&good);
	pb_buf_init(&forged);
	pb_buf_init(&forged2);
	make_packet(&good, 2001, 8);
	make_packet(&forged, 2002, 8);
	pb_put_varint(&forged, TP_TRUSTED_UID, 12345);
	make_packet(&forged2, 2003, 8);
	pb_put_varint(&forged2, TP_MACHINE_ID, 7);
	struct frag f[3] = {{forged.data, forged.len},
			    {good.data, good.len},
			    {forged2.data, forged2.len}};
	struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_4, f, 3, 0,
						true);
	producer_commit(p, &cs, 1, p->target_buffer);
	stop_and_read(p, c);

	struct pkt_view v = {0};
	assert_true(find_test_packet(&c->trace, 2001, &v));
	check_trusted_suffix(&v, &good);
	assert_false(find_test_packet(&c->trace, 2002, &v));
	assert_false(find_test_packet(&c->trace, 2003, &v));
	/* Nothing in the trace carries the forged uid. */
	for (size_t i = 0; trace_packet(c->trace.data, c->trace.len, i, &v);
	     i++) {
		uint64_t uid;
		if (pkt_varint(&v, TP_TRUSTED_UID, &uid))
			assert_int_not_equal(uid, 12345);
	}
	struct vp_service_stats st = svc_stats(t);
	assert_int_equal(st.invalid_packets, 2);
	pb_buf_free(&good);
	pb_buf_free(&forged);
	pb_buf_free(&forged2);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* ---- fields only the service may write ------------------------------------ */

/* The TracePacket fields traced reserves for itself, with a value of the
 * right wire type for each. */
static const struct {
	uint32_t num;
	bool len; /* length-delimited, else varint */
} reserved_fields[] = {
	{TP_TRUSTED_UID, false},
	{TP_TRUSTED_PACKET_SEQUENCE_ID, false},
	{TP_TRACE_CONFIG, true},
	{TP_TRACE_STATS, true},
	{TP_SYNCHRONIZATION_MARKER, true},
	{TP_COMPRESSED_PACKETS, true},
	{TP_SERVICE_EVENT, true},
	{TP_TRUSTED_PID, false},
	{TP_MACHINE_ID, false},
	{TP_TRACE_PROVENANCE, true},
	{TP_PROTOVMS, true},
	{TP_ZSTD_COMPRESSED_PACKETS, true},
};
#define N_RESERVED (sizeof(reserved_fields) / sizeof(reserved_fields[0]))

/* A test packet with timestamp ts that also carries reserved field i, with
 * a value the service itself might have written. */
static void make_forged(struct pb_buf *b, uint64_t ts, size_t i)
{
	make_packet(b, ts, 4);
	uint32_t num = reserved_fields[i].num;
	if (!reserved_fields[i].len) {
		/* uid 0, the service's sequence 1, pid 1, machine 1 */
		pb_put_varint(b, num, num == TP_TRUSTED_UID ? 0 : 1);
		return;
	}
	struct pb_buf inner;
	pb_buf_init(&inner);
	switch (num) {
	case TP_TRACE_CONFIG: /* buffers { size_kb: 1 } */
		pb_put_bytes(&inner, 1, (const uint8_t *)"\x08\x01", 2);
		break;
	case TP_TRACE_STATS: /* invalid_packets: 0 */
		pb_put_varint(&inner, 10, 0);
		break;
	case TP_SERVICE_EVENT: /* all_data_sources_started */
		pb_put_varint(&inner, 2, 1);
		break;
	case TP_COMPRESSED_PACKETS: { /* a harmless packet, deflated */
		struct pb_buf pkt, trace;
		pb_buf_init(&pkt);
		pb_buf_init(&trace);
		make_packet(&pkt, ts + 500000, 4);
		pb_put_bytes(&trace, 1, pkt.data, pkt.len);
		uLongf zlen = compressBound(trace.len);
		uint8_t *z = malloc(zlen);
		assert_non_null(z);
		assert_int_equal(compress(z, &zlen, trace.data, trace.len),
				 Z_OK);
		pb_put_raw(&inner, z, zlen);
		free(z);
		pb_buf_free(&pkt);
		pb_buf_free(&trace);
		break;
	}
	default: /* any bytes will do */
		pb_put_raw(&inner, (const uint8_t *)"\x82\x47\x41\x91", 4);
		break;
	}
	pb_put_bytes(b, num, inner.data, inner.len);
	pb_buf_free(&inner);
}

/* A packet with timestamp ts holding compressed_packets: a zlib Trace of
 * `inner` (one packet). */
static void make_compressed(struct pb_buf *b, uint64_t ts,
			    const struct pb_buf *inner)
{
	struct pb_buf trace;
	pb_buf_init(&trace);
	pb_put_bytes(&trace, 1, inner->data, inner->len);
	uLongf zlen = compressBound(trace.len);
	uint8_t *z = malloc(zlen);
	assert_non_null(z);
	assert_int_equal(compress(z, &zlen, trace.data, trace.len), Z_OK);
	make_packet(b, ts, 4);
	pb_put_bytes(b, TP_COMPRESSED_PACKETS, z, zlen);
	free(z);
	pb_buf_free(&trace);
}

/* Commits one packet in a chunk of its own. */
static void write_one(struct producer *p, const struct pb_buf *b)
{
	struct frag f = {b->data, b->len};
	struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_4, &f, 1, 0,
						true);
	producer_commit(p, &cs, 1, p->target_buffer);
}

/* TraceStats.invalid_packets of the trace's trace_stats packet. */
static uint64_t trace_invalid_packets(const struct pb_buf *trace)
{
	struct pkt_view v = {0};
	uint64_t n = 0;
	assert_true(find_field_packet(trace, TP_TRACE_STATS, &v));
	assert_true(nested_varint(&v, TP_TRACE_STATS, 0, 10, &n));
	return n;
}

/* A producer tries every field only the service may write, plainly and
 * inside compressed_packets, and a few encodings of them: every such packet
 * is dropped whole and counted, in the service's counters and in the
 * trace's trace_stats; nothing forged reaches the trace. */
static void test_forged_service_fields(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "forger", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 256};
	start_session(p, c, &o);

	struct pb_buf b, inner;
	pb_buf_init(&b);
	pb_buf_init(&inner);
	uint64_t forged = 0;
	make_packet(&b, 5000, 4); /* a good one first */
	write_one(p, &b);
	for (size_t i = 0; i < N_RESERVED; i++) {
		/* plainly */
		make_forged(&b, 5100 + i, i);
		write_one(p, &b);
		forged++;
		/* inside compressed_packets */
		make_forged(&inner, 5300 + i, i);
		make_compressed(&b, 5200 + i, &inner);
		write_one(p, &b);
		forged++;
	}
	/* compressed_packets holding nothing forged: the service never
	 * compresses what a producer wrote, so traced refuses them all. */
	make_packet(&inner, 5400, 4);
	make_compressed(&b, 5401, &inner);
	write_one(p, &b);
	forged++;
	/* trusted_uid with a padded tag (0x98 0x80 0x00 is field 3, varint) */
	make_packet(&b, 5402, 4);
	pb_put_raw(&b, (const uint8_t *)"\x98\x80\x00\x00", 4);
	write_one(p, &b);
	forged++;
	/* trusted_packet_sequence_id as fixed32, machine_id as bytes */
	make_packet(&b, 5403, 4);
	pb_put_raw(&b, (const uint8_t *)"\x55\x01\x00\x00\x00", 5);
	write_one(p, &b);
	forged++;
	make_packet(&b, 5404, 4);
	pb_put_bytes(&b, TP_MACHINE_ID, (const uint8_t *)"\x01", 1);
	write_one(p, &b);
	forged++;
	make_packet(&b, 5999, 4); /* and a good one last */
	write_one(p, &b);
	stop_and_read(p, c);

	/* The good packets arrived, stamped by the service. */
	struct pkt_view v = {0};
	assert_true(find_test_packet(&c->trace, 5000, &v));
	assert_true(find_test_packet(&c->trace, 5999, &v));
	assert_int_equal(count_test_packets(&c->trace), 2);
	/* No other packet a producer wrote, and no reserved field but the
	 * service's own: each at most once per packet, on the service's
	 * sequence for service packets, with this process's credentials on
	 * producer packets. */
	for (size_t i = 0; trace_packet(c->trace.data, c->trace.len, i, &v);
	     i++) {
		bool producer = pkt_has(&v, 900);
		struct pb_reader r;
		struct pb_field f;
		unsigned seen[N_RESERVED] = {0};
		pb_reader_init(&r, v.data, v.len);
		while (pb_next(&r, &f)) {
			for (size_t k = 0; k < N_RESERVED; k++)
				if (f.num == reserved_fields[k].num)
					seen[k]++;
			switch (f.num) {
			case TP_TRUSTED_UID:
				assert_int_equal(f.val, getuid());
				break;
			case TP_TRUSTED_PID:
				assert_int_equal(f.val, getpid());
				break;
			case TP_TRUSTED_PACKET_SEQUENCE_ID:
				if (producer)
					assert_true(f.val >= 2);
				else
					assert_int_equal(f.val, 1);
				break;
			case TP_MACHINE_ID: /* a local producer has none */
			case TP_COMPRESSED_PACKETS:
			case TP_ZSTD_COMPRESSED_PACKETS:
			case TP_PROTOVMS:
				fail_msg("packet %zu carries field %u", i,
					 f.num);
				break;
			case TP_SYNCHRONIZATION_MARKER: /* the service's own */
			case TP_TRACE_PROVENANCE:
			case TP_TRACE_CONFIG:
			case TP_TRACE_STATS:
			case TP_SERVICE_EVENT:
				assert_false(producer);
				break;
			default:
				break;
			}
		}
		assert_int_equal(r.err, PB_OK);
		for (size_t k = 0; k < N_RESERVED; k++)
			assert_true(seen[k] <= 1);
	}
	/* Every drop counted, in the trace and in the service. */
	assert_int_equal(trace_invalid_packets(&c->trace), forged);
	assert_int_equal(svc_stats(t).invalid_packets, forged);

	pb_buf_free(&b);
	pb_buf_free(&inner);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* Writes `n` chunks of one packet each (timestamps base..base+n-1). */
static void write_many(struct producer *p, uint64_t base, int n, size_t pad)
{
	struct pb_buf b;
	pb_buf_init(&b);
	for (int i = 0; i < n; i++) {
		make_packet(&b, base + (uint64_t)i, pad);
		struct frag f = {b.data, b.len};
		struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_4, &f, 1,
							0, true);
		producer_commit(p, &cs, 1, p->target_buffer);
	}
	pb_buf_free(&b);
}

/* A 4 KiB ring buffer keeps the newest chunks; the overwrite is counted. */
static void test_ring_buffer_overwrite(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "ring", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 4};
	start_session(p, c, &o);
	write_many(p, 3000, 40, 600);
	stop_and_read(p, c);

	struct pkt_view v = {0};
	size_t n = count_test_packets(&c->trace);
	assert_true(n > 0 && n < 40);
	assert_true(find_test_packet(&c->trace, 3039, &v)); /* the newest */
	assert_false(find_test_packet(&c->trace, 3000, &v)); /* overwritten */
	assert_true(buffer_stat(&c->trace, 3) > 0); /* chunks_overwritten */
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* A DISCARD buffer keeps the oldest chunks and drops the rest. */
static void test_discard_policy(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "discard", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 4, .discard = true};
	start_session(p, c, &o);
	write_many(p, 4000, 40, 600);
	stop_and_read(p, c);

	struct pkt_view v = {0};
	size_t n = count_test_packets(&c->trace);
	assert_true(n > 0 && n < 40);
	assert_true(find_test_packet(&c->trace, 4000, &v)); /* the oldest */
	assert_false(find_test_packet(&c->trace, 4039, &v));
	assert_true(buffer_stat(&c->trace, 18) > 0); /* chunks_discarded */
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* A producer that goes away mid-session: what it committed stays, what it
 * left complete in shared memory is scraped, the session goes on. */
static void test_producer_disconnect(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "dying", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);

	struct pb_buf a, b;
	pb_buf_init(&a);
	pb_buf_init(&b);
	make_packet(&a, 5001, 16);
	make_packet(&b, 5002, 16);
	struct frag fa = {a.data, a.len}, fb = {b.data, b.len};
	struct vp_smb_chunk ca = producer_chunk(p, VP_PAGE_DIV_4, &fa, 1, 0,
						true);
	producer_commit(p, &ca, 1, p->target_buffer);
	/* Complete but never committed: the service scrapes it. */
	producer_chunk(p, VP_PAGE_DIV_4, &fb, 1, 0, true);
	vp_ipc_client_close(p->cli);
	p->cli = NULL;

	/* The session survives the producer. */
	uint64_t end = vp_loop_now_ms() + WAIT_MS;
	while (svc_stats(t).producers_connected != 0 &&
	       vp_loop_now_ms() < end)
		usleep(10000);
	assert_int_equal(svc_stats(t).producers_connected, 0);
	assert_int_equal(svc_stats(t).tracing_sessions, 1);
	assert_false(c->enable_done);

	stop_and_read(NULL, c);
	struct pkt_view v = {0};
	assert_true(find_test_packet(&c->trace, 5001, &v));
	check_trusted_suffix(&v, &a);
	assert_true(find_test_packet(&c->trace, 5002, &v));
	check_trusted_suffix(&v, &b);
	pb_buf_free(&a);
	pb_buf_free(&b);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* A consumer that disconnects without detaching takes its session (and
 * buffers) with it; its data sources are stopped. */
static void test_consumer_disconnect(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "orphan", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);
	assert_int_equal(svc_stats(t).tracing_sessions, 1);
	assert_int_equal(svc_stats(t).total_buffers, 1);
	consumer_close(c);
	assert_true(pump_count(p, NULL, &p->n_stop, 1, WAIT_MS));
	struct vp_service_stats st = svc_stats(t);
	assert_int_equal(st.tracing_sessions, 0);
	assert_int_equal(st.total_buffers, 0);
	/* A commit into the freed buffer is refused, not a crash. */
	struct pb_buf a;
	pb_buf_init(&a);
	make_packet(&a, 6001, 4);
	struct frag f = {a.data, a.len};
	struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_4, &f, 1, 0,
						true);
	producer_commit(p, &cs, 1, p->target_buffer);
	assert_true(svc_stats(t).chunks_discarded >= 1);
	pb_buf_free(&a);
	producer_close(p);
	svc_stop(t);
}

/* duration_ms ends the session by itself: flush, stop, reply. */
static void test_duration(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "timed", true);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64, .duration_ms = 300};
	start_session(p, c, &o);
	uint64_t t0 = vp_loop_now_ms();
	assert_true(pump_until(p, c, &c->enable_done, WAIT_MS));
	assert_true(vp_loop_now_ms() - t0 >= 200);
	assert_true(c->enable_disabled);
	assert_true(p->n_flush >= 1); /* the final flush */
	assert_int_equal(p->n_stop, 1);
	consumer_read(p, c);
	struct pkt_view v = {0};
	assert_true(find_field_packet(&c->trace, TP_TRACE_STATS, &v));
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* write_into_file: the service writes the trace into the fd it was given. */
static void test_write_into_file(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "filer", false);
	struct consumer *c = consumer_connect(t);
	char path[128];
	snprintf(path, sizeof(path), "%s/trace.pb", t->dir);
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	struct cfg_opts o = {.size_kb = 64,
			     .write_into_file = true,
			     .file_write_period_ms = 100};
	consumer_enable(c, &o, fd);
	close(fd);
	assert_true(pump_count(p, c, &p->n_start, 1, WAIT_MS));

	write_many(p, 7000, 5, 32);
	usleep(300 * 1000); /* a periodic write happens */
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_true(sb.st_size > 0);
	write_many(p, 7005, 5, 32);
	consumer_simple(c, "DisableTracing");
	assert_true(pump_until(p, c, &c->enable_done, WAIT_MS));
	assert_true(c->enable_disabled);

	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	struct pb_buf trace;
	pb_buf_init(&trace);
	uint8_t chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		pb_put_raw(&trace, chunk, n);
	fclose(f);
	assert_int_equal(count_test_packets(&trace), 10);
	struct pkt_view v = {0};
	assert_true(find_field_packet(&trace, TP_TRACE_CONFIG, &v));
	/* Written every 100 ms: the service flushes every 5 s on its own
	 * (traced's write_flush_mode AUTO), and the config says so. */
	uint64_t val = 0;
	assert_true(nested_varint(&v, TP_TRACE_CONFIG, 0, 13, &val));
	assert_int_equal(val, 5000);
	assert_true(find_field_packet(&trace, TP_TRACE_STATS, &v));
	pb_buf_free(&trace);
	unlink(path);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* write_flush_mode ENABLED: the producers flush before every write. */
static void test_write_into_file_flushes(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "flushed-filer", false);
	struct consumer *c = consumer_connect(t);
	char path[128];
	snprintf(path, sizeof(path), "%s/trace.pb", t->dir);
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	struct cfg_opts o = {
		.size_kb = 64,
		.write_into_file = true,
		.file_write_period_ms = 150,
		.write_flush_mode =
			PERFETTO__PROTOS__TRACE_CONFIG__WRITE_FLUSH_MODE__WRITE_FLUSH_ENABLED};
	consumer_enable(c, &o, fd);
	close(fd);
	assert_true(pump_count(p, c, &p->n_start, 1, WAIT_MS));
	write_many(p, 7200, 3, 32);
	assert_true(pump_count(p, c, &p->n_flush, 2, WAIT_MS));
	consumer_simple(c, "DisableTracing");
	assert_true(pump_until(p, c, &c->enable_done, WAIT_MS));

	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	struct pb_buf trace;
	pb_buf_init(&trace);
	uint8_t chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		pb_put_raw(&trace, chunk, n);
	fclose(f);
	assert_int_equal(count_test_packets(&trace), 3);
	struct pkt_view v = {0};
	uint64_t val = 0;
	assert_true(find_field_packet(&trace, TP_TRACE_CONFIG, &v));
	assert_true(nested_varint(&v, TP_TRACE_CONFIG, 0, 13, &val));
	assert_int_equal(val, 150);
	pb_buf_free(&trace);
	unlink(path);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* QueryServiceState lists the producer and its data source. */
static void test_query_service_state(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "queried", false);
	struct consumer *c = consumer_connect(t);
	struct vp_error err;
	uint8_t *reply = NULL;
	size_t len = 0;
	assert_int_equal(vp_ipc_client_call(c->cli, "QueryServiceState", NULL,
					    0, &reply, &len, NULL, WAIT_MS,
					    &err),
			 0);
	Perfetto__Protos__QueryServiceStateResponse *m =
		perfetto__protos__query_service_state_response__unpack(
			NULL, len, reply);
	assert_non_null(m);
	assert_non_null(m->service_state);
	const Perfetto__Protos__TracingServiceState *s = m->service_state;
	assert_int_equal(s->n_producers, 1);
	assert_string_equal(s->producers[0]->name, "queried");
	assert_int_equal(s->producers[0]->pid, getpid());
	assert_int_equal(s->n_data_sources, 1);
	assert_string_equal(s->data_sources[0]->ds_descriptor->name, DS_NAME);
	assert_int_equal(s->data_sources[0]->producer_id,
			 s->producers[0]->id);
	perfetto__protos__query_service_state_response__free_unpacked(m, NULL);
	free(reply);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* Garbage from a third client (bad frame, then a huge length) does not
 * disturb a running session. */
static void test_garbage_client(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "steady", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);

	struct vp_error err;
	static const uint8_t junk[] = {0x10, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
				       0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				       0xff, 0xff, 0x07, 0x07, 0x07, 0x07};
	static const uint8_t huge[] = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3};
	const char *socks[2] = {t->psock, t->csock};
	for (int i = 0; i < 2; i++) {
		int fd = vp_sock_connect(socks[i], WAIT_MS, &err);
		assert_true(fd >= 0);
		assert_int_equal(vp_sock_send_all(fd, junk, sizeof(junk), -1),
				 0);
		close(fd);
		fd = vp_sock_connect(socks[i], WAIT_MS, &err);
		assert_true(fd >= 0);
		assert_int_equal(vp_sock_send_all(fd, huge, sizeof(huge), -1),
				 0);
		close(fd);
	}
	/* A bound client with garbage method arguments. */
	struct producer *bad = calloc(1, sizeof(*bad));
	assert_non_null(bad);
	assert_int_equal(vp_ipc_client_connect(&bad->cli, t->psock, WAIT_MS,
					       &err),
			 0);
	assert_int_equal(vp_ipc_client_bind(bad->cli, "ProducerPort", WAIT_MS,
					    &err),
			 0);
	static const uint8_t bad_args[] = {0x0a, 0x50, 0x01};
	uint8_t *reply = NULL;
	size_t rlen;
	assert_int_equal(vp_ipc_client_call(bad->cli, "CommitData", bad_args,
					    sizeof(bad_args), &reply, &rlen,
					    NULL, WAIT_MS, &err),
			 -1);
	/* Chunk indices far outside its (absent) shared memory. */
	Perfetto__Protos__CommitDataRequest cd =
		PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove m =
		PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove *mp = &m;
	m.has_page = m.has_chunk = m.has_target_buffer = true;
	m.page = 100000;
	m.chunk = 99;
	m.target_buffer = p->target_buffer; /* not its session */
	cd.n_chunks_to_move = 1;
	cd.chunks_to_move = &mp;
	uint8_t buf[64];
	size_t blen = perfetto__protos__commit_data_request__pack(&cd, buf);
	producer_call(bad, "CommitData", buf, blen);
	producer_close(bad);

	/* The session still works. */
	struct pb_buf a;
	pb_buf_init(&a);
	make_packet(&a, 8001, 12);
	struct frag f = {a.data, a.len};
	struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_4, &f, 1, 0,
						true);
	producer_commit(p, &cs, 1, p->target_buffer);
	stop_and_read(p, c);
	struct pkt_view v = {0};
	assert_true(find_test_packet(&c->trace, 8001, &v));
	check_trusted_suffix(&v, &a);
	struct vp_service_stats st = svc_stats(t);
	assert_true(st.invalid_requests >= 1);
	assert_true(st.chunks_discarded >= 1);
	pb_buf_free(&a);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* A big read streams in many replies, none over the frame target. */
static void test_read_streaming(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "bulk", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 8192};
	start_session(p, c, &o);
	/* 1000 chunks of ~3.9 KiB (more than the service lets wait on the
	 * socket: the read pauses and resumes) plus one 40 KiB packet over
	 * 11 chunks. */
	struct pb_buf b;
	pb_buf_init(&b);
	for (int i = 0; i < 1000; i++) {
		make_packet(&b, 9000 + (uint64_t)i, 3900);
		struct frag f = {b.data, b.len};
		struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_1, &f, 1,
							0, true);
		producer_commit(p, &cs, 1, p->target_buffer);
	}
	make_packet(&b, 19999, 40000);
	size_t off = 0;
	for (int i = 0; off < b.len; i++) {
		size_t n = b.len - off > 4000 ? 4000 : b.len - off;
		struct frag f = {b.data + off, n};
		unsigned flags = (i ? VP_CHUNK_FIRST_PACKET_CONTINUES : 0) |
				 (off + n < b.len
					  ? VP_CHUNK_LAST_PACKET_CONTINUES
					  : 0);
		struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_1, &f, 1,
							flags, true);
		producer_commit(p, &cs, 1, p->target_buffer);
		off += n;
	}
	stop_and_read(p, c);
	assert_int_equal(count_test_packets(&c->trace), 1001);
	struct pkt_view v = {0};
	assert_true(find_test_packet(&c->trace, 9500, &v));
	assert_true(find_test_packet(&c->trace, 19999, &v));
	check_trusted_suffix(&v, &b);
	assert_true(c->max_reply <= VP_IPC_SEND_FRAME_TARGET);
	pb_buf_free(&b);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* A producer registering after the session started joins it; a
 * producer_name_filter keeps others out. */
static void test_late_producer_and_filter(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64, .producer_filter = "wanted"};
	consumer_enable(c, &o, -1);
	struct producer *other = producer_connect(t, "unwanted", false);
	struct producer *p = producer_connect(t, "wanted", false);
	assert_true(pump_count(p, c, &p->n_start, 1, WAIT_MS));
	vp_ipc_client_poll(other->cli, 100, NULL);
	assert_int_equal(other->n_setup, 0);
	struct pb_buf a;
	pb_buf_init(&a);
	make_packet(&a, 10001, 4);
	struct frag f = {a.data, a.len};
	struct vp_smb_chunk cs = producer_chunk(p, VP_PAGE_DIV_4, &f, 1, 0,
						true);
	producer_commit(p, &cs, 1, p->target_buffer);
	stop_and_read(p, c);
	struct pkt_view v = {0};
	assert_true(find_test_packet(&c->trace, 10001, &v));
	pb_buf_free(&a);
	consumer_close(c);
	producer_close(p);
	producer_close(other);
	svc_stop(t);
}

/* Config errors come back in EnableTracingResponse.error. */
static void test_bad_config(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 4u * 1024u * 1024u}; /* 4 GiB */
	consumer_enable(c, &o, -1);
	assert_true(pump_until(NULL, c, &c->enable_done, WAIT_MS));
	assert_true(strstr(c->enable_error, "limit") != NULL);
	assert_int_equal(svc_stats(t).tracing_sessions, 0);
	consumer_close(c);
	svc_stop(t);
}

/* A producer on another machine (TCP here): no shared memory, chunks
 * inline, its packets stamped with a machine id and the identity it gave. */
static void test_remote_producer(void **state)
{
	(void)state;
	char addr[64];
	struct svc *t = svc_start_tcp(addr, sizeof(addr));
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64, .trace_all_machines = true};
	struct producer *p = producer_connect_to(addr, "guest-probe", false,
						 true);
	assert_true(p->emulation);
	start_session(p, c, &o);
	assert_int_equal(p->n_setup_tracing, 1);

	struct pb_buf pkt, chunk;
	pb_buf_init(&pkt);
	pb_buf_init(&chunk);
	make_packet(&pkt, 11001, 24);
	uint8_t hdr[8] = {1, 0, 0, 0, WRITER, 0, 0, 0};
	uint16_t word = vp_chunk_packets_word(1, 0);
	memcpy(hdr + 6, &word, 2);
	pb_put_raw(&chunk, hdr, sizeof(hdr));
	uint8_t len[4];
	vp_write_redundant_varint(len, (uint32_t)pkt.len);
	pb_put_raw(&chunk, len, 4);
	pb_put_raw(&chunk, pkt.data, pkt.len);

	Perfetto__Protos__CommitDataRequest cd =
		PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove m =
		PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
	Perfetto__Protos__CommitDataRequest__ChunksToMove *mp = &m;
	m.has_target_buffer = true;
	m.target_buffer = p->target_buffer;
	m.has_data = true;
	m.data.data = chunk.data;
	m.data.len = chunk.len;
	cd.n_chunks_to_move = 1;
	cd.chunks_to_move = &mp;
	uint8_t buf[256];
	size_t blen = perfetto__protos__commit_data_request__pack(&cd, buf);
	producer_call(p, "CommitData", buf, blen);
	stop_and_read(p, c);

	struct pkt_view v = {0};
	uint64_t val;
	assert_true(find_test_packet(&c->trace, 11001, &v));
	assert_memory_equal(v.data, pkt.data, pkt.len);
	assert_true(pkt_varint(&v, TP_MACHINE_ID, &val));
	assert_true(val != 0);
	assert_true(pkt_varint(&v, TP_TRUSTED_UID, &val));
	assert_int_equal(val, 4343);
	assert_true(pkt_varint(&v, TP_TRUSTED_PID, &val));
	assert_int_equal(val, 4242);
	pb_buf_free(&pkt);
	pb_buf_free(&chunk);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* Without trace_all_machines a remote producer is not enabled. */
static void test_remote_not_matched_by_default(void **state)
{
	(void)state;
	char addr[64];
	struct svc *t = svc_start_tcp(addr, sizeof(addr));
	struct consumer *c = consumer_connect(t);
	struct producer *p = producer_connect_to(addr, "guest-probe", false,
						 true);
	struct cfg_opts o = {.size_kb = 64};
	consumer_enable(c, &o, -1);
	assert_false(pump_count(p, c, &p->n_setup, 1, 300));
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

static void key_args(const char *key, uint8_t *buf, size_t *len)
{
	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_string(&b, 1, key);
	memcpy(buf, b.data, b.len);
	*len = b.len;
	pb_buf_free(&b);
}

/* Detach keeps the session past its consumer; Attach by key gets it back. */
static void test_detach_attach(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "kept", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);
	struct vp_error err;
	uint8_t args[64], *reply = NULL;
	size_t alen, rlen;
	key_args("my-key", args, &alen);
	assert_int_equal(vp_ipc_client_call(c->cli, "Detach", args, alen,
					    &reply, &rlen, NULL, WAIT_MS, &err),
			 0);
	free(reply);
	consumer_close(c);
	write_many(p, 12000, 3, 16);
	assert_int_equal(svc_stats(t).tracing_sessions, 1);
	assert_int_equal(p->n_stop, 0);

	c = consumer_connect(t);
	key_args("wrong-key", args, &alen);
	assert_int_equal(vp_ipc_client_call(c->cli, "Attach", args, alen,
					    &reply, &rlen, NULL, WAIT_MS, &err),
			 -1);
	key_args("my-key", args, &alen);
	reply = NULL;
	assert_int_equal(vp_ipc_client_call(c->cli, "Attach", args, alen,
					    &reply, &rlen, NULL, WAIT_MS, &err),
			 0);
	Perfetto__Protos__AttachResponse *ar =
		perfetto__protos__attach_response__unpack(NULL, rlen, reply);
	assert_non_null(ar);
	assert_non_null(ar->trace_config);
	assert_int_equal(ar->trace_config->n_buffers, 1);
	perfetto__protos__attach_response__free_unpacked(ar, NULL);
	free(reply);

	/* Ask to be told when it ends, then end it. */
	Perfetto__Protos__EnableTracingRequest er =
		PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
	er.has_attach_notification_only = er.attach_notification_only = true;
	uint8_t ebuf[16];
	size_t elen = perfetto__protos__enable_tracing_request__pack(&er, ebuf);
	assert_int_equal(vp_ipc_client_invoke(c->cli, "EnableTracing", ebuf,
					      elen, -1, on_enable, c, &err),
			 0);
	stop_and_read(p, c);
	assert_int_equal(count_test_packets(&c->trace), 3);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* Consumer Flush: answered when the producer acks, failed on timeout. */
static void test_consumer_flush(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "flushed", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);
	/* The producer must answer while the consumer waits: pump it from a
	 * reply callback-free loop. */
	struct vp_error err;
	bool done = false;
	struct flush_wait fw = {&done, false};
	Perfetto__Protos__FlushRequest fr = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
	fr.has_timeout_ms = true;
	fr.timeout_ms = 3000;
	uint8_t buf[16];
	size_t len = perfetto__protos__flush_request__pack(&fr, buf);
	assert_int_equal(vp_ipc_client_invoke(c->cli, "Flush", buf, len, -1,
					      on_flush, &fw, &err),
			 0);
	assert_true(pump_until(p, c, &done, WAIT_MS));
	assert_true(fw.ok);
	assert_int_equal(p->n_flush, 1);

	p->auto_ack_flush = false;
	done = false;
	fr.timeout_ms = 200;
	len = perfetto__protos__flush_request__pack(&fr, buf);
	assert_int_equal(vp_ipc_client_invoke(c->cli, "Flush", buf, len, -1,
					      on_flush, &fw, &err),
			 0);
	assert_true(pump_until(p, c, &done, WAIT_MS));
	assert_false(fw.ok);
	struct vp_service_stats st = svc_stats(t);
	assert_int_equal(st.flushes_succeeded, 1);
	assert_int_equal(st.flushes_failed, 1);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* ---- failed methods, frame by frame ------------------------------------------ */

/* A raw connection to one port: frames as they are on the wire. */
struct raw_port {
	int fd;
	struct vp_ipc_rx rx;
	struct pb_buf b;
	uint64_t next_id;
	char names[20][32];
	uint32_t ids[20];
	size_t n_methods;
};

static void raw_read(struct raw_port *rp, struct vp_ipc_frame *f)
{
	struct vp_error err;
	struct vp_ipc_rx_frame rf;
	for (;;) {
		int rc = vp_ipc_rx_next(&rp->rx, &rf, &err);
		assert_int_not_equal(rc, -1);
		if (rc == 1)
			break;
		struct pollfd pf = {.fd = rp->fd, .events = POLLIN};
		if (poll(&pf, 1, WAIT_MS) != 1)
			fail_msg("no frame within %d ms", WAIT_MS);
		size_t avail;
		uint8_t *sp = vp_ipc_rx_space(&rp->rx, &avail);
		ssize_t n = read(rp->fd, sp, avail);
		assert_true(n > 0);
		vp_ipc_rx_commit(&rp->rx, (size_t)n);
	}
	for (int i = 0; i < rf.n_fds; i++)
		close(rf.fds[i]);
	assert_int_equal(vp_ipc_frame_decode(rf.data, rf.len, f, &err), 0);
}

static void raw_open(struct raw_port *rp, const char *addr, const char *svc)
{
	struct vp_error err;
	memset(rp, 0, sizeof(*rp));
	rp->fd = vp_sock_connect(addr, WAIT_MS, &err);
	assert_true(rp->fd >= 0);
	vp_ipc_rx_init(&rp->rx);
	pb_buf_init(&rp->b);
	rp->next_id = 1;
	size_t m = vp_ipc_frame_begin(&rp->b, rp->next_id++);
	vp_ipc_put_bind(&rp->b, svc);
	vp_ipc_frame_end(&rp->b, m);
	assert_int_equal(vp_sock_send_all(rp->fd, rp->b.data, rp->b.len, -1),
			 0);
	pb_buf_reset(&rp->b);
	struct vp_ipc_frame f;
	raw_read(rp, &f);
	assert_int_equal(f.msg, VP_IPC_MSG_BIND_SERVICE_REPLY);
	assert_true(f.bind_reply.success);
	struct vp_ipc_method_iter it;
	uint32_t id;
	struct vp_ipc_bytes name;
	vp_ipc_methods_begin(&f, &it);
	while (vp_ipc_methods_next(&it, &id, &name) && rp->n_methods < 20) {
		size_t n = name.len < 31 ? name.len : 31;
		memcpy(rp->names[rp->n_methods], name.data, n);
		rp->names[rp->n_methods][n] = '\0';
		rp->ids[rp->n_methods++] = id;
	}
}

static void raw_close(struct raw_port *rp)
{
	close(rp->fd);
	vp_ipc_rx_free(&rp->rx);
	pb_buf_free(&rp->b);
}

/* Invokes method (by name, or by id when name is NULL) and returns the
 * request id. */
static uint64_t raw_invoke(struct raw_port *rp, const char *method,
			   uint32_t mid, const void *args, size_t len)
{
	for (size_t i = 0; method && i < rp->n_methods; i++)
		if (strcmp(rp->names[i], method) == 0)
			mid = rp->ids[i];
	assert_true(mid != 0);
	uint64_t id = rp->next_id++;
	size_t m = vp_ipc_frame_begin(&rp->b, id);
	vp_ipc_put_invoke(&rp->b, 1, mid, args, len, false);
	vp_ipc_frame_end(&rp->b, m);
	assert_int_equal(vp_sock_send_all(rp->fd, rp->b.data, rp->b.len, -1),
			 0);
	pb_buf_reset(&rp->b);
	return id;
}

/* The method's answer is one InvokeMethodReply for its request id with
 * success false, no has_more and no reply: how Perfetto's host frames a
 * failed method, the only failure Perfetto's client passes on (it drops
 * RequestError frames and would wait for ever). */
static void expect_rejected(struct raw_port *rp, const char *method,
			    const void *args, size_t len)
{
	uint64_t id = raw_invoke(rp, method, 0, args, len);
	struct vp_ipc_frame f;
	raw_read(rp, &f);
	if (f.msg != VP_IPC_MSG_INVOKE_METHOD_REPLY)
		fail_msg("%s: frame kind %d, not a method reply", method,
			 (int)f.msg);
	assert_int_equal(f.request_id, id);
	if (f.reply.success)
		fail_msg("%s: succeeded", method);
	assert_false(f.reply.has_more);
	assert_int_equal(f.reply.reply.len, 0);
}

/* A reply with success true, no has_more; its bytes are left in *f. */
static void expect_resolved(struct raw_port *rp, const char *method,
			    const void *args, size_t len,
			    struct vp_ipc_frame *f)
{
	uint64_t id = raw_invoke(rp, method, 0, args, len);
	raw_read(rp, f);
	if (f->msg != VP_IPC_MSG_INVOKE_METHOD_REPLY)
		fail_msg("%s: frame kind %d, not a method reply", method,
			 (int)f->msg);
	assert_int_equal(f->request_id, id);
	if (!f->reply.success)
		fail_msg("%s: failed", method);
	assert_false(f->reply.has_more);
}

static void test_failed_methods_reply(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct raw_port rp;
	struct vp_ipc_frame f;
	uint8_t args[64];
	size_t alen;

	raw_open(&rp, t->csock, "ConsumerPort");
	/* perfetto --attach=nokey / --is_detached=nokey */
	key_args("nokey", args, &alen);
	expect_rejected(&rp, "Attach", args, alen);
	expect_rejected(&rp, "Detach", args, alen);
	expect_rejected(&rp, "Flush", NULL, 0);
	expect_rejected(&rp, "GetTraceStats", NULL, 0);
	expect_rejected(&rp, "ChangeTraceConfig", NULL, 0);
	expect_rejected(&rp, "ObserveEvents", "\xff", 1);
	/* A method id the service does not have. */
	uint64_t id = raw_invoke(&rp, NULL, 99, NULL, 0);
	raw_read(&rp, &f);
	assert_int_equal(f.msg, VP_IPC_MSG_INVOKE_METHOD_REPLY);
	assert_int_equal(f.request_id, id);
	assert_false(f.reply.success);
	/* What traced answers with success: a read of nothing ends at once,
	 * StartTracing and DisableTracing with no session are no-ops. */
	expect_resolved(&rp, "ReadBuffers", NULL, 0, &f);
	expect_resolved(&rp, "StartTracing", NULL, 0, &f);
	expect_resolved(&rp, "DisableTracing", NULL, 0, &f);
	/* perfetto --clone 1234 / --clone-by-name: a CloneSessionResponse
	 * that says why. */
	Perfetto__Protos__CloneSessionRequest cr =
		PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
	cr.selector_case =
		PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
	cr.session_id = 1234;
	alen = perfetto__protos__clone_session_request__pack(&cr, args);
	expect_resolved(&rp, "CloneSession", args, alen, &f);
	Perfetto__Protos__CloneSessionResponse *r =
		perfetto__protos__clone_session_response__unpack(
			NULL, f.reply.reply.len, f.reply.reply.data);
	assert_non_null(r);
	assert_true(r->has_success);
	assert_false(r->success);
	assert_non_null(r->error);
	assert_true(strlen(r->error) > 0);
	perfetto__protos__clone_session_response__free_unpacked(r, NULL);
	cr.selector_case =
		PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
	cr.unique_session_name = "nosuchname";
	alen = perfetto__protos__clone_session_request__pack(&cr, args);
	expect_resolved(&rp, "CloneSession", args, alen, &f);
	r = perfetto__protos__clone_session_response__unpack(
		NULL, f.reply.reply.len, f.reply.reply.data);
	assert_non_null(r);
	assert_false(r->success);
	perfetto__protos__clone_session_response__free_unpacked(r, NULL);
	raw_close(&rp);

	raw_open(&rp, t->psock, "ProducerPort");
	expect_rejected(&rp, "InitializeConnection", "\xff", 1);
	expect_rejected(&rp, "CommitData", "\xff", 1);
	expect_rejected(&rp, "NotifyDataSourceStopped", "\xff", 1);
	raw_close(&rp);
	svc_stop(t);
}

/* ---- scraping a producer that stays -------------------------------------- */

static void register_writer(struct producer *p, uint32_t writer,
			    uint32_t buffer)
{
	Perfetto__Protos__RegisterTraceWriterRequest r =
		PERFETTO__PROTOS__REGISTER_TRACE_WRITER_REQUEST__INIT;
	r.has_trace_writer_id = r.has_target_buffer = true;
	r.trace_writer_id = writer;
	r.target_buffer = buffer;
	uint8_t buf[32];
	size_t len = perfetto__protos__register_trace_writer_request__pack(&r,
									   buf);
	producer_call(p, "RegisterTraceWriter", buf, len);
}

/* What a thread of a Perfetto SDK producer leaves in shared memory when it
 * never flushes: a chunk it finished but did not commit, and the chunk it
 * is writing (a packet count of 3, the third packet maybe unfinished). */
static void leave_uncommitted(struct producer *p, uint64_t base,
			      struct pb_buf *pk)
{
	struct frag f[5];
	for (int i = 0; i < 5; i++) {
		make_packet(&pk[i], base + (uint64_t)i, 24);
		f[i] = (struct frag){pk[i].data, pk[i].len};
	}
	producer_chunk(p, VP_PAGE_DIV_4, f, 2, 0, true);
	producer_chunk(p, VP_PAGE_DIV_4, f + 2, 3, 0, false);
}

static void consumer_flush(struct producer *p, struct consumer *c)
{
	struct vp_error err;
	bool done = false;
	struct flush_wait fw = {&done, false};
	assert_int_equal(vp_ipc_client_invoke(c->cli, "Flush", NULL, 0, -1,
					      on_flush, &fw, &err),
			 0);
	assert_true(pump_until(p, c, &done, WAIT_MS));
	assert_true(fw.ok);
}

static void test_scrape_live_producer(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "long-lived", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);
	register_writer(p, WRITER, p->target_buffer);
	struct pb_buf pk[5];
	for (int i = 0; i < 5; i++)
		pb_buf_init(&pk[i]);
	leave_uncommitted(p, 7001, pk);
	/* Scraped at the flush and again at the stop: read once. */
	consumer_flush(p, c);
	assert_true(svc_stats(t).chunks_scraped >= 2);
	stop_and_read(p, c);
	struct pkt_view v = {0};
	for (uint64_t ts = 7001; ts <= 7004; ts++) {
		if (!find_test_packet(&c->trace, ts, &v))
			fail_msg("packet %llu was not scraped",
				 (unsigned long long)ts);
		check_trusted_suffix(&v, &pk[ts - 7001]);
	}
	/* The flush shows as flush_started and all_data_sources_flushed
	 * service events, as traced writes them. */
	size_t started = 0, flushed = 0;
	uint64_t val;
	for (size_t i = 0; trace_packet(c->trace.data, c->trace.len, i, &v);
	     i++) {
		started += nested_varint(&v, 69, 0, 9, &val) && val == 1;
		flushed += nested_varint(&v, 69, 0, 3, &val) && val == 1;
	}
	assert_int_equal(started, 1);
	assert_int_equal(flushed, 1);
	/* The packets traced writes at the start and at the first read. */
	assert_true(find_field_packet(&c->trace, TP_SYNCHRONIZATION_MARKER,
				      &v));
	assert_true(find_field_packet(&c->trace, TP_TRACE_PROVENANCE, &v));
	assert_true(find_field_packet(&c->trace, TP_SYSTEM_INFO, &v));
	assert_true(nested_varint(&v, TP_SYSTEM_INFO, 0, 16, &val));
	assert_true(val > 0); /* system_ram_bytes */
	/* previous_packet_dropped on the sequence's first packet only, as
	 * traced sets it. */
	assert_true(find_test_packet(&c->trace, 7001, &v));
	assert_true(pkt_varint(&v, TP_PREVIOUS_PACKET_DROPPED, &val));
	assert_int_equal(val, 1);
	assert_true(find_test_packet(&c->trace, 7002, &v));
	assert_false(pkt_varint(&v, TP_PREVIOUS_PACKET_DROPPED, &val));
	/* The last packet of the chunk being written is not taken. */
	assert_false(find_test_packet(&c->trace, 7005, &v));
	assert_int_equal(count_test_packets(&c->trace), 4);
	/* The chunks are still the producer's. */
	assert_int_equal(vp_smb_chunk_state(&p->smb, 0, 1),
			 VP_CHUNK_BEING_WRITTEN);
	for (int i = 0; i < 5; i++)
		pb_buf_free(&pk[i]);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* smb_scraping_mode DISABLED: what is not committed is not read. */
static void test_scrape_disabled(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	g_scraping_mode =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__PRODUCER_SMBSCRAPING_MODE__SMB_SCRAPING_DISABLED;
	struct producer *p = producer_connect(t, "no-scraping", false);
	g_scraping_mode = 0;
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64};
	start_session(p, c, &o);
	register_writer(p, WRITER, p->target_buffer);
	struct pb_buf pk[5];
	for (int i = 0; i < 5; i++)
		pb_buf_init(&pk[i]);
	leave_uncommitted(p, 7101, pk);
	consumer_flush(p, c);
	stop_and_read(p, c);
	assert_int_equal(count_test_packets(&c->trace), 0);
	assert_int_equal(svc_stats(t).chunks_scraped, 0);
	for (int i = 0; i < 5; i++)
		pb_buf_free(&pk[i]);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* ---- CloneSession and the sessions in QueryServiceState ------------------- */

static Perfetto__Protos__TracingServiceState *query_state(struct consumer *c)
{
	struct vp_error err;
	uint8_t *reply = NULL;
	size_t len = 0;
	assert_int_equal(vp_ipc_client_call(c->cli, "QueryServiceState", NULL,
					    0, &reply, &len, NULL, WAIT_MS,
					    &err),
			 0);
	Perfetto__Protos__QueryServiceStateResponse *m =
		perfetto__protos__query_service_state_response__unpack(
			NULL, len, reply);
	free(reply);
	assert_non_null(m);
	Perfetto__Protos__TracingServiceState *s = m->service_state;
	m->service_state = NULL;
	perfetto__protos__query_service_state_response__free_unpacked(m, NULL);
	assert_non_null(s);
	return s;
}


struct clone_wait {
	bool done;
	bool ok;
};

static void on_clone(void *ctx, const struct vp_ipc_reply *r)
{
	struct clone_wait *cw = ctx;
	cw->done = true;
	if (!r->success)
		return;
	Perfetto__Protos__CloneSessionResponse *m =
		perfetto__protos__clone_session_response__unpack(NULL, r->len,
								 r->data);
	assert_non_null(m);
	cw->ok = m->success;
	if (m->success) {
		assert_true(m->has_uuid_msb && m->has_uuid_lsb);
	}
	perfetto__protos__clone_session_response__free_unpacked(m, NULL);
}

static void clone_into(struct producer *p, struct consumer *c,
		       uint64_t id, const char *name, bool *ok)
{
	Perfetto__Protos__CloneSessionRequest cr =
		PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
	if (name) {
		cr.selector_case =
			PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
		cr.unique_session_name = (char *)name;
	} else {
		cr.selector_case =
			PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
		cr.session_id = id;
	}
	uint8_t buf[128];
	size_t len = perfetto__protos__clone_session_request__pack(&cr, buf);
	struct clone_wait cw = {false, false};
	struct vp_error err;
	assert_int_equal(vp_ipc_client_invoke(c->cli, "CloneSession", buf, len,
					      -1, on_clone, &cw, &err),
			 0);
	assert_true(pump_until(p, c, &cw.done, WAIT_MS));
	*ok = cw.ok;
}

static void test_clone_session(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "cloned", false);
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64, .unique_session_name = "snap"};
	start_session(p, c, &o);
	write_many(p, 9000, 3, 16);

	struct consumer *c2 = consumer_connect(t);
	Perfetto__Protos__TracingServiceState *st = query_state(c2);
	assert_true(st->has_supports_tracing_sessions &&
		    st->supports_tracing_sessions);
	assert_int_equal(st->n_tracing_sessions, 1);
	const Perfetto__Protos__TracingServiceState__TracingSession *ts =
		st->tracing_sessions[0];
	assert_string_equal(ts->state, "STARTED");
	assert_string_equal(ts->unique_session_name, "snap");
	assert_true(ts->is_started);
	assert_int_equal(ts->n_buffer_size_kb, 1);
	assert_int_equal(ts->buffer_size_kb[0], 64);
	assert_int_equal(ts->num_data_sources, 1);
	uint64_t id = ts->id;
	perfetto__protos__tracing_service_state__free_unpacked(st, NULL);

	/* perfetto --clone ID: the copy is read by the caller; the session
	 * goes on. */
	bool ok = false;
	clone_into(p, c2, id, NULL, &ok);
	assert_true(ok);
	assert_true(p->n_flush >= 1);
	consumer_read(p, c2);
	assert_int_equal(count_test_packets(&c2->trace), 3);
	struct pkt_view v = {0};
	assert_true(find_field_packet(&c2->trace, TP_TRACE_CONFIG, &v));
	consumer_close(c2);

	/* perfetto --clone-by-name, after more was written. */
	write_many(p, 9100, 2, 16);
	c2 = consumer_connect(t);
	clone_into(p, c2, 0, "snap", &ok);
	assert_true(ok);
	consumer_read(p, c2);
	assert_int_equal(count_test_packets(&c2->trace), 5);
	consumer_close(c2);

	/* The copies go with their consumers. */
	uint64_t end = vp_loop_now_ms() + WAIT_MS;
	while (svc_stats(t).tracing_sessions != 1 && vp_loop_now_ms() < end)
		usleep(10000);
	assert_int_equal(svc_stats(t).tracing_sessions, 1);
	stop_and_read(p, c);
	assert_int_equal(count_test_packets(&c->trace), 5);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

/* The session ends while a clone waits for its flush: the clone is
 * answered (it fails), not left waiting. */
static void test_clone_source_gone(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "slow-flusher", false);
	p->auto_ack_flush = false;
	struct consumer *c = consumer_connect(t);
	struct cfg_opts o = {.size_kb = 64, .unique_session_name = "gone"};
	start_session(p, c, &o);
	struct consumer *c2 = consumer_connect(t);
	Perfetto__Protos__CloneSessionRequest cr =
		PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
	cr.selector_case =
		PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
	cr.unique_session_name = "gone";
	uint8_t buf[64];
	size_t len = perfetto__protos__clone_session_request__pack(&cr, buf);
	struct clone_wait cw = {false, false};
	struct vp_error err;
	assert_int_equal(vp_ipc_client_invoke(c2->cli, "CloneSession", buf, len,
					      -1, on_clone, &cw, &err),
			 0);
	assert_true(pump_count(p, c2, &p->n_flush, 1, WAIT_MS));
	assert_false(cw.done);
	consumer_close(c); /* the session goes with its consumer */
	assert_true(pump_until(p, c2, &cw.done, WAIT_MS));
	assert_false(cw.ok);
	consumer_close(c2);
	producer_close(p);
	svc_stop(t);
}

/* A chunk scraped complete, written to the file, then committed by its
 * producer: its packets are in the file once. */
static void test_scrape_then_commit_once(void **state)
{
	(void)state;
	struct svc *t = svc_start();
	struct producer *p = producer_connect(t, "late-committer", false);
	struct consumer *c = consumer_connect(t);
	char path[128];
	snprintf(path, sizeof(path), "%s/trace.pb", t->dir);
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	struct cfg_opts o = {
		.size_kb = 64,
		.write_into_file = true,
		.file_write_period_ms = 100,
		.write_flush_mode =
			PERFETTO__PROTOS__TRACE_CONFIG__WRITE_FLUSH_MODE__WRITE_FLUSH_DISABLED};
	consumer_enable(c, &o, fd);
	close(fd);
	assert_true(pump_count(p, c, &p->n_start, 1, WAIT_MS));
	register_writer(p, WRITER, p->target_buffer);
	struct pb_buf a, b;
	pb_buf_init(&a);
	pb_buf_init(&b);
	make_packet(&a, 7301, 16);
	make_packet(&b, 7302, 16);
	struct frag f[2] = {{a.data, a.len}, {b.data, b.len}};
	struct vp_smb_chunk ch = producer_chunk(p, VP_PAGE_DIV_4, f, 2, 0,
						true);
	consumer_flush(p, c);
	usleep(400 * 1000); /* written into the file */
	producer_commit(p, &ch, 1, p->target_buffer);
	usleep(300 * 1000);
	consumer_simple(c, "DisableTracing");
	assert_true(pump_until(p, c, &c->enable_done, WAIT_MS));

	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	struct pb_buf trace;
	pb_buf_init(&trace);
	uint8_t chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		pb_put_raw(&trace, chunk, n);
	fclose(fp);
	assert_int_equal(count_test_packets(&trace), 2);
	pb_buf_free(&trace);
	pb_buf_free(&a);
	pb_buf_free(&b);
	unlink(path);
	consumer_close(c);
	producer_close(p);
	svc_stop(t);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_forged_trusted_uid),
		cmocka_unit_test(test_forged_service_fields),
		cmocka_unit_test(test_ring_buffer_overwrite),
		cmocka_unit_test(test_discard_policy),
		cmocka_unit_test(test_producer_disconnect),
		cmocka_unit_test(test_consumer_disconnect),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_write_into_file),
		cmocka_unit_test(test_query_service_state),
		cmocka_unit_test(test_garbage_client),
		cmocka_unit_test(test_read_streaming),
		cmocka_unit_test(test_late_producer_and_filter),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_remote_producer),
		cmocka_unit_test(test_remote_not_matched_by_default),
		cmocka_unit_test(test_detach_attach),
		cmocka_unit_test(test_consumer_flush),
		cmocka_unit_test(test_failed_methods_reply),
		cmocka_unit_test(test_scrape_live_producer),
		cmocka_unit_test(test_scrape_disabled),
		cmocka_unit_test(test_clone_session),
		cmocka_unit_test(test_write_into_file_flushes),
		cmocka_unit_test(test_clone_source_gone),
		cmocka_unit_test(test_scrape_then_commit_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
