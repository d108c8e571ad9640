/*
 * cmd_config.h - the TraceConfig of a vperfetto run: loaded from a file
 * (binary, or text with --txt), or built from light-mode shorthands, then
 * adjusted by -t / -b.
 *
 * Every config returned is a protobuf-c message whose parts are all
 * malloc'd: free it with perfetto__protos__trace_config__free_unpacked(c,
 * NULL).
 */
#ifndef VP_CMD_CONFIG_H
#define VP_CMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfetto/config/config.pb-c.h"
#include "vp_error.h"

typedef Perfetto__Protos__TraceConfig vp_trace_config;

/* Largest config file read (binary or text). */
#define VP_CMD_MAX_CONFIG (16u << 20)

/* "10s", "500ms", "2m", "1h" (a bare number is seconds) -> milliseconds. */
int vp_cmd_parse_duration(const char *s, uint32_t *ms, struct vp_error *err);
/* "32mb", "512kb", "1gb" (also k, m, g; any case) -> kilobytes. */
int vp_cmd_parse_size(const char *s, uint32_t *kb, struct vp_error *err);

/* Reads path ("-" is stdin) as a TraceConfig: binary, or text if txt. */
int vp_cmd_load_config(const char *path, bool txt, vp_trace_config **out,
		       struct vp_error *err);

/* Light mode: track_event with the comma-separated categories (if
 * track_event_cats is not NULL), linux.ftrace with the ftrace events and
 * linux.process_stats (if n_events > 0), one RING_BUFFER buffer. */
int vp_cmd_light_config(const char *track_event_cats, char *const *events,
			size_t n_events, vp_trace_config **out,
			struct vp_error *err);

/* -t / -b: sets duration_ms; sets buffers[0].size_kb (adding a buffer if
 * the config has none). */
int vp_cmd_override(vp_trace_config *tc, bool set_duration,
		    uint32_t duration_ms, bool set_size, uint32_t size_kb,
		    struct vp_error *err);

/* Adds a data source called name (with an empty config) unless tc has
 * one already.  0, or -1 (out of memory). */
int vp_cmd_ensure_data_source(vp_trace_config *tc, const char *name,
			      struct vp_error *err);

/* Makes sure a track_event data source enables category cat by its exact
 * name (which Perfetto's rules put above any disabled pattern): added to
 * the first track_event data source's enabled_categories, or a new
 * track_event data source when there is none.  0, or -1. */
int vp_cmd_ensure_category(vp_trace_config *tc, const char *cat,
			   struct vp_error *err);

/* Serializes tc into a malloc'd buffer.  0, or -1 (out of memory). */
int vp_cmd_pack_config(const vp_trace_config *tc, uint8_t **buf, size_t *len,
		       struct vp_error *err);

#endif
