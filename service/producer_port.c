/*
 * producer_port.c - the ProducerPort service of vtraced: producer
 * connections, their data sources and trace writers, the shared memory
 * buffer, the GetAsyncCommand stream and CommitData.
 *
 * Producers are untrusted.  Arguments that do not decode, indices outside
 * the shared memory, buffers of sessions the producer takes no part in:
 * each is counted (stats.invalid_requests / chunks_discarded /
 * patches_discarded) and ignored or answered with an error, never more.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_fields.h"
#include "service.h"

#include "perfetto/ipc/ipc.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"
#include "vp_alloc.h"

static struct vp_producer *producer_of(struct vp_ipc_conn *conn)
{
	return vp_ipc_conn_user(conn);
}

struct vp_producer *vp_producer_by_id(struct vp_service *s, uint16_t id)
{
	for (size_t i = 0; i < s->producers.n; i++) {
		struct vp_producer *p = s->producers.v[i];
		if (p->id == id)
			return p;
	}
	return NULL;
}

static void bad_request(struct vp_producer *p, uint64_t req,
			const char *method, const char *why)
{
	p->svc->stats.invalid_requests++;
	vp_svc_log(p->svc, true, "producer %u (%s) %s: %s", p->id,
		   p->name ? p->name : "?", method, why);
	vp_ipc_conn_reject(p->conn, req);
}

static void reply_empty(struct vp_producer *p, uint64_t req)
{
	vp_ipc_conn_reply(p->conn, req, true, false, NULL, 0, -1);
}

/* ---- async commands ------------------------------------------------------ */

static void send_cmd(struct vp_producer *p, const struct pb_buf *cmd, int fd)
{
	if (p->async_pending) {
		vp_ipc_conn_reply(p->conn, p->async_req, true, true, cmd->data,
				  cmd->len, fd);
		return;
	}
	if (p->n_queue >= SVC_MAX_QUEUED_CMDS) {
		/* A producer that never asks for its commands. */
		vp_svc_log(p->svc, true,
			   "producer %u (%s): %u commands queued, dropping it",
			   p->id, p->name ? p->name : "?",
			   SVC_MAX_QUEUED_CMDS);
		vp_ipc_conn_close(p->conn);
		return;
	}
	VP_XGROW(p->queue, p->cap_queue, p->n_queue + 1);
	struct vp_async_cmd *c = &p->queue[p->n_queue++];
	c->data = vp_xmalloc(cmd->len);
	memcpy(c->data, cmd->data, cmd->len);
	c->len = cmd->len;
	c->fd = fd;
}

static void flush_queue(struct vp_producer *p)
{
	for (size_t i = 0; i < p->n_queue; i++) {
		struct vp_async_cmd *c = &p->queue[i];
		vp_ipc_conn_reply(p->conn, p->async_req, true, true, c->data,
				  c->len, c->fd);
		free(c->data);
	}
	p->n_queue = 0;
}

/* Creates the SMB (local producers) and sends SetupTracing, once. */
static void ensure_setup_tracing(struct vp_producer *p)
{
	if (p->setup_sent)
		return;
	p->setup_sent = true;
	int fd = -1;
	if (!p->remote) {
		struct vp_error err;
		int rc = vp_smb_create(&p->smb, p->smb_size,
				       p->smb_page_size, &p->smb_fd, &err);
		/* Out of fds: a connection that never made a call gives
		 * way (see vp_ipc_limits). */
		if (rc < 0 && (errno == EMFILE || errno == ENFILE) &&
		    vp_ipc_group_reclaim_fd(p->svc->conn_group))
			rc = vp_smb_create(&p->smb, p->smb_size,
					   p->smb_page_size, &p->smb_fd, &err);
		if (rc < 0) {
			vp_svc_log(p->svc, true,
				   "producer %u (%s): shared memory: %s", p->id,
				   p->name, err.msg);
			p->smb_fd = -1;
		} else {
			p->has_smb = true;
			fd = p->smb_fd;
		}
	}
	struct pb_buf b;
	pb_buf_init(&b);
	size_t nb = pb_begin_nested(&b, CMD_SETUP_TRACING);
	pb_put_varint(&b, CMD_SETUP_TRACING_PAGE_SIZE_KB,
		      p->smb_page_size / 1024);
	pb_end_nested(&b, nb);
	send_cmd(p, &b, fd);
	pb_buf_free(&b);
}

/* StartDataSource and SetupDataSource number their fields alike. */
_Static_assert(CMD_START_NEW_INSTANCE_ID == CMD_SETUP_NEW_INSTANCE_ID &&
		       CMD_START_CONFIG == CMD_SETUP_CONFIG,
	       "Start/SetupDataSource");

