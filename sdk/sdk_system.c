/*
 * sdk_system.c - the system backend: a producer thread that talks to the
 * tracing service (vtraced or Perfetto's traced) over ProducerPort.
 *
 * The thread runs a vp_loop.  It connects (retrying with backoff while the
 * service is absent: vp_init never waits for it), binds ProducerPort,
 * sends InitializeConnection, registers "track_event" (with the
 * registered categories) and every generic data source, and keeps a
 * GetAsyncCommand stream open: SetupTracing (the SMB fd comes with it),
 * SetupDataSource, StartDataSource, StopDataSource, Flush and
 * ClearIncrementalState.  If the service says use_shmem_emulation (vsock,
 * TCP) there is no shared memory: writers use a private arena with the
 * same layout and the chunks travel inline in CommitData.
 *
 * Commits are batched: a writer that completes a chunk queues it
 * (vp_sdk.commit_q) and wakes this thread only when VP_COMMIT_BATCH chunks
 * wait, when the SMB is more than half taken, or (for a lone chunk) after
 * VP_COMMIT_DELAY_MS.  RegisterTraceWriter for new writers is sent before
 * the commit that may carry their chunks, UnregisterTraceWriter after it.
 *
 * Arguments are encoded with pb_wire.h (field numbers from
 * protos/perfetto/ipc/producer_port.proto and ipc.proto) and replies
 * scanned with it, so the DataSourceConfig bytes reach data sources
 * exactly as the service sent them.
 *
 * When the service goes away every instance is stopped (its writers
 * retired), the SMB unmapped, and the thread reconnects later.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "event_loop.h"
#include "ipc_client.h"
#include "ipc_sock.h"
#include "sdk_data_source.h"
#include "sdk_state.h"
#include "sdk_system.h"
#include "sdk_track_event.h"
#include "sdk_writer.h"
#include "vp_version.h"
#include "vp_alloc.h"
#include "vp_log.h"

#define VP_COMMIT_BATCH 4u      /* chunks that make the producer commit */
#define VP_COMMIT_DELAY_MS 20u  /* the longest a lone chunk waits */
#define VP_CONNECT_TIMEOUT_MS 500
#define VP_CALL_TIMEOUT_MS 2000
#define VP_BACKOFF_MIN_MS 100u
#define VP_BACKOFF_MAX_MS 2000u
#define VP_COMMIT_FRAME_BYTES (96u << 10) /* inline chunks per CommitData */

struct writer_reg {
	uint16_t id;
	uint32_t target_buffer;
	bool add;
};

struct vp_system {
	pthread_t thread;
	bool thread_started;
	/* vp_system_stop could not post stop_task (out of memory): the
	 * producer thread runs it when its loop returns. */
	atomic_bool stop_unposted;
	struct vp_loop *loop;
	struct vp_ipc_client *client;
	char *addr;
	uint32_t shm_size, page_size;
	uint32_t backoff_ms;
	bool connected;
	bool emulation;

	/* Under vp_sdk.commit_mu. */
	struct writer_reg *regs;
	size_t n_regs, cap_regs;
	bool commit_now_posted;
	bool commit_timer_posted;

	/* vp_flush() waits for a commit round it asked for. */
	pthread_mutex_t flush_mu;
	pthread_cond_t flush_cv;
	uint64_t flush_asked, flush_done;
};

static void sys_connect(void *ctx);
static void sys_disconnect(struct vp_system *s, const char *why);

/* ---------------------------------------------------------------- calls */

static void log_reply(void *ctx, const struct vp_ipc_reply *r)
{
	const char *what = ctx;
	if (!r->success && !r->disconnected)
		vp_log_error("%s failed", what);
	if (r->fd >= 0)
		close(r->fd);
}

