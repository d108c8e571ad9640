/*
 * sdk_system.h - the system backend (sdk_system.c): the producer thread
 * that talks to the tracing service over ProducerPort.  vp_init, vp_flush
 * and vp_shutdown start, flush and stop it; the layers under it reach it
 * through the vp_backend_ops it installs (sdk_state.h).
 */
#ifndef VP_SDK_SYSTEM_H
#define VP_SDK_SYSTEM_H

#include "sdk_state.h"

int vp_system_start(const struct vp_init_args *args);
void vp_system_flush(void);
void vp_system_stop(void);

#endif