static void send_ds_cmd(struct vp_producer *p, uint32_t which, uint64_t id,
			const uint8_t *cfg, size_t cfg_len)
{
	struct pb_buf b;
	pb_buf_init(&b);
	size_t nb = pb_begin_nested(&b, which);
	pb_put_varint(&b, CMD_START_NEW_INSTANCE_ID, id);
	pb_put_bytes(&b, CMD_START_CONFIG, cfg, cfg_len);
	pb_end_nested(&b, nb);
	send_cmd(p, &b, -1);
	pb_buf_free(&b);
}

void vp_producer_setup_ds(struct vp_producer *p, uint64_t instance_id,
			  const uint8_t *cfg, size_t cfg_len)
{
	ensure_setup_tracing(p);
	send_ds_cmd(p, CMD_SETUP_DATA_SOURCE, instance_id, cfg, cfg_len);
}

void vp_producer_start_ds(struct vp_producer *p, uint64_t instance_id,
			  const uint8_t *cfg, size_t cfg_len)
{
	send_ds_cmd(p, CMD_START_DATA_SOURCE, instance_id, cfg, cfg_len);
}

void vp_producer_stop_ds(struct vp_producer *p, uint64_t instance_id)
{
	struct pb_buf b;
	pb_buf_init(&b);
	size_t nb = pb_begin_nested(&b, CMD_STOP_DATA_SOURCE);
	pb_put_varint(&b, CMD_STOP_INSTANCE_ID, instance_id);
	pb_end_nested(&b, nb);
	send_cmd(p, &b, -1);
	pb_buf_free(&b);
}

void vp_producer_flush(struct vp_producer *p, const uint64_t *ids, size_t n,
		       uint64_t flush_id)
{
	struct pb_buf b;
	pb_buf_init(&b);
	size_t nb = pb_begin_nested(&b, CMD_FLUSH);
	for (size_t i = 0; i < n; i++)
		pb_put_varint(&b, CMD_FLUSH_DATA_SOURCE_IDS, ids[i]);
	pb_put_varint(&b, CMD_FLUSH_REQUEST_ID, flush_id);
	pb_end_nested(&b, nb);
	send_cmd(p, &b, -1);
	pb_buf_free(&b);
}

void vp_producer_clear_incremental(struct vp_producer *p,
				   const uint64_t *ids, size_t n)
{
	struct pb_buf b;
	pb_buf_init(&b);
	size_t nb = pb_begin_nested(&b, CMD_CLEAR_INCREMENTAL_STATE);
	for (size_t i = 0; i < n; i++)
		pb_put_varint(&b, CMD_CLEAR_DATA_SOURCE_IDS, ids[i]);
	pb_end_nested(&b, nb);
	send_cmd(p, &b, -1);
	pb_buf_free(&b);
}

const struct vp_svc_ds *vp_producer_find_ds(const struct vp_producer *p,
					    const char *name)
{
	for (size_t i = 0; i < p->n_ds; i++)
		if (strcmp(p->ds[i].name, name) == 0)
			return &p->ds[i];
	return NULL;
}

/* ---- connection lifecycle ------------------------------------------------- */

static uint16_t alloc_producer_id(struct vp_service *s)
{
	for (unsigned tries = 0; tries < 65536u; tries++) {
		uint16_t id = s->next_producer_id++;
		if (s->next_producer_id == 0)
			s->next_producer_id = 1;
		if (id != 0 && !vp_producer_by_id(s, id))
			return id;
	}
	return 0;
}

static void on_connect(void *ctx, struct vp_ipc_conn *conn)
{
	struct vp_service *s = ctx;
	uint16_t id = alloc_producer_id(s);
	if (id == 0) {
		vp_svc_log(s, true, "too many producers; refusing one");
		vp_ipc_conn_close(conn);
		return;
	}
	struct vp_producer *p = vp_xcalloc(1, sizeof(*p));
	const struct vp_ipc_peer *peer = vp_ipc_conn_peer(conn);
	p->svc = s;
	p->conn = conn;
	p->id = id;
	p->pid = peer ? peer->pid : -1;
	p->uid = peer ? peer->uid : (uid_t)-1;
	p->remote = peer && peer->remote;
	p->smb_fd = -1;
	p->smb_scraping = true;
	p->smb_size = VP_SMB_DEFAULT_SIZE;
	p->smb_page_size = VP_SMB_DEFAULT_PAGE_SIZE;
	u64map_init(&p->writer_seq);
	u64map_init(&p->writer_buf);
	vp_ipc_conn_set_user(conn, p);
	vp_ptrvec_push(&s->producers, p);
	s->stats.producers_seen++;
	vp_svc_log(s, false, "producer %u connected (pid %d uid %d%s%s)", id,
		   (int)p->pid, (int)p->uid, p->remote ? " remote " : "",
		   p->remote && peer ? peer->addr : "");
}

