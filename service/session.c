/*
 * session.c - tracing sessions: a TraceConfig turned into buffers and data
 * source instances, and their life: start (now or on StartTracing), the
 * periodic work (flush, incremental state clearing, clock snapshots, file
 * writes), flushes, and the end (final flush, StopDataSource and waiting for
 * the data sources, the last packets, the EnableTracing reply).
 *
 * Data sources are matched by name (and the producer filters) against every
 * producer, including those that register later while the session runs.
 *
 * trigger_config, as traced: a START_TRACING session waits (configured, its
 * data sources set up) for a trigger, then records for the trigger's
 * stop_delay_ms, or ends at trigger_timeout_ms if none came; a
 * STOP_TRACING session records until stop_delay_ms after its first
 * trigger, or ends at trigger_timeout_ms.  Until it has a trigger a
 * session reads as empty (session_read.c); which trigger an activation
 * fires is triggers.c's.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "consumer.h"
#include "packets.h"
#include "perfetto_fields.h"
#include "producer.h"
#include "session.h"
#include "session_read.h"
#include "svc_state.h"
#include "triggers.h"

#include "perfetto/ipc/consumer_port.pb-c.h"
#include "vp_alloc.h"

static void session_finalize(struct vp_session *sess);
static void session_stop_phase(struct vp_session *sess);
static void check_all_started(struct vp_session *sess);
static void drain_to_file(struct vp_session *sess, bool final);
static void cancel_timer(struct vp_session *sess, uint64_t *t);

/* ---- lookups ---------------------------------------------------------- */

struct vp_session *vp_session_by_id(struct vp_service *s, uint64_t id)
{
	for (size_t i = 0; i < s->sessions.n; i++) {
		struct vp_session *sess = s->sessions.v[i];
		if (sess->id == id)
			return sess;
	}
	return NULL;
}

bool vp_session_alive(struct vp_service *s, const struct vp_session *sess)
{
	for (size_t i = 0; i < s->sessions.n; i++)
		if (s->sessions.v[i] == sess)
			return true;
	return false;
}

void vp_sessions_check_shutdown(struct vp_service *s)
{
	if (!s->shutting_down)
		return;
	for (size_t i = 0; i < s->sessions.n; i++) {
		const struct vp_session *sess = s->sessions.v[i];
		if (sess->state != SESS_STOPPED)
			return;
	}
	vp_svc_finish_shutdown(s);
}

bool vp_producer_may_write(struct vp_service *s, struct vp_producer *p,
			   uint16_t buffer_id)
{
	struct vp_svc_buffer *b = vp_buffer_by_id(s, buffer_id);
	if (!b)
		return false;
	const struct vp_session *sess = b->session;
	for (size_t i = 0; i < sess->instances.n; i++) {
		const struct vp_ds_instance *inst = sess->instances.v[i];
		if (inst->producer == p)
			return true;
	}
	return false;
}

static void push_built(struct vp_session *sess,
		       void (*build)(struct vp_session *, struct pb_buf *))
{
	struct pb_buf b;
	pb_buf_init(&b);
	build(sess, &b);
	vp_session_push_packet(sess, &b);
	pb_buf_free(&b);
}

static void push_event(struct vp_session *sess, uint32_t field);

/* A flush's service event, at most SVC_MAX_FLUSH_EVENTS of each kind
 * between two reads (periodic flushes must not grow the queue). */
static void push_flush_event(struct vp_session *sess, uint32_t field)
{
	if (sess->pending_off >= sess->pending.len)
		sess->flush_events[0] = sess->flush_events[1] = 0;
	uint32_t *n = &sess->flush_events[field == SE_FLUSH_STARTED ? 0 : 1];
	if (*n >= SVC_MAX_FLUSH_EVENTS)
		return;
	(*n)++;
	push_event(sess, field);
}

static void push_event(struct vp_session *sess, uint32_t field)
{
	if (!sess->service_events)
		return;
	struct pb_buf b;
	pb_buf_init(&b);
	vp_pkt_service_event(sess, field, &b);
	vp_session_push_packet(sess, &b);
	pb_buf_free(&b);
}

/* Instances changed: the producers' "may write buffer X" answers must be
 * recomputed. */
static void forget_write_permissions(struct vp_service *s)
{
	for (size_t i = 0; i < s->producers.n; i++) {
		struct vp_producer *p = s->producers.v[i];
		p->last_ok_buffer = 0;
	}
}

/* ---- matching ------------------------------------------------------------ */

static const char *local_machine_name(void)
{
	static struct utsname u;
	static bool done;
	if (!done) {
		if (uname(&u) != 0)
			u.nodename[0] = '\0';
		done = true;
	}
	return u.nodename;
}

/* Does TraceConfig.data_sources[i] select data source ds of producer p? */
static bool ds_matches(const struct vp_session *sess, size_t i,
		       const struct vp_producer *p, const struct vp_svc_ds *ds)
{
	const Perfetto__Protos__TraceConfig__DataSource *cd =
		sess->cfg->data_sources[i];
	if (!cd->config || !cd->config->name ||
	    strcmp(cd->config->name, ds->name) != 0)
		return false;
	const char *pname = p->name ? p->name : "";
	if (cd->n_producer_name_filter || cd->n_producer_name_regex_filter) {
		bool ok = false;
		for (size_t k = 0; k < cd->n_producer_name_filter && !ok; k++)
			ok = strcmp(cd->producer_name_filter[k], pname) == 0;
		for (size_t k = 0; k < cd->n_producer_name_regex_filter && !ok;
		     k++)
			ok = vp_svc_regex_full_match(
				cd->producer_name_regex_filter[k], pname);
		if (!ok)
			return false;
	}
	if (cd->n_machine_name_filter) {
		const char *mname =
			p->remote ? p->machine_name : local_machine_name();
		for (size_t k = 0; k < cd->n_machine_name_filter; k++)
			if (strcmp(cd->machine_name_filter[k], mname) == 0)
				return true;
		return false;
	}
	/* As traced: other machines' producers only when asked for. */
	if (p->remote && !(sess->cfg->has_trace_all_machines &&
			   sess->cfg->trace_all_machines))
		return false;
	return true;
}

static struct vp_ds_instance *find_instance(struct vp_session *sess,
					    const struct vp_producer *p,
					    size_t cfg_index)
{
	for (size_t i = 0; i < sess->instances.n; i++) {
		struct vp_ds_instance *inst = sess->instances.v[i];
		if (inst->producer == p && inst->cfg_index == cfg_index)
			return inst;
	}
	return NULL;
}

/* The DataSourceConfig for one instance: the consumer's, with
 * target_buffer naming the global buffer and tracing_session_id set. */
static void pack_instance_config(struct vp_session *sess, size_t cfg_index,
				 struct vp_ds_instance *inst)
{
	Perfetto__Protos__DataSourceConfig *dc =
		sess->cfg->data_sources[cfg_index]->config;
	Perfetto__Protos__DataSourceConfig saved = *dc;
	uint32_t idx = dc->has_target_buffer ? dc->target_buffer : 0;
	dc->has_target_buffer = true;
	dc->target_buffer = sess->bufs[idx]->id;
	dc->has_tracing_session_id = true;
	dc->tracing_session_id = sess->id;
	inst->config_len =
		perfetto__protos__data_source_config__get_packed_size(dc);
	inst->config = vp_xmalloc(inst->config_len);
	perfetto__protos__data_source_config__pack(dc, inst->config);
	*dc = saved;
}

