/*
 * test_guest_agent.c - unit tests of the guest agent's parts: --host
 * address parsing, the reconnect backoff, opening links (UNIX socket, a
 * pty standing in for a serial port), and the exchange state machine
 * against a peer thread that answers like the host endpoint (with
 * vp_cpu_counter()), late, with garbage, or not at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_exchange.h"
#include "agent_link.h"
#include "ipc_sock.h"
#include "sync_proto.h"
#include "vp_clock.h"

/* ------------------------------------------------------------ addresses */

static void test_parse_vsock(void **state)
{
	(void)state;
	struct ga_host_addr a;
	struct vp_error err;
	char buf[64];

	assert_int_equal(ga_parse_host("vsock://2:20020", &a, &err), 0);
	assert_int_equal(a.kind, GA_HOST_VSOCK);
	assert_int_equal(a.cid, 2);
	assert_int_equal(a.port, 20020);
	ga_host_str(&a, buf, sizeof(buf));
	assert_string_equal(buf, "vsock://2:20020");

	assert_int_equal(ga_parse_host("vsock://3", &a, &err), 0);
	assert_int_equal(a.cid, 3);
	assert_int_equal(a.port, VP_SYNC_DEFAULT_VSOCK_PORT);

	assert_int_equal(ga_parse_host("vsock://4294967294:4294967294", &a,
				       &err),
			 0);
	assert_int_equal(a.cid, 4294967294u);

	const char *bad[] = {"vsock://", "vsock://x:1", "vsock://2:",
			     "vsock://2:0", "vsock://2:1x", "vsock://-1:5",
			     "vsock://2:99999999999", "vsock://4294967295:1",
			     "vsock://2:3:4"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = 0;
		assert_int_equal(ga_parse_host(bad[i], &a, &err), -1);
		/* the message names the address */
		assert_non_null(strstr(err.msg, bad[i]));
	}
}

static void test_parse_unix_and_paths(void **state)
{
	(void)state;
	struct ga_host_addr a;
	struct vp_error err;
	char buf[GA_PATH_MAX + 32];

	assert_int_equal(ga_parse_host("unix:/tmp/x.sock", &a, &err), 0);
	assert_int_equal(a.kind, GA_HOST_UNIX);
	assert_string_equal(a.path, "/tmp/x.sock");
	ga_host_str(&a, buf, sizeof(buf));
	assert_string_equal(buf, "unix:/tmp/x.sock");
	assert_int_equal(ga_parse_host("unix:@abstract", &a, &err), 0);

	assert_int_equal(ga_parse_host("unix:", &a, &err), -1);
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = 0;
	memcpy(longp, "unix:/", 6);
	assert_int_equal(ga_parse_host(longp, &a, &err), -1);
	assert_non_null(strstr(err.msg, "longer"));

	/* A character device, and a path that does not exist yet. */
	assert_int_equal(ga_parse_host("/dev/null", &a, &err), 0);
	assert_int_equal(a.kind, GA_HOST_PATH);
	assert_int_equal(ga_parse_host("/dev/virtio-ports/nope-not-here", &a,
				       &err),
			 0);
	assert_int_equal(a.kind, GA_HOST_PATH);

	/* A regular file and a directory are neither. */
	char tmpl[] = "/tmp/test_guest_agentXXXXXX";
	int fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ga_parse_host(tmpl, &a, &err), -1);
	assert_non_null(strstr(err.msg, "not a socket"));
	unlink(tmpl);
	assert_int_equal(ga_parse_host("/", &a, &err), -1);

	const char *bad[] = {"", "foo", "127.0.0.1:20020", "tcp://x:1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ga_parse_host(bad[i], &a, &err), -1);
	assert_int_equal(ga_parse_host(NULL, &a, &err), -1);
}

/* -------------------------------------------------------------- backoff */

