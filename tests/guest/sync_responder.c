/*
 * sync_responder.c - a test double for the host clock producer's sync
 * endpoint: listens on a UNIX socket and answers each sync_proto request
 * with a reply carrying the same seq and vp_cpu_counter() read when the
 * request was received.  Misbehaviour on demand, for the agent's tests.
 *
 * Usage: sync_responder --listen PATH [--delay-ms N] [--delay-every K]
 *                       [--drop-every K] [--garbage-every K]
 *                       [--die-after N]
 *   --delay-ms N      wait N ms before answering (every request, or every
 *                     K-th with --delay-every K)
 *   --drop-every K    never answer every K-th request
 *   --garbage-every K send junk bytes before every K-th reply
 *   --die-after N     exit (status 0) at once after the N-th reply
 * One client at a time; prints "answered N" on stderr when a client leaves.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ipc_sock.h"
#include "sync_proto.h"
#include "vp_clock.h"

struct opts {
	const char *listen;
	unsigned delay_ms, delay_every, drop_every, garbage_every;
	unsigned long die_after;
};

static unsigned long n_requests, n_replies;

static int send_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	while (len) {
		ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Answers one request received at host counter `cyc`.  Returns -1 when the
 * client is gone. */
static int answer(const struct opts *o, int fd, uint64_t seq, uint64_t cyc)
{
	static const uint8_t junk[] = "VPSY\x07garbage\x00VP";
	uint8_t rep[VP_SYNC_REPLY_SIZE];

	n_requests++;
	if (o->drop_every && n_requests % o->drop_every == 0)
		return 0;
	if (o->delay_ms && (!o->delay_every || n_requests % o->delay_every == 0))
		sleep_ms(o->delay_ms);
	if (o->garbage_every && n_requests % o->garbage_every == 0 &&
	    send_all(fd, junk, sizeof(junk) - 1) < 0)
		return -1;
	vp_sync_encode_reply(rep, seq, cyc);
	if (send_all(fd, rep, sizeof(rep)) < 0)
		return -1;
	n_replies++;
	if (o->die_after && n_replies >= o->die_after) {
		fprintf(stderr, "sync_responder: dying after %lu replies\n",
			n_replies);
		_exit(0);
	}
	return 0;
}

static void serve(const struct opts *o, int fd)
{
	struct vp_sync_decoder d;
	uint8_t buf[256];

	vp_sync_decoder_init(&d);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		/* The host's receipt time: right after the read returns. */
		uint64_t cyc = vp_cpu_counter();
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t used = 0;
		while (used < (size_t)n) {
			struct vp_sync_msg m;
			bool got;
			used += vp_sync_decode(&d, buf + used, (size_t)n - used,
					       &m, &got);
			if (got && m.type == VP_SYNC_REQUEST &&
			    answer(o, fd, m.seq, cyc) < 0)
				goto out;
		}
	}
out:
	fprintf(stderr, "sync_responder: client left; answered %lu, "
			"skipped %llu garbage bytes\n",
		n_replies, (unsigned long long)d.skipped_bytes);
}

static unsigned long num(const char *s)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || !*s || *end) {
		fprintf(stderr, "sync_responder: bad number \"%s\"\n", s);
		exit(1);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct vp_error err;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (i + 1 >= argc) {
			fprintf(stderr, "sync_responder: %s needs a value\n", a);
			return 1;
		}
		const char *v = argv[++i];
		if (!strcmp(a, "--listen"))
			o.listen = v;
		else if (!strcmp(a, "--delay-ms"))
			o.delay_ms = (unsigned)num(v);
		else if (!strcmp(a, "--delay-every"))
			o.delay_every = (unsigned)num(v);
		else if (!strcmp(a, "--drop-every"))
			o.drop_every = (unsigned)num(v);
		else if (!strcmp(a, "--garbage-every"))
			o.garbage_every = (unsigned)num(v);
		else if (!strcmp(a, "--die-after"))
			o.die_after = num(v);
		else {
			fprintf(stderr, "sync_responder: unknown option %s\n",
				a);
			return 1;
		}
	}
	if (!o.listen) {
		fprintf(stderr, "usage: sync_responder --listen PATH "
				"[--delay-ms N] [--delay-every K] "
				"[--drop-every K] [--garbage-every K] "
				"[--die-after N]\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	int lfd = vp_sock_listen(o.listen, &err);
	if (lfd < 0) {
		fprintf(stderr, "sync_responder: %s\n", err.msg);
		return 1;
	}
	for (;;) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return 1;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(&o, fd);
		close(fd);
	}
}
