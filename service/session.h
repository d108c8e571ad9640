/*
 * session.h - tracing sessions (session.c): created from a consumer's
 * TraceConfig, started, flushed, stopped and freed, and told what their
 * producers' data sources do.  Both ports and the service object drive
 * them.
 */
#ifndef VP_SVC_SESSION_H
#define VP_SVC_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc_state.h"

typedef void (*vp_flush_done_fn)(struct vp_session *s, bool ok, void *ctx,
				 uint64_t arg);

/* A flush in flight: the producers that have not acked yet. */
struct vp_flush {
	uint64_t id;
	struct vp_session *session;
	uint16_t *pending;
	size_t n_pending;
	uint64_t timer;
	vp_flush_done_fn done;
	void *ctx;
	uint64_t arg;
};

int vp_session_create(struct vp_service *s, struct vp_consumer *c,
		      uint64_t request_id, const uint8_t *args, size_t len,
		      int file_fd, struct vp_error *err);
void vp_session_start(struct vp_session *sess);
/* Ends the session: optionally a flush first, then stop the data sources
 * and wait for them, then the end packets, the file drain and the
 * EnableTracing reply. */
void vp_session_disable(struct vp_session *sess, bool flush_first);
void vp_session_free(struct vp_session *sess);
/* CloneSession: a stopped copy of src (config, buffers as they are now)
 * owned by consumer c, which reads it as its session. */
int vp_session_clone(struct vp_session *src, struct vp_consumer *c,
		     struct vp_error *err);
/* Starts a flush of every data source of the session. */
void vp_session_flush(struct vp_session *sess, uint32_t timeout_ms,
		      vp_flush_done_fn done, void *ctx, uint64_t arg);
struct vp_session *vp_session_by_id(struct vp_service *s, uint64_t id);
bool vp_session_alive(struct vp_service *s, const struct vp_session *sess);

/* Hooks from the producer side. */
void vp_sessions_on_ds_registered(struct vp_service *s,
				  struct vp_producer *p,
				  const struct vp_svc_ds *ds);
void vp_sessions_on_ds_unregistered(struct vp_service *s,
				    struct vp_producer *p, const char *name);
void vp_sessions_on_producer_gone(struct vp_service *s,
				  struct vp_producer *p);
void vp_sessions_on_ds_started(struct vp_service *s, struct vp_producer *p,
			       uint64_t instance_id);
void vp_sessions_on_ds_stopped(struct vp_service *s, struct vp_producer *p,
			       uint64_t instance_id);
void vp_sessions_on_flush_ack(struct vp_service *s, struct vp_producer *p,
			      uint64_t flush_id);
/* Producer p activated the trigger name (ActivateTriggers): every session
 * with a matching trigger receives it (triggers.c matches, session.c
 * acts). */
void vp_sessions_activate_trigger(struct vp_service *s, struct vp_producer *p,
				  const char *name);
/* True if p has an instance in the session owning buffer_id. */
bool vp_producer_may_write(struct vp_service *s, struct vp_producer *p,
			   uint16_t buffer_id);
/* If the service is shutting down and every session has stopped, ends
 * the shutdown (called when a session stops or is freed). */
void vp_sessions_check_shutdown(struct vp_service *s);

#endif
