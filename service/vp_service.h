/*
 * vp_service.h - vtraced, the tracing service, as a library: what
 * vtraced_main.c and the tests use to run one.
 *
 * A service lives on one vp_loop and is used from that loop's thread only
 * (vp_service_get_stats included; tests post to the loop to call it).  It
 * exposes ProducerPort on one or more producer addresses (UNIX sockets for
 * local producers, vsock:// or host:port for producers on other machines,
 * which then run without shared memory) and ConsumerPort on consumer
 * addresses.
 */
#ifndef VP_SERVICE_H
#define VP_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "event_loop.h"
#include "vp_error.h"

struct vp_service;

struct vp_service_opts {
	/* Connection limits (see vp_ipc_limits in ipc_host.h), over producer
	 * and consumer connections together; 0 as there: no init timeout, no
	 * per-uid cap, at most half the open-file limit in all. */
	uint32_t init_timeout_ms;
	uint32_t max_conns_per_uid;
	uint32_t max_conns;
};

/* Counters for logs and tests (a snapshot). */
struct vp_service_stats {
	uint32_t producers_connected;
	uint64_t producers_seen;
	uint32_t consumers_connected;
	uint32_t data_sources_registered;
	uint64_t data_sources_seen;
	uint32_t tracing_sessions;
	uint32_t total_buffers;
	uint64_t chunks_discarded;  /* commits the service refused, and
				     * chunks left in shared memory that no
				     * buffer could take */
	uint64_t chunks_scraped;    /* copied from shared memory uncommitted
				     * (at flush, at stop) */
	uint64_t patches_discarded;
	uint64_t invalid_packets;   /* producer packets dropped on read */
	uint64_t invalid_requests;  /* malformed or forbidden IPC arguments */
	uint64_t triggers_received;
	uint64_t flushes_requested;
	uint64_t flushes_succeeded;
	uint64_t flushes_failed;
	uint64_t conns_refused;     /* over a connection limit, or no fd */
	uint64_t conns_idle_closed; /* closed before their first call */
};

int vp_service_new(struct vp_service **out, struct vp_loop *loop,
		   const struct vp_service_opts *opts, struct vp_error *err);
/* Listens for producers on addr (see ipc_sock.h for the syntax).  Producers
 * connecting over vsock/TCP are remote: no shared memory, chunks inline,
 * their packets stamped with a machine id. */
int vp_service_listen_producer(struct vp_service *s, const char *addr,
			       struct vp_error *err);
int vp_service_listen_consumer(struct vp_service *s, const char *addr,
			       struct vp_error *err);
/* Adopts a connected socket as a producer / consumer connection (tests). */
int vp_service_adopt_producer(struct vp_service *s, int fd,
			      struct vp_error *err);
int vp_service_adopt_consumer(struct vp_service *s, int fd,
			      struct vp_error *err);

/* Stops every session cleanly (flush, stop data sources, drain
 * write_into_file outputs, answer EnableTracing), then calls done(ctx) on
 * the loop; at most a few seconds even if producers do not answer. */
void vp_service_shutdown(struct vp_service *s, void (*done)(void *ctx),
			 void *ctx);
/* Closes every connection and listener (UNIX socket files are removed)
 * and frees everything. */
void vp_service_free(struct vp_service *s);

void vp_service_get_stats(const struct vp_service *s,
			  struct vp_service_stats *out);

#endif