static void start_instance(struct vp_ds_instance *inst)
{
	if (!inst->producer)
		return;
	inst->state = inst->will_notify_on_start ? DS_STARTING : DS_STARTED;
	vp_producer_start_ds(inst->producer, inst->id, inst->config,
			     inst->config_len);
}

static void add_instance(struct vp_session *sess, size_t cfg_index,
			 struct vp_producer *p, const struct vp_svc_ds *ds)
{
	struct vp_service *s = sess->svc;
	struct vp_ds_instance *inst = vp_xcalloc(1, sizeof(*inst));
	inst->id = s->next_instance_id++;
	inst->session = sess;
	inst->producer = p;
	inst->producer_id = p->id;
	inst->cfg_index = cfg_index;
	inst->ds_name = vp_svc_strndup(ds->name, SVC_MAX_NAME);
	inst->will_notify_on_start = ds->will_notify_on_start;
	inst->will_notify_on_stop = ds->will_notify_on_stop;
	inst->handles_incremental_state_clear =
		ds->handles_incremental_state_clear;
	inst->no_flush = ds->no_flush;
	inst->state = DS_CONFIGURED;
	pack_instance_config(sess, cfg_index, inst);
	vp_ptrvec_push(&sess->instances, inst);
	p->last_ok_buffer = 0;
	vp_svc_log(s, false, "session %llu: data source %s of producer %u (%s)"
		   " is instance %llu",
		   (unsigned long long)sess->id, inst->ds_name, p->id,
		   p->name ? p->name : "?", (unsigned long long)inst->id);
	vp_producer_setup_ds(p, inst->id, inst->config, inst->config_len);
	if (sess->state == SESS_STARTED)
		start_instance(inst);
}

/* TraceConfig.lockdown_mode, as traced: set, the service takes only
 * producers of its own uid; clear, any again.  Once a session has set
 * it, it holds for every session until one clears it. */
static void set_lockdown(struct vp_service *s,
			 Perfetto__Protos__TraceConfig__LockdownModeOperation m)
{
	if (m == PERFETTO__PROTOS__TRACE_CONFIG__LOCKDOWN_MODE_OPERATION__LOCKDOWN_SET)
		s->lockdown = true;
	else if (m == PERFETTO__PROTOS__TRACE_CONFIG__LOCKDOWN_MODE_OPERATION__LOCKDOWN_CLEAR)
		s->lockdown = false;
}

/* Adds the instances a (producer, data source) pair gets in a session. */
static void match_session(struct vp_session *sess, struct vp_producer *p,
			  const struct vp_svc_ds *ds)
{
	if (sess->state != SESS_CONFIGURED && sess->state != SESS_STARTED)
		return;
	/* in lockdown, a producer of another uid gets no data source (one
	 * that connected before it was set included) */
	if (sess->svc->lockdown && p->uid != sess->svc->uid)
		return;
	for (size_t i = 0; i < sess->cfg->n_data_sources; i++) {
		if (!ds_matches(sess, i, p, ds) || find_instance(sess, p, i))
			continue;
		add_instance(sess, i, p, ds);
	}
}

void vp_sessions_on_ds_registered(struct vp_service *s, struct vp_producer *p,
				  const struct vp_svc_ds *ds)
{
	for (size_t i = 0; i < s->sessions.n; i++) {
		struct vp_session *sess = s->sessions.v[i];
		bool was_all_started = sess->all_started;
		match_session(sess, p, ds);
		if (!was_all_started)
			check_all_started(sess);
	}
}

static void free_instance(struct vp_ds_instance *inst)
{
	free(inst->ds_name);
	free(inst->config);
	free(inst);
}

/* Anything waiting on data sources may be done now. */
static void recheck_session(struct vp_session *sess)
{
	if (sess->state == SESS_STARTED) {
		check_all_started(sess);
		return;
	}
	if (sess->state != SESS_DISABLING || sess->t_stop == 0)
		return;
	for (size_t i = 0; i < sess->instances.n; i++) {
		const struct vp_ds_instance *inst = sess->instances.v[i];
		if (inst->state == DS_STOPPING)
			return;
	}
	vp_loop_cancel(sess->svc->loop, sess->t_stop);
	sess->t_stop = 0;
	session_finalize(sess);
}

void vp_sessions_on_ds_unregistered(struct vp_service *s,
				    struct vp_producer *p, const char *name)
{
	for (size_t i = 0; i < s->sessions.n; i++) {
		struct vp_session *sess = s->sessions.v[i];
		for (size_t k = 0; k < sess->instances.n;) {
			struct vp_ds_instance *inst = sess->instances.v[k];
			if (inst->producer != p ||
			    strcmp(inst->ds_name, name) != 0) {
				k++;
				continue;
			}
			if (inst->state != DS_STOPPED)
				vp_producer_stop_ds(p, inst->id);
			inst->producer = NULL;
			inst->state = DS_STOPPED;
			k++;
		}
	}
	forget_write_permissions(s);
	/* Re-checking may finalize sessions; sessions are not freed by it. */
	for (size_t i = 0; i < s->sessions.n; i++)
		recheck_session(s->sessions.v[i]);
}

/* ---- flushes ------------------------------------------------------------- */

static void flush_free(struct vp_flush *f)
{
	free(f->pending);
	free(f);
}

/* Every producer of the session: what it wrote and did not commit. */
static void scrape_session(struct vp_session *sess, bool final)
{
	struct vp_service *s = sess->svc;
	for (size_t i = 0; i < s->producers.n; i++)
		vp_producer_scrape(s->producers.v[i], sess, final);
}

static void flush_complete(struct vp_flush *f, bool ok)
{
	struct vp_session *sess = f->session;
	struct vp_service *s = sess->svc;
	vp_ptrvec_remove(&sess->flushes, f);
	/* As traced: a producer that acked may still hold chunks it could
	 * not commit (a thread's writer that never flushes); take copies. */
	scrape_session(sess, false);
	push_flush_event(sess, SE_ALL_DATA_SOURCES_FLUSHED);
	if (f->timer)
		vp_loop_cancel(s->loop, f->timer);
	if (ok) {
		sess->flushes_succeeded++;
		s->stats.flushes_succeeded++;
	} else {
		sess->flushes_failed++;
		s->stats.flushes_failed++;
	}
	vp_flush_done_fn done = f->done;
	void *ctx = f->ctx;
	uint64_t arg = f->arg;
	flush_free(f);
	if (done)
		done(sess, ok, ctx, arg);
}

static void flush_timeout(void *ctx)
{
	struct vp_flush *f = ctx;
	f->timer = 0;
	vp_svc_log(f->session->svc, true,
		   "session %llu: flush %llu timed out (%zu producers)",
		   (unsigned long long)f->session->id,
		   (unsigned long long)f->id, f->n_pending);
	flush_complete(f, false);
}

static void flush_drop_producer(struct vp_flush *f, uint16_t pid)
{
	for (size_t i = 0; i < f->n_pending; i++) {
		if (f->pending[i] != pid)
			continue;
		f->pending[i] = f->pending[--f->n_pending];
		return;
	}
}

/* Completes, one at a time, flushes nobody is pending on any more.  A
 * completion can start or end other flushes, hence the rescan. */
