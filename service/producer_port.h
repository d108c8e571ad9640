/*
 * producer_port.h - the ProducerPort service of vtraced (producer_port.c):
 * what the service object needs to host it.
 */
#ifndef VP_SVC_PRODUCER_PORT_H
#define VP_SVC_PRODUCER_PORT_H

#include "ipc_host.h"
#include "svc_state.h"

/* Fills the ProducerPort description (methods, callbacks, ctx = s). */
void vp_producer_port_describe(struct vp_ipc_service *d,
			       struct vp_service *s);

#endif