static void invoke(struct vp_system *s, const char *method,
		   const struct pb_buf *b, bool want_reply)
{
	struct vp_error err;
	if (!s->client)
		return;
	if (pb_buf_failed(b)) {
		/* Not sent: a CommitData's chunks are then lost, and the
		 * service counts the gap in their chunk ids. */
		vp_log_error("%s: out of memory", method);
		return;
	}
	if (vp_ipc_client_invoke(s->client, method, b->data, b->len, -1,
				 want_reply ? log_reply : NULL,
				 (void *)method, &err) < 0)
		vp_log_error("%s: %s", method, err.msg);
}

/* --------------------------------------------------------------- commit */

/* Sends registrations, then CommitData for every queued chunk (in frames
 * of bounded size), then unregistrations.  flush_id 0: none. */
static void sys_commit(struct vp_system *s, uint64_t flush_id)
{
	pthread_mutex_lock(&vp_g.commit_mu);
	struct vp_commit_entry *q = vp_g.commit_q;
	size_t n = vp_g.commit_len;
	struct writer_reg *regs = s->regs;
	size_t n_regs = s->n_regs;
	vp_g.commit_q = NULL;
	vp_g.commit_len = vp_g.commit_cap = 0;
	s->regs = NULL;
	s->n_regs = s->cap_regs = 0;
	s->commit_now_posted = false;
	pthread_mutex_unlock(&vp_g.commit_mu);

	struct pb_buf b;
	pb_buf_init_soft(&b);
	for (size_t i = 0; i < n_regs; i++) {
		if (!regs[i].add)
			continue;
		pb_buf_reset(&b);
		pb_put_varint(&b, RTW_TRACE_WRITER_ID, regs[i].id);
		pb_put_varint(&b, RTW_TARGET_BUFFER, regs[i].target_buffer);
		invoke(s, "RegisterTraceWriter", &b, false);
	}
	bool emulated = atomic_load(&vp_g.mode) == VP_MODE_EMULATED;
	size_t i = 0;
	do {
		pb_buf_reset(&b);
		for (; i < n && b.len < VP_COMMIT_FRAME_BYTES; i++) {
			size_t m = pb_begin_nested(&b, CDR_CHUNKS_TO_MOVE);
			if (emulated) {
				pb_put_varint(&b, CTM_TARGET_BUFFER,
					      q[i].target_buffer);
				pb_put_bytes(&b, CTM_DATA, q[i].begin,
					     q[i].size);
			} else {
				pb_put_varint(&b, CTM_PAGE, q[i].page);
				pb_put_varint(&b, CTM_CHUNK, q[i].chunk);
				pb_put_varint(&b, CTM_TARGET_BUFFER,
					      q[i].target_buffer);
			}
			pb_end_nested(&b, m);
			if (emulated) {
				/* Sent (copied): the arena chunk is free. */
				bool complete;
				if (vp_smb_try_acquire_chunk_for_reading(
					    &vp_g.smb, q[i].page, q[i].chunk,
					    false, &complete))
					vp_smb_release_chunk_as_free(
						&vp_g.smb, q[i].page,
						q[i].chunk);
			}
		}
		if (i == n && flush_id)
			pb_put_varint(&b, CDR_FLUSH_REQUEST_ID, flush_id);
		if (b.len)
			invoke(s, "CommitData", &b, false);
	} while (i < n);
	for (size_t k = 0; k < n_regs; k++) {
		if (regs[k].add)
			continue;
		pb_buf_reset(&b);
		pb_put_varint(&b, UTW_TRACE_WRITER_ID, regs[k].id);
		invoke(s, "UnregisterTraceWriter", &b, false);
	}
	pb_buf_free(&b);
	free(q);
	free(regs);
}

static void commit_task(void *ctx)
{
	sys_commit(ctx, 0);
}

static void commit_timer_fired(void *ctx)
{
	struct vp_system *s = ctx;
	pthread_mutex_lock(&vp_g.commit_mu);
	s->commit_timer_posted = false;
	pthread_mutex_unlock(&vp_g.commit_mu);
	sys_commit(s, 0);
}

static void arm_commit_timer(void *ctx)
{
	struct vp_system *s = ctx;
	if (vp_loop_timer(s->loop, VP_COMMIT_DELAY_MS, 0, commit_timer_fired,
			  s) == 0)
		commit_timer_fired(s); /* no memory for a timer: commit now */
}