static void complete_finished_flushes(struct vp_service *s)
{
	for (;;) {
		struct vp_flush *done = NULL;
		for (size_t i = 0; i < s->sessions.n && !done; i++) {
			struct vp_session *sess = s->sessions.v[i];
			for (size_t k = 0; k < sess->flushes.n && !done; k++) {
				struct vp_flush *f = sess->flushes.v[k];
				if (f->n_pending == 0)
					done = f;
			}
		}
		if (!done)
			return;
		flush_complete(done, true);
	}
}

void vp_session_flush(struct vp_session *sess, uint32_t timeout_ms,
		      vp_flush_done_fn done, void *ctx, uint64_t arg)
{
	struct vp_service *s = sess->svc;
	struct vp_flush *f = vp_xcalloc(1, sizeof(*f));
	f->id = s->next_flush_id++;
	f->session = sess;
	f->done = done;
	f->ctx = ctx;
	f->arg = arg;
	f->pending = vp_xcalloc(sess->instances.n, sizeof(*f->pending));
	uint64_t *ids = vp_xcalloc(sess->instances.n, sizeof(*ids));
	sess->flushes_requested++;
	s->stats.flushes_requested++;
	vp_ptrvec_push(&sess->flushes, f);
	push_flush_event(sess, SE_FLUSH_STARTED);

	/* One Flush command per producer, naming its instances. */
	for (size_t i = 0; i < sess->instances.n; i++) {
		struct vp_ds_instance *first = sess->instances.v[i];
		struct vp_producer *p = first->producer;
		if (!p || first->no_flush)
			continue;
		bool seen = false;
		for (size_t k = 0; k < f->n_pending; k++)
			seen |= f->pending[k] == p->id;
		if (seen)
			continue;
		size_t n = 0;
		for (size_t k = i; k < sess->instances.n; k++) {
			struct vp_ds_instance *inst = sess->instances.v[k];
			if (inst->producer == p && !inst->no_flush)
				ids[n++] = inst->id;
		}
		f->pending[f->n_pending++] = p->id;
		vp_producer_flush(p, ids, n, f->id);
	}
	free(ids);
	if (f->n_pending == 0) {
		flush_complete(f, true);
		return;
	}
	f->timer = vp_loop_timer(s->loop,
				 timeout_ms ? timeout_ms
					    : SVC_DEFAULT_FLUSH_TIMEOUT_MS,
				 0, flush_timeout, f);
}

void vp_sessions_on_flush_ack(struct vp_service *s, struct vp_producer *p,
			      uint64_t flush_id)
{
	/* An ack covers every earlier flush of this producer too. */
	for (size_t i = 0; i < s->sessions.n; i++) {
		struct vp_session *sess = s->sessions.v[i];
		for (size_t k = 0; k < sess->flushes.n; k++) {
			struct vp_flush *f = sess->flushes.v[k];
			if (f->id <= flush_id)
				flush_drop_producer(f, p->id);
		}
	}
	complete_finished_flushes(s);
}

/* ---- producer events ----------------------------------------------------- */

static struct vp_ds_instance *instance_of(struct vp_service *s,
					  struct vp_producer *p, uint64_t id)
{
	for (size_t i = 0; i < s->sessions.n; i++) {
		struct vp_session *sess = s->sessions.v[i];
		for (size_t k = 0; k < sess->instances.n; k++) {
			struct vp_ds_instance *inst = sess->instances.v[k];
			if (inst->id == id && inst->producer == p)
				return inst;
		}
	}
	return NULL;
}

void vp_sessions_on_ds_started(struct vp_service *s, struct vp_producer *p,
			       uint64_t instance_id)
{
	struct vp_ds_instance *inst = instance_of(s, p, instance_id);
	if (!inst) {
		s->stats.invalid_requests++;
		return;
	}
	if (inst->state == DS_STARTING)
		inst->state = DS_STARTED;
	check_all_started(inst->session);
}

void vp_sessions_on_ds_stopped(struct vp_service *s, struct vp_producer *p,
			       uint64_t instance_id)
{
	struct vp_ds_instance *inst = instance_of(s, p, instance_id);
	if (!inst) {
		s->stats.invalid_requests++;
		return;
	}
	inst->state = DS_STOPPED;
	recheck_session(inst->session);
}

void vp_sessions_on_producer_gone(struct vp_service *s, struct vp_producer *p)
{
	for (size_t i = 0; i < s->sessions.n; i++) {
		struct vp_session *sess = s->sessions.v[i];
		for (size_t k = 0; k < sess->flushes.n; k++)
			flush_drop_producer(sess->flushes.v[k], p->id);
		for (size_t k = 0; k < sess->instances.n;) {
			struct vp_ds_instance *inst = sess->instances.v[k];
			if (inst->producer != p) {
				k++;
				continue;
			}
			vp_ptrvec_remove(&sess->instances, inst);
			free_instance(inst);
		}
	}
	complete_finished_flushes(s);
	for (size_t i = 0; i < s->sessions.n; i++)
		recheck_session(s->sessions.v[i]);
}

/* ---- triggers ------------------------------------------------------------ */

static void on_trigger_stop(void *ctx)
{
	struct vp_session *sess = ctx;
	sess->t_trigger = 0;
	vp_svc_log(sess->svc, false, "session %llu: stopping (its trigger's "
		   "stop_delay_ms elapsed)", (unsigned long long)sess->id);
	vp_session_disable(sess, true);
}

static void log_fired(const struct vp_session *sess,
		      const struct vp_trigger_activation *a, const char *what)
{
	vp_svc_log(sess->svc, false, "session %llu: trigger \"%.64s\" of "
		   "producer %u (%s) %s", (unsigned long long)sess->id,
		   a->name, a->producer->id,
		   a->producer->name ? a->producer->name : "?", what);
}

/* What trigger t does to sess, by the session's mode (as traced): the
 * first starts a START_TRACING session, which then records for the
 * trigger's stop_delay_ms (0: until stopped); the first stops a
 * STOP_TRACING session stop_delay_ms later.  Every one is recorded. */
static void fire_trigger(struct vp_session *sess, const vp_cfg_trigger *t,
			 const struct vp_trigger_activation *a)
{
	uint32_t delay = t->has_stop_delay_ms ? t->stop_delay_ms : 0;
	bool live = sess->state == SESS_CONFIGURED ||
		    sess->state == SESS_STARTED;
	switch (vp_trigger_mode(sess->cfg)) {
	case VP_TRIGGER_MODE(START_TRACING):
		if (sess->state == SESS_CONFIGURED) {
			log_fired(sess, a, "starts it");
			sess->duration_ms = delay;
			vp_session_start(sess);
		}
		/* after the start: its packet follows the preamble's */
		vp_trigger_record(sess, t, a);
		return;
	case VP_TRIGGER_MODE(STOP_TRACING):
		if (!vp_trigger_record(sess, t, a) || !live)
			return;
		log_fired(sess, a, "stops it after its stop_delay_ms");
		sess->t_trigger = vp_loop_timer(sess->svc->loop, delay, 0,
						on_trigger_stop, sess);
		return;
	default: /* triggers without a mode: kept, nothing else */
		vp_trigger_record(sess, t, a);
		return;
	}
}

