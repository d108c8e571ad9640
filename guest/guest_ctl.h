/*
 * guest_ctl.h - the session side of vperfetto_guest_ctl: what the daemon
 * does with each control request (ctl_proto.h) and how it runs the
 * consumer.  The transport (listening, the serial port, reading and
 * writing frames) is guest_ctl_main.c's.
 *
 * One session at a time:
 *   START  writes OUT_DIR/guest.cfg and runs
 *          `CONSUMER -c OUT_DIR/guest.cfg -o OUT_DIR/guest.pb`, its
 *          output in OUT_DIR/consumer.log; STARTED once it runs, ERROR
 *          with its message if it exits at once.
 *   STOP   SIGINT to the consumer; STOPPED (size, exit status) once it has
 *          written the trace, ERROR if it fails or does not stop in time
 *          (then SIGKILL).  The reply comes later, from gc_tick().
 *   PULL   DATA chunks of guest.pb from the offset asked for, then END
 *          with the size and CRC32 of the whole file.
 *   PING   PONG with the state; a consumer that died on its own shows up
 *          here (state failed, with its message) and on the next STOP.
 * A STOP after the session ended by itself (duration_ms) answers STOPPED
 * with the size.  Frames of reply types are logged and not answered, so
 * a line that echoes cannot loop.
 */
#ifndef VP_GUEST_CTL_H
#define VP_GUEST_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctl_proto.h"

#define GC_STOP_TIMEOUT_MS 30000
#define GC_START_GRACE_MS 1000

struct gc_options {
	const char *consumer;  /* the consumer program */
	const char *out_dir;   /* guest.cfg, guest.pb, consumer.log */
	int stop_timeout_ms;   /* SIGINT to SIGKILL */
	int start_grace_ms;    /* how long a consumer must live to count as
				* started */
};

/* Sends one reply; returns 0, or -1 when the link failed (the rest of a
 * multi-frame reply is then dropped). */
typedef int (*gc_send_fn)(void *ctx, const struct vp_ctl_msg *m);

struct gc_session {
	struct gc_options opt;
	char cfg_path[4096], trace_path[4096], log_path[4096];
	uint32_t state;          /* enum vp_ctl_state */
	pid_t pid;               /* the consumer, while running/stopping */
	char session[256];       /* the name START gave */
	uint64_t start_key;      /* of the START that began it (0: none) */
	pid_t start_pid;         /* the consumer that START started */
	int32_t exit_status;     /* of the last consumer */
	char message[VP_CTL_MAX_TEXT]; /* why the last session failed */
	/* A STOP waiting for the consumer to finish. */
	bool stop_pending;
	uint32_t stop_id;
	uint64_t stop_deadline_ms;
};

/* Checks the options (out_dir must be a writable directory) and sets the
 * session up idle.  0, or -1 with a message. */
int gc_session_init(struct gc_session *s, const struct gc_options *opt,
		    struct vp_error *err);

/* Handles one request, answering through send. */
void gc_session_handle(struct gc_session *s, const struct vp_ctl_msg *req,
		       gc_send_fn send, void *ctx);

/* Notices a consumer that exited and a STOP that timed out; sends the
 * pending STOP's reply through send (if any).  Call every ~100 ms. */
void gc_session_tick(struct gc_session *s, gc_send_fn send, void *ctx);

/* Stops a running consumer (SIGTERM: it writes its trace) and waits up to
 * timeout_ms for it; SIGKILL after that. */
void gc_session_shutdown(struct gc_session *s, int timeout_ms);

#endif
