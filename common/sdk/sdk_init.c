/* sdk/sdk_init.c - placeholder, being written. */
extern int vp_placeholder_sdk_sdk_init_c;
