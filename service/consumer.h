/*
 * consumer.h - a consumer as vtraced answers it (consumer.c): the reply to
 * its EnableTracing when its session ends, the events it observes, and the
 * streaming of its ReadBuffers.  Its connection and calls are
 * consumer_port.c's; the session tells it when it ends or all its data
 * sources started.
 */
#ifndef VP_SVC_CONSUMER_H
#define VP_SVC_CONSUMER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pb_wire.h"
#include "session_read.h"
#include "svc_state.h"

struct vp_read_op {
	bool active;
	uint64_t request_id;
	struct vp_session_reader rd;
	struct pb_buf reply;
	size_t reply_slices;
};

struct vp_consumer {
	struct vp_service *svc;
	struct vp_ipc_conn *conn;
	pid_t pid;
	uid_t uid;
	struct vp_session *session;
	bool observing;
	uint64_t observe_req;
	bool observe_all_started;
	bool observe_instances;
	bool clone_pending; /* CloneSession waits for its source's flush */
	struct vp_read_op read;
};

/* Answers EnableTracing request req: the session is over (error: why it
 * failed, or NULL). */
void vp_consumer_enable_reply(struct vp_consumer *c, uint64_t req,
			      const char *error);
/* The session ended: answer EnableTracing. */
void vp_consumer_session_ended(struct vp_consumer *c, struct vp_session *s,
			       const char *error);
/* Every data source of the consumer's session started. */
void vp_consumer_all_started(struct vp_consumer *c);

/* ReadBuffers request req: streams the consumer's session out. */
void vp_consumer_read_start(struct vp_consumer *c, uint64_t req);
/* Ends the read in progress, if any, without a last reply. */
void vp_consumer_read_end(struct vp_consumer *c);
/* The session is going away: stop a ReadBuffers reading it. */
void vp_consumer_abort_read(struct vp_consumer *c, struct vp_session *s);

#endif
