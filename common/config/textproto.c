/* config/textproto.c - placeholder, being written. */
extern int vp_placeholder_config_textproto_c;