static void copy_into_buffer(struct vp_producer *p, struct vp_svc_buffer *b,
			     const uint8_t *chunk, size_t len, bool complete);

/* Copies what a dead producer left in its SMB into the buffers: complete
 * chunks as they are, chunks being written as incomplete. */
static void scrape_smb(struct vp_producer *p)
{
	struct vp_service *s = p->svc;
	if (!p->has_smb || !p->smb_scraping)
		return;
	for (uint32_t page = 0; page < p->smb.num_pages; page++) {
		enum vp_page_layout l = vp_smb_page_layout(&p->smb, page);
		unsigned n = vp_smb_chunks_per_layout(l);
		for (uint32_t c = 0; c < n; c++) {
			bool complete = false;
			if (!vp_smb_try_acquire_chunk_for_reading(
				    &p->smb, page, c, true, &complete))
				continue;
			size_t len = vp_smb_copy_chunk(&p->smb, page, c,
						       s->scratch);
			vp_smb_release_chunk_as_free(&p->smb, page, c);
			if (len < VP_SMB_CHUNK_HEADER_SIZE)
				continue;
			uint16_t writer = (uint16_t)(s->scratch[4] |
						     s->scratch[5] << 8);
			uint64_t buf_id = 0;
			if (!u64map_get(&p->writer_buf, writer, &buf_id)) {
				/* Never committed nor registered: no buffer
				 * to put it in. */
				s->stats.chunks_discarded++;
				continue;
			}
			struct vp_svc_buffer *b =
				vp_buffer_by_id(s, (uint16_t)buf_id);
			if (!b || !vp_producer_may_write(s, p, b->id)) {
				s->stats.chunks_discarded++;
				continue;
			}
			/* A registered writer that never committed gets its
			 * sequence now. */
			copy_into_buffer(p, b, s->scratch, len, complete);
		}
	}
}

void vp_producer_scrape(struct vp_producer *p, struct vp_session *sess,
			bool final)
{
	struct vp_service *s = p->svc;
	if (!p->has_smb || !p->smb_scraping)
		return;
	bool in_session = false;
	for (size_t i = 0; i < sess->instances.n && !in_session; i++) {
		const struct vp_ds_instance *inst = sess->instances.v[i];
		in_session = inst->producer == p;
	}
	if (!in_session)
		return;
	for (uint32_t page = 0; page < p->smb.num_pages; page++) {
		enum vp_page_layout l = vp_smb_page_layout(&p->smb, page);
		unsigned n = vp_smb_chunks_per_layout(l);
		for (uint32_t c = 0; c < n; c++) {
			bool complete = false;
			size_t len = vp_smb_scrape_chunk(&p->smb, page, c,
							 s->scratch, &complete);
			if (len < VP_SMB_CHUNK_HEADER_SIZE)
				continue;
			uint16_t writer = (uint16_t)(s->scratch[4] |
						     s->scratch[5] << 8);
			uint64_t buf_id = 0;
			if (!u64map_get(&p->writer_buf, writer, &buf_id)) {
				if (final)
					s->stats.chunks_discarded++;
				continue;
			}
			struct vp_svc_buffer *b =
				vp_buffer_by_id(s, (uint16_t)buf_id);
			if (!b || b->session != sess)
				continue;
			/* A registered writer that never committed gets its
			 * sequence now. */
			copy_into_buffer(p, b, s->scratch, len, complete);
			s->stats.chunks_scraped++;
		}
	}
}

static void producer_free(struct vp_producer *p)
{
	for (size_t i = 0; i < p->n_queue; i++)
		free(p->queue[i].data);
	free(p->queue);
	for (size_t i = 0; i < p->n_ds; i++) {
		free(p->ds[i].name);
		free(p->ds[i].descriptor);
	}
	free(p->ds);
	if (p->has_smb)
		vp_smb_unmap(&p->smb);
	if (p->smb_fd >= 0)
		close(p->smb_fd);
	u64map_free(&p->writer_seq);
	u64map_free(&p->writer_buf);
	free(p->name);
	free(p->sdk_version);
	free(p);
}