void vp_sessions_activate_trigger(struct vp_service *s, struct vp_producer *p,
				  const char *name)
{
	struct vp_trigger_activation a;
	vp_trigger_activation_init(&a, s, p, name);
	for (size_t i = 0; i < s->sessions.n; i++) {
		struct vp_session *sess = s->sessions.v[i];
		const vp_cfg_trigger *t = vp_trigger_match(&a, sess);
		if (t)
			fire_trigger(sess, t, &a);
	}
	vp_trigger_activation_done(&a);
}

/* ---- start --------------------------------------------------------------- */

static void check_all_started(struct vp_session *sess)
{
	if (sess->all_started || sess->state != SESS_STARTED)
		return;
	for (size_t i = 0; i < sess->instances.n; i++) {
		const struct vp_ds_instance *inst = sess->instances.v[i];
		if (inst->producer && inst->state < DS_STARTED)
			return;
	}
	sess->all_started = true;
	push_event(sess, SE_ALL_DATA_SOURCES_STARTED);
	vp_svc_log(sess->svc, false, "session %llu: all data sources started",
		   (unsigned long long)sess->id);
	if (sess->consumer)
		vp_consumer_all_started(sess->consumer);
}

static void on_duration(void *ctx)
{
	struct vp_session *sess = ctx;
	sess->t_duration = 0;
	/* STOP_TRACING: trigger_timeout_ms, unless a trigger came (then its
	 * stop_delay_ms ends the session, even later than this). */
	if (vp_trigger_mode(sess->cfg) == VP_TRIGGER_MODE(STOP_TRACING) &&
	    sess->triggers_received)
		return;
	vp_svc_log(sess->svc, false, "session %llu: duration elapsed",
		   (unsigned long long)sess->id);
	vp_session_disable(sess, true);
}

static void on_periodic_flush(void *ctx)
{
	struct vp_session *sess = ctx;
	if (sess->state != SESS_STARTED)
		return;
	uint32_t t = sess->cfg->has_flush_timeout_ms
			     ? sess->cfg->flush_timeout_ms
			     : SVC_DEFAULT_FLUSH_TIMEOUT_MS;
	vp_session_flush(sess, t, NULL, NULL, 0);
}

static void on_clear_incremental(void *ctx)
{
	struct vp_session *sess = ctx;
	if (sess->state != SESS_STARTED)
		return;
	uint64_t *ids = vp_xcalloc(sess->instances.n, sizeof(*ids));
	bool *done = vp_xcalloc(sess->instances.n, 1);
	for (size_t i = 0; i < sess->instances.n; i++) {
		struct vp_ds_instance *first = sess->instances.v[i];
		if (done[i] || !first->producer)
			continue;
		size_t n = 0;
		for (size_t k = i; k < sess->instances.n; k++) {
			struct vp_ds_instance *inst = sess->instances.v[k];
			if (inst->producer != first->producer)
				continue;
			done[k] = true;
			if (inst->handles_incremental_state_clear &&
			    inst->state == DS_STARTED)
				ids[n++] = inst->id;
		}
		if (n)
			vp_producer_clear_incremental(first->producer, ids, n);
	}
	free(ids);
	free(done);
}

static void on_snapshot(void *ctx)
{
	struct vp_session *sess = ctx;
	if (sess->state != SESS_STARTED)
		return;
	push_built(sess, vp_pkt_sync_marker);
	push_built(sess, vp_pkt_clock_snapshot);
}

static void after_file_flush(struct vp_session *sess, bool ok, void *ctx,
			     uint64_t arg)
{
	(void)ok;
	(void)ctx;
	(void)arg;
	sess->file_flush_pending = false;
	if (!sess->freeing && sess->state == SESS_STARTED)
		drain_to_file(sess, false);
}

static void on_file_period(void *ctx)
{
	struct vp_session *sess = ctx;
	if (!sess->flush_on_write) {
		drain_to_file(sess, false);
		return;
	}
	/* What the producers hold goes into this write. */
	if (sess->file_flush_pending)
		return;
	sess->file_flush_pending = true;
	vp_session_flush(sess, 0, after_file_flush, NULL, 0);
}

/* traced's write_flush_mode: AUTO (the default) flushes every 5 s when the
 * file is written at least that often, else before each write; ENABLED
 * always before each write; DISABLED as flush_period_ms says. */
static void choose_write_flush(struct vp_session *sess, uint32_t write_ms)
{
	const Perfetto__Protos__TraceConfig *cfg = sess->cfg;
	int mode = cfg->has_write_flush_mode ? (int)cfg->write_flush_mode : 0;
	if (mode ==
	    PERFETTO__PROTOS__TRACE_CONFIG__WRITE_FLUSH_MODE__WRITE_FLUSH_DISABLED)
		return;
	if (mode ==
		    PERFETTO__PROTOS__TRACE_CONFIG__WRITE_FLUSH_MODE__WRITE_FLUSH_ENABLED ||
	    write_ms > SVC_DEFAULT_FILE_PERIOD_MS) {
		sess->flush_on_write = true;
		sess->effective_flush_ms = write_ms;
	} else {
		sess->effective_flush_ms = SVC_DEFAULT_FILE_PERIOD_MS;
	}
}

static uint32_t period(uint32_t v)
{
	return v < SVC_MIN_PERIODIC_MS ? SVC_MIN_PERIODIC_MS : v;
}

/* The packets a reader needs before any data, as traced writes them at the
 * start of a session (and of a clone): a sync marker, the config and the
 * system info unless the config turns them off, the uuid, a clock
 * snapshot. */
static void push_preamble(struct vp_session *sess,
			  const Perfetto__Protos__TraceConfig__BuiltinDataSource
				  *bi)
{
	push_built(sess, vp_pkt_sync_marker);
	if (!(bi && bi->has_disable_trace_config && bi->disable_trace_config))
		push_built(sess, vp_pkt_trace_config);
	if (!(bi && bi->has_disable_system_info && bi->disable_system_info))
		push_built(sess, vp_pkt_system_info);
	push_built(sess, vp_pkt_trace_uuid);
	if (sess->clock_snapshots)
		push_built(sess, vp_pkt_clock_snapshot);
}

