/*
 * packets.h - the packets vtraced writes itself into a session
 * (packets.c): what the session, its readers and GetTraceStats put out.
 */
#ifndef VP_SVC_PACKETS_H
#define VP_SVC_PACKETS_H

#include <stdint.h>

#include "pb_wire.h"
#include "svc_state.h"

/* Each builds one whole TracePacket, the service's trusted fields
 * included, into out (replacing its contents). */
void vp_pkt_trace_config(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_system_info(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_clock_snapshot(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_trace_uuid(struct vp_session *sess, struct pb_buf *out);
void vp_pkt_trace_stats(struct vp_session *sess, struct pb_buf *out);
/* A synchronization marker (at the start and with each periodic clock
 * snapshot, as traced writes them). */
void vp_pkt_sync_marker(struct vp_session *sess, struct pb_buf *out);
/* TraceProvenance: the sequences each buffer holds (at the first read). */
void vp_pkt_trace_provenance(struct vp_session *sess, struct pb_buf *out);
/* TracingServiceEvent with `field` (TSE_*) set to true. */
void vp_pkt_service_event(struct vp_session *sess, uint32_t field,
			  struct pb_buf *out);
/* TracePacket.trigger: a trigger the session received, at its time, with
 * the producer's name and uid as the service saw them. */
void vp_pkt_trigger(struct vp_session *sess, const struct vp_trigger_rec *t,
		    struct pb_buf *out);
/* TraceStats of the session, as nested field `field` of b. */
void vp_write_trace_stats(struct vp_session *sess, struct pb_buf *b,
			  uint32_t field);

#endif
