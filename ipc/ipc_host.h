/*
 * ipc_host.h - the service end of Perfetto's IPC: listening sockets,
 * connections, method dispatch.
 *
 * A host exposes one service (ProducerPort or ConsumerPort) on one or more
 * addresses and runs on a vp_loop.  Each accepted connection becomes a
 * vp_ipc_conn; frames are decoded, BindService is answered from the method
 * table, InvokeMethod runs the handler.  Handlers answer with
 * vp_ipc_conn_reply() at once or later (streaming: several replies with
 * has_more, the last without).
 *
 * Everything a client sends is untrusted: a frame over VP_IPC_MAX_FRAME, a
 * frame that does not decode, an unknown service or method id, too many
 * passed fds: the host answers a request with a failed reply (an
 * InvokeMethodReply with success false, as Perfetto's host does), or drops
 * the connection, and counts it; it never crashes and other
 * connections are not affected.  Replies are queued per connection without
 * blocking the loop; vp_ipc_conn_tx_queued() tells a handler how much is
 * waiting, so a slow consumer can be paced.
 */
#ifndef VP_IPC_HOST_H
#define VP_IPC_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "event_loop.h"
#include "vp_error.h"

struct vp_ipc_host;
struct vp_ipc_conn;

/* Called for InvokeMethod.  args is valid during the call only.  A fd the
 * client passed with this frame is available through vp_ipc_conn_take_fd().
 */
typedef void (*vp_ipc_method_fn)(void *svc_ctx, struct vp_ipc_conn *conn,
				 uint64_t request_id, const uint8_t *args,
				 size_t len);

struct vp_ipc_method {
	const char *name;
	vp_ipc_method_fn fn;
};

struct vp_ipc_service {
	const char *name; /* "ProducerPort" / "ConsumerPort" */
	const struct vp_ipc_method *methods;
	size_t n_methods;
	void *ctx; /* svc_ctx for all callbacks */
	/* A new connection (peer credentials already known).  For a UNIX
	 * peer it runs at accept; for a remote (vsock/TCP) peer it runs just
	 * before its first frame other than set_peer_identity is handled, so
	 * the identity that frame carried is already in vp_ipc_conn_peer().
	 * on_disconnect runs only for connections on_connect ran for. */
	void (*on_connect)(void *svc_ctx, struct vp_ipc_conn *conn);
	/* The connection is gone (EOF, error, protocol violation or
	 * vp_ipc_conn_close); conn is freed after this returns. */
	void (*on_disconnect)(void *svc_ctx, struct vp_ipc_conn *conn);
};

/* Who is at the other end.  For UNIX sockets pid/uid come from
 * SO_PEERCRED and cannot be forged.  For vsock/TCP they are what the peer
 * said in set_peer_identity (or -1), and `remote` is true. */
struct vp_ipc_peer {
	pid_t pid;
	uid_t uid;
	bool remote;
	char machine_name[64];    /* from set_peer_identity, else "" */
	char machine_id_hint[64]; /* from set_peer_identity, else "" */
	char addr[128];           /* the peer's address, for logs */
};

/* Counters kept by the host, for logs and tests. */
struct vp_ipc_host_stats {
	uint64_t connections;
	uint64_t frames_in;
	uint64_t bad_frames;      /* undecodable or oversized */
	uint64_t unknown_methods; /* unknown service/method id */
	uint64_t dropped_conns;   /* closed for a protocol violation */
	uint64_t refused_conns;   /* over a connection limit, or no fd left */
	uint64_t idle_closed;     /* closed before their first method call */
};

/* Limits on connections, shared by the hosts of a group (file descriptors
 * are a process's resource, so one group per process).  A connection is
 * fresh until it makes its first method call.  Fresh connections are closed
 * after init_timeout_ms; when a new connection would pass a limit, or
 * accept() finds no fd left, the oldest fresh connection (of the same uid
 * for the per-uid cap) makes room, and without one the new connection is
 * refused: accepted and closed at once, so the listener never spins.  Peers
 * over vsock/TCP count as one uid, (uid_t)-1. */
