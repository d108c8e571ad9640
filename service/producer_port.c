/*
 * producer_port.c - the ProducerPort service of vtraced: producer
 * connections and their calls: their data sources and trace writers, the
 * shared memory buffer, the GetAsyncCommand stream and CommitData.  What
 * the service sends a producer, and its uncommitted chunks, are
 * producer.c's.
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
#include "producer.h"
#include "producer_port.h"
#include "session.h"
#include "svc_state.h"

#include "perfetto/ipc/ipc.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"
#include "vp_alloc.h"

static struct vp_producer *producer_of(struct vp_ipc_conn *conn)
{
	return vp_ipc_conn_user(conn);
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
	const struct vp_ipc_peer *peer = vp_ipc_conn_peer(conn);
	if (s->lockdown && peer && !peer->remote && peer->uid != s->uid) {
		/* TraceConfig.lockdown_mode (session.c): as traced, refused */
		vp_svc_log(s, false, "lockdown: refusing producer of uid %d",
			   (int)peer->uid);
		vp_ipc_conn_close(conn);
		return;
	}
	uint16_t id = alloc_producer_id(s);
	if (id == 0) {
		vp_svc_log(s, true, "too many producers; refusing one");
		vp_ipc_conn_close(conn);
		return;
	}
	struct vp_producer *p = vp_xcalloc(1, sizeof(*p));
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
			vp_producer_copy_chunk(p, b, s->scratch, len, complete);
		}
	}
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
	vp_producer_free(p);
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
	vp_producer_flush_queue(p);
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
	vp_producer_copy_chunk(p, b, chunk, len, complete);
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
	/* As traced: a trigger names its producer, so it needs a name. */
	if (!p->initialized) {
		bad_request(p, req, "ActivateTriggers",
			    "before InitializeConnection");
		return;
	}
	Perfetto__Protos__ActivateTriggersRequest *m =
		perfetto__protos__activate_triggers_request__unpack(NULL, len,
								    args);
	if (!m) {
		bad_request(p, req, "ActivateTriggers", "bad arguments");
		return;
	}
	s->stats.triggers_received += m->n_trigger_names;
	reply_empty(p, req);
	for (size_t i = 0; i < m->n_trigger_names; i++) {
		vp_svc_log(s, false, "producer %u (%s) trigger \"%.64s\"",
			   p->id, p->name, m->trigger_names[i]);
		vp_sessions_activate_trigger(s, p, m->trigger_names[i]);
	}
	perfetto__protos__activate_triggers_request__free_unpacked(m, NULL);
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
