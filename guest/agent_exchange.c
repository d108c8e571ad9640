/*
 * agent_exchange.c - one clock-sync exchange over a non-blocking link
 * (see agent_exchange.h).
 */
#include "agent_exchange.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vp_clock.h"

void ga_exchange_init(struct ga_exchange *x, int fd, bool is_socket,
		      uint64_t last_seq)
{
	memset(x, 0, sizeof(*x));
	x->fd = fd;
	x->is_socket = is_socket;
	x->seq = last_seq;
	x->answered = true; /* nothing in flight yet */
	vp_sync_decoder_init(&x->dec);
}

bool ga_exchange_feed(struct ga_exchange *x, const uint8_t *p, size_t n,
		      uint64_t *host)
{
	bool found = false;
	size_t used = 0;

	while (used < n) {
		struct vp_sync_msg m;
		bool got;
		used += vp_sync_decode(&x->dec, p + used, n - used, &m, &got);
		if (!got)
			continue;
		if (m.type != VP_SYNC_REPLY) {
			x->unexpected_frames++;
		} else if (m.seq != x->seq || x->answered) {
			x->stale_replies++;
		} else {
			x->answered = true;
			*host = m.host_counter;
			found = true;
		}
	}
	return found;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits until fd has `events` (POLLIN or POLLOUT), stop_fd is readable or
 * the deadline passes.  Returns 1 ready, 0 timeout, -1 stopped, -2 error
 * (errno set). */
static int wait_fd(int fd, short events, int stop_fd, uint64_t deadline)
{
	for (;;) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			return 0;
		struct pollfd p[2] = {
			{.fd = fd, .events = events},
			{.fd = stop_fd, .events = POLLIN},
		};
		int r = poll(p, stop_fd >= 0 ? 2 : 1, (int)(deadline - now));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -2;
		}
		if (r == 0)
			return 0;
		if (stop_fd >= 0 && (p[1].revents & POLLIN))
			return -1;
		if (p[0].revents & POLLNVAL) {
			errno = EBADF;
			return -2;
		}
		/* POLLHUP / POLLERR: the read or write that follows says
		 * what happened (EOF, ECONNRESET, ...). */
		if (p[0].revents)
			return 1;
	}
}

/* Writes the whole request before the deadline. */
static enum ga_exchange_result send_request(struct ga_exchange *x,
					    const uint8_t *req, size_t len,
					    int stop_fd, uint64_t deadline,
					    struct vp_error *err)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = x->is_socket ? send(x->fd, req + off, len - off,
						MSG_NOSIGNAL | MSG_DONTWAIT)
					 : write(x->fd, req + off, len - off);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			vp_errorf(err, "send: %s", strerror(errno));
			return GA_EXCHANGE_CLOSED;
		}
		int w = wait_fd(x->fd, POLLOUT, stop_fd, deadline);
		if (w == -1)
			return GA_EXCHANGE_STOPPED;
		if (w == 0) {
			vp_errorf(err, "send: the host does not take the "
				       "request (timeout)");
			return GA_EXCHANGE_TIMEOUT;
		}
		if (w < 0) {
			vp_errorf(err, "poll: %s", strerror(errno));
			return GA_EXCHANGE_CLOSED;
		}
	}
	return GA_EXCHANGE_OK;
}

enum ga_exchange_result ga_exchange_run(struct ga_exchange *x, int stop_fd,
					int timeout_ms,
					struct ga_exchange_record *rec,
					struct vp_error *err)
{
	uint8_t req[VP_SYNC_REQUEST_SIZE];
	uint8_t buf[256];
	uint64_t deadline = mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	x->seq++;
	x->answered = false;
	vp_sync_encode_request(req, x->seq);

	/* The counter read right before the write: the host cannot have
	 * seen the request earlier. */
	uint64_t send_cyc = vp_cpu_counter();
	enum ga_exchange_result r =
		send_request(x, req, sizeof(req), stop_fd, deadline, err);
	if (r != GA_EXCHANGE_OK)
		return r;

	for (;;) {
		ssize_t n = read(x->fd, buf, sizeof(buf));
		/* Read right after the read returns: the reply (and so the
		 * host's counter read) came before this. */
		uint64_t recv_cyc = vp_cpu_counter();
		uint64_t host;
		if (n > 0) {
			if (ga_exchange_feed(x, buf, (size_t)n, &host)) {
				*rec = (struct ga_exchange_record){
					.seq = x->seq,
					.guest_send = send_cyc,
					.guest_recv = recv_cyc,
					.host = host,
				};
				return GA_EXCHANGE_OK;
			}
			continue;
		}
		if (n == 0) {
			vp_errorf(err, "the host closed the link");
			return GA_EXCHANGE_CLOSED;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			vp_errorf(err, "read: %s", strerror(errno));
			return GA_EXCHANGE_CLOSED;
		}
		int w = wait_fd(x->fd, POLLIN, stop_fd, deadline);
		if (w == -1)
			return GA_EXCHANGE_STOPPED;
		if (w == 0) {
			vp_errorf(err, "no reply to seq %llu within %d ms",
				  (unsigned long long)x->seq, timeout_ms);
			return GA_EXCHANGE_TIMEOUT;
		}
		if (w < 0) {
			vp_errorf(err, "poll: %s", strerror(errno));
			return GA_EXCHANGE_CLOSED;
		}
	}
}