static void test_backoff(void **state)
{
	(void)state;
	struct ga_backoff b;
	const uint32_t want[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};

	ga_backoff_init(&b, 100, 5000);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_int_equal(ga_backoff_next(&b), want[i]);
	ga_backoff_reset(&b);
	assert_int_equal(ga_backoff_next(&b), 100);
	assert_int_equal(ga_backoff_next(&b), 200);

	/* A cap below the start, a zero start, no overflow near the top. */
	ga_backoff_init(&b, 300, 100);
	assert_int_equal(ga_backoff_next(&b), 300);
	assert_int_equal(ga_backoff_next(&b), 300);
	ga_backoff_init(&b, 0, 4);
	assert_int_equal(ga_backoff_next(&b), 1);
	assert_int_equal(ga_backoff_next(&b), 2);
	assert_int_equal(ga_backoff_next(&b), 4);
	assert_int_equal(ga_backoff_next(&b), 4);
	ga_backoff_init(&b, 3000000000u, UINT32_MAX);
	assert_int_equal(ga_backoff_next(&b), 3000000000u);
	assert_int_equal(ga_backoff_next(&b), UINT32_MAX);
	assert_int_equal(ga_backoff_next(&b), UINT32_MAX);
}

/* ------------------------------------------------------- the peer thread */

enum peer_mode {
	PEER_ANSWER,      /* answer every request at once */
	PEER_LATE_FIRST,  /* answer the first request after 700 ms */
	PEER_STALE_FIRST, /* a reply with an old seq before each answer */
	PEER_GARBAGE,     /* junk, a request and torn frames around replies */
	PEER_BYTEWISE,    /* replies one byte per write */
	PEER_SILENT,      /* read requests, never answer */
	PEER_CLOSE,       /* close after the first request */
};

struct peer {
	int fd;
	enum peer_mode mode;
	unsigned answered;
	pthread_t th;
};

static void write_all(int fd, const void *p, size_t len)
{
	const uint8_t *c = p;
	while (len) {
		/* The agent side may close while a torn frame is still
		 * going out: that is EPIPE here, not a SIGPIPE that kills
		 * the whole test. */
		ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
		if (n < 0 && errno == ENOTSOCK) /* the pty case */
			n = write(fd, c, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the agent side is gone */
		c += n;
		len -= (size_t)n;
	}
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void peer_reply(struct peer *p, uint64_t seq, uint64_t cyc)
{
	uint8_t rep[VP_SYNC_REPLY_SIZE], req[VP_SYNC_REQUEST_SIZE];
	static const uint8_t junk[] = "\x00\xffVPS\x01VPSY\x09\x02VPSY\x01";

	switch (p->mode) {
	case PEER_LATE_FIRST:
		if (p->answered == 0)
			sleep_ms(700);
		break;
	case PEER_STALE_FIRST:
		vp_sync_encode_reply(rep, seq - 1, 1);
		write_all(p->fd, rep, sizeof(rep));
		vp_sync_encode_reply(rep, seq + 1000, 2);
		write_all(p->fd, rep, sizeof(rep));
		break;
	case PEER_GARBAGE:
		write_all(p->fd, junk, sizeof(junk) - 1);
		vp_sync_encode_request(req, seq);
		write_all(p->fd, req, sizeof(req));
		break;
	case PEER_SILENT:
		return;
	default:
		break;
	}
	vp_sync_encode_reply(rep, seq, cyc);
	if (p->mode == PEER_BYTEWISE) {
		for (size_t i = 0; i < sizeof(rep); i++)
			write_all(p->fd, rep + i, 1);
	} else {
		write_all(p->fd, rep, sizeof(rep));
	}
	if (p->mode == PEER_GARBAGE)
		write_all(p->fd, junk, 6); /* a torn frame after the reply */
	p->answered++;
}

/* Reads requests and answers them per the mode until EOF. */
static void *peer_main(void *arg)
{
	struct peer *p = arg;
	struct vp_sync_decoder d;
	uint8_t buf[64];

	vp_sync_decoder_init(&d);
	for (;;) {
		ssize_t n = read(p->fd, buf, sizeof(buf));
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
			if (!got || m.type != VP_SYNC_REQUEST)
				continue;
			if (p->mode == PEER_CLOSE) {
				close(p->fd);
				return NULL;
			}
			peer_reply(p, m.seq, cyc);
		}
	}
	close(p->fd);
	return NULL;
}

/* A socketpair: the agent's end is non-blocking, the peer's is served by
 * a thread. */
static int start_peer(struct peer *p, enum peer_mode mode)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	p->fd = sv[1];
	p->mode = mode;
	p->answered = 0;
	assert_int_equal(pthread_create(&p->th, NULL, peer_main, p), 0);
	return sv[0];
}

