/*
 * ipc_sock.c - socket addresses (UNIX path, @abstract, vsock://CID:PORT,
 * host:port) and the socket calls of the IPC layer (see ipc_sock.h).
 */
#include "ipc_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/vm_sockets.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define VSOCK_PREFIX "vsock://"
#define MAX_RECV_FDS 16

/* A parsed address, ready for bind()/connect() (TCP resolves later). */
struct sock_addr {
	enum vp_sock_kind kind;
	union {
		struct sockaddr_un un;
		struct sockaddr_vm vm;
	} u;
	socklen_t len;
	char host[256]; /* TCP */
	char port[16];  /* TCP */
};

/* ---- names --------------------------------------------------------------- */

static bool run_perfetto_exists(void)
{
	struct stat st;
	return stat("/run/perfetto", &st) == 0 && S_ISDIR(st.st_mode);
}

const char *vp_producer_sock_name(void)
{
	const char *env = getenv("PERFETTO_PRODUCER_SOCK_NAME");
	if (env && *env)
		return env;
	return run_perfetto_exists() ? "/run/perfetto/traced-producer.sock"
				     : "/tmp/perfetto-producer";
}

const char *vp_consumer_sock_name(void)
{
	const char *env = getenv("PERFETTO_CONSUMER_SOCK_NAME");
	if (env && *env)
		return env;
	return run_perfetto_exists() ? "/run/perfetto/traced-consumer.sock"
				     : "/tmp/perfetto-consumer";
}

enum vp_sock_kind vp_sock_addr_kind(const char *addr)
{
	if (!addr || addr[0] == '/' || addr[0] == '@')
		return VP_SOCK_UNIX;
	if (strncmp(addr, VSOCK_PREFIX, strlen(VSOCK_PREFIX)) == 0)
		return VP_SOCK_VSOCK;
	if (strchr(addr, ':'))
		return VP_SOCK_TCP;
	return VP_SOCK_UNIX;
}

/* ---- parsing ------------------------------------------------------------- */

static int parse_unix(const char *addr, struct sock_addr *sa,
		      struct vp_error *err)
{
	size_t n = strlen(addr);
	struct sockaddr_un *un = &sa->u.un;

	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	if (n == 0)
		return vp_errorf(err, "socket address \"\": empty");
	if (n >= sizeof(un->sun_path))
		return vp_errorf(err,
				 "socket address \"%s\": %zu bytes, UNIX socket "
				 "names hold at most %zu",
				 addr, n, sizeof(un->sun_path) - 1);
	memcpy(un->sun_path, addr, n);
	if (addr[0] == '@') {
		un->sun_path[0] = '\0'; /* abstract: no terminator counted */
		sa->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	} else {
		sa->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
				      n + 1);
	}
	return 0;
}