static void vp_system_commit_wakeup(size_t n, bool urgent)
{
	struct vp_system *s = vp_g.sys;
	if (!s || !s->loop || n == 0)
		return;
	if (urgent || n >= VP_COMMIT_BATCH) {
		/* A post that fails (out of memory) leaves the flag clear:
		 * the chunks stay queued for the next wake-up. */
		if (!s->commit_now_posted) {
			s->commit_now_posted = true;
			if (vp_loop_post_threadsafe(s->loop, commit_task, s) < 0)
				s->commit_now_posted = false;
		}
	} else if (!s->commit_timer_posted) {
		s->commit_timer_posted = true;
		if (vp_loop_post_threadsafe(s->loop, arm_commit_timer, s) < 0)
			s->commit_timer_posted = false;
	}
}

static void push_reg(struct vp_system *s, uint16_t id, uint32_t tb, bool add)
{
	pthread_mutex_lock(&vp_g.commit_mu);
	if (VP_GROW(s->regs, s->cap_regs, s->n_regs + 1) < 0) {
		/* The service learns of the writer from its chunks anyway;
		 * this only tells it the target buffer early. */
		pthread_mutex_unlock(&vp_g.commit_mu);
		vp_log_error("trace writer %u: out of memory to register it",
			     id);
		return;
	}
	s->regs[s->n_regs++] = (struct writer_reg){id, tb, add};
	pthread_mutex_unlock(&vp_g.commit_mu);
}

static void vp_system_writer_added(uint16_t writer_id,
				   uint32_t target_buffer)
{
	if (vp_g.sys)
		push_reg(vp_g.sys, writer_id, target_buffer, true);
}

static void vp_system_writer_removed(uint16_t writer_id)
{
	if (vp_g.sys)
		push_reg(vp_g.sys, writer_id, 0, false);
}

/* --------------------------------------------------------- data sources */

static void register_ds(struct vp_system *s, struct vp_data_source *ds)
{
	struct pb_buf b;
	pb_buf_init_soft(&b);
	size_t d = pb_begin_nested(&b, RDS_DATA_SOURCE_DESCRIPTOR);
	pb_put_string(&b, DSD_NAME, ds->desc.name);
	pb_put_varint(&b, DSD_WILL_NOTIFY_ON_STOP, 1);
	if (ds->desc.handles_incremental_state_clear)
		pb_put_varint(&b, DSD_HANDLES_INCREMENTAL_STATE_CLEAR, 1);
	if (ds->is_track_event) {
		size_t t = pb_begin_nested(&b, DSD_TRACK_EVENT_DESCRIPTOR);
		pthread_mutex_lock(&vp_g.mu);
		for (struct vp_category *c = vp_te_categories(); c;
		     c = c->next) {
			size_t cm = pb_begin_nested(
				&b, TEDESC_AVAILABLE_CATEGORIES);
			pb_put_string(&b, TECAT_NAME, c->name ? c->name : "");
			if (c->description)
				pb_put_string(&b, TECAT_DESCRIPTION,
					      c->description);
			pb_end_nested(&b, cm);
		}
		pthread_mutex_unlock(&vp_g.mu);
		pb_end_nested(&b, t);
	}
	pb_end_nested(&b, d);
	invoke(s, "RegisterDataSource", &b, true);
	pb_buf_free(&b);
	ds->registered = true;
}

static void register_ds_task(void *ctx)
{
	struct vp_system *s = vp_g.sys;
	struct vp_data_source *ds = ctx;
	pthread_mutex_lock(&vp_g.mu);
	bool known = false;
	for (struct vp_data_source *d = vp_g.sources; d; d = d->next)
		known |= d == ds;
	pthread_mutex_unlock(&vp_g.mu);
	if (s && s->connected && known && !ds->registered)
		register_ds(s, ds);
}

