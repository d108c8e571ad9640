/* service/service.c - placeholder, being written. */
extern int vp_placeholder_service_service_c;
