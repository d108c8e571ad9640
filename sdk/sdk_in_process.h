/*
 * sdk_in_process.h - the in-process backend (sdk_in_process.c): no
 * service, the SDK's own trace buffer and file.  vp_init, vp_flush and
 * vp_shutdown start it, write the file and stop it.
 */
#ifndef VP_SDK_IN_PROCESS_H
#define VP_SDK_IN_PROCESS_H

#include "sdk_state.h"

int vp_inproc_start(const struct vp_init_args *args);
int vp_inproc_write_file(void);
void vp_inproc_stop(void);

#endif
