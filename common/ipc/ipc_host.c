/* ipc/ipc_host.c - placeholder, being written. */
extern int vp_placeholder_ipc_ipc_host_c;
