/*
 * sync_client.c - a test client of the host's sync endpoint: does N
 * clock-sync exchanges over a UNIX socket and checks every reply: the
 * host's counter must lie between this program's counter reads before
 * the send and after the reply (same machine, same counter).
 *
 * Usage: sync_client SOCKET N [--garbage]
 *   --garbage  send a few bytes of garbage before every request (the
 *              endpoint must resynchronize and still answer each one)
 * Exit status 0 when every exchange was answered and causal.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_sock.h"
#include "sync_proto.h"
#include "vp_clock.h"

static int read_reply(int fd, struct vp_sync_decoder *d, struct vp_sync_msg *m)
{
	uint8_t b[VP_SYNC_REPLY_SIZE];
	for (;;) {
		/* One request is outstanding: never more than its reply. */
		ssize_t n = read(fd, b, sizeof(b));
		if (n <= 0)
			return -1;
		size_t off = 0;
		while (off < (size_t)n) {
			bool got;
			off += vp_sync_decode(d, b + off, (size_t)n - off, m,
					      &got);
			if (got) {
				if (off != (size_t)n) {
					fprintf(stderr, "sync_client: bytes "
							"after a reply\n");
					return -1;
				}
				return 0;
			}
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 ||
	    (argc == 4 && strcmp(argv[3], "--garbage") != 0)) {
		fprintf(stderr, "usage: sync_client SOCKET N [--garbage]\n");
		return 2;
	}
	long n = atol(argv[2]);
	bool garbage = argc == 4;
	struct vp_error err;
	int fd = vp_sock_connect(argv[1], 5000, &err);
	if (fd < 0) {
		fprintf(stderr, "sync_client: %s\n", err.msg);
		return 1;
	}
	struct vp_sync_decoder d;
	vp_sync_decoder_init(&d);
	long bad = 0;
	uint64_t min_rtt = UINT64_MAX;
	for (long i = 0; i < n; i++) {
		uint8_t req[VP_SYNC_REQUEST_SIZE];
		static const uint8_t junk[] = "VPSYxx\x01\x02garbage";
		if (garbage && vp_sock_send_all(fd, junk, sizeof(junk) - 1,
						-1) < 0) {
			perror("sync_client: send");
			return 1;
		}
		vp_sync_encode_request(req, (uint64_t)i);
		uint64_t send = vp_cpu_counter();
		if (vp_sock_send_all(fd, req, sizeof(req), -1) < 0) {
			perror("sync_client: send");
			return 1;
		}
		struct vp_sync_msg m;
		if (read_reply(fd, &d, &m) < 0) {
			fprintf(stderr, "sync_client: exchange %ld: no reply\n",
				i);
			return 1;
		}
		uint64_t recv = vp_cpu_counter();
		if (m.type != VP_SYNC_REPLY || m.seq != (uint64_t)i) {
			fprintf(stderr,
				"sync_client: exchange %ld: got type %u seq "
				"%llu\n",
				i, m.type, (unsigned long long)m.seq);
			return 1;
		}
		if (!(send <= m.host_counter && m.host_counter <= recv)) {
			fprintf(stderr,
				"sync_client: exchange %ld: host counter %llu "
				"not in [%llu, %llu]\n",
				i, (unsigned long long)m.host_counter,
				(unsigned long long)send,
				(unsigned long long)recv);
			bad++;
		}
		if (recv - send < min_rtt)
			min_rtt = recv - send;
	}
	close(fd);
	printf("sync_client: %ld exchanges, %ld causality violations, "
	       "min round trip %llu ticks\n",
	       n, bad, (unsigned long long)min_rtt);
	return bad ? 1 : 0;
}