static int parse_u32(const char *s, const char *end, bool allow_minus1,
		     uint32_t *out)
{
	if (s == end)
		return -1;
	if (allow_minus1 && end - s == 2 && s[0] == '-' && s[1] == '1') {
		*out = UINT32_MAX;
		return 0;
	}
	uint64_t v = 0;
	for (const char *p = s; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_vsock(const char *addr, struct sock_addr *sa,
		       struct vp_error *err)
{
	const char *s = addr + strlen(VSOCK_PREFIX);
	const char *colon = strrchr(s, ':');
	uint32_t cid, port;

	if (!colon || parse_u32(s, colon, true, &cid) < 0 ||
	    parse_u32(colon + 1, colon + strlen(colon), false, &port) < 0)
		return vp_errorf(err,
				 "socket address \"%s\": expected "
				 "vsock://CID:PORT (CID -1 for any)",
				 addr);
	memset(&sa->u.vm, 0, sizeof(sa->u.vm));
	sa->u.vm.svm_family = AF_VSOCK;
	sa->u.vm.svm_cid = cid == UINT32_MAX ? VMADDR_CID_ANY : cid;
	sa->u.vm.svm_port = port;
	sa->len = sizeof(sa->u.vm);
	return 0;
}

static int parse_tcp(const char *addr, struct sock_addr *sa,
		     struct vp_error *err)
{
	const char *host = addr, *host_end, *port;

	if (addr[0] == '[') {
		host = addr + 1;
		host_end = strchr(host, ']');
		if (!host_end || host_end[1] != ':')
			return vp_errorf(err,
					 "socket address \"%s\": expected "
					 "[ipv6]:port",
					 addr);
		port = host_end + 2;
	} else {
		host_end = strrchr(addr, ':');
		port = host_end + 1;
	}
	size_t hl = (size_t)(host_end - host), pl = strlen(port);
	uint32_t pv;
	if (hl == 0 || hl >= sizeof(sa->host) || pl >= sizeof(sa->port) ||
	    parse_u32(port, port + pl, false, &pv) < 0 || pv > 65535)
		return vp_errorf(err,
				 "socket address \"%s\": expected host:port "
				 "with a port 0..65535",
				 addr);
	memcpy(sa->host, host, hl);
	sa->host[hl] = '\0';
	memcpy(sa->port, port, pl + 1);
	return 0;
}

static int parse_addr(const char *addr, struct sock_addr *sa,
		      struct vp_error *err)
{
	if (!addr)
		return vp_errorf(err, "socket address: none given");
	sa->kind = vp_sock_addr_kind(addr);
	switch (sa->kind) {
	case VP_SOCK_VSOCK:
		return parse_vsock(addr, sa, err);
	case VP_SOCK_TCP:
		return parse_tcp(addr, sa, err);
	case VP_SOCK_UNIX:
		break;
	}
	return parse_unix(addr, sa, err);
}

static int resolve_tcp(const struct sock_addr *sa, bool passive,
		       struct addrinfo **out, const char *addr,
		       struct vp_error *err)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = passive ? AI_PASSIVE : 0,
	};
	int rc = getaddrinfo(sa->host, sa->port, &hints, out);
	if (rc != 0)
		return vp_errorf(err, "socket address \"%s\": %s", addr,
				 gai_strerror(rc));
	return 0;
}

/* ---- listen -------------------------------------------------------------- */

static int set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl);
}

/* Removes a UNIX socket file left by a dead service.  A file that is not a
 * socket, or a socket a live service still answers on, is left alone. */
static int remove_stale(const char *path, struct vp_error *err)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return vp_errorf(err,
				 "socket address \"%s\": exists and is not a "
				 "socket",
				 path);
	struct sock_addr sa;
	if (parse_unix(path, &sa, err) < 0)
		return -1;
	/* Non-blocking: a live service with a full backlog answers EAGAIN
	 * instead of making us wait. */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		int rc = connect(fd, (struct sockaddr *)&sa.u.un, sa.len);
		int e = errno;
		close(fd);
		if (rc == 0 || e == EAGAIN)
			return vp_errorf(err,
					 "socket address \"%s\": a service is "
					 "already listening there",
					 path);
	}
	if (unlink(path) < 0 && errno != ENOENT)
		return vp_errorf(err, "socket address \"%s\": unlink: %s",
				 path, strerror(errno));
	return 0;
}

static int listen_fd(int fd, const struct sockaddr *a, socklen_t len,
		     const char *addr, struct vp_error *err)
{
	if (bind(fd, a, len) < 0)
		return vp_errorf(err, "socket address \"%s\": bind: %s", addr,
				 strerror(errno));
	if (listen(fd, SOMAXCONN) < 0)
		return vp_errorf(err, "socket address \"%s\": listen: %s",
				 addr, strerror(errno));
	return 0;
}

static int listen_unix(const char *addr, struct sock_addr *sa,
		       struct vp_error *err)
{
	bool is_path = addr[0] != '@';
	if (is_path && remove_stale(addr, err) < 0)
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);
	if (fd < 0)
		return vp_errorf(err, "socket address \"%s\": socket: %s",
				 addr, strerror(errno));
	if (listen_fd(fd, (struct sockaddr *)&sa->u.un, sa->len, addr, err) <
	    0) {
		close(fd);
		return -1;
	}
	if (is_path && chmod(addr, 0666) < 0) {
		/* The path as bound (sun_path holds a copy): gcc with UBSan
		 * otherwise warns that addr might be NULL on this path. */
		vp_errorf(err, "socket address \"%s\": chmod 0666: %s",
			  sa->u.un.sun_path, strerror(errno));
		close(fd);
		unlink(addr);
		return -1;
	}
	return fd;
}

