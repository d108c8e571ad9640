/*
 * agent_link.c - the guest agent's link to the host sync endpoint: address
 * parsing, opening vsock / UNIX sockets and character devices, and the
 * reconnect backoff (see agent_link.h).
 */
#include "agent_link.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc_sock.h"
#include "sync_proto.h"

/* The longest UNIX socket path sockaddr_un holds (with its NUL). */
#define UNIX_PATH_LIMIT (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* A decimal number in [0, max], the whole of s[0..len). */
static int parse_u32(const char *s, size_t len, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	if (len == 0 || len > 10)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_vsock(const char *s, struct ga_host_addr *a,
		       struct vp_error *err)
{
	const char *rest = s + strlen("vsock://");
	const char *colon = strchr(rest, ':');
	size_t cid_len = colon ? (size_t)(colon - rest) : strlen(rest);

	a->kind = GA_HOST_VSOCK;
	a->port = VP_SYNC_DEFAULT_VSOCK_PORT;
	if (parse_u32(rest, cid_len, UINT32_MAX - 1, &a->cid) < 0)
		return vp_errorf(err,
				 "--host \"%s\": bad vsock CID (want "
				 "vsock://CID:PORT, e.g. vsock://2:20020)",
				 s);
	if (colon && parse_u32(colon + 1, strlen(colon + 1), UINT32_MAX - 1,
			       &a->port) < 0)
		return vp_errorf(err, "--host \"%s\": bad vsock port", s);
	if (a->port == 0)
		return vp_errorf(err, "--host \"%s\": vsock port 0", s);
	return 0;
}

/* A bare path that exists must be something the agent can talk through. */
static int check_path(const char *s, const char *path, struct vp_error *err)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0; /* may appear later (a port, a socket) */
		return vp_errorf(err, "--host \"%s\": %s", s, strerror(errno));
	}
	if (S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode))
		return 0;
	return vp_errorf(err,
			 "--host \"%s\": not a socket or a character device",
			 s);
}

int ga_parse_host(const char *s, struct ga_host_addr *a, struct vp_error *err)
{
	memset(a, 0, sizeof(*a));
	if (!s || !*s)
		return vp_errorf(err, "--host: empty address");
	if (strncmp(s, "vsock://", 8) == 0)
		return parse_vsock(s, a, err);
	if (strncmp(s, "unix:", 5) == 0) {
		const char *path = s + 5;
		if (!*path)
			return vp_errorf(err, "--host \"%s\": empty path", s);
		if (strlen(path) > UNIX_PATH_LIMIT)
			return vp_errorf(err,
					 "--host \"%s\": socket path longer "
					 "than %zu bytes",
					 s, (size_t)UNIX_PATH_LIMIT);
		a->kind = GA_HOST_UNIX;
		strcpy(a->path, path);
		return 0;
	}
	if (s[0] == '/' || s[0] == '.') {
		if (strlen(s) >= sizeof(a->path))
			return vp_errorf(err, "--host \"%s\": path too long",
					 s);
		if (check_path(s, s, err) < 0)
			return -1;
		a->kind = GA_HOST_PATH;
		strcpy(a->path, s);
		return 0;
	}
	return vp_errorf(err,
			 "--host \"%s\": want vsock://CID:PORT, unix:PATH or "
			 "a device or socket path",
			 s);
}

void ga_host_str(const struct ga_host_addr *a, char *buf, size_t len)
{
	switch (a->kind) {
	case GA_HOST_VSOCK:
		snprintf(buf, len, "vsock://%u:%u", a->cid, a->port);
		break;
	case GA_HOST_UNIX:
		snprintf(buf, len, "unix:%s", a->path);
		break;
	default:
		snprintf(buf, len, "%s", a->path);
		break;
	}
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Connects to a socket address in ipc_sock's syntax, then makes the socket
 * non-blocking. */
static int open_socket(const char *addr, int timeout_ms, struct ga_link *l,
		       struct vp_error *err)
{
	int fd = vp_sock_connect(addr, timeout_ms, err);
	if (fd < 0)
		return -1;
	if (set_nonblock(fd) < 0) {
		int e = errno;
		close(fd);
		return vp_errorf(err, "%s: fcntl: %s", addr, strerror(e));
	}
	l->fd = fd;
	l->is_socket = true;
	return 0;
}

/* A character device: a virtio-serial port or a serial line.  A tty gets
 * raw mode so that no byte of a frame is translated or swallowed. */
static int open_chardev(const char *path, struct ga_link *l,
			struct vp_error *err)
{
	int fd = vp_chardev_open(path, true, err);
	if (fd < 0)
		return -1;
	l->fd = fd;
	l->is_socket = false;
	return 0;
}

int ga_link_open(const struct ga_host_addr *a, int timeout_ms,
		 struct ga_link *l, struct vp_error *err)
{
	char addr[GA_PATH_MAX + 32];
	struct stat st;

	l->fd = -1;
	l->is_socket = false;
	switch (a->kind) {
	case GA_HOST_VSOCK:
		snprintf(addr, sizeof(addr), "vsock://%u:%u", a->cid, a->port);
		return open_socket(addr, timeout_ms, l, err);
	case GA_HOST_UNIX:
		return open_socket(a->path, timeout_ms, l, err);
	case GA_HOST_PATH:
		if (stat(a->path, &st) < 0)
			return vp_errorf(err, "%s: %s", a->path,
					 strerror(errno));
		if (S_ISSOCK(st.st_mode)) {
			if (strlen(a->path) > UNIX_PATH_LIMIT)
				return vp_errorf(err,
						 "%s: socket path too long",
						 a->path);
			return open_socket(a->path, timeout_ms, l, err);
		}
		if (S_ISCHR(st.st_mode))
			return open_chardev(a->path, l, err);
		return vp_errorf(err, "%s: not a socket or a character device",
				 a->path);
	}
	return vp_errorf(err, "bad host address kind %d", (int)a->kind);
}

void ga_link_close(struct ga_link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

void ga_backoff_init(struct ga_backoff *b, uint32_t initial_ms,
		     uint32_t max_ms)
{
	b->initial_ms = initial_ms ? initial_ms : 1;
	b->max_ms = max_ms < b->initial_ms ? b->initial_ms : max_ms;
	b->next_ms = b->initial_ms;
}

uint32_t ga_backoff_next(struct ga_backoff *b)
{
	uint32_t d = b->next_ms;
	b->next_ms = d > b->max_ms / 2 ? b->max_ms : d * 2;
	return d;
}

void ga_backoff_reset(struct ga_backoff *b) { b->next_ms = b->initial_ms; }