static void on_disconnect(void *ctx, struct vp_ipc_conn *conn)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	vp_svc_log(s, false, "producer %u (%s) disconnected", p->id,
		   p->name ? p->name : "?");
	scrape_smb(p);
	vp_sessions_on_producer_gone(s, p);
	for (size_t i = 0; i < SVC_MAX_BUFFER_IDS; i++)
		if (s->buffers[i])
			vp_trace_buffer_producer_gone(s->buffers[i]->tb,
						      p->id);
	vp_ptrvec_remove(&s->producers, p);
	vp_ipc_conn_set_user(conn, NULL);
	producer_free(p);
}

/* ---- methods ------------------------------------------------------------ */

static bool valid_page_size(uint32_t v)
{
	return v >= VP_SMB_MIN_PAGE_SIZE && v <= VP_SMB_MAX_PAGE_SIZE &&
	       v % 4096u == 0;
}

/* The machine key of a remote producer: its hint, else its address
 * without the port. */
static void machine_key(const struct vp_ipc_peer *peer, char *key,
			size_t size)
{
	if (peer->machine_id_hint[0]) {
		snprintf(key, size, "hint:%s", peer->machine_id_hint);
		return;
	}
	snprintf(key, size, "addr:%s", peer->addr);
	char *colon = strrchr(key, ':');
	if (colon && colon > key + 5)
		*colon = '\0';
}

static void m_initialize_connection(void *ctx, struct vp_ipc_conn *conn,
				    uint64_t req, const uint8_t *args,
				    size_t len)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	if (p->initialized) {
		bad_request(p, req, "InitializeConnection", "already initialized");
		return;
	}
	Perfetto__Protos__InitializeConnectionRequest *m =
		perfetto__protos__initialize_connection_request__unpack(
			NULL, len, args);
	if (!m) {
		bad_request(p, req, "InitializeConnection",
			    "arguments do not decode");
		return;
	}
	p->initialized = true;
	p->name = vp_svc_strndup(m->producer_name ? m->producer_name : "",
				 SVC_MAX_NAME);
	p->sdk_version = vp_svc_strndup(m->sdk_version, SVC_MAX_NAME);
	/* Unspecified: on.  traced's own default is off, but Perfetto's SDK
	 * asks for it, and so loses nothing; a producer that says no gets
	 * none, not even when it goes away. */
	p->smb_scraping =
		!(m->has_smb_scraping_mode &&
		  m->smb_scraping_mode ==
			  PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__PRODUCER_SMBSCRAPING_MODE__SMB_SCRAPING_DISABLED);
	if (m->has_shared_memory_page_size_hint_bytes &&
	    valid_page_size(m->shared_memory_page_size_hint_bytes))
		p->smb_page_size = m->shared_memory_page_size_hint_bytes;
	uint32_t size = VP_SMB_DEFAULT_SIZE;
	if (m->has_shared_memory_size_hint_bytes &&
	    m->shared_memory_size_hint_bytes > 0) {
		size = m->shared_memory_size_hint_bytes;
		if (size > VP_SMB_MAX_SIZE)
			size = VP_SMB_MAX_SIZE;
	}
	size -= size % p->smb_page_size;
	if (size < p->smb_page_size)
		size = p->smb_page_size;
	p->smb_size = size;
	perfetto__protos__initialize_connection_request__free_unpacked(m,
								       NULL);

	const struct vp_ipc_peer *peer = vp_ipc_conn_peer(conn);
	if (p->remote && peer) {
		char key[160];
		machine_key(peer, key, sizeof(key));
		p->machine_id = vp_svc_machine_id(s, key);
		snprintf(p->machine_name, sizeof(p->machine_name), "%s",
			 peer->machine_name);
		p->pid = peer->pid;
		p->uid = peer->uid;
	}
	vp_svc_log(s, false,
		   "producer %u is \"%s\" (smb %u KiB, page %u KiB%s, "
		   "machine %u)",
		   p->id, p->name, p->smb_size / 1024,
		   p->smb_page_size / 1024,
		   p->remote ? ", emulated" : "", p->machine_id);

	Perfetto__Protos__InitializeConnectionResponse r =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_RESPONSE__INIT;
	if (p->remote) {
		r.has_use_shmem_emulation = true;
		r.use_shmem_emulation = true;
	}
	uint8_t out[16];
	size_t n = perfetto__protos__initialize_connection_response__pack(
		&r, out);
	vp_ipc_conn_reply(conn, req, true, false, out, n, -1);
}