void vp_session_start(struct vp_session *sess)
{
	struct vp_service *s = sess->svc;
	const Perfetto__Protos__TraceConfig *cfg = sess->cfg;
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *bi =
		cfg->builtin_data_sources;
	if (sess->state != SESS_CONFIGURED)
		return;
	if (vp_trigger_mode(cfg) == VP_TRIGGER_MODE(START_TRACING))
		cancel_timer(sess, &sess->t_trigger); /* no more waiting */
	sess->state = SESS_STARTED;
	sess->start_realtime_ns = (int64_t)vp_svc_clock_ns(CLOCK_REALTIME);
	uint32_t write_ms = 0;
	if (sess->file_fd >= 0) {
		write_ms = SVC_DEFAULT_FILE_PERIOD_MS;
		if (cfg->has_file_write_period_ms &&
		    cfg->file_write_period_ms > 0)
			write_ms = cfg->file_write_period_ms;
		if (write_ms < SVC_MIN_FILE_PERIOD_MS)
			write_ms = SVC_MIN_FILE_PERIOD_MS;
		choose_write_flush(sess, write_ms);
	}
	vp_svc_log(s, false, "session %llu: started (%zu buffers, %zu data "
		   "source instances)",
		   (unsigned long long)sess->id, sess->n_bufs,
		   sess->instances.n);

	push_preamble(sess, bi);
	push_event(sess, SE_TRACING_STARTED);

	for (size_t i = 0; i < sess->instances.n; i++) {
		struct vp_ds_instance *inst = sess->instances.v[i];
		if (inst->state == DS_CONFIGURED)
			start_instance(inst);
	}

	if (sess->duration_ms > 0)
		sess->t_duration = vp_loop_timer(s->loop, sess->duration_ms, 0,
						 on_duration, sess);
	if (sess->effective_flush_ms && !sess->flush_on_write) {
		uint32_t p = period(sess->effective_flush_ms);
		sess->t_flush_period = vp_loop_timer(s->loop, p, p,
						     on_periodic_flush, sess);
	} else if (!sess->effective_flush_ms && cfg->has_flush_period_ms &&
		   cfg->flush_period_ms > 0) {
		uint32_t p = period(cfg->flush_period_ms);
		sess->t_flush_period = vp_loop_timer(s->loop, p, p,
						     on_periodic_flush, sess);
	}
	if (cfg->incremental_state_config &&
	    cfg->incremental_state_config->has_clear_period_ms &&
	    cfg->incremental_state_config->clear_period_ms > 0) {
		uint32_t p =
			period(cfg->incremental_state_config->clear_period_ms);
		sess->t_clear = vp_loop_timer(s->loop, p, p,
					      on_clear_incremental, sess);
	}
	if (sess->clock_snapshots) {
		uint32_t p = SVC_DEFAULT_SNAPSHOT_MS;
		if (bi && bi->has_snapshot_interval_ms &&
		    bi->snapshot_interval_ms > 0)
			p = period(bi->snapshot_interval_ms);
		sess->t_snapshot =
			vp_loop_timer(s->loop, p, p, on_snapshot, sess);
	}
	if (sess->file_fd >= 0)
		sess->t_file = vp_loop_timer(s->loop, write_ms, write_ms,
					     on_file_period, sess);
	check_all_started(sess);
}

/* ---- stop ---------------------------------------------------------------- */

static void cancel_timer(struct vp_session *sess, uint64_t *t)
{
	if (*t)
		vp_loop_cancel(sess->svc->loop, *t);
	*t = 0;
}

static void cancel_periodic(struct vp_session *sess)
{
	cancel_timer(sess, &sess->t_duration);
	cancel_timer(sess, &sess->t_trigger);
	cancel_timer(sess, &sess->t_flush_period);
	cancel_timer(sess, &sess->t_clear);
	cancel_timer(sess, &sess->t_snapshot);
	cancel_timer(sess, &sess->t_file);
}

static void session_finalize(struct vp_session *sess)
{
	if (sess->state == SESS_STOPPED)
		return;
	sess->state = SESS_STOPPED;
	cancel_timer(sess, &sess->t_stop);
	scrape_session(sess, true);
	if (sess->clock_snapshots)
		push_built(sess, vp_pkt_clock_snapshot);
	push_event(sess, SE_TRACING_DISABLED);
	vp_svc_log(sess->svc, false, "session %llu: stopped",
		   (unsigned long long)sess->id);
	if (sess->file_fd >= 0) {
		drain_to_file(sess, true);
		if (sess->file_fd >= 0)
			close(sess->file_fd);
		sess->file_fd = -1;
	}
	if (sess->consumer)
		vp_consumer_session_ended(sess->consumer, sess,
					  sess->file_error[0] ? sess->file_error
							      : NULL);
	vp_sessions_check_shutdown(sess->svc);
}

static void on_stop_timeout(void *ctx)
{
	struct vp_session *sess = ctx;
	sess->t_stop = 0;
	vp_svc_log(sess->svc, true,
		   "session %llu: data sources did not stop in time",
		   (unsigned long long)sess->id);
	session_finalize(sess);
}

static void session_stop_phase(struct vp_session *sess)
{
	bool wait = false;
	for (size_t i = 0; i < sess->instances.n; i++) {
		struct vp_ds_instance *inst = sess->instances.v[i];
		if (!inst->producer || inst->state == DS_STOPPED ||
		    inst->state == DS_STOPPING)
			continue;
		vp_producer_stop_ds(inst->producer, inst->id);
		if (inst->will_notify_on_stop) {
			inst->state = DS_STOPPING;
			wait = true;
		} else {
			inst->state = DS_STOPPED;
		}
	}
	if (!wait) {
		session_finalize(sess);
		return;
	}
	uint32_t t = sess->cfg->has_data_source_stop_timeout_ms &&
				     sess->cfg->data_source_stop_timeout_ms
			     ? sess->cfg->data_source_stop_timeout_ms
			     : SVC_DEFAULT_STOP_TIMEOUT_MS;
	sess->t_stop = vp_loop_timer(sess->svc->loop, t, 0, on_stop_timeout,
				     sess);
}

static void after_final_flush(struct vp_session *sess, bool ok, void *ctx,
			      uint64_t arg)
{
	(void)ctx;
	(void)arg;
	if (sess->freeing)
		return;
	sess->final_flush_outcome = ok ? 1 : 2;
	if (sess->state == SESS_DISABLING)
		session_stop_phase(sess);
}

void vp_session_disable(struct vp_session *sess, bool flush_first)
{
	if (sess->state == SESS_DISABLING || sess->state == SESS_STOPPED)
		return;
	bool was_started = sess->state == SESS_STARTED;
	sess->state = SESS_DISABLING;
	cancel_periodic(sess);
	vp_svc_log(sess->svc, false, "session %llu: stopping%s",
		   (unsigned long long)sess->id,
		   flush_first ? " (final flush)" : "");
	if (flush_first && was_started) {
		uint32_t t = sess->cfg->has_flush_timeout_ms &&
					     sess->cfg->flush_timeout_ms
				     ? sess->cfg->flush_timeout_ms
				     : SVC_DEFAULT_FLUSH_TIMEOUT_MS;
		vp_session_flush(sess, t, after_final_flush, NULL, 0);
		return;
	}
	session_stop_phase(sess);
}

/* ---- write_into_file ----------------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			if (poll(&pfd, 1, 1000) <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			continue;
		}
		if (w == 0)
			errno = ENOSPC;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Moves what the session holds into its output file, as Trace.packet
 * records.  Stops the session when the file reaches max_file_size_bytes or
 * cannot be written. */
static void drain_to_file(struct vp_session *sess, bool final)
{
	if (sess->file_fd < 0)
		return;
	struct vp_session_reader rd;
	vp_session_reader_init(&rd, sess, final);
	bool stop = false;
	const char *why = NULL;
	uint8_t hdr[1 + PB_MAX_VARINT_LEN];
	while (vp_session_reader_next(&rd) == 1) {
		hdr[0] = 0x0a;
		size_t hl = 1 + pb_encode_varint(hdr + 1, rd.pkt.len);
		uint64_t rec = hl + rd.pkt.len;
		if (sess->max_file_size &&
		    sess->file_bytes + rec > sess->max_file_size) {
			stop = true;
			why = "max_file_size_bytes reached";
			break;
		}
		if (write_all(sess->file_fd, hdr, hl) < 0 ||
		    write_all(sess->file_fd, rd.pkt.data, rd.pkt.len) < 0) {
			/* The consumer is told (EnableTracing fails): a
			 * truncated file must not pass for a trace. */
			snprintf(sess->file_error, sizeof(sess->file_error),
				 "cannot write the output file: %s",
				 strerror(errno ? errno : ENOSPC));
			stop = true;
			why = "cannot write the output file";
			close(sess->file_fd);
			sess->file_fd = -1;
			break;
		}
		sess->file_bytes += rec;
	}
	vp_session_reader_fini(&rd);
	if (!stop)
		return;
	vp_svc_log(sess->svc, !why || why[0] == 'c', "session %llu: %s",
		   (unsigned long long)sess->id, why);
	if (!final)
		vp_session_disable(sess, false);
}

