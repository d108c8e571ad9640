/* ipc/ipc_sock.c - placeholder, being written. */
extern int vp_placeholder_ipc_ipc_sock_c;