static void vp_system_data_source_added(struct vp_data_source *ds)
{
	struct vp_system *s = vp_g.sys;
	if (s && s->loop &&
	    vp_loop_post_threadsafe(s->loop, register_ds_task, ds) < 0)
		vp_log_error("data source %s: out of memory to register it "
			     "(it will be at the next connection)",
			     ds->desc.name);
}

/* ------------------------------------------------------- async commands */

static void cmd_setup_tracing(struct vp_system *s, const uint8_t *p,
			      size_t len, int fd)
{
	struct pb_reader r;
	struct pb_field f;
	uint32_t page_kb = 4;
	struct vp_error err;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == CMD_SETUP_TRACING_PAGE_SIZE_KB &&
		    f.wt == PB_WT_VARINT && f.val)
			page_kb = (uint32_t)f.val;
	if (fd < 0)
		return; /* emulation: our arena is the SMB */
	if (vp_g.smb.base || s->emulation) {
		close(fd);
		return;
	}
	struct vp_smb smb;
	if (vp_smb_map(&smb, fd, (size_t)page_kb * 1024, &err) < 0) {
		vp_log_error("SetupTracing: %s", err.msg);
		close(fd);
		return;
	}
	close(fd);
	pthread_mutex_lock(&vp_g.mu);
	vp_g.smb = smb;
	atomic_store(&vp_g.mode, VP_MODE_SMB);
	pthread_mutex_unlock(&vp_g.mu);
}

/* Finds id and the config bytes in a Setup/StartDataSource message (the
 * two number their fields alike). */
_Static_assert(CMD_START_NEW_INSTANCE_ID == CMD_SETUP_NEW_INSTANCE_ID &&
		       CMD_START_CONFIG == CMD_SETUP_CONFIG,
	       "Start/SetupDataSource");
static void scan_instance_msg(const uint8_t *p, size_t len, uint64_t *id,
			      const uint8_t **cfg, size_t *cfg_len)
{
	struct pb_reader r;
	struct pb_field f;
	*id = 0;
	*cfg = NULL;
	*cfg_len = 0;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == CMD_START_NEW_INSTANCE_ID && f.wt == PB_WT_VARINT)
			*id = f.val;
		else if (f.num == CMD_START_CONFIG && f.wt == PB_WT_LEN) {
			*cfg = f.data;
			*cfg_len = f.len;
		}
	}
}

static struct vp_ds_instance *setup_instance(uint64_t id, const uint8_t *cfg,
					     size_t cfg_len)
{
	struct pb_reader r;
	struct pb_field f;
	char name[256] = "";

	pb_reader_init(&r, cfg, cfg_len);
	while (pb_next(&r, &f))
		if (f.num == DSC_NAME && f.wt == PB_WT_LEN &&
		    f.len < sizeof(name)) {
			memcpy(name, f.data, f.len);
			name[f.len] = 0;
		}
	pthread_mutex_lock(&vp_g.mu);
	struct vp_data_source *ds = vp_data_source_find(name);
	pthread_mutex_unlock(&vp_g.mu);
	if (!ds) {
		vp_log_warn("the service set up unknown data "
			    "source \"%s\" (instance %llu)",
			name, (unsigned long long)id);
		return NULL;
	}
	return vp_instance_setup(ds, id, cfg ? cfg : (const uint8_t *)"",
				 cfg_len);
}

static void cmd_setup_ds(const uint8_t *p, size_t len)
{
	uint64_t id;
	const uint8_t *cfg;
	size_t cl;
	scan_instance_msg(p, len, &id, &cfg, &cl);
	if (!vp_instance_find(id))
		setup_instance(id, cfg, cl);
}

static void cmd_start_ds(const uint8_t *p, size_t len)
{
	uint64_t id;
	const uint8_t *cfg;
	size_t cl;
	scan_instance_msg(p, len, &id, &cfg, &cl);
	struct vp_ds_instance *inst = vp_instance_find(id);
	if (!inst)
		inst = setup_instance(id, cfg, cl);
	if (inst)
		vp_instance_start(inst);
}