/* ---- creation ------------------------------------------------------------ */

/* The raw TraceConfig inside EnableTracingRequest. */
static bool raw_trace_config(const uint8_t *args, size_t len,
			     const uint8_t **cfg, size_t *cfg_len)
{
	struct pb_reader r;
	struct pb_field f;
	bool found = false;
	pb_reader_init(&r, args, len);
	while (pb_next(&r, &f)) {
		if (f.num == ETR_TRACE_CONFIG && f.wt == PB_WT_LEN) {
			*cfg = f.data;
			*cfg_len = f.len;
			found = true;
		}
	}
	return found && r.err == PB_OK;
}

/* The limits of one consumer uid: its sessions at once, and, for a uid
 * other than the service's, the buffers all such uids hold (a session's
 * of total bytes more). */
static int check_uid_limits(struct vp_service *s, uid_t uid, uint64_t total,
			    struct vp_error *err)
{
	unsigned n = 0;
	uint64_t others = 0;

	if (uid == (uid_t)-1) /* the service's own */
		return 0;
	for (size_t i = 0; i < s->sessions.n; i++) {
		const struct vp_session *x = s->sessions.v[i];
		n += x->uid == uid;
		for (size_t b = 0; x->uid != s->uid && b < x->n_bufs; b++)
			others += x->bufs[b]->size;
	}
	if (n >= SVC_MAX_SESSIONS_PER_UID)
		return vp_errorf(err, "too many concurrent tracing sessions "
				 "(%u) for uid %d, the limit is %u", n,
				 (int)uid, SVC_MAX_SESSIONS_PER_UID);
	if (uid != s->uid && others + total > SVC_OTHER_UIDS_BUFFER_BYTES)
		return vp_errorf(err, "buffers of %llu KiB exceed what sessions "
				 "of other users than the service's may hold "
				 "(%llu KiB in use, %llu KiB max)",
				 (unsigned long long)(total / 1024),
				 (unsigned long long)(others / 1024),
				 SVC_OTHER_UIDS_BUFFER_BYTES / 1024);
	return 0;
}

/* true if a string filter chain has rules. */
static bool chain_has_rules(
	const Perfetto__Protos__TraceConfig__TraceFilter__StringFilterChain *c)
{
	return c && c->n_rules > 0;
}

/* TraceConfig.trace_filter's bytecode loaded, or NULL with an error that
 * says why (traced's words where it has them): a session with a filter
 * that does not load is refused rather than recorded unfiltered. */
static struct vp_trace_filter *load_trace_filter(
	const Perfetto__Protos__TraceConfig *cfg, struct vp_error *err)
{
	const Perfetto__Protos__TraceConfig__TraceFilter *tf =
		cfg->trace_filter;
	/* String rules rewrite strings by regex (std::regex-like patterns
	 * in traced): not implemented, and recording the strings unredacted
	 * would keep what the rules were to hide. */
	if (chain_has_rules(tf->string_filter_chain) ||
	    chain_has_rules(tf->string_filter_chain_v54)) {
		vp_errorf(err, "Trace filter string_filter_chain is not "
			  "supported by vtraced; refusing rather than "
			  "recording strings unredacted");
		return NULL;
	}
	/* bytecode_v2 when set, else bytecode (as traced). */
	ProtobufCBinaryData bc = tf->has_bytecode_v2 && tf->bytecode_v2.len ?
					 tf->bytecode_v2 : tf->bytecode;
	ProtobufCBinaryData ov = tf->has_bytecode_overlay_v54 ?
					 tf->bytecode_overlay_v54 :
					 (ProtobufCBinaryData){0, NULL};
	enum vp_tf_load why;
	struct vp_trace_filter *f = vp_trace_filter_new(
		bc.data, bc.len, ov.len ? ov.data : NULL, ov.len, &why);
	if (f)
		return f;
	switch (why) {
	case TF_LOAD_NO_ROOT:
		vp_errorf(err, "Failed to set filter root.");
		break;
	case TF_LOAD_TOO_LARGE:
		vp_errorf(err, "Trace filter bytecode invalid: over vtraced's "
			  "caps (%u bytes, %u messages)",
			  TF_MAX_BYTECODE_BYTES, TF_MAX_MESSAGES);
		break;
	default:
		vp_errorf(err, "Trace filter bytecode invalid");
		break;
	}
	return NULL;
}

static int check_config(struct vp_service *s,
			const Perfetto__Protos__TraceConfig *cfg, uid_t uid,
			uint64_t *total, struct vp_error *err)
{
	if (s->sessions.n >= SVC_MAX_SESSIONS)
		return vp_errorf(err, "too many tracing sessions (max %u)",
				 SVC_MAX_SESSIONS);
	if (cfg->trace_filter) {
		/* Loaded here to be checked, again for the session. */
		struct vp_trace_filter *f = load_trace_filter(cfg, err);
		if (!f)
			return -1;
		vp_trace_filter_free(f);
	}
	if (cfg->has_duration_ms && cfg->duration_ms > SVC_MAX_DURATION_MS)
		return vp_errorf(err, "duration_ms %u is too long (max %llu, "
				 "7 days)", cfg->duration_ms,
				 SVC_MAX_DURATION_MS);
	if (vp_triggers_check_config(cfg, err) < 0)
		return -1;
	if (cfg->n_buffers == 0)
		return vp_errorf(err, "TraceConfig has no buffers");
	if (cfg->n_buffers > SVC_MAX_BUFFERS_PER_SESSION)
		return vp_errorf(err, "TraceConfig has %zu buffers (max %u)",
				 cfg->n_buffers, SVC_MAX_BUFFERS_PER_SESSION);
	*total = 0;
	for (size_t i = 0; i < cfg->n_buffers; i++) {
		const Perfetto__Protos__TraceConfig__BufferConfig *b =
			cfg->buffers[i];
		if (!b->has_size_kb || b->size_kb == 0)
			return vp_errorf(err, "buffers[%zu]: size_kb is 0", i);
		*total += (uint64_t)b->size_kb * 1024u;
	}
	if (*total + s->total_buffer_bytes > SVC_MAX_TOTAL_BUFFER_BYTES)
		return vp_errorf(err,
				 "buffers of %llu KiB exceed the service's "
				 "limit (%llu KiB in use, %llu KiB max)",
				 (unsigned long long)(*total / 1024),
				 (unsigned long long)(s->total_buffer_bytes /
						      1024),
				 SVC_MAX_TOTAL_BUFFER_BYTES / 1024);
	if (check_uid_limits(s, uid, *total, err) < 0)
		return -1;
	for (size_t i = 0; i < cfg->n_data_sources; i++) {
		const Perfetto__Protos__TraceConfig__DataSource *d =
			cfg->data_sources[i];
		if (!d->config || !d->config->name || !d->config->name[0])
			return vp_errorf(err,
					 "data_sources[%zu]: no config.name",
					 i);
		if (d->config->has_target_buffer &&
		    d->config->target_buffer >= cfg->n_buffers)
			return vp_errorf(err,
					 "data_sources[%zu] (%s): target_buffer"
					 " %u out of range (%zu buffers)",
					 i, d->config->name,
					 d->config->target_buffer,
					 cfg->n_buffers);
	}
	if (cfg->unique_session_name && cfg->unique_session_name[0]) {
		for (size_t i = 0; i < s->sessions.n; i++) {
			const struct vp_session *o = s->sessions.v[i];
			const char *n = o->cfg->unique_session_name;
			if (!o->cloned && n &&
			    strcmp(n, cfg->unique_session_name) == 0)
				return vp_errorf(
					err,
					"a session named \"%s\" already exists",
					n);
		}
	}
	return 0;
}

