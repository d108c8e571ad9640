/*
 * consumer_port.c - the ConsumerPort service of vtraced: consumer
 * connections and their calls: their (one) session, ReadBuffers, flush,
 * detach/attach, the queries.  What the service sends a consumer on its
 * own (the end of its session, events) and the streaming of a read are
 * consumer.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer.h"
#include "consumer_port.h"
#include "packets.h"
#include "perfetto_fields.h"
#include "session.h"
#include "svc_state.h"
#include "vp_version.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "vp_alloc.h"

static struct vp_consumer *consumer_of(struct vp_ipc_conn *conn)
{
	return vp_ipc_conn_user(conn);
}

static void reply_empty(struct vp_consumer *c, uint64_t req)
{
	vp_ipc_conn_reply(c->conn, req, true, false, NULL, 0, -1);
}

/* A method that fails: logged, and answered with a failed reply (what
 * traced's Deferred::Reject sends), the one failure Perfetto's client
 * passes on to its caller. */
static void reply_error(struct vp_consumer *c, uint64_t req,
			const char *method, const char *msg)
{
	vp_svc_log(c->svc, true, "consumer (pid %d) %s: %s", (int)c->pid,
		   method, msg);
	vp_ipc_conn_reject(c->conn, req);
}

/* ---- EnableTracing and the end of a session ------------------------------ */

static void m_enable_tracing(void *ctx, struct vp_ipc_conn *conn,
			     uint64_t req, const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_consumer *c = consumer_of(conn);
	int fd = vp_ipc_conn_take_fd(conn);
	if (!c) {
		if (fd >= 0)
			close(fd);
		return;
	}
	Perfetto__Protos__EnableTracingRequest *m =
		perfetto__protos__enable_tracing_request__unpack(NULL, len,
								 args);
	bool notify_only = m && m->has_attach_notification_only &&
			   m->attach_notification_only;
	if (m)
		perfetto__protos__enable_tracing_request__free_unpacked(m,
									NULL);
	if (notify_only && c->session) {
		/* After Attach: tell me when the session ends. */
		if (fd >= 0)
			close(fd);
		struct vp_session *sess = c->session;
		if (sess->state == SESS_STOPPED) {
			vp_consumer_enable_reply(c, req, NULL);
			return;
		}
		sess->enable_pending = true;
		sess->enable_req = req;
		return;
	}
	struct vp_error err;
	if (c->session) {
		if (fd >= 0)
			close(fd);
		s->stats.invalid_requests++;
		vp_consumer_enable_reply(c, req,
				  "this consumer already has a tracing session");
		return;
	}
	if (vp_session_create(s, c, req, args, len, fd, &err) < 0) {
		if (fd >= 0)
			close(fd);
		vp_svc_log(s, true, "consumer (pid %d) EnableTracing: %s",
			   (int)c->pid, err.msg);
		vp_consumer_enable_reply(c, req, err.msg);
		return;
	}
	if (fd >= 0 && (!c->session || c->session->file_fd != fd))
		close(fd);
}

static void m_start_tracing(void *ctx, struct vp_ipc_conn *conn,
			    uint64_t req, const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	if (!c->session || c->session->state != SESS_CONFIGURED) {
		/* traced logs this and answers success all the same. */
		vp_svc_log(c->svc, true,
			   "consumer (pid %d) StartTracing: no session "
			   "waiting for it",
			   (int)c->pid);
		reply_empty(c, req);
		return;
	}
	vp_session_start(c->session);
	reply_empty(c, req);
}

static void m_disable_tracing(void *ctx, struct vp_ipc_conn *conn,
			      uint64_t req, const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	if (!c->session) {
		/* As traced: logged, answered with success. */
		vp_svc_log(c->svc, true,
			   "consumer (pid %d) DisableTracing: no tracing "
			   "session",
			   (int)c->pid);
		reply_empty(c, req);
		return;
	}
	reply_empty(c, req);
	/* A file session gets its final flush; otherwise, as traced does,
	 * the consumer flushes first if it wants to. */
	vp_session_disable(c->session, c->session->file_fd >= 0);
}

/* ---- ReadBuffers ---------------------------------------------------------- */

