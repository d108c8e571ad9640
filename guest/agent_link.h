/*
 * agent_link.h - how the guest agent reaches the host's sync endpoint:
 * the --host address, opening the transport, and the reconnect backoff.
 *
 * Addresses:
 *   vsock://CID:PORT     AF_VSOCK (CID 2 is the host); PORT defaults to
 *                        20020 when left out ("vsock://2")
 *   unix:PATH            a UNIX stream socket (unix:@name: abstract)
 *   PATH                 a UNIX socket or a character device (a
 *                        virtio-serial port /dev/virtio-ports/NAME, a
 *                        serial line); what it is is decided when it is
 *                        opened, so a port that appears later still works
 */
#ifndef VP_GUEST_AGENT_LINK_H
#define VP_GUEST_AGENT_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vp_error.h"

#define GA_DEFAULT_HOST "vsock://2:20020"
#define GA_PATH_MAX 256

enum ga_host_kind {
	GA_HOST_VSOCK = 1,
	GA_HOST_UNIX,   /* unix:PATH */
	GA_HOST_PATH,   /* a bare path: socket or character device */
};

struct ga_host_addr {
	enum ga_host_kind kind;
	uint32_t cid, port;     /* vsock */
	char path[GA_PATH_MAX]; /* unix and path */
};

/* Parses a --host value.  A bare path that exists must be a socket or a
 * character device; one that does not exist yet is accepted.  Returns 0,
 * or -1 with a message naming the address. */
int ga_parse_host(const char *s, struct ga_host_addr *a, struct vp_error *err);

/* The address as text (for messages). */
void ga_host_str(const struct ga_host_addr *a, char *buf, size_t len);

/* An open, non-blocking, close-on-exec link to the host. */
struct ga_link {
	int fd;
	bool is_socket; /* send() with MSG_NOSIGNAL, else write() */
};

/* Opens the link, waiting up to timeout_ms for a socket to connect.  A tty
 * is put in raw mode.  Returns 0, or -1 with a message. */
int ga_link_open(const struct ga_host_addr *a, int timeout_ms,
		 struct ga_link *l, struct vp_error *err);
void ga_link_close(struct ga_link *l);

/* Exponential reconnect backoff: initial_ms, doubling, capped at max_ms;
 * reset after the link works again. */
struct ga_backoff {
	uint32_t initial_ms, max_ms, next_ms;
};

void ga_backoff_init(struct ga_backoff *b, uint32_t initial_ms,
		     uint32_t max_ms);
/* The delay to wait before the next attempt; doubles the one after. */
uint32_t ga_backoff_next(struct ga_backoff *b);
void ga_backoff_reset(struct ga_backoff *b);

#endif
