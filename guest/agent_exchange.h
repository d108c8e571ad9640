/*
 * agent_exchange.h - one clock-sync exchange with the host, as a small
 * state machine over a non-blocking link.
 *
 * The agent reads its counter (send), writes a request with a new seq,
 * waits for the reply carrying that seq, and reads its counter again the
 * moment the read that completed the reply returns (recv).  The host read
 * its counter between the two, so send <= host <= recv once the host
 * counter is mapped to guest cycles; the reads sit right next to the
 * write and read syscalls to keep the interval narrow.
 *
 * Replies with another seq (late answers to a request that timed out, or
 * leftovers on a serial line from an earlier connection), requests, and
 * garbage are skipped and counted; seqs are never reused on one agent, so
 * a stale reply can never be taken for the current one.
 */
#ifndef VP_GUEST_AGENT_EXCHANGE_H
#define VP_GUEST_AGENT_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync_proto.h"
#include "vp_error.h"

struct ga_exchange {
	int fd;
	bool is_socket;
	uint64_t seq;       /* the seq of the request in flight (or last) */
	bool answered;      /* the reply to seq has arrived */
	struct vp_sync_decoder dec;
	uint64_t stale_replies;     /* replies with another seq */
	uint64_t unexpected_frames; /* requests sent to us */
};

/* What one exchange found. */
struct ga_exchange_record {
	uint64_t seq;
	uint64_t guest_send; /* counter before the request was written */
	uint64_t guest_recv; /* counter after the reply was read */
	uint64_t host;       /* the host's counter at receipt */
};

enum ga_exchange_result {
	GA_EXCHANGE_OK = 0,
	GA_EXCHANGE_TIMEOUT,  /* no reply in time: try again on this link */
	GA_EXCHANGE_CLOSED,   /* EOF or an I/O error: reopen the link */
	GA_EXCHANGE_STOPPED,  /* stop_fd became readable */
};

/* Starts on a link; seqs continue from last_seq + 1 (keep last_seq across
 * reconnects so that seqs stay unique). */
void ga_exchange_init(struct ga_exchange *x, int fd, bool is_socket,
		      uint64_t last_seq);

/* One exchange: a new seq, the request, the reply within timeout_ms.
 * stop_fd (or -1) ends the wait early when readable.  On GA_EXCHANGE_OK
 * *rec holds the result; on GA_EXCHANGE_CLOSED and TIMEOUT err says why. */
enum ga_exchange_result ga_exchange_run(struct ga_exchange *x, int stop_fd,
					int timeout_ms,
					struct ga_exchange_record *rec,
					struct vp_error *err);

/* The byte handling behind ga_exchange_run, for tests and the fuzzer:
 * feeds bytes received from the host.  Returns true (and *host) when the
 * reply to the current seq is among them, the first time only; every
 * byte is consumed either way. */
bool ga_exchange_feed(struct ga_exchange *x, const uint8_t *p, size_t n,
		      uint64_t *host);

#endif
