/*
 * fuzz_guest_reply.c - libFuzzer target for the guest agent's reply
 * handling: bytes from the host are untrusted.
 *
 * The first 8 input bytes pick the seq the agent is waiting for, so the
 * fuzzer can build a matching reply.  The rest is (1) fed by hand in
 * pieces whose sizes come from the input, where a reply may be taken at
 * most once per request and nothing is read out of bounds, and (2) put in
 * a socket the real exchange reads from (ga_exchange_run with a zero
 * timeout reads what is there), whose result must agree with (1).
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_exchange.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* Pass (1): the pure byte handling.  Returns whether the reply came, and
 * its host counter. */
static bool feed_pieces(uint64_t last_seq, const uint8_t *p, size_t n,
			uint64_t *host)
{
	struct ga_exchange x;
	size_t step = n ? (size_t)(p[0] % 29) + 1 : 1;
	bool found = false;

	ga_exchange_init(&x, -1, true, last_seq);
	x.seq = last_seq + 1; /* as ga_exchange_run does */
	x.answered = false;
	for (size_t off = 0; off < n; off += step) {
		size_t piece = n - off < step ? n - off : step;
		uint64_t h;
		if (ga_exchange_feed(&x, p + off, piece, &h)) {
			if (found)
				abort(); /* taken twice */
			found = true;
			*host = h;
		}
		if (x.dec.len >= VP_SYNC_MAX_FRAME)
			abort();
	}
	return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8 || size > 8 + 16384)
		return 0;
	uint64_t last_seq = get_u64(data);
	const uint8_t *p = data + 8;
	size_t n = size - 8;
	uint64_t host1 = 0;
	bool found1 = feed_pieces(last_seq, p, n, &host1);

	/* Pass (2): the same bytes through a socket. */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	int big = 1 << 20;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	size_t sent = 0;
	while (sent < n) {
		ssize_t w = send(sv[1], p + sent, n - sent, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		sent += (size_t)w;
	}

	struct ga_exchange x;
	struct ga_exchange_record rec;
	struct vp_error err;
	ga_exchange_init(&x, sv[0], true, last_seq);
	enum ga_exchange_result r = ga_exchange_run(&x, -1, 0, &rec, &err);
	if (sent == n) {
		/* Every byte was there to read: the same answer as (1). */
		if (found1 != (r == GA_EXCHANGE_OK))
			abort();
		if (found1 && (rec.host != host1 || rec.seq != last_seq + 1 ||
			       rec.guest_recv < rec.guest_send))
			abort();
	}
	if (r != GA_EXCHANGE_OK && r != GA_EXCHANGE_TIMEOUT)
		abort(); /* the peer neither closed nor failed */
	close(sv[0]);
	close(sv[1]);
	return 0;
}