static void new_uuid(struct vp_session *sess)
{
	/* GRND_NONBLOCK: a guest booting without an entropy device may wait
	 * long for its pool; the fallback is unique enough for a uuid. */
	if (getrandom(sess->uuid, sizeof(sess->uuid), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(sess->uuid)) {
		sess->uuid[0] = vp_svc_clock_ns(CLOCK_REALTIME);
		sess->uuid[1] = sess->id ^ ((uint64_t)sess->svc->pid << 32);
	}
}

static uint16_t alloc_buffer_id(struct vp_service *s)
{
	for (unsigned tries = 0; tries < SVC_MAX_BUFFER_IDS; tries++) {
		uint16_t id = s->next_buffer_id++;
		if (s->next_buffer_id >= SVC_MAX_BUFFER_IDS)
			s->next_buffer_id = 1;
		if (id != 0 && !s->buffers[id])
			return id;
	}
	return 0;
}

static int create_buffers(struct vp_session *sess, struct vp_error *err)
{
	struct vp_service *s = sess->svc;
	const Perfetto__Protos__TraceConfig *cfg = sess->cfg;
	sess->bufs = vp_xcalloc(cfg->n_buffers, sizeof(*sess->bufs));
	for (size_t i = 0; i < cfg->n_buffers; i++) {
		const Perfetto__Protos__TraceConfig__BufferConfig *bc =
			cfg->buffers[i];
		uint16_t id = alloc_buffer_id(s);
		if (id == 0)
			return vp_errorf(err, "out of buffer ids");
		struct vp_svc_buffer *b = vp_xcalloc(1, sizeof(*b));
		enum vp_fill_policy pol =
			bc->has_fill_policy &&
				bc->fill_policy ==
					PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD
				? VP_FILL_DISCARD
				: VP_FILL_RING_BUFFER;
		if (vp_trace_buffer_new(&b->tb, (size_t)bc->size_kb * 1024u,
					pol, err) < 0) {
			free(b);
			return -1;
		}
		b->id = id;
		b->session = sess;
		b->size = vp_trace_buffer_size(b->tb);
		s->buffers[id] = b;
		s->total_buffer_bytes += b->size;
		sess->bufs[sess->n_bufs++] = b;
	}
	return 0;
}

/* The session's filter, from a config check_config accepted. */
static void setup_filter(struct vp_session *sess)
{
	pb_buf_init(&sess->filter_out);
	if (!sess->cfg->trace_filter)
		return;
	/* It loaded when checked: it cannot fail. */
	sess->filter = load_trace_filter(sess->cfg, NULL);
}

static void configure_builtins(struct vp_session *sess)
{
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *bi =
		sess->cfg->builtin_data_sources;
	sess->service_events =
		!(bi && bi->has_disable_service_events &&
		  bi->disable_service_events);
	sess->clock_snapshots =
		!(bi && bi->has_disable_clock_snapshotting &&
		  bi->disable_clock_snapshotting);
	if (bi && bi->has_primary_trace_clock)
		sess->primary_clock = (uint32_t)bi->primary_trace_clock;
}

static void on_no_start_trigger(void *ctx)
{
	struct vp_session *sess = ctx;
	sess->t_trigger = 0;
	if (sess->state != SESS_CONFIGURED)
		return;
	vp_svc_log(sess->svc, false, "session %llu: no trigger in %u ms; "
		   "ending it", (unsigned long long)sess->id,
		   sess->cfg->trigger_config->trigger_timeout_ms);
	vp_session_disable(sess, false);
}

/* START_TRACING: the session ends trigger_timeout_ms from now if no
 * trigger starts it.  False for the other modes. */
static bool arm_trigger_timeout(struct vp_session *sess)
{
	if (vp_trigger_mode(sess->cfg) != VP_TRIGGER_MODE(START_TRACING))
		return false;
	sess->t_trigger = vp_loop_timer(
		sess->svc->loop, sess->cfg->trigger_config->trigger_timeout_ms,
		0, on_no_start_trigger, sess);
	return true;
}

int vp_session_create(struct vp_service *s, struct vp_consumer *c,
		      uint64_t request_id, const uint8_t *args, size_t len,
		      int file_fd, struct vp_error *err)
{
	const uint8_t *raw = NULL;
	size_t raw_len = 0;
	uint64_t total = 0;
	if (!raw_trace_config(args, len, &raw, &raw_len))
		return vp_errorf(err, "EnableTracing: no trace_config");
	Perfetto__Protos__TraceConfig *cfg =
		perfetto__protos__trace_config__unpack(NULL, raw_len, raw);
	if (!cfg)
		return vp_errorf(err, "EnableTracing: TraceConfig (%zu bytes) "
				 "does not decode", raw_len);
	if (check_config(s, cfg, c ? c->uid : (uid_t)-1, &total, err) < 0) {
		perfetto__protos__trace_config__free_unpacked(cfg, NULL);
		return -1;
	}
	bool to_file = cfg->has_write_into_file && cfg->write_into_file;
	if (to_file && file_fd < 0) {
		perfetto__protos__trace_config__free_unpacked(cfg, NULL);
		return vp_errorf(err, "write_into_file is set but no file "
				 "descriptor came with EnableTracing");
	}

	if (cfg->has_lockdown_mode)
		set_lockdown(s, cfg->lockdown_mode);

	struct vp_session *sess = vp_xcalloc(1, sizeof(*sess));
	sess->svc = s;
	sess->id = s->next_session_id++;
	sess->cfg = cfg;
	sess->cfg_raw = vp_xmalloc(raw_len);
	memcpy(sess->cfg_raw, raw, raw_len);
	sess->cfg_raw_len = raw_len;
	sess->file_fd = -1;
	sess->uid = c ? c->uid : (uid_t)-1;
	sess->duration_ms = cfg->has_duration_ms ? cfg->duration_ms : 0;
	/* As traced: a STOP_TRACING session lasts trigger_timeout_ms unless
	 * a trigger ends it. */
	if (vp_trigger_mode(cfg) == VP_TRIGGER_MODE(STOP_TRACING))
		sess->duration_ms = cfg->trigger_config->trigger_timeout_ms;
	new_uuid(sess);
	pb_buf_init(&sess->pending);
	configure_builtins(sess);
	setup_filter(sess);
	vp_ptrvec_push(&s->sessions, sess);
	if (create_buffers(sess, err) < 0) {
		vp_session_free(sess);
		return -1;
	}
	if (to_file) {
		sess->file_fd = file_fd;
		if (cfg->has_max_file_size_bytes)
			sess->max_file_size = cfg->max_file_size_bytes;
	}
	sess->consumer = c;
	if (c) {
		c->session = sess;
		sess->enable_pending = true;
		sess->enable_req = request_id;
	}
	vp_svc_log(s, false, "session %llu: enabled (%zu KiB of buffers%s)",
		   (unsigned long long)sess->id, (size_t)(total / 1024),
		   to_file ? ", into a file" : "");

	for (size_t i = 0; i < s->producers.n; i++) {
		struct vp_producer *p = s->producers.v[i];
		for (size_t k = 0; k < p->n_ds; k++)
			match_session(sess, p, &p->ds[k]);
	}
	/* START_TRACING waits for its trigger, as deferred_start for
	 * StartTracing: whichever comes first starts it. */
	if (!(cfg->has_deferred_start && cfg->deferred_start) &&
	    !arm_trigger_timeout(sess))
		vp_session_start(sess);
	return 0;
}

/* ---- CloneSession -------------------------------------------------------- */

int vp_session_clone(struct vp_session *src, struct vp_consumer *c,
		     struct vp_error *err)
{
	struct vp_service *s = src->svc;
	if (s->sessions.n >= SVC_MAX_SESSIONS)
		return vp_errorf(err, "too many tracing sessions (%u)",
				 SVC_MAX_SESSIONS);
	uint64_t total = 0;
	for (size_t i = 0; i < src->n_bufs; i++)
		total += src->bufs[i]->size;
	if (total + s->total_buffer_bytes > SVC_MAX_TOTAL_BUFFER_BYTES)
		return vp_errorf(err,
				 "a copy of %llu KiB of buffers exceeds the "
				 "service's limit",
				 (unsigned long long)(total / 1024));
	if (check_uid_limits(s, c->uid, total, err) < 0)
		return -1;
	Perfetto__Protos__TraceConfig *cfg =
		perfetto__protos__trace_config__unpack(NULL, src->cfg_raw_len,
						       src->cfg_raw);
	if (!cfg)
		return vp_errorf(err, "out of memory");
	struct vp_session *sess = vp_xcalloc(1, sizeof(*sess));
	sess->svc = s;
	sess->id = s->next_session_id++;
	sess->cfg = cfg;
	sess->cfg_raw = vp_xmalloc(src->cfg_raw_len);
	memcpy(sess->cfg_raw, src->cfg_raw, src->cfg_raw_len);
	sess->cfg_raw_len = src->cfg_raw_len;
	sess->file_fd = -1;
	sess->uid = c->uid;
	sess->cloned = true;
	new_uuid(sess);
	pb_buf_init(&sess->pending);
	configure_builtins(sess);
	/* As traced: the copy gets a filter of its own (its stats from 0). */
	setup_filter(sess);
	sess->final_flush_outcome = src->final_flush_outcome;
	sess->flushes_requested = src->flushes_requested;
	sess->flushes_succeeded = src->flushes_succeeded;
	sess->flushes_failed = src->flushes_failed;
	sess->invalid_packets = src->invalid_packets;
	sess->start_realtime_ns = src->start_realtime_ns;
	sess->effective_flush_ms = src->effective_flush_ms;
	sess->duration_ms = src->duration_ms;
	vp_ptrvec_push(&s->sessions, sess);
	sess->bufs = vp_xcalloc(src->n_bufs, sizeof(*sess->bufs));
	for (size_t i = 0; i < src->n_bufs; i++) {
		uint16_t id = alloc_buffer_id(s);
		struct vp_svc_buffer *b = vp_xcalloc(1, sizeof(*b));
		b->tb = id ? vp_trace_buffer_clone(src->bufs[i]->tb) : NULL;
		if (!b->tb) {
			free(b);
			vp_session_free(sess);
			return vp_errorf(err, id ? "out of memory for a copy "
						   "of the buffers"
						 : "out of buffer ids");
		}
		b->id = id;
		b->session = sess;
		b->size = src->bufs[i]->size;
		s->buffers[id] = b;
		s->total_buffer_bytes += b->size;
		sess->bufs[sess->n_bufs++] = b;
	}
	/* What a reader of the copy needs first, as at the start of a
	 * session; the copy is over: a final snapshot and the end. */
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *bi =
		cfg->builtin_data_sources;
	push_preamble(sess, bi);
	vp_triggers_copy(sess, src);
	sess->state = SESS_STOPPED;
	sess->consumer = c;
	c->session = sess;
	vp_svc_log(s, false, "session %llu: cloned from session %llu",
		   (unsigned long long)sess->id, (unsigned long long)src->id);
	return 0;
}

/* ---- freeing ------------------------------------------------------------- */

void vp_session_free(struct vp_session *sess)
{
	struct vp_service *s = sess->svc;
	if (sess->consumer)
		vp_consumer_abort_read(sess->consumer, sess);
	if (sess->state != SESS_STOPPED) {
		for (size_t i = 0; i < sess->instances.n; i++) {
			struct vp_ds_instance *inst = sess->instances.v[i];
			if (inst->producer && inst->state != DS_STOPPED)
				vp_producer_stop_ds(inst->producer, inst->id);
		}
	}
	cancel_periodic(sess);
	cancel_timer(sess, &sess->t_stop);
	/* Pending flushes fail, so whoever waits for one gets an answer (a
	 * consumer's Flush, a CloneSession); with `freeing` set their
	 * callbacks leave the session alone. */
	sess->freeing = true;
	while (sess->flushes.n) {
		struct vp_flush *f = sess->flushes.v[sess->flushes.n - 1];
		sess->flushes.n--;
		if (f->timer)
			vp_loop_cancel(s->loop, f->timer);
		vp_flush_done_fn done = f->done;
		void *ctx = f->ctx;
		uint64_t arg = f->arg;
		flush_free(f);
		if (done)
			done(sess, false, ctx, arg);
	}
	if (sess->file_fd >= 0) {
		drain_to_file(sess, true);
		if (sess->file_fd >= 0)
			close(sess->file_fd);
		sess->file_fd = -1;
	}
	for (size_t i = 0; i < sess->n_bufs; i++) {
		struct vp_svc_buffer *b = sess->bufs[i];
		s->buffers[b->id] = NULL;
		s->total_buffer_bytes -= b->size;
		vp_trace_buffer_free(b->tb);
		free(b);
	}
	free(sess->bufs);
	for (size_t i = 0; i < sess->instances.n; i++)
		free_instance(sess->instances.v[i]);
	vp_ptrvec_free(&sess->instances);
	vp_ptrvec_free(&sess->flushes);
	if (sess->consumer && sess->consumer->session == sess)
		sess->consumer->session = NULL;
	vp_ptrvec_remove(&s->sessions, sess);
	forget_write_permissions(s);
	vp_svc_log(s, false, "session %llu: freed",
		   (unsigned long long)sess->id);
	perfetto__protos__trace_config__free_unpacked(sess->cfg, NULL);
	free(sess->cfg_raw);
	free(sess->detach_key);
	vp_triggers_free(sess);
	pb_buf_free(&sess->pending);
	pb_buf_free(&sess->filter_out);
	vp_trace_filter_free(sess->filter);
	vp_filter_stats_free(&sess->filter_stats);
	free(sess);
	vp_sessions_check_shutdown(s);
}