static void ds_from_descriptor(struct vp_svc_ds *d,
			       const Perfetto__Protos__DataSourceDescriptor *dd)
{
	d->descriptor_id = dd->has_id ? dd->id : 0;
	d->will_notify_on_start = dd->has_will_notify_on_start &&
				  dd->will_notify_on_start;
	d->will_notify_on_stop =
		dd->has_will_notify_on_stop && dd->will_notify_on_stop;
	d->handles_incremental_state_clear =
		dd->has_handles_incremental_state_clear &&
		dd->handles_incremental_state_clear;
	d->no_flush = dd->has_no_flush && dd->no_flush;
}

/* The raw DataSourceDescriptor bytes inside a (Register|Update)DataSource
 * request, kept for QueryServiceState. */
_Static_assert(RDS_DATA_SOURCE_DESCRIPTOR == UDS_DATA_SOURCE_DESCRIPTOR,
	       "Register/UpdateDataSourceRequest");
static void keep_descriptor(struct vp_svc_ds *d, const uint8_t *args,
			    size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, args, len);
	while (pb_next(&r, &f)) {
		if (f.num != RDS_DATA_SOURCE_DESCRIPTOR || f.wt != PB_WT_LEN)
			continue;
		free(d->descriptor);
		d->descriptor = vp_xmalloc(f.len);
		memcpy(d->descriptor, f.data, f.len);
		d->descriptor_len = f.len;
	}
}

static void reply_register_error(struct vp_producer *p, uint64_t req,
				 const char *msg)
{
	p->svc->stats.invalid_requests++;
	vp_svc_log(p->svc, true, "producer %u (%s) RegisterDataSource: %s",
		   p->id, p->name ? p->name : "?", msg);
	Perfetto__Protos__RegisterDataSourceResponse r =
		PERFETTO__PROTOS__REGISTER_DATA_SOURCE_RESPONSE__INIT;
	r.error = (char *)msg;
	uint8_t out[512];
	if (perfetto__protos__register_data_source_response__get_packed_size(
		    &r) > sizeof(out)) {
		vp_ipc_conn_reject(p->conn, req);
		return;
	}
	size_t n = perfetto__protos__register_data_source_response__pack(&r,
									out);
	vp_ipc_conn_reply(p->conn, req, true, false, out, n, -1);
}

static void m_register_data_source(void *ctx, struct vp_ipc_conn *conn,
				   uint64_t req, const uint8_t *args,
				   size_t len)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	Perfetto__Protos__RegisterDataSourceRequest *m =
		perfetto__protos__register_data_source_request__unpack(
			NULL, len, args);
	if (!m) {
		bad_request(p, req, "RegisterDataSource",
			    "arguments do not decode");
		return;
	}
	const Perfetto__Protos__DataSourceDescriptor *dd =
		m->data_source_descriptor;
	const char *err = NULL;
	if (!dd || !dd->name || !dd->name[0])
		err = "data source without a name";
	else if (strlen(dd->name) > SVC_MAX_NAME)
		err = "data source name too long";
	else if (vp_producer_find_ds(p, dd->name))
		err = "data source already registered";
	else if (p->n_ds >= SVC_MAX_DATA_SOURCES_PER_PRODUCER)
		err = "too many data sources";
	if (err) {
		reply_register_error(p, req, err);
		perfetto__protos__register_data_source_request__free_unpacked(
			m, NULL);
		return;
	}
	VP_XGROW(p->ds, p->cap_ds, p->n_ds + 1);
	struct vp_svc_ds *d = &p->ds[p->n_ds++];
	memset(d, 0, sizeof(*d));
	d->name = vp_svc_strndup(dd->name, SVC_MAX_NAME);
	ds_from_descriptor(d, dd);
	keep_descriptor(d, args, len);
	perfetto__protos__register_data_source_request__free_unpacked(m,
								      NULL);
	s->stats.data_sources_seen++;
	vp_svc_log(s, false, "producer %u (%s) registered data source %s",
		   p->id, p->name ? p->name : "?", d->name);
	reply_empty(p, req);
	vp_sessions_on_ds_registered(s, p, d);
}

