/* ipc/ipc_client.c - placeholder, being written. */
extern int vp_placeholder_ipc_ipc_client_c;
