/*
 * ipc_sock.h - socket addresses and the socket calls the IPC layer needs.
 *
 * Address syntax, as Perfetto spells it:
 *   /path/to.sock        a UNIX stream socket
 *   @name                a Linux abstract UNIX socket
 *   vsock://CID:PORT     AF_VSOCK (CID -1 = any, when listening)
 *   host:port            TCP (IPv4 or IPv6 literal in [..], or a name)
 * A comma-separated list names several listening sockets (vtraced only).
 *
 * Socket names come from PERFETTO_PRODUCER_SOCK_NAME and
 * PERFETTO_CONSUMER_SOCK_NAME; without them, /run/perfetto/traced-producer.sock
 * and /run/perfetto/traced-consumer.sock when /run/perfetto exists, else
 * /tmp/perfetto-producer and /tmp/perfetto-consumer.
 */
#ifndef VP_IPC_SOCK_H
#define VP_IPC_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "vp_error.h"

enum vp_sock_kind { VP_SOCK_UNIX, VP_SOCK_VSOCK, VP_SOCK_TCP };

/* The producer / consumer socket name (env var or default).  The returned
 * string is static or from getenv(); do not free. */
const char *vp_producer_sock_name(void);
const char *vp_consumer_sock_name(void);

/* The kind an address names (UNIX for anything not vsock:// or host:port). */
enum vp_sock_kind vp_sock_addr_kind(const char *addr);

/* A listening, non-blocking, close-on-exec socket.  A stale UNIX socket file
 * is removed first; the file is made 0666 like traced's.  A socket file a
 * live service still accepts on, or a path that is not a socket, is an
 * error (nothing is removed). */
int vp_sock_listen(const char *addr, struct vp_error *err);
/* A connected, blocking, close-on-exec socket; waits up to timeout_ms. */
int vp_sock_connect(const char *addr, int timeout_ms, struct vp_error *err);
/* Removes the file of a UNIX socket address (no-op for the others). */
void vp_sock_unlink(const char *addr);

/* Opens a character device that carries a byte stream (a virtio-serial
 * port, a serial line, a pty): read-write, close-on-exec, never as the
 * controlling terminal, O_NONBLOCK if nonblock.  A tty is put in raw mode
 * (no byte translated or swallowed; CLOCAL | CREAD, VMIN 1) and what was
 * queued before is flushed as stale.  Returns the fd, or -1 with a message
 * naming the path and the step that failed (errno kept). */
int vp_chardev_open(const char *path, bool nonblock, struct vp_error *err);

/* Peer credentials of a UNIX socket (SO_PEERCRED); -1 for other kinds. */
int vp_sock_peer_cred(int fd, pid_t *pid, uid_t *uid);

/* sendmsg of all len bytes, with fd (if >= 0) as SCM_RIGHTS on the first
 * byte.  Blocking sockets only.  0 or -1 (errno set). */
int vp_sock_send_all(int fd, const void *buf, size_t len, int pass_fd);
/* One sendmsg (the building block of vp_sock_send_all): sends what the
 * socket takes now, with pass_fd (if >= 0) as SCM_RIGHTS on the first byte.
 * nonblock adds MSG_DONTWAIT.  Returns bytes sent or -1 (errno set; EAGAIN
 * when nothing could be sent without blocking). */
ssize_t vp_sock_send_some(int fd, const void *buf, size_t len, int pass_fd,
			  bool nonblock);
/* One recvmsg: up to len bytes; received fds are stored in fds[0..] (at
 * most max_fds, the rest closed) and *n_fds is set to how many were stored
 * (0 when none came).  Fds are close-on-exec.  Returns bytes read, 0 on
 * EOF, -1 on error (errno set; EAGAIN for a non-blocking socket with
 * nothing to read). */
ssize_t vp_sock_recv(int fd, void *buf, size_t len, int *fds, int max_fds,
		     int *n_fds);
/* The peer's address as text ("unix:pid 12", "1.2.3.4:567", "[::1]:80",
 * "vsock:3:1000"), for logs.  Always NUL-terminates buf. */
void vp_sock_peer_name(int fd, char *buf, size_t len);

#endif
