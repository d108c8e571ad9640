/*
 * service.c - the vtraced service object: the two IPC hosts, the id
 * allocators (producers, sessions, buffers, sequences, machines), logging,
 * statistics and the clean shutdown.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "service.h"
#include "vp_log.h"
#include "vp_alloc.h"

/* ---- small helpers ----------------------------------------------------- */

void vp_ptrvec_push(struct vp_ptrvec *pv, void *p)
{
	VP_XGROW(pv->v, pv->cap, pv->n + 1);
	pv->v[pv->n++] = p;
}

bool vp_ptrvec_remove(struct vp_ptrvec *pv, const void *p)
{
	for (size_t i = 0; i < pv->n; i++) {
		if (pv->v[i] != p)
			continue;
		memmove(&pv->v[i], &pv->v[i + 1],
			(pv->n - i - 1) * sizeof(pv->v[0]));
		pv->n--;
		return true;
	}
	return false;
}

void vp_ptrvec_free(struct vp_ptrvec *pv)
{
	free(pv->v);
	pv->v = NULL;
	pv->n = pv->cap = 0;
}

char *vp_svc_strndup(const char *s, size_t max)
{
	return vp_xstrndup(s ? s : "", max);
}

uint64_t vp_svc_clock_ns(int clk)
{
	struct timespec ts;
	if (clock_gettime(clk, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vp_svc_log(struct vp_service *s, bool error, const char *fmt, ...)
{
	enum vp_log_level level = error ? VP_LOG_ERROR : VP_LOG_INFO;

	(void)s; /* the level is the process's: vtraced's -v, VPERFETTO_LOG */
	if (!vp_log_enabled(level))
		return;
	/* A daemon's log is read later: each line says when. */
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);

	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vp_log(level, "%s.%03ld %s", when, ts.tv_nsec / 1000000, msg);
}

/* ---- ids --------------------------------------------------------------- */

uint32_t vp_svc_new_sequence_id(struct vp_service *s)
{
	uint32_t id = s->next_sequence_id++;
	if (s->next_sequence_id == 0)
		s->next_sequence_id = SVC_SERVICE_SEQ_ID + 1;
	return id;
}

/* A remote machine's id: the same key always maps to the same id. */
uint32_t vp_svc_machine_id(struct vp_service *s, const char *key)
{
	for (size_t i = 0; i < s->n_machines; i++)
		if (strcmp(s->machines[i].key, key) == 0)
			return s->machines[i].id;
	VP_XGROW(s->machines, s->cap_machines, s->n_machines + 1);
	struct vp_machine *m = &s->machines[s->n_machines++];
	snprintf(m->key, sizeof(m->key), "%s", key);
	m->id = s->next_machine_id++;
	return m->id;
}

struct vp_svc_buffer *vp_buffer_by_id(struct vp_service *s, uint16_t id)
{
	if (id == 0 || id >= SVC_MAX_BUFFER_IDS)
		return NULL;
	return s->buffers[id];
}

/* ---- lifecycle ---------------------------------------------------------- */

int vp_service_new(struct vp_service **out, struct vp_loop *loop,
		   const struct vp_service_opts *opts, struct vp_error *err)
{
	struct vp_service *s = calloc(1, sizeof(*s));
	if (!s)
		return vp_errorf(err, "vtraced: out of memory");
	s->loop = loop;
	s->uid = getuid();
	s->pid = getpid();
	s->next_buffer_id = 1;
	s->next_producer_id = 1;
	s->next_session_id = 1;
	s->next_instance_id = 1;
	s->next_flush_id = 1;
	s->next_sequence_id = SVC_SERVICE_SEQ_ID + 1;
	s->next_machine_id = 1;
	s->scratch = malloc(VP_SMB_MAX_PAGE_SIZE);
	if (!s->scratch) {
		free(s);
		return vp_errorf(err, "vtraced: out of memory");
	}
	vp_producer_port_describe(&s->producer_desc, s);
	vp_consumer_port_describe(&s->consumer_desc, s);
	struct vp_ipc_limits lim = {0};
	if (opts) {
		lim.init_timeout_ms = opts->init_timeout_ms;
		lim.max_conns_per_uid = opts->max_conns_per_uid;
		lim.max_conns = opts->max_conns;
	}
	if (vp_ipc_group_new(&s->conn_group, loop, &lim, err) < 0 ||
	    vp_ipc_host_new(&s->producer_host, loop, &s->producer_desc,
			    err) < 0 ||
	    vp_ipc_host_new(&s->consumer_host, loop, &s->consumer_desc,
			    err) < 0) {
		vp_service_free(s);
		return -1;
	}
	vp_ipc_host_set_group(s->producer_host, s->conn_group);
	vp_ipc_host_set_group(s->consumer_host, s->conn_group);
	*out = s;
	return 0;
}

int vp_service_listen_producer(struct vp_service *s, const char *addr,
			       struct vp_error *err)
{
	if (vp_ipc_host_listen(s->producer_host, addr, err) < 0)
		return -1;
	vp_svc_log(s, false, "producer socket: %s", addr);
	return 0;
}

int vp_service_listen_consumer(struct vp_service *s, const char *addr,
			       struct vp_error *err)
{
	if (vp_ipc_host_listen(s->consumer_host, addr, err) < 0)
		return -1;
	vp_svc_log(s, false, "consumer socket: %s", addr);
	return 0;
}

int vp_service_adopt_producer(struct vp_service *s, int fd,
			      struct vp_error *err)
{
	return vp_ipc_host_adopt(s->producer_host, fd, err);
}

int vp_service_adopt_consumer(struct vp_service *s, int fd,
			      struct vp_error *err)
{
	return vp_ipc_host_adopt(s->consumer_host, fd, err);
}

void vp_service_free(struct vp_service *s)
{
	if (!s)
		return;
	if (s->t_shutdown)
		vp_loop_cancel(s->loop, s->t_shutdown);
	/* Consumers first: their sessions go with them (unless detached). */
	if (s->consumer_host)
		vp_ipc_host_free(s->consumer_host);
	s->consumer_host = NULL;
	while (s->sessions.n)
		vp_session_free(s->sessions.v[s->sessions.n - 1]);
	if (s->producer_host)
		vp_ipc_host_free(s->producer_host);
	vp_ipc_group_free(s->conn_group);
	vp_ptrvec_free(&s->producers);
	vp_ptrvec_free(&s->consumers);
	vp_ptrvec_free(&s->sessions);
	free(s->machines);
	free(s->scratch);
	free(s);
}

void vp_service_get_stats(const struct vp_service *s,
			  struct vp_service_stats *out)
{
	*out = s->stats;
	out->producers_connected = (uint32_t)s->producers.n;
	out->consumers_connected = (uint32_t)s->consumers.n;
	out->tracing_sessions = (uint32_t)s->sessions.n;
	uint32_t nb = 0, nds = 0;
	for (size_t i = 0; i < SVC_MAX_BUFFER_IDS; i++)
		nb += s->buffers[i] != NULL;
	for (size_t i = 0; i < s->producers.n; i++) {
		const struct vp_producer *p = s->producers.v[i];
		nds += (uint32_t)p->n_ds;
	}
	out->total_buffers = nb;
	out->data_sources_registered = nds;
	const struct vp_ipc_host *hosts[] = {s->producer_host,
					     s->consumer_host};
	for (size_t i = 0; i < 2; i++) {
		const struct vp_ipc_host_stats *hs = vp_ipc_host_stats(hosts[i]);
		out->conns_refused += hs->refused_conns;
		out->conns_idle_closed += hs->idle_closed;
	}
}

/* ---- shutdown ----------------------------------------------------------- */

static void shutdown_finish(struct vp_service *s)
{
	if (!s->shutting_down || !s->shutdown_done)
		return;
	void (*done)(void *) = s->shutdown_done;
	s->shutdown_done = NULL;
	if (s->t_shutdown) {
		vp_loop_cancel(s->loop, s->t_shutdown);
		s->t_shutdown = 0;
	}
	done(s->shutdown_ctx);
}

void vp_svc_check_shutdown(struct vp_service *s)
{
	if (!s->shutting_down)
		return;
	for (size_t i = 0; i < s->sessions.n; i++) {
		const struct vp_session *sess = s->sessions.v[i];
		if (sess->state != SESS_STOPPED)
			return;
	}
	shutdown_finish(s);
}

static void shutdown_timeout(void *ctx)
{
	struct vp_service *s = ctx;
	s->t_shutdown = 0;
	vp_svc_log(s, true, "shutdown: sessions did not stop in time");
	shutdown_finish(s);
}

void vp_service_shutdown(struct vp_service *s, void (*done)(void *ctx),
			 void *ctx)
{
	s->shutting_down = true;
	s->shutdown_done = done;
	s->shutdown_ctx = ctx;
	s->t_shutdown = vp_loop_timer(s->loop, 8000, 0, shutdown_timeout, s);
	/* Disabling may free nothing, but iterate over a copy anyway. */
	size_t n = s->sessions.n;
	struct vp_session **copy = vp_xcalloc(n, sizeof(*copy));
	memcpy(copy, s->sessions.v, n * sizeof(*copy));
	for (size_t i = 0; i < n; i++) {
		if (!vp_session_alive(s, copy[i]))
			continue;
		if (copy[i]->state == SESS_STARTED ||
		    copy[i]->state == SESS_CONFIGURED)
			vp_session_disable(copy[i], true);
	}
	free(copy);
	vp_svc_check_shutdown(s);
}