static void m_read_buffers(void *ctx, struct vp_ipc_conn *conn, uint64_t req,
			   const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	/* A read that cannot be done ends at once with no data (has_more
	 * false), as traced answers it: Perfetto's client ignores a failed
	 * ReadBuffers reply and would wait for its data for ever. */
	const char *why = NULL;
	if (!c->session)
		why = "no tracing session";
	else if (c->session->file_fd >= 0)
		why = "the session writes into a file";
	else if (c->read.active)
		why = "a read is in progress";
	if (why) {
		vp_svc_log(c->svc, true, "consumer (pid %d) ReadBuffers: %s",
			   (int)c->pid, why);
		reply_empty(c, req);
		return;
	}
	vp_consumer_read_start(c, req);
}

/* ---- the rest of the session methods -------------------------------------- */

static void m_free_buffers(void *ctx, struct vp_ipc_conn *conn, uint64_t req,
			   const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	struct vp_session *sess = c->session;
	if (sess) {
		vp_consumer_session_ended(c, sess, NULL);
		vp_session_free(sess);
	}
	reply_empty(c, req);
}

static void flush_done(struct vp_session *sess, bool ok, void *ctx,
		       uint64_t req)
{
	(void)ctx;
	struct vp_consumer *c = sess->consumer;
	if (!c)
		return;
	if (ok)
		vp_ipc_conn_reply(c->conn, req, true, false, NULL, 0, -1);
	else
		vp_ipc_conn_reject(c->conn, req);
}

static void m_flush(void *ctx, struct vp_ipc_conn *conn, uint64_t req,
		    const uint8_t *args, size_t len)
{
	(void)ctx;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	if (!c->session) {
		reply_error(c, req, "Flush", "no tracing session");
		return;
	}
	Perfetto__Protos__FlushRequest *m =
		perfetto__protos__flush_request__unpack(NULL, len, args);
	uint32_t timeout = m && m->has_timeout_ms ? m->timeout_ms : 0;
	if (m)
		perfetto__protos__flush_request__free_unpacked(m, NULL);
	vp_session_flush(c->session, timeout, flush_done, NULL, req);
}

static void m_get_trace_stats(void *ctx, struct vp_ipc_conn *conn,
			      uint64_t req, const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	if (!c->session) {
		reply_error(c, req, "GetTraceStats", "no tracing session");
		return;
	}
	struct pb_buf b;
	pb_buf_init(&b);
	vp_write_trace_stats(c->session, &b, 1);
	vp_ipc_conn_reply(c->conn, req, true, false, b.data, b.len, -1);
	pb_buf_free(&b);
}

/* TracingServiceState.TracingSession, as traced lists them: the sessions
 * the caller could clone (its own uid's, or all for root). */
static void put_session_state(struct pb_buf *b, const struct vp_session *s)
{
	static const char *const names[] = {
		[SESS_CONFIGURED] = "CONFIGURED",
		[SESS_STARTED] = "STARTED",
		[SESS_DISABLING] = "STOP_WAIT",
		[SESS_STOPPED] = "DISABLED",
	};
	const Perfetto__Protos__TraceConfig *cfg = s->cfg;
	size_t n = pb_begin_nested(b, TSS_TRACING_SESSIONS);
	pb_put_varint(b, TSS_SESS_ID, s->id);
	pb_put_varint(b, TSS_SESS_CONSUMER_UID,
		      (uint64_t)(int64_t)(int32_t)s->uid);
	pb_put_string(b, TSS_SESS_STATE,
		      s->cloned ? "CLONED_READ_ONLY" : names[s->state]);
	pb_put_string(b, TSS_SESS_UNIQUE_SESSION_NAME,
		      cfg->unique_session_name ? cfg->unique_session_name
					       : "");
	for (size_t i = 0; i < cfg->n_buffers; i++)
		pb_put_varint(b, TSS_SESS_BUFFER_SIZE_KB,
			      cfg->buffers[i]->size_kb);
	pb_put_varint(b, TSS_SESS_DURATION_MS, s->duration_ms);
	pb_put_varint(b, TSS_SESS_NUM_DATA_SOURCES, s->instances.n);
	if (s->start_realtime_ns)
		pb_put_varint(b, TSS_SESS_START_REALTIME_NS,
			      (uint64_t)s->start_realtime_ns);
	if (s->state == SESS_STARTED && !s->cloned)
		pb_put_varint(b, TSS_SESS_IS_STARTED, 1);
	pb_end_nested(b, n);
}