static void cmd_stop_ds(struct vp_system *s, const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t id = 0;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == CMD_STOP_INSTANCE_ID && f.wt == PB_WT_VARINT)
			id = f.val;
	struct vp_ds_instance *inst = vp_instance_find(id);
	if (inst)
		vp_instance_stop(inst);
	sys_commit(s, 0);
	struct pb_buf b;
	pb_buf_init_soft(&b);
	pb_put_varint(&b, NDS_STOPPED_DATA_SOURCE_ID, id);
	invoke(s, "NotifyDataSourceStopped", &b, false);
	pb_buf_free(&b);
}

/* Calls fn for every id in the data_source_ids (packed or not) of a Flush
 * or a ClearIncrementalState command. */
_Static_assert(CMD_FLUSH_DATA_SOURCE_IDS == CMD_CLEAR_DATA_SOURCE_IDS,
	       "Flush/ClearIncrementalState");
static void for_each_id(const uint8_t *p, size_t len,
			void (*fn)(struct vp_ds_instance *))
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != CMD_FLUSH_DATA_SOURCE_IDS)
			continue;
		if (f.wt == PB_WT_VARINT) {
			struct vp_ds_instance *inst = vp_instance_find(f.val);
			if (inst)
				fn(inst);
		} else if (f.wt == PB_WT_LEN) {
			struct pb_packed_iter it;
			uint64_t v;
			pb_packed_init(&it, f.data, f.len);
			while (pb_packed_next(&it, &v)) {
				struct vp_ds_instance *inst =
					vp_instance_find(v);
				if (inst)
					fn(inst);
			}
		}
	}
}

static void flush_instance(struct vp_ds_instance *inst)
{
	struct vp_data_source *ds = inst->ds;
	if (ds->desc.on_flush && atomic_load(&inst->state) == VP_INST_STARTED)
		ds->desc.on_flush(ds->desc.ctx, inst);
	pthread_mutex_lock(&vp_g.mu);
	vp_instance_flush_writers(inst);
	pthread_mutex_unlock(&vp_g.mu);
}

static void cmd_flush(struct vp_system *s, const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t req = 0;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == CMD_FLUSH_REQUEST_ID && f.wt == PB_WT_VARINT)
			req = f.val;
	for_each_id(p, len, flush_instance);
	sys_commit(s, req); /* flush_request_id acknowledges the flush */
}

static void on_async_command(void *ctx, const struct vp_ipc_reply *rep)
{
	struct vp_system *s = ctx;
	struct pb_reader r;
	struct pb_field f;
	int fd = rep->fd;

	if (rep->disconnected || !rep->success) {
		if (fd >= 0)
			close(fd);
		if (!rep->disconnected)
			vp_log_error("GetAsyncCommand failed");
		return;
	}
	pb_reader_init(&r, rep->data, rep->len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_LEN)
			continue;
		switch (f.num) {
		case CMD_SETUP_TRACING:
			cmd_setup_tracing(s, f.data, f.len, fd);
			fd = -1;
			break;
		case CMD_SETUP_DATA_SOURCE:
			cmd_setup_ds(f.data, f.len);
			break;
		case CMD_START_DATA_SOURCE:
			cmd_start_ds(f.data, f.len);
			break;
		case CMD_STOP_DATA_SOURCE:
			cmd_stop_ds(s, f.data, f.len);
			break;
		case CMD_FLUSH:
			cmd_flush(s, f.data, f.len);
			break;
		case CMD_CLEAR_INCREMENTAL_STATE:
			for_each_id(f.data, f.len,
				    vp_instance_clear_incremental_state);
			break;
		}
	}
	if (fd >= 0)
		close(fd);
}

/* ------------------------------------------------------------ connection */

static void schedule_reconnect(struct vp_system *s)
{
	if (vp_loop_timer(s->loop, s->backoff_ms, 0, sys_connect, s) == 0)
		vp_log_error("%s: out of memory: no more reconnection",
			     s->addr);
	s->backoff_ms = s->backoff_ms * 2 > VP_BACKOFF_MAX_MS
				? VP_BACKOFF_MAX_MS
				: s->backoff_ms * 2;
}