static void stop_peer(struct peer *p, int agent_fd)
{
	close(agent_fd); /* the peer sees EOF */
	pthread_join(p->th, NULL);
}

static void check_record(const struct ga_exchange_record *r, uint64_t seq)
{
	assert_int_equal(r->seq, seq);
	/* Same machine, same counter: the host read lies inside. */
	assert_true(r->guest_send <= r->host);
	assert_true(r->host <= r->guest_recv);
}

/* ------------------------------------------------------------ exchanges */

static void test_exchange_answers(void **state)
{
	(void)state;
	struct peer p;
	struct ga_exchange x;
	struct ga_exchange_record r;
	struct vp_error err;
	int fd = start_peer(&p, PEER_ANSWER);

	ga_exchange_init(&x, fd, true, 41);
	for (uint64_t i = 0; i < 50; i++) {
		assert_int_equal(ga_exchange_run(&x, -1, 5000, &r, &err),
				 GA_EXCHANGE_OK);
		check_record(&r, 42 + i);
	}
	assert_int_equal(x.stale_replies, 0);
	assert_int_equal(x.dec.skipped_bytes, 0);
	stop_peer(&p, fd);
}

static void test_exchange_stale_after_timeout(void **state)
{
	(void)state;
	struct peer p;
	struct ga_exchange x;
	struct ga_exchange_record r;
	struct vp_error err;
	int fd = start_peer(&p, PEER_LATE_FIRST);

	ga_exchange_init(&x, fd, true, 0);
	/* The first reply comes 700 ms late: a timeout ... */
	assert_int_equal(ga_exchange_run(&x, -1, 100, &r, &err),
			 GA_EXCHANGE_TIMEOUT);
	assert_non_null(strstr(err.msg, "seq 1"));
	/* ... then it arrives during the next exchange and is skipped. */
	assert_int_equal(ga_exchange_run(&x, -1, 10000, &r, &err),
			 GA_EXCHANGE_OK);
	check_record(&r, 2);
	assert_int_equal(x.stale_replies, 1);
	stop_peer(&p, fd);
}

static void test_exchange_stale_and_future_seqs(void **state)
{
	(void)state;
	struct peer p;
	struct ga_exchange x;
	struct ga_exchange_record r;
	struct vp_error err;
	int fd = start_peer(&p, PEER_STALE_FIRST);

	ga_exchange_init(&x, fd, true, 100);
	for (uint64_t i = 1; i <= 5; i++) {
		assert_int_equal(ga_exchange_run(&x, -1, 5000, &r, &err),
				 GA_EXCHANGE_OK);
		check_record(&r, 100 + i);
		assert_true(r.host > 2); /* not one of the bogus replies */
	}
	assert_int_equal(x.stale_replies, 10);
	stop_peer(&p, fd);
}

static void test_exchange_garbage(void **state)
{
	(void)state;
	struct peer p;
	struct ga_exchange x;
	struct ga_exchange_record r;
	struct vp_error err;
	int fd = start_peer(&p, PEER_GARBAGE);

	ga_exchange_init(&x, fd, true, 0);
	for (uint64_t i = 1; i <= 10; i++) {
		assert_int_equal(ga_exchange_run(&x, -1, 5000, &r, &err),
				 GA_EXCHANGE_OK);
		check_record(&r, i);
	}
	assert_true(x.dec.skipped_bytes > 0);
	assert_int_equal(x.unexpected_frames, 10);
	stop_peer(&p, fd);
}

static void test_exchange_bytewise(void **state)
{
	(void)state;
	struct peer p;
	struct ga_exchange x;
	struct ga_exchange_record r;
	struct vp_error err;
	int fd = start_peer(&p, PEER_BYTEWISE);

	ga_exchange_init(&x, fd, true, 0);
	for (uint64_t i = 1; i <= 5; i++) {
		assert_int_equal(ga_exchange_run(&x, -1, 5000, &r, &err),
				 GA_EXCHANGE_OK);
		check_record(&r, i);
	}
	stop_peer(&p, fd);
}