/* QueryServiceStateRequest.sessions_only. */
static bool sessions_only(const uint8_t *args, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	bool v = false;
	pb_reader_init(&r, args, len);
	while (pb_next(&r, &f))
		if (f.num == QSS_REQ_SESSIONS_ONLY && f.wt == PB_WT_VARINT)
			v = f.val != 0;
	return v;
}

static void m_query_service_state(void *ctx, struct vp_ipc_conn *conn,
				  uint64_t req, const uint8_t *args,
				  size_t len)
{
	struct vp_service *s = ctx;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	bool only = sessions_only(args, len);
	struct pb_buf b;
	pb_buf_init(&b);
	size_t st = pb_begin_nested(&b, QSS_RESP_SERVICE_STATE);
	for (size_t i = 0; !only && i < s->producers.n; i++) {
		const struct vp_producer *p = s->producers.v[i];
		size_t n = pb_begin_nested(&b, TSS_PRODUCERS);
		pb_put_varint(&b, TSS_PRODUCER_ID, p->id);
		pb_put_string(&b, TSS_PRODUCER_NAME, p->name ? p->name : "");
		if ((int32_t)p->uid >= 0)
			pb_put_varint(&b, TSS_PRODUCER_UID, (uint64_t)p->uid);
		if (p->sdk_version && p->sdk_version[0])
			pb_put_string(&b, TSS_PRODUCER_SDK_VERSION,
				      p->sdk_version);
		if (p->pid > 0)
			pb_put_varint(&b, TSS_PRODUCER_PID, (uint64_t)p->pid);
		pb_end_nested(&b, n);
	}
	for (size_t i = 0; !only && i < s->producers.n; i++) {
		const struct vp_producer *p = s->producers.v[i];
		for (size_t k = 0; k < p->n_ds; k++) {
			size_t n = pb_begin_nested(&b, TSS_DATA_SOURCES);
			pb_put_bytes(&b, TSS_DS_DESCRIPTOR, p->ds[k].descriptor,
				     p->ds[k].descriptor_len);
			pb_put_varint(&b, TSS_DS_PRODUCER_ID, p->id);
			pb_end_nested(&b, n);
		}
	}
	uint64_t started = 0;
	for (size_t i = 0; i < s->sessions.n; i++) {
		const struct vp_session *sess = s->sessions.v[i];
		started += sess->state == SESS_STARTED;
	}
	pb_put_varint(&b, TSS_NUM_SESSIONS, s->sessions.n);
	pb_put_varint(&b, TSS_NUM_SESSIONS_STARTED, started);
	pb_put_string(&b, TSS_VERSION, "vtraced " VP_VERSION);
	for (size_t i = 0; i < s->sessions.n; i++) {
		const struct vp_session *sess = s->sessions.v[i];
		if (c->uid == 0 || sess->uid == c->uid)
			put_session_state(&b, sess);
	}
	pb_put_varint(&b, TSS_SUPPORTS_TRACING_SESSIONS, 1);
	pb_end_nested(&b, st);
	vp_ipc_conn_reply(c->conn, req, true, false, b.data, b.len, -1);
	pb_buf_free(&b);
}

static void m_query_capabilities(void *ctx, struct vp_ipc_conn *conn,
				 uint64_t req, const uint8_t *args, size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	struct pb_buf b;
	pb_buf_init(&b);
	size_t n = pb_begin_nested(&b, QCR_CAPABILITIES);
	pb_put_varint(&b, CAP_HAS_QUERY_CAPABILITIES, 1);
	pb_put_varint(&b, CAP_OBSERVABLE_EVENTS, PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED);
	pb_end_nested(&b, n);
	vp_ipc_conn_reply(c->conn, req, true, false, b.data, b.len, -1);
	pb_buf_free(&b);
}