static void m_update_data_source(void *ctx, struct vp_ipc_conn *conn,
				 uint64_t req, const uint8_t *args,
				 size_t len)
{
	(void)ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	Perfetto__Protos__UpdateDataSourceRequest *m =
		perfetto__protos__update_data_source_request__unpack(NULL, len,
								     args);
	if (!m || !m->data_source_descriptor ||
	    !m->data_source_descriptor->name) {
		if (m)
			perfetto__protos__update_data_source_request__free_unpacked(
				m, NULL);
		bad_request(p, req, "UpdateDataSource", "bad arguments");
		return;
	}
	struct vp_svc_ds *d = (struct vp_svc_ds *)vp_producer_find_ds(
		p, m->data_source_descriptor->name);
	if (!d) {
		perfetto__protos__update_data_source_request__free_unpacked(
			m, NULL);
		bad_request(p, req, "UpdateDataSource",
			    "no such data source");
		return;
	}
	ds_from_descriptor(d, m->data_source_descriptor);
	keep_descriptor(d, args, len);
	perfetto__protos__update_data_source_request__free_unpacked(m, NULL);
	reply_empty(p, req);
}

static void m_unregister_data_source(void *ctx, struct vp_ipc_conn *conn,
				     uint64_t req, const uint8_t *args,
				     size_t len)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	Perfetto__Protos__UnregisterDataSourceRequest *m =
		perfetto__protos__unregister_data_source_request__unpack(
			NULL, len, args);
	if (!m || !m->data_source_name) {
		if (m)
			perfetto__protos__unregister_data_source_request__free_unpacked(
				m, NULL);
		bad_request(p, req, "UnregisterDataSource", "bad arguments");
		return;
	}
	size_t i;
	for (i = 0; i < p->n_ds; i++)
		if (strcmp(p->ds[i].name, m->data_source_name) == 0)
			break;
	if (i == p->n_ds) {
		perfetto__protos__unregister_data_source_request__free_unpacked(
			m, NULL);
		bad_request(p, req, "UnregisterDataSource",
			    "no such data source");
		return;
	}
	vp_sessions_on_ds_unregistered(s, p, p->ds[i].name);
	free(p->ds[i].name);
	free(p->ds[i].descriptor);
	memmove(&p->ds[i], &p->ds[i + 1], (p->n_ds - i - 1) * sizeof(p->ds[0]));
	p->n_ds--;
	perfetto__protos__unregister_data_source_request__free_unpacked(m,
									NULL);
	reply_empty(p, req);
}

static void m_get_async_command(void *ctx, struct vp_ipc_conn *conn,
				uint64_t req, const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	p->async_pending = true;
	p->async_req = req;
	flush_queue(p);
}

/* The trusted_packet_sequence_id of one of p's writers. */
static uint32_t writer_sequence(struct vp_producer *p, uint16_t writer)
{
	uint64_t seq;
	if (u64map_get(&p->writer_seq, writer, &seq))
		return (uint32_t)seq;
	seq = vp_svc_new_sequence_id(p->svc);
	u64map_put(&p->writer_seq, writer, seq);
	return (uint32_t)seq;
}

/* The buffer a commit names, if p may write it. */
static struct vp_svc_buffer *commit_target(struct vp_producer *p,
					   uint32_t target)
{
	if (target == 0 || target >= SVC_MAX_BUFFER_IDS)
		return NULL;
	struct vp_svc_buffer *b = vp_buffer_by_id(p->svc, (uint16_t)target);
	if (!b)
		return NULL;
	if (p->last_ok_buffer != b->id) {
		if (!vp_producer_may_write(p->svc, p, b->id))
			return NULL;
		p->last_ok_buffer = b->id;
	}
	return b;
}

/* Copies a chunk of p's (validated by the caller) into buffer b, under
 * the sequence of its writer and with p's trusted identity. */
static void copy_into_buffer(struct vp_producer *p, struct vp_svc_buffer *b,
			     const uint8_t *chunk, size_t len, bool complete)
{
	uint16_t writer = (uint16_t)(chunk[4] | chunk[5] << 8);
	struct vp_tb_sequence_meta meta = {
		.sequence_id = writer_sequence(p, writer),
		.uid = (int32_t)p->uid,
		.pid = (int32_t)p->pid,
		.machine_id = p->machine_id,
	};
	vp_trace_buffer_copy_chunk(b->tb, p->id, &meta, chunk, len, complete);
}

/* Copies one chunk (already out of shared memory) into its buffer. */
static void commit_chunk(struct vp_producer *p, struct vp_svc_buffer *b,
			 const uint8_t *chunk, size_t len, bool complete)
{
	struct vp_service *s = p->svc;
	if (!b) {
		s->stats.chunks_discarded++;
		return;
	}
	if (len < VP_SMB_CHUNK_HEADER_SIZE || len > VP_SMB_MAX_PAGE_SIZE) {
		s->stats.chunks_discarded++;
		return;
	}
	uint16_t writer = (uint16_t)(chunk[4] | chunk[5] << 8);
	u64map_put(&p->writer_buf, writer, b->id);
	copy_into_buffer(p, b, chunk, len, complete);
}