static void on_client_fd(void *ctx, int fd, uint32_t events)
{
	struct vp_system *s = ctx;
	struct vp_error err;
	(void)fd;
	(void)events;
	if (s->client && vp_ipc_client_poll(s->client, 0, &err) < 0)
		sys_disconnect(s, err.msg);
}

static int emulation_arena(struct vp_system *s, struct vp_error *err)
{
	size_t size = s->shm_size, page = s->page_size;
	uint8_t *mem = aligned_alloc(4096, size);
	if (!mem)
		return vp_errorf(err, "no memory for a %zu byte arena", size);
	memset(mem, 0, size);
	struct vp_smb smb;
	if (vp_smb_init(&smb, mem, size, page, err) < 0) {
		free(mem);
		return -1;
	}
	pthread_mutex_lock(&vp_g.mu);
	vp_g.arena = mem;
	vp_g.smb = smb;
	atomic_store(&vp_g.mode, VP_MODE_EMULATED);
	pthread_mutex_unlock(&vp_g.mu);
	return 0;
}

static int handshake(struct vp_system *s, struct vp_error *err)
{
	struct pb_buf b;
	uint8_t *reply = NULL;
	size_t reply_len = 0;
	char ver[64];

	if (vp_sock_addr_kind(s->addr) != VP_SOCK_UNIX &&
	    vp_ipc_client_set_peer_identity(s->client, (int32_t)vp_g.pid,
					    (int32_t)getuid(), NULL, NULL,
					    err) < 0)
		return -1;
	if (vp_ipc_client_bind(s->client, "ProducerPort", VP_CALL_TIMEOUT_MS,
			       err) < 0)
		return -1;
	pb_buf_init_soft(&b);
	pb_put_varint(&b, INITC_SHARED_MEMORY_PAGE_SIZE_HINT_BYTES,
		      s->page_size);
	pb_put_varint(&b, INITC_SHARED_MEMORY_SIZE_HINT_BYTES, s->shm_size);
	pb_put_string(&b, INITC_PRODUCER_NAME,
		      vp_g.producer_name ? vp_g.producer_name : "vperfetto");
	pb_put_varint(&b, INITC_SMB_SCRAPING_MODE, SMB_SCRAPING_ENABLED);
	snprintf(ver, sizeof(ver), "vperfetto-%s", VP_VERSION);
	pb_put_string(&b, INITC_SDK_VERSION, ver);
	int rc = vp_ipc_client_call(s->client, "InitializeConnection", b.data,
				    b.len, &reply, &reply_len, NULL,
				    VP_CALL_TIMEOUT_MS, err);
	pb_buf_free(&b);
	if (rc < 0)
		return -1;
	struct pb_reader r;
	struct pb_field f;
	s->emulation = vp_sock_addr_kind(s->addr) != VP_SOCK_UNIX;
	pb_reader_init(&r, reply, reply_len);
	while (pb_next(&r, &f))
		if (f.num == INITC_RESP_USE_SHMEM_EMULATION &&
		    f.wt == PB_WT_VARINT)
			s->emulation = f.val != 0;
	free(reply);
	if (s->emulation && emulation_arena(s, err) < 0)
		return -1;
	return 0;
}