static void m_observe_events(void *ctx, struct vp_ipc_conn *conn,
			     uint64_t req, const uint8_t *args, size_t len)
{
	(void)ctx;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	Perfetto__Protos__ObserveEventsRequest *m =
		perfetto__protos__observe_events_request__unpack(NULL, len,
								 args);
	if (!m) {
		c->svc->stats.invalid_requests++;
		reply_error(c, req, "ObserveEvents", "bad arguments");
		return;
	}
	if (c->observing)  /* the previous stream ends */
		vp_ipc_conn_reply(c->conn, c->observe_req, true, false, NULL,
				  0, -1);
	c->observing = m->n_events_to_observe > 0;
	c->observe_req = req;
	c->observe_all_started = false;
	for (size_t i = 0; i < m->n_events_to_observe; i++)
		if (m->events_to_observe[i] ==
		    PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED)
			c->observe_all_started = true;
	perfetto__protos__observe_events_request__free_unpacked(m, NULL);
	if (!c->observing) {
		reply_empty(c, req);
		return;
	}
	if (c->session && c->session->all_started)
		vp_consumer_all_started(c);
}

/* The key of an AttachRequest or a DetachRequest. */
_Static_assert(ATTACH_REQ_KEY == DETACH_REQ_KEY, "Attach/DetachRequest");

static char *decode_key(const uint8_t *args, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	char *key = NULL;
	pb_reader_init(&r, args, len);
	while (pb_next(&r, &f)) {
		if (f.num != ATTACH_REQ_KEY || f.wt != PB_WT_LEN ||
		    f.len == 0 || f.len > SVC_MAX_NAME)
			continue;
		free(key);
		key = vp_svc_strndup((const char *)f.data, f.len);
		if (strlen(key) != f.len) { /* embedded NUL */
			free(key);
			key = NULL;
		}
	}
	return key;
}

static void m_detach(void *ctx, struct vp_ipc_conn *conn, uint64_t req,
		     const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	char *key = decode_key(args, len);
	if (!key || !c->session) {
		free(key);
		reply_error(c, req, "Detach",
			    key ? "no tracing session" : "no key");
		return;
	}
	for (size_t i = 0; i < s->sessions.n; i++) {
		const struct vp_session *o = s->sessions.v[i];
		if (o->detach_key && strcmp(o->detach_key, key) == 0 &&
		    o->uid == c->uid) {
			free(key);
			reply_error(c, req, "Detach", "key already in use");
			return;
		}
	}
	struct vp_session *sess = c->session;
	vp_consumer_abort_read(c, sess);
	sess->detach_key = key;
	sess->consumer = NULL;
	sess->enable_pending = false;
	c->session = NULL;
	vp_svc_log(s, false, "session %llu: detached as \"%s\"",
		   (unsigned long long)sess->id, key);
	reply_empty(c, req);
}

static void m_attach(void *ctx, struct vp_ipc_conn *conn, uint64_t req,
		     const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	char *key = decode_key(args, len);
	if (!key || c->session) {
		free(key);
		reply_error(c, req, "Attach",
			    key ? "this consumer already has a session"
				: "no key");
		return;
	}
	struct vp_session *sess = NULL;
	for (size_t i = 0; i < s->sessions.n && !sess; i++) {
		struct vp_session *o = s->sessions.v[i];
		if (o->detach_key && !o->consumer && o->uid == c->uid &&
		    strcmp(o->detach_key, key) == 0)
			sess = o;
	}
	free(key);
	if (!sess) {
		reply_error(c, req, "Attach", "no detached session with that key");
		return;
	}
	free(sess->detach_key);
	sess->detach_key = NULL;
	sess->consumer = c;
	c->session = sess;
	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_bytes(&b, ATTACH_RESP_TRACE_CONFIG, sess->cfg_raw,
		     sess->cfg_raw_len);
	vp_ipc_conn_reply(c->conn, req, true, false, b.data, b.len, -1);
	pb_buf_free(&b);
	vp_svc_log(s, false, "session %llu: attached",
		   (unsigned long long)sess->id);
}

