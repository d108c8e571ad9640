/*
 * service.c - the vtraced service object (vp_service.h): the two IPC
 * hosts, listening and adopting connections, and the clean shutdown.  Its
 * state, ids, logging and statistics are svc_state.c's; svc_state.h says
 * how the files stand on each other.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer_port.h"
#include "producer_port.h"
#include "session.h"
#include "svc_state.h"
#include "vp_alloc.h"

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

/* ---- shutdown ----------------------------------------------------------- */

static void shutdown_timeout(void *ctx)
{
	struct vp_service *s = ctx;
	s->t_shutdown = 0;
	vp_svc_log(s, true, "shutdown: sessions did not stop in time");
	vp_svc_finish_shutdown(s);
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
	if (n) /* no session: sessions.v may be NULL */
		memcpy(copy, s->sessions.v, n * sizeof(*copy));
	for (size_t i = 0; i < n; i++) {
		if (!vp_session_alive(s, copy[i]))
			continue;
		if (copy[i]->state == SESS_STARTED ||
		    copy[i]->state == SESS_CONFIGURED)
			vp_session_disable(copy[i], true);
	}
	free(copy);
	vp_sessions_check_shutdown(s);
}