static void move_chunk(struct vp_producer *p,
		       const Perfetto__Protos__CommitDataRequest__ChunksToMove
			       *c)
{
	struct vp_service *s = p->svc;
	struct vp_svc_buffer *b =
		commit_target(p, c->has_target_buffer ? c->target_buffer : 0);
	bool complete = !(c->has_chunk_incomplete && c->chunk_incomplete);
	if (c->has_data) {
		commit_chunk(p, b, c->data.data, c->data.len, complete);
		return;
	}
	if (!p->has_smb || !c->has_page || !c->has_chunk ||
	    c->page >= p->smb.num_pages ||
	    c->chunk >= VP_SMB_MAX_CHUNKS_PER_PAGE) {
		s->stats.chunks_discarded++;
		return;
	}
	bool was_complete = false;
	if (!vp_smb_try_acquire_chunk_for_reading(&p->smb, c->page, c->chunk,
						  false, &was_complete)) {
		s->stats.chunks_discarded++;
		return;
	}
	size_t len = vp_smb_copy_chunk(&p->smb, c->page, c->chunk,
				       s->scratch);
	vp_smb_release_chunk_as_free(&p->smb, c->page, c->chunk);
	commit_chunk(p, b, s->scratch, len, complete);
}

#define SVC_MAX_PATCHES 1024u

static void patch_chunk(struct vp_producer *p,
			const Perfetto__Protos__CommitDataRequest__ChunkToPatch
				*c)
{
	struct vp_service *s = p->svc;
	struct vp_svc_buffer *b =
		commit_target(p, c->has_target_buffer ? c->target_buffer : 0);
	if (!b || !c->has_writer_id || c->writer_id > 0xffffu ||
	    !c->has_chunk_id || c->n_patches > SVC_MAX_PATCHES) {
		s->stats.patches_discarded += c->n_patches ? c->n_patches : 1;
		return;
	}
	struct vp_tb_patch patches[64];
	size_t n = 0;
	bool applied = false;
	bool more = c->has_has_more_patches && c->has_more_patches;
	for (size_t i = 0; i < c->n_patches; i++) {
		const Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch
			*pt = c->patches[i];
		if (!pt->has_offset || !pt->has_data ||
		    pt->data.len != VP_TB_PATCH_SIZE) {
			s->stats.patches_discarded++;
			continue;
		}
		patches[n].offset = pt->offset;
		memcpy(patches[n].data, pt->data.data, VP_TB_PATCH_SIZE);
		if (++n < 64)
			continue;
		/* A full batch: more follow, keep the chunk unreadable. */
		if (vp_trace_buffer_patch_chunk(b->tb, p->id,
						(uint16_t)c->writer_id,
						c->chunk_id, patches, n,
						true) < 0)
			s->stats.patches_discarded += n;
		n = 0;
		applied = true;
	}
	if (n == 0 && !applied)
		return;
	if (vp_trace_buffer_patch_chunk(b->tb, p->id, (uint16_t)c->writer_id,
					c->chunk_id, patches, n, more) < 0)
		s->stats.patches_discarded += n;
}

static void m_commit_data(void *ctx, struct vp_ipc_conn *conn, uint64_t req,
			  const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	Perfetto__Protos__CommitDataRequest *m =
		perfetto__protos__commit_data_request__unpack(NULL, len, args);
	if (!m) {
		bad_request(p, req, "CommitData", "arguments do not decode");
		return;
	}
	for (size_t i = 0; i < m->n_chunks_to_move; i++)
		move_chunk(p, m->chunks_to_move[i]);
	for (size_t i = 0; i < m->n_chunks_to_patch; i++)
		patch_chunk(p, m->chunks_to_patch[i]);
	bool flush = m->has_flush_request_id && m->flush_request_id;
	uint64_t flush_id = m->flush_request_id;
	perfetto__protos__commit_data_request__free_unpacked(m, NULL);
	reply_empty(p, req);
	if (flush)
		vp_sessions_on_flush_ack(s, p, flush_id);
}