static void m_save_for_bugreport(void *ctx, struct vp_ipc_conn *conn,
				 uint64_t req, const uint8_t *args,
				 size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_varint(&b, SFB_RESP_SUCCESS, 0);
	pb_put_string(&b, SFB_RESP_MSG,
		      "SaveTraceForBugreport is not supported on Linux");
	vp_ipc_conn_reply(c->conn, req, true, false, b.data, b.len, -1);
	pb_buf_free(&b);
}

static void m_change_trace_config(void *ctx, struct vp_ipc_conn *conn,
				  uint64_t req, const uint8_t *args,
				  size_t len)
{
	(void)ctx;
	(void)args;
	(void)len;
	struct vp_consumer *c = consumer_of(conn);
	if (c)
		reply_error(c, req, "ChangeTraceConfig",
			    "ChangeTraceConfig is not supported by vtraced");
}

/* CloneSessionResponse: traced answers a clone that fails with success
 * on the IPC and the reason in the response, which Perfetto's client
 * prints before it reads (nothing) and exits. */
static void send_clone_reply(struct vp_consumer *c, uint64_t req,
			     const char *error, const struct vp_session *sess)
{
	Perfetto__Protos__CloneSessionResponse r =
		PERFETTO__PROTOS__CLONE_SESSION_RESPONSE__INIT;
	r.has_success = true;
	r.success = error == NULL;
	r.error = (char *)error;
	if (sess) {
		r.has_uuid_msb = r.has_uuid_lsb = true;
		r.uuid_msb = (int64_t)sess->uuid[0];
		r.uuid_lsb = (int64_t)sess->uuid[1];
		/* Even for a write_into_file source the copy is read with
		 * ReadBuffers (traced writes it into a file the client
		 * passes; vtraced does not take that file). */
		r.has_was_write_into_file = true;
		r.was_write_into_file = false;
	}
	size_t n = perfetto__protos__clone_session_response__get_packed_size(
		&r);
	uint8_t *out = vp_xmalloc(n);
	perfetto__protos__clone_session_response__pack(&r, out);
	vp_ipc_conn_reply(c->conn, req, true, false, out, n, -1);
	free(out);
	if (error)
		vp_svc_log(c->svc, true, "consumer (pid %d) CloneSession: %s",
			   (int)c->pid, error);
}

/* The source session's flush is over (or timed out): copy it now. */
static void clone_after_flush(struct vp_session *src, bool ok, void *ctx,
			      uint64_t req)
{
	(void)ok;
	struct vp_consumer *c = ctx;
	if (!c) /* it went away meanwhile */
		return;
	c->clone_pending = false;
	struct vp_error err;
	if (src->freeing) {
		send_clone_reply(c, req,
				 "the session ended before it could be copied",
				 NULL);
		return;
	}
	if (c->session) {
		send_clone_reply(c, req,
				 "this consumer already has a tracing session",
				 NULL);
		return;
	}
	if (vp_session_clone(src, c, &err) < 0) {
		send_clone_reply(c, req, err.msg, NULL);
		return;
	}
	send_clone_reply(c, req, NULL, c->session);
}

static void m_clone_session(void *ctx, struct vp_ipc_conn *conn,
			    uint64_t req, const uint8_t *args, size_t len)
{
	struct vp_service *s = ctx;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	Perfetto__Protos__CloneSessionRequest *m =
		perfetto__protos__clone_session_request__unpack(NULL, len,
								args);
	if (!m) {
		s->stats.invalid_requests++;
		reply_error(c, req, "CloneSession", "bad arguments");
		return;
	}
	char what[SVC_MAX_NAME + 32];
	struct vp_session *src = NULL;
	if (m->selector_case ==
	    PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME) {
		const char *name = m->unique_session_name
					   ? m->unique_session_name
					   : "";
		snprintf(what, sizeof(what), "named \"%.*s\"",
			 (int)SVC_MAX_NAME, name);
		for (size_t i = 0; i < s->sessions.n && !src; i++) {
			struct vp_session *o = s->sessions.v[i];
			const char *n = o->cfg->unique_session_name;
			if (!o->cloned && n && name[0] && strcmp(n, name) == 0)
				src = o;
		}
	} else {
		uint64_t id = m->selector_case ==
					      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID
				      ? m->session_id
				      : 0;
		snprintf(what, sizeof(what), "%llu", (unsigned long long)id);
		src = vp_session_by_id(s, id);
	}
	perfetto__protos__clone_session_request__free_unpacked(m, NULL);
	char msg[SVC_MAX_NAME + 96];
	if (!src) {
		snprintf(msg, sizeof(msg), "no tracing session %s", what);
		send_clone_reply(c, req, msg, NULL);
		return;
	}
	if (src->uid != c->uid && c->uid != 0) {
		snprintf(msg, sizeof(msg),
			 "not allowed to clone session %s of another uid",
			 what);
		send_clone_reply(c, req, msg, NULL);
		return;
	}
	if (c->session || c->clone_pending) {
		send_clone_reply(c, req,
				 "this consumer already has a tracing session",
				 NULL);
		return;
	}
	if (src->state == SESS_STOPPED || src->state == SESS_CONFIGURED) {
		clone_after_flush(src, true, c, req);
		return;
	}
	/* As traced: the producers flush first, so the copy has what they
	 * hold; the shared memory is scraped at the flush. */
	c->clone_pending = true;
	vp_session_flush(src, 0, clone_after_flush, c, req);
}