static int listen_vsock(const char *addr, struct sock_addr *sa,
			struct vp_error *err)
{
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);
	if (fd < 0)
		return vp_errorf(err,
				 "socket address \"%s\": vsock socket: %s "
				 "(no vsock transport on this machine?)",
				 addr, strerror(errno));
	if (listen_fd(fd, (struct sockaddr *)&sa->u.vm, sa->len, addr, err) <
	    0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int listen_tcp(const char *addr, struct sock_addr *sa,
		      struct vp_error *err)
{
	struct addrinfo *ai;
	if (resolve_tcp(sa, true, &ai, addr, err) < 0)
		return -1;
	int fd = -1, last_errno = 0;
	for (struct addrinfo *p = ai; p; p = p->ai_next) {
		fd = socket(p->ai_family,
			    p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    p->ai_protocol);
		if (fd < 0) {
			last_errno = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, p->ai_addr, p->ai_addrlen) == 0 &&
		    listen(fd, SOMAXCONN) == 0)
			break;
		last_errno = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return vp_errorf(err, "socket address \"%s\": listen: %s",
				 addr, strerror(last_errno));
	return fd;
}

int vp_sock_listen(const char *addr, struct vp_error *err)
{
	struct sock_addr sa;
	if (parse_addr(addr, &sa, err) < 0)
		return -1;
	switch (sa.kind) {
	case VP_SOCK_VSOCK:
		return listen_vsock(addr, &sa, err);
	case VP_SOCK_TCP:
		return listen_tcp(addr, &sa, err);
	case VP_SOCK_UNIX:
		break;
	}
	return listen_unix(addr, &sa, err);
}

void vp_sock_unlink(const char *addr)
{
	if (addr && addr[0] && addr[0] != '@' &&
	    vp_sock_addr_kind(addr) == VP_SOCK_UNIX)
		unlink(addr);
}

/* ---- connect ------------------------------------------------------------- */

static int remaining_ms(uint64_t deadline_ms, int timeout_ms)
{
	if (timeout_ms < 0)
		return -1;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000u +
		       (uint64_t)ts.tv_nsec / 1000000u;
	return now >= deadline_ms ? 0 : (int)(deadline_ms - now);
}

static uint64_t deadline_after(int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000u +
		       (uint64_t)ts.tv_nsec / 1000000u;
	return now + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
}

/* A non-blocking connect that waits for completion until the deadline.
 * UNIX sockets answer EAGAIN when the backlog is full: retried. */
static int connect_one(int fd, const struct sockaddr *a, socklen_t len,
		       uint64_t deadline, int timeout_ms)
{
	for (;;) {
		if (connect(fd, a, len) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			int left = remaining_ms(deadline, timeout_ms);
			if (left == 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			struct timespec ts = {0, 5 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		if (errno != EINPROGRESS)
			return -1;
		break;
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int rc = poll(&p, 1, remaining_ms(deadline, timeout_ms));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		break;
	}
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return -1;
	if (soerr) {
		errno = soerr;
		return -1;
	}
	return 0;
}

static int connect_addr(int family, const struct sockaddr *a, socklen_t len,
			uint64_t deadline, int timeout_ms, int *out)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect_one(fd, a, len, deadline, timeout_ms) < 0 ||
	    set_nonblock(fd, false) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (family == AF_INET || family == AF_INET6) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	*out = fd;
	return 0;
}

int vp_sock_connect(const char *addr, int timeout_ms, struct vp_error *err)
{
	struct sock_addr sa;
	uint64_t deadline = deadline_after(timeout_ms);
	int fd = -1;

	if (parse_addr(addr, &sa, err) < 0)
		return -1;
	if (sa.kind == VP_SOCK_UNIX) {
		if (connect_addr(AF_UNIX, (struct sockaddr *)&sa.u.un, sa.len,
				 deadline, timeout_ms, &fd) < 0)
			return vp_errorf(err, "connect to \"%s\": %s", addr,
					 strerror(errno));
		return fd;
	}
	if (sa.kind == VP_SOCK_VSOCK) {
		if (connect_addr(AF_VSOCK, (struct sockaddr *)&sa.u.vm, sa.len,
				 deadline, timeout_ms, &fd) < 0)
			return vp_errorf(err,
					 "connect to \"%s\": %s (vsock needs a "
					 "vsock transport and a listener)",
					 addr, strerror(errno));
		return fd;
	}
	struct addrinfo *ai;
	if (resolve_tcp(&sa, false, &ai, addr, err) < 0)
		return -1;
	int last_errno = ENOENT;
	for (struct addrinfo *p = ai; p && fd < 0; p = p->ai_next) {
		if (connect_addr(p->ai_family, p->ai_addr, p->ai_addrlen,
				 deadline, timeout_ms, &fd) < 0)
			last_errno = errno;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return vp_errorf(err, "connect to \"%s\": %s", addr,
				 strerror(last_errno));
	return fd;
}

/* ---- credentials and fd passing ------------------------------------------ */

int vp_sock_peer_cred(int fd, pid_t *pid, uid_t *uid)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    ss.ss_family != AF_UNIX)
		return -1;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return -1;
	*pid = cred.pid;
	*uid = cred.uid;
	return 0;
}

ssize_t vp_sock_send_some(int fd, const void *buf, size_t len, int pass_fd,
			  bool nonblock)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;

	if (pass_fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	ssize_t n;
	do {
		n = sendmsg(fd, &msg,
			    MSG_NOSIGNAL | (nonblock ? MSG_DONTWAIT : 0));
	} while (n < 0 && errno == EINTR);
	return n;
}

int vp_sock_send_all(int fd, const void *buf, size_t len, int pass_fd)
{
	const uint8_t *p = buf;
	size_t off = 0;
	do {
		ssize_t n = vp_sock_send_some(fd, p + off, len - off,
					      off == 0 ? pass_fd : -1, false);
		if (n < 0)
			return -1;
		off += (size_t)n;
	} while (off < len);
	return 0;
}

ssize_t vp_sock_recv(int fd, void *buf, size_t len, int *fds, int max_fds,
		     int *n_fds)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(MAX_RECV_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	ssize_t n;

	if (n_fds)
		*n_fds = 0;
	do {
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	int kept = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
	     c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < cnt; i++) {
			int rfd;
			memcpy(&rfd, CMSG_DATA(c) + i * sizeof(int),
			       sizeof(int));
			if (fds && kept < max_fds)
				fds[kept++] = rfd;
			else
				close(rfd);
		}
	}
	if (n_fds)
		*n_fds = kept;
	return n;
}

void vp_sock_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN + 2] = "";
	char serv[16] = "";

	if (!buf || len == 0)
		return;
	snprintf(buf, len, "fd %d", fd);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_UNIX) {
		pid_t pid;
		uid_t uid;
		if (vp_sock_peer_cred(fd, &pid, &uid) == 0)
			snprintf(buf, len, "unix:pid %d uid %u", (int)pid,
				 (unsigned)uid);
		else
			snprintf(buf, len, "unix:fd %d", fd);
	} else if (ss.ss_family == AF_VSOCK) {
		const struct sockaddr_vm *vm = (const struct sockaddr_vm *)&ss;
		snprintf(buf, len, "vsock:%u:%u", vm->svm_cid, vm->svm_port);
	} else if (getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host),
			       serv, sizeof(serv),
			       NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
		if (ss.ss_family == AF_INET6)
			snprintf(buf, len, "[%s]:%s", host, serv);
		else
			snprintf(buf, len, "%s:%s", host, serv);
	}
}

/* ------------------------------------------------------ character devices */

int vp_chardev_open(const char *path, bool nonblock, struct vp_error *err)
{
	int flags = O_RDWR | O_NOCTTY | O_CLOEXEC | (nonblock ? O_NONBLOCK : 0);
	int fd = open(path, flags);
	if (fd < 0) {
		int e = errno;
		vp_errorf(err, "open %s: %s", path, strerror(e));
		errno = e;
		return -1;
	}
	if (!isatty(fd))
		return fd;
	struct termios t;
	const char *step = "tcgetattr";
	if (tcgetattr(fd, &t) == 0) {
		cfmakeraw(&t);
		t.c_cflag |= CLOCAL | CREAD;
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		step = "raw mode";
		if (tcsetattr(fd, TCSANOW, &t) == 0) {
			tcflush(fd, TCIOFLUSH); /* what was queued is stale */
			return fd;
		}
	}
	int e = errno;
	close(fd);
	vp_errorf(err, "%s: %s: %s", path, step, strerror(e));
	errno = e;
	return -1;
}
