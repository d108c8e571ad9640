/*
 * producer.h - a producer as vtraced drives it (producer.c): the commands
 * the sessions send its data sources, the copies of its chunks into the
 * buffers, and its end.  Its connection and calls are producer_port.c's.
 */
#ifndef VP_SVC_PRODUCER_H
#define VP_SVC_PRODUCER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc_state.h"

struct vp_producer *vp_producer_by_id(struct vp_service *s, uint16_t id);
const struct vp_svc_ds *vp_producer_find_ds(const struct vp_producer *p,
					    const char *name);

/* Commands to a producer's data sources (the first SetupDataSource also
 * sets up its tracing: the shared memory and SetupTracing). */
void vp_producer_setup_ds(struct vp_producer *p, uint64_t instance_id,
			  const uint8_t *cfg, size_t cfg_len);
void vp_producer_start_ds(struct vp_producer *p, uint64_t instance_id,
			  const uint8_t *cfg, size_t cfg_len);
void vp_producer_stop_ds(struct vp_producer *p, uint64_t instance_id);
void vp_producer_flush(struct vp_producer *p, const uint64_t *ids, size_t n,
		       uint64_t flush_id);
void vp_producer_clear_incremental(struct vp_producer *p,
				   const uint64_t *ids, size_t n);
/* A GetAsyncCommand came: sends it the commands queued meanwhile. */
void vp_producer_flush_queue(struct vp_producer *p);

/* Copies a chunk of p's (validated by the caller) into buffer b, under
 * the sequence of its writer and with p's trusted identity. */
void vp_producer_copy_chunk(struct vp_producer *p, struct vp_svc_buffer *b,
			    const uint8_t *chunk, size_t len, bool complete);
/* Copies into sess's buffers what p has written for them but not
 * committed (complete chunks whole, chunks being written up to their last
 * packet), leaving the chunks to the producer, as traced does after a flush
 * and at stop.  With `final`, a chunk of a writer whose buffer is not known
 * is counted as discarded (it can never be read). */
void vp_producer_scrape(struct vp_producer *p, struct vp_session *sess,
			bool final);

/* Frees p (gone from the service's list and from every session). */
void vp_producer_free(struct vp_producer *p);

#endif
