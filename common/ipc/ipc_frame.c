/* ipc/ipc_frame.c - placeholder, being written. */
extern int vp_placeholder_ipc_ipc_frame_c;