static void test_exchange_silent_and_stop(void **state)
{
	(void)state;
	struct peer p;
	struct ga_exchange x;
	struct ga_exchange_record r;
	struct vp_error err;
	int fd = start_peer(&p, PEER_SILENT);
	int stop[2];

	ga_exchange_init(&x, fd, true, 0);
	assert_int_equal(ga_exchange_run(&x, -1, 50, &r, &err),
			 GA_EXCHANGE_TIMEOUT);
	/* A readable stop fd ends the wait long before the timeout. */
	assert_int_equal(pipe(stop), 0);
	assert_int_equal(write(stop[1], "x", 1), 1);
	assert_int_equal(ga_exchange_run(&x, stop[0], 60000, &r, &err),
			 GA_EXCHANGE_STOPPED);
	close(stop[0]);
	close(stop[1]);
	stop_peer(&p, fd);
}

static void test_exchange_peer_closes(void **state)
{
	(void)state;
	struct peer p;
	struct ga_exchange x;
	struct ga_exchange_record r;
	struct vp_error err;
	int fd = start_peer(&p, PEER_CLOSE);

	ga_exchange_init(&x, fd, true, 0);
	assert_int_equal(ga_exchange_run(&x, -1, 5000, &r, &err),
			 GA_EXCHANGE_CLOSED);
	pthread_join(p.th, NULL);
	/* Writing into a closed peer is CLOSED too, not SIGPIPE. */
	enum ga_exchange_result res = ga_exchange_run(&x, -1, 5000, &r, &err);
	assert_int_equal(res, GA_EXCHANGE_CLOSED);
	close(fd);
}

/* Replies fed by hand: split anywhere, duplicated, after garbage. */
static void test_exchange_feed(void **state)
{
	(void)state;
	struct ga_exchange x;
	uint8_t rep[VP_SYNC_REPLY_SIZE], buf[128];
	uint64_t host = 0;

	ga_exchange_init(&x, -1, true, 6);
	x.seq = 7;
	x.answered = false;
	vp_sync_encode_reply(rep, 7, 0x1122334455667788ull);
	for (size_t cut = 0; cut <= sizeof(rep); cut++) {
		x.answered = false;
		bool a = ga_exchange_feed(&x, rep, cut, &host);
		bool b = ga_exchange_feed(&x, rep + cut, sizeof(rep) - cut,
					  &host);
		assert_true(cut == sizeof(rep) ? a && !b : !a && b);
		assert_int_equal(host, 0x1122334455667788ull);
	}
	/* A second copy of the answered reply is stale. */
	assert_false(ga_exchange_feed(&x, rep, sizeof(rep), &host));
	assert_int_equal(x.stale_replies, 1);

	/* Garbage, then the reply, all in one read. */
	x.answered = false;
	memset(buf, 'V', 40);
	memcpy(buf + 40, rep, sizeof(rep));
	host = 0;
	assert_true(ga_exchange_feed(&x, buf, 40 + sizeof(rep), &host));
	assert_int_equal(host, 0x1122334455667788ull);
	assert_true(x.dec.skipped_bytes >= 40);
}

/* ---------------------------------------------------------------- links */

struct acceptor {
	int lfd;
	struct peer p;
};

static void *acceptor_main(void *arg)
{
	struct acceptor *a = arg;
	struct pollfd pf = {.fd = a->lfd, .events = POLLIN};
	if (poll(&pf, 1, 10000) != 1)
		return NULL;
	a->p.fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);
	a->p.mode = PEER_ANSWER;
	if (a->p.fd >= 0)
		peer_main(&a->p);
	return NULL;
}