/* ---- connections ------------------------------------------------------------ */

static void on_connect(void *ctx, struct vp_ipc_conn *conn)
{
	struct vp_service *s = ctx;
	struct vp_consumer *c = vp_xcalloc(1, sizeof(*c));
	const struct vp_ipc_peer *peer = vp_ipc_conn_peer(conn);
	c->svc = s;
	c->conn = conn;
	c->pid = peer ? peer->pid : -1;
	c->uid = peer ? peer->uid : (uid_t)-1;
	vp_ipc_conn_set_user(conn, c);
	vp_ptrvec_push(&s->consumers, c);
	vp_svc_log(s, false, "consumer connected (pid %d uid %d)", (int)c->pid,
		   (int)c->uid);
}

static void on_disconnect(void *ctx, struct vp_ipc_conn *conn)
{
	struct vp_service *s = ctx;
	struct vp_consumer *c = consumer_of(conn);
	if (!c)
		return;
	vp_svc_log(s, false, "consumer (pid %d) disconnected", (int)c->pid);
	vp_consumer_read_end(c);
	/* A clone waiting for its source's flush has no one to answer. */
	for (size_t i = 0; c->clone_pending && i < s->sessions.n; i++) {
		struct vp_session *o = s->sessions.v[i];
		for (size_t k = 0; k < o->flushes.n; k++) {
			struct vp_flush *f = o->flushes.v[k];
			if (f->done == clone_after_flush && f->ctx == c)
				f->ctx = NULL;
		}
	}
	if (c->session) {
		/* Not detached: the session goes with its consumer. */
		struct vp_session *sess = c->session;
		sess->enable_pending = false;
		vp_session_free(sess);
	}
	vp_ptrvec_remove(&s->consumers, c);
	vp_ipc_conn_set_user(conn, NULL);
	free(c);
}

static const struct vp_ipc_method consumer_methods[] = {
	{"EnableTracing", m_enable_tracing},
	{"DisableTracing", m_disable_tracing},
	{"ReadBuffers", m_read_buffers},
	{"FreeBuffers", m_free_buffers},
	{"Flush", m_flush},
	{"StartTracing", m_start_tracing},
	{"ChangeTraceConfig", m_change_trace_config},
	{"Detach", m_detach},
	{"Attach", m_attach},
	{"GetTraceStats", m_get_trace_stats},
	{"ObserveEvents", m_observe_events},
	{"QueryServiceState", m_query_service_state},
	{"QueryCapabilities", m_query_capabilities},
	{"SaveTraceForBugreport", m_save_for_bugreport},
	{"CloneSession", m_clone_session},
};

void vp_consumer_port_describe(struct vp_ipc_service *d,
			       struct vp_service *s)
{
	memset(d, 0, sizeof(*d));
	d->name = "ConsumerPort";
	d->methods = consumer_methods;
	d->n_methods = sizeof(consumer_methods) / sizeof(consumer_methods[0]);
	d->ctx = s;
	d->on_connect = on_connect;
	d->on_disconnect = on_disconnect;
}
