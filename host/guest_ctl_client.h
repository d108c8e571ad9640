/*
 * guest_ctl_client.h - the host's side of the guest control protocol
 * (ctl/ctl_proto.h): a small blocking client that vperfetto_record
 * uses to start and stop the guest's tracing session and to pull the
 * guest's trace, talking to vperfetto_guest_ctl in the guest.
 *
 * Every call has a timeout and returns 0, or -1 with a message in err that
 * names what failed and where ("guest did not answer HELLO within 30 s on
 * /run/vm.ctl.sock", "guest: START failed: session running ...", "CRC
 * mismatch pulling guest.pb ...").  Replies are matched to requests by
 * id, so stale frames from an earlier session on a serial port are
 * skipped.  Not thread-safe: one caller per connection.
 */
#ifndef VP_GUEST_CTL_CLIENT_H
#define VP_GUEST_CTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vp_error.h"

struct vp_guest_ctl;

/* Connects to the guest's control endpoint.  addr is
 *   PATH or unix:PATH    a UNIX socket (QEMU's chardev for the
 *                        org.vperfetto.control virtio-serial port)
 *   vsock://CID:PORT     vsock (the guest listens on port 20021)
 *   PATH                 a character device (a serial line, a pty)
 * waiting up to timeout_ms for a socket to accept.  Connecting says
 * nothing about the guest: call vp_guest_ctl_hello next. */
int vp_guest_ctl_connect(const char *addr, int timeout_ms,
			 struct vp_guest_ctl **out, struct vp_error *err);
/* The same over a byte stream the caller opened (a pty master, a socket
 * pair); the connection owns fd from now on, even on failure.  name is
 * for messages. */
int vp_guest_ctl_from_fd(int fd, const char *name, struct vp_guest_ctl **out,
			 struct vp_error *err);
void vp_guest_ctl_close(struct vp_guest_ctl *c);
/* True when the last request failed because the guest did not answer in
 * time (not on an answer that said it failed, nor a broken link). */
bool vp_guest_ctl_timed_out(const struct vp_guest_ctl *c);

/* What HELLO_REPLY says about the guest. */
struct vp_guest_info {
	uint32_t version;     /* protocol version */
	char machine[256];    /* the guest's host name */
	char uname[256];      /* "Linux 6.1.0-... #1 SMP ... x86_64" */
	char consumer[256];   /* the guest's consumer program */
	bool consumer_ok;     /* it exists and is executable */
	uint32_t state;       /* enum vp_ctl_state (ctl_proto.h) */
	uint64_t trace_size;  /* of an ended session's trace */
};

/* Says HELLO, again every second (a guest still booting, or bytes lost on
 * a serial port), until the guest answers or timeout_ms passes.  info may
 * be NULL. */
int vp_guest_ctl_hello(struct vp_guest_ctl *c, int timeout_ms,
		       struct vp_guest_info *info, struct vp_error *err);

/* Starts a guest session with a binary TraceConfig.  session_name is for
 * the guest's log (may be NULL).  The guest answers once its consumer
 * runs (about a second); pid (may be NULL) gets the consumer's pid. */
int vp_guest_ctl_start(struct vp_guest_ctl *c, const uint8_t *config,
		       size_t config_len, const char *session_name,
		       int timeout_ms, uint32_t *pid, struct vp_error *err);

/* Stops the guest session and waits until the guest's consumer has
 * written its trace (the guest allows it 30 s).  trace_size may be
 * NULL. */
int vp_guest_ctl_stop(struct vp_guest_ctl *c, int timeout_ms,
		      uint64_t *trace_size, struct vp_error *err);

/* The guest's state (PING / PONG). */
struct vp_guest_status {
	uint32_t state;       /* enum vp_ctl_state */
	int32_t exit_status;  /* of the last consumer */
	uint64_t trace_size;  /* of an ended session's trace */
	char session[256];
	char message[1024];   /* why the session failed */
};

/* Checks that the guest answers.  Returns -1 (with the guest's message)
 * when the guest's consumer has failed on its own; st (may be NULL) is
 * filled either way when the guest answered. */
int vp_guest_ctl_ping(struct vp_guest_ctl *c, int timeout_ms,
		      struct vp_guest_status *st, struct vp_error *err);

/* Called as DATA arrives during a pull: bytes received so far. */
typedef void (*vp_guest_ctl_progress_fn)(void *ctx, uint64_t received);

/* Pulls the guest's trace into path: written to a temporary file beside
 * it, checked against the size and CRC32 the guest sends at the end, then
 * renamed into place.  On any failure nothing is left at path (nor the
 * temporary file).  chunk is the DATA size to ask for (0: 64 KiB);
 * stall_timeout_ms bounds the wait for each frame, not the whole pull.
 * progress (may be NULL) is called per chunk; size (may be NULL) gets the
 * trace's size. */
int vp_guest_ctl_pull(struct vp_guest_ctl *c, const char *path,
		      uint32_t chunk, int stall_timeout_ms,
		      vp_guest_ctl_progress_fn progress, void *progress_ctx,
		      uint64_t *size, struct vp_error *err);

#endif