static void test_link_unix(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_guest_agentXXXXXX", path[128], spec[160];
	struct ga_host_addr addr;
	struct ga_link l;
	struct vp_error err;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/h.sock", dir);

	/* Nothing listens yet: an error naming the address. */
	snprintf(spec, sizeof(spec), "unix:%s", path);
	assert_int_equal(ga_parse_host(spec, &addr, &err), 0);
	assert_int_equal(ga_link_open(&addr, 200, &l, &err), -1);
	assert_non_null(strstr(err.msg, path));
	/* Same for a bare path that does not exist. */
	struct ga_host_addr bare;
	assert_int_equal(ga_parse_host(path, &bare, &err), 0);
	assert_int_equal(ga_link_open(&bare, 200, &l, &err), -1);

	/* Both spellings reach a listener. */
	struct ga_host_addr *which[2] = {&addr, &bare};
	for (int i = 0; i < 2; i++) {
		struct acceptor a = {0};
		pthread_t th;
		a.lfd = vp_sock_listen(path, &err);
		assert_true(a.lfd >= 0);
		assert_int_equal(pthread_create(&th, NULL, acceptor_main, &a),
				 0);
		assert_int_equal(ga_link_open(which[i], 5000, &l, &err), 0);
		assert_true(l.is_socket);
		assert_true(fcntl(l.fd, F_GETFL) & O_NONBLOCK);
		struct ga_exchange x;
		struct ga_exchange_record r;
		ga_exchange_init(&x, l.fd, l.is_socket, 0);
		assert_int_equal(ga_exchange_run(&x, -1, 5000, &r, &err),
				 GA_EXCHANGE_OK);
		check_record(&r, 1);
		ga_link_close(&l);
		assert_int_equal(l.fd, -1);
		pthread_join(th, NULL);
		close(a.lfd);
		vp_sock_unlink(path);
	}
	rmdir(dir);
}

/* A pty stands in for a serial port: the agent opens the slave as a
 * character device (raw mode), the master plays the host. */
static void test_link_pty(void **state)
{
	(void)state;
	struct ga_host_addr addr;
	struct ga_link l;
	struct vp_error err;

	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
		printf("SKIP: no pty: %s\n", strerror(errno));
		if (m >= 0)
			close(m);
		skip();
	}
	const char *slave = ptsname(m);
	assert_non_null(slave);
	assert_int_equal(ga_parse_host(slave, &addr, &err), 0);
	assert_int_equal(addr.kind, GA_HOST_PATH);
	assert_int_equal(ga_link_open(&addr, 1000, &l, &err), 0);
	assert_false(l.is_socket);

	struct termios t;
	assert_int_equal(tcgetattr(l.fd, &t), 0);
	assert_int_equal(t.c_lflag & (ICANON | ECHO | ISIG), 0);
	assert_int_equal(t.c_oflag & OPOST, 0);

	struct peer p = {.fd = m, .mode = PEER_ANSWER};
	assert_int_equal(pthread_create(&p.th, NULL, peer_main, &p), 0);
	struct ga_exchange x;
	struct ga_exchange_record r;
	ga_exchange_init(&x, l.fd, l.is_socket, 0);
	/* Request and reply bytes include 0x0a, 0x0d, 0x03 ...: raw mode
	 * must pass them through unchanged. */
	for (uint64_t i = 1; i <= 20; i++) {
		assert_int_equal(ga_exchange_run(&x, -1, 5000, &r, &err),
				 GA_EXCHANGE_OK);
		check_record(&r, i);
	}
	assert_int_equal(x.dec.skipped_bytes, 0);
	ga_link_close(&l); /* the master reads EIO/EOF: the peer ends */
	pthread_join(p.th, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_vsock),
		cmocka_unit_test(test_parse_unix_and_paths),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_exchange_answers),
		cmocka_unit_test(test_exchange_stale_after_timeout),
		cmocka_unit_test(test_exchange_stale_and_future_seqs),
		cmocka_unit_test(test_exchange_garbage),
		cmocka_unit_test(test_exchange_bytewise),
		cmocka_unit_test(test_exchange_silent_and_stop),
		cmocka_unit_test(test_exchange_peer_closes),
		cmocka_unit_test(test_exchange_feed),
		cmocka_unit_test(test_link_unix),
		cmocka_unit_test(test_link_pty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
