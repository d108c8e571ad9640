/*
 * producer.c - a producer as vtraced drives it: the commands to its data
 * sources (queued for its GetAsyncCommand stream, SetupTracing with the
 * shared memory first), its writers' sequences, the copies of its chunks
 * into the buffers (committed, or scraped from shared memory), and its
 * end.  The ProducerPort calls themselves are producer_port.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_fields.h"
#include "producer.h"
#include "svc_state.h"
#include "vp_alloc.h"

struct vp_producer *vp_producer_by_id(struct vp_service *s, uint16_t id)
{
	for (size_t i = 0; i < s->producers.n; i++) {
		struct vp_producer *p = s->producers.v[i];
		if (p->id == id)
			return p;
	}
	return NULL;
}

/* ---- async commands ------------------------------------------------------ */

/* An async command waiting for the producer's GetAsyncCommand. */
struct vp_async_cmd {
	uint8_t *data;
	size_t len;
	int fd; /* not owned (the SMB fd), or -1 */
};

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

void vp_producer_flush_queue(struct vp_producer *p)
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

/* ---- chunks ------------------------------------------------------------- */

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

/* Copies a chunk of p's (validated by the caller) into buffer b, under
 * the sequence of its writer and with p's trusted identity. */
void vp_producer_copy_chunk(struct vp_producer *p, struct vp_svc_buffer *b,
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
			vp_producer_copy_chunk(p, b, s->scratch, len, complete);
			s->stats.chunks_scraped++;
		}
	}
}

/* ---- the end ------------------------------------------------------------ */

void vp_producer_free(struct vp_producer *p)
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
