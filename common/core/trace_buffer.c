/* core/trace_buffer.c - placeholder, being written. */
extern int vp_placeholder_core_trace_buffer_c;