static void sys_connect(void *ctx)
{
	struct vp_system *s = ctx;
	struct vp_error err;

	if (s->client)
		return;
	if (vp_ipc_client_connect(&s->client, s->addr, VP_CONNECT_TIMEOUT_MS,
				  &err) < 0) {
		s->client = NULL;
		schedule_reconnect(s);
		return;
	}
	if (handshake(s, &err) < 0) {
		vp_log_error("%s: %s", s->addr, err.msg);
		vp_ipc_client_close(s->client);
		s->client = NULL;
		schedule_reconnect(s);
		return;
	}
	if (vp_loop_watch(s->loop, vp_ipc_client_fd(s->client), VP_EV_IN,
			  on_client_fd, s, &err) < 0) {
		vp_log_error("%s", err.msg);
		vp_ipc_client_close(s->client);
		s->client = NULL;
		schedule_reconnect(s);
		return;
	}
	/* The command stream first, then the data sources: traced starts a
	 * data source of a running session as soon as it is registered, and
	 * drops the commands of a producer that has not asked for them yet
	 * (Perfetto's own SDK asks in this order too). */
	if (vp_ipc_client_invoke(s->client, "GetAsyncCommand", NULL, 0, -1,
				 on_async_command, s, &err) < 0) {
		vp_log_error("%s: %s", s->addr, err.msg);
		vp_ipc_client_close(s->client);
		s->client = NULL;
		schedule_reconnect(s);
		return;
	}
	s->connected = true;
	s->backoff_ms = VP_BACKOFF_MIN_MS;
	register_ds(s, &vp_g.track_event_ds);
	pthread_mutex_lock(&vp_g.mu);
	size_t n = 0;
	for (struct vp_data_source *d = vp_g.sources; d; d = d->next)
		n++;
	struct vp_data_source **list = calloc(n ? n : 1, sizeof(*list));
	if (!list)
		vp_log_error("%s: out of memory: data sources not registered",
			     s->addr);
	n = 0;
	for (struct vp_data_source *d = vp_g.sources; d && list; d = d->next)
		list[n++] = d;
	pthread_mutex_unlock(&vp_g.mu);
	for (size_t i = 0; i < n; i++)
		register_ds(s, list[i]);
	free(list);
	atomic_store(&vp_g.connected, true);
}

/* Tears the connection down: instances stopped, SMB gone. */
static void sys_teardown(struct vp_system *s)
{
	atomic_store(&vp_g.connected, false);
	s->connected = false;
	vp_stop_all_instances();
	if (s->client) {
		vp_loop_unwatch(s->loop, vp_ipc_client_fd(s->client));
		vp_ipc_client_close(s->client);
		s->client = NULL;
	}
	pthread_mutex_lock(&vp_g.mu);
	atomic_store(&vp_g.mode, VP_MODE_NONE);
	pthread_mutex_lock(&vp_g.commit_mu);
	free(vp_g.commit_q);
	vp_g.commit_q = NULL;
	vp_g.commit_len = vp_g.commit_cap = 0;
	free(s->regs);
	s->regs = NULL;
	s->n_regs = s->cap_regs = 0;
	pthread_mutex_unlock(&vp_g.commit_mu);
	if (vp_g.arena) {
		free(vp_g.arena);
		vp_g.arena = NULL;
		memset(&vp_g.smb, 0, sizeof(vp_g.smb));
	} else {
		vp_smb_unmap(&vp_g.smb);
	}
	for (struct vp_data_source *d = vp_g.sources; d; d = d->next)
		d->registered = false;
	vp_g.track_event_ds.registered = false;
	pthread_mutex_unlock(&vp_g.mu);
}

static void sys_disconnect(struct vp_system *s, const char *why)
{
	(void)why;
	sys_teardown(s);
	schedule_reconnect(s);
}

/* ---------------------------------------------------------------- thread */

static void stop_task(void *ctx);

static void *producer_thread(void *arg)
{
	struct vp_system *s = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* Data source callbacks that write run here: they must not wait for
	 * the commits only this thread sends. */
	vp_thread_state()->no_stall = true;
	vp_loop_run(s->loop);
	if (atomic_load(&s->stop_unposted))
		stop_task(s);
	return NULL;
}

/* What the writers and the data sources call (sdk_state.h). */
static const struct vp_backend_ops system_ops = {
	.writer_added = vp_system_writer_added,
	.writer_removed = vp_system_writer_removed,
	.data_source_added = vp_system_data_source_added,
	.commit_wakeup = vp_system_commit_wakeup,
};

