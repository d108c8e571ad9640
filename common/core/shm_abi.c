/* core/shm_abi.c - placeholder, being written. */
extern int vp_placeholder_core_shm_abi_c;
