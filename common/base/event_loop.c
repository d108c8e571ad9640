/* base/event_loop.c - placeholder, being written. */
extern int vp_placeholder_base_event_loop_c;
