/*
 * consumer_port.h - the ConsumerPort service of vtraced (consumer_port.c):
 * what the service object needs to host it.
 */
#ifndef VP_SVC_CONSUMER_PORT_H
#define VP_SVC_CONSUMER_PORT_H

#include "ipc_host.h"
#include "svc_state.h"

/* Fills the ConsumerPort description (methods, callbacks, ctx = s). */
void vp_consumer_port_describe(struct vp_ipc_service *d,
			       struct vp_service *s);

#endif