int vp_system_start(const struct vp_init_args *args)
{
	struct vp_error err;
	struct vp_system *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	const char *addr = args->producer_socket ? args->producer_socket
						 : vp_producer_sock_name();
	s->addr = strdup(addr);
	s->shm_size = args->shmem_size_kb ? args->shmem_size_kb * 1024u
					  : VP_SMB_DEFAULT_SIZE;
	s->page_size = args->shmem_page_size_kb
			       ? args->shmem_page_size_kb * 1024u
			       : VP_SMB_DEFAULT_PAGE_SIZE;
	s->backoff_ms = VP_BACKOFF_MIN_MS;
	pthread_mutex_init(&s->flush_mu, NULL);
	pthread_cond_init(&s->flush_cv, NULL);
	if (!s->addr || vp_loop_new(&s->loop, &err) < 0) {
		vp_log_error("vp_init: %s",
			s->addr ? err.msg : "out of memory");
		free(s->addr);
		free(s);
		return -1;
	}
	/* The loop lives in the application: out of memory fails a call,
	 * never the process. */
	vp_loop_set_soft(s->loop);
	atomic_store_explicit(&vp_g.backend_ops, &system_ops,
			      memory_order_release);
	vp_g.sys = s;
	if (vp_loop_post(s->loop, sys_connect, s) < 0 ||
	    pthread_create(&s->thread, NULL, producer_thread, s) != 0) {
		vp_log_error("vp_init: cannot start the "
				"producer thread (or out of memory)");
		vp_g.sys = NULL;
		vp_loop_free(s->loop);
		free(s->addr);
		free(s);
		return -1;
	}
	s->thread_started = true;
	return 0;
}

static void flush_task(void *ctx)
{
	struct vp_system *s = ctx;
	vp_flush_all_writers();
	sys_commit(s, 0);
	pthread_mutex_lock(&s->flush_mu);
	s->flush_done++;
	pthread_cond_broadcast(&s->flush_cv);
	pthread_mutex_unlock(&s->flush_mu);
}

void vp_system_flush(void)
{
	struct vp_system *s = vp_g.sys;
	if (!s)
		return;
	pthread_mutex_lock(&s->flush_mu);
	uint64_t want = ++s->flush_asked;
	pthread_mutex_unlock(&s->flush_mu);
	if (vp_loop_post_threadsafe(s->loop, flush_task, s) < 0) {
		/* Count it as done, or the next flush waits for it. */
		vp_log_error("vp_flush: out of memory");
		pthread_mutex_lock(&s->flush_mu);
		s->flush_done++;
		pthread_mutex_unlock(&s->flush_mu);
		return;
	}

	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 2;
	pthread_mutex_lock(&s->flush_mu);
	while (s->flush_done < want &&
	       pthread_cond_timedwait(&s->flush_cv, &s->flush_mu, &deadline) !=
		       ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->flush_mu);
}

static void stop_task(void *ctx)
{
	struct vp_system *s = ctx;
	if (s->connected) {
		vp_flush_all_writers();
		sys_commit(s, 0);
	}
	/* Stop every instance while the connection is still up, so the last
	 * chunks are committed, then go. */
	vp_stop_all_instances();
	if (s->connected)
		sys_commit(s, 0);
	sys_teardown(s);
	vp_loop_quit(s->loop);
}

/* The way to stop that needs no memory: quit the loop, and the producer
 * thread runs stop_task after it (producer_thread). */
static void post_stop(struct vp_system *s)
{
	if (vp_loop_post_threadsafe(s->loop, stop_task, s) == 0)
		return;
	atomic_store(&s->stop_unposted, true);
	vp_loop_quit(s->loop);
}

void vp_system_stop(void)
{
	struct vp_system *s = vp_g.sys;
	if (!s)
		return;
	post_stop(s);
	if (s->thread_started)
		pthread_join(s->thread, NULL);
	vp_g.sys = NULL;
	vp_loop_free(s->loop);
	pthread_mutex_destroy(&s->flush_mu);
	pthread_cond_destroy(&s->flush_cv);
	free(s->regs);
	free(s->addr);
	free(s);
}