struct vp_ipc_limits {
	uint32_t init_timeout_ms;   /* 0: none */
	uint32_t max_conns_per_uid; /* 0: no cap */
	uint32_t max_conns;         /* 0: half the open-file limit */
};
struct vp_ipc_group;

int vp_ipc_group_new(struct vp_ipc_group **out, struct vp_loop *loop,
		     const struct vp_ipc_limits *lim, struct vp_error *err);
/* After every host of the group is freed. */
void vp_ipc_group_free(struct vp_ipc_group *g);
/* Closes the group's oldest fresh connection at once, to free a file
 * descriptor for something that failed with EMFILE/ENFILE.  False if there
 * is none. */
bool vp_ipc_group_reclaim_fd(struct vp_ipc_group *g);
/* Puts a host (before it listens or adopts) under the group's limits. */
int vp_ipc_host_set_group(struct vp_ipc_host *h, struct vp_ipc_group *g);

int vp_ipc_host_new(struct vp_ipc_host **out, struct vp_loop *loop,
		    const struct vp_ipc_service *svc, struct vp_error *err);
/* Listens on addr (one address, see ipc_sock.h); may be called again for
 * more addresses.  svc (copied) and its method table (not copied) must
 * outlive the host.  BindService is answered with service id 1 and the
 * method table, ids 1..n in table order; an InvokeMethod with another
 * service id or a method id outside 1..n gets a failed reply (even with
 * drop_reply, as Perfetto's host does).  Other replies to a drop_reply
 * request are not sent. */
int vp_ipc_host_listen(struct vp_ipc_host *h, const char *addr,
		       struct vp_error *err);
/* Adopts a connected socket as if accepted (tests, socketpair). */
int vp_ipc_host_adopt(struct vp_ipc_host *h, int fd, struct vp_error *err);
/* Closes listeners and every connection (on_disconnect runs for each) and
 * unlinks UNIX socket files.  Not from inside the host's own callbacks. */
void vp_ipc_host_free(struct vp_ipc_host *h);
const struct vp_ipc_host_stats *vp_ipc_host_stats(const struct vp_ipc_host *h);

/* Sends an InvokeMethodReply.  pass_fd >= 0 travels as SCM_RIGHTS (the
 * host dups nothing: the caller keeps ownership).  Returns 0, or -1 if the
 * connection is gone (the reply is dropped). */
int vp_ipc_conn_reply(struct vp_ipc_conn *c, uint64_t request_id,
		      bool success, bool has_more, const void *reply,
		      size_t len, int pass_fd);
/* Ends request_id with a failed InvokeMethodReply: success false, no
 * reply_proto, no has_more.  This is how Perfetto's host answers a method
 * that fails (its Deferred::Reject), and the only failure Perfetto's IPC
 * client delivers to the caller: it ignores RequestError frames. */
int vp_ipc_conn_reject(struct vp_ipc_conn *c, uint64_t request_id);
/* Sends a RequestError frame for request_id.  Perfetto's host sends one
 * only for a frame that is neither BindService nor InvokeMethod. */
int vp_ipc_conn_error(struct vp_ipc_conn *c, uint64_t request_id,
		      const char *msg);
/* Takes the fd that came with the current frame (-1 if none).  Fds not
 * taken are closed when the handler returns. */
int vp_ipc_conn_take_fd(struct vp_ipc_conn *c);
/* Closes the connection after the current callback (on_disconnect runs). */
void vp_ipc_conn_close(struct vp_ipc_conn *c);
/* Bytes of replies waiting to be written to this connection. */
size_t vp_ipc_conn_tx_queued(const struct vp_ipc_conn *c);
/* Calls fn(ctx) once the transmit queue has drained below `below` bytes
 * (at once if it already has).  One pending callback per connection. */
void vp_ipc_conn_on_drain(struct vp_ipc_conn *c, size_t below,
			  vp_task_cb fn, void *ctx);
const struct vp_ipc_peer *vp_ipc_conn_peer(const struct vp_ipc_conn *c);
void vp_ipc_conn_set_user(struct vp_ipc_conn *c, void *user);
void *vp_ipc_conn_user(const struct vp_ipc_conn *c);

#endif