static void m_register_trace_writer(void *ctx, struct vp_ipc_conn *conn,
				    uint64_t req, const uint8_t *args,
				    size_t len)
{
	(void)ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	Perfetto__Protos__RegisterTraceWriterRequest *m =
		perfetto__protos__register_trace_writer_request__unpack(
			NULL, len, args);
	if (!m || m->trace_writer_id == 0 || m->trace_writer_id > 0xffffu ||
	    m->target_buffer == 0 || m->target_buffer >= SVC_MAX_BUFFER_IDS) {
		if (m)
			perfetto__protos__register_trace_writer_request__free_unpacked(
				m, NULL);
		bad_request(p, req, "RegisterTraceWriter", "bad arguments");
		return;
	}
	u64map_put(&p->writer_buf, m->trace_writer_id, m->target_buffer);
	perfetto__protos__register_trace_writer_request__free_unpacked(m,
									NULL);
	reply_empty(p, req);
}

static void m_unregister_trace_writer(void *ctx, struct vp_ipc_conn *conn,
				      uint64_t req, const uint8_t *args,
				      size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	/* The writer's sequence id stays: chunks of it may still be in a
	 * buffer, and a late scrape still needs its target. */
	struct vp_producer *p = producer_of(conn);
	if (p)
		reply_empty(p, req);
}

/* The data source id of NotifyDataSourceStarted/Stopped. */
_Static_assert(NDS_STARTED_DATA_SOURCE_ID == NDS_STOPPED_DATA_SOURCE_ID,
	       "NotifyDataSourceStarted/StoppedRequest");

static bool decode_ds_id(const uint8_t *args, size_t len, uint64_t *id)
{
	struct pb_reader r;
	struct pb_field f;
	bool found = false;
	pb_reader_init(&r, args, len);
	while (pb_next(&r, &f)) {
		if (f.num == NDS_STARTED_DATA_SOURCE_ID &&
		    f.wt == PB_WT_VARINT) {
			*id = f.val;
			found = true;
		}
	}
	return found && r.err == PB_OK;
}

static void m_notify_started(void *ctx, struct vp_ipc_conn *conn,
			     uint64_t req, const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	uint64_t id;
	if (!p)
		return;
	if (!decode_ds_id(args, len, &id)) {
		bad_request(p, req, "NotifyDataSourceStarted", "bad arguments");
		return;
	}
	reply_empty(p, req);
	vp_sessions_on_ds_started(s, p, id);
}

static void m_notify_stopped(void *ctx, struct vp_ipc_conn *conn,
			     uint64_t req, const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	uint64_t id;
	if (!p)
		return;
	if (!decode_ds_id(args, len, &id)) {
		bad_request(p, req, "NotifyDataSourceStopped", "bad arguments");
		return;
	}
	reply_empty(p, req);
	vp_sessions_on_ds_stopped(s, p, id);
}

static void m_activate_triggers(void *ctx, struct vp_ipc_conn *conn,
				uint64_t req, const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_producer *p = producer_of(conn);
	if (!p)
		return;
	Perfetto__Protos__ActivateTriggersRequest *m =
		perfetto__protos__activate_triggers_request__unpack(NULL, len,
								    args);
	if (!m) {
		bad_request(p, req, "ActivateTriggers", "bad arguments");
		return;
	}
	s->stats.triggers_received += m->n_trigger_names;
	for (size_t i = 0; i < m->n_trigger_names; i++)
		vp_svc_log(s, false, "producer %u (%s) trigger \"%.64s\"",
			   p->id, p->name ? p->name : "?",
			   m->trigger_names[i]);
	perfetto__protos__activate_triggers_request__free_unpacked(m, NULL);
	reply_empty(p, req);
}

static void m_sync(void *ctx, struct vp_ipc_conn *conn, uint64_t req,
		   const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_producer *p = producer_of(conn);
	if (p)
		reply_empty(p, req);
}

static const struct vp_ipc_method producer_methods[] = {
	{"InitializeConnection", m_initialize_connection},
	{"RegisterDataSource", m_register_data_source},
	{"UnregisterDataSource", m_unregister_data_source},
	{"CommitData", m_commit_data},
	{"GetAsyncCommand", m_get_async_command},
	{"RegisterTraceWriter", m_register_trace_writer},
	{"UnregisterTraceWriter", m_unregister_trace_writer},
	{"NotifyDataSourceStarted", m_notify_started},
	{"NotifyDataSourceStopped", m_notify_stopped},
	{"ActivateTriggers", m_activate_triggers},
	{"Sync", m_sync},
	{"UpdateDataSource", m_update_data_source},
};

void vp_producer_port_describe(struct vp_ipc_service *d,
			       struct vp_service *s)
{
	memset(d, 0, sizeof(*d));
	d->name = "ProducerPort";
	d->methods = producer_methods;
	d->n_methods = sizeof(producer_methods) / sizeof(producer_methods[0]);
	d->ctx = s;
	d->on_connect = on_connect;
	d->on_disconnect = on_disconnect;
}
