/*
 * clock_config.h - the options of the vperfetto.clock_sync data source:
 * which system clock is paired with the cpu counter, and how often.
 *
 * The command line gives the defaults.  A session may override them per
 * instance through DataSourceConfig.legacy_config (field 1000, a string;
 * DataSourceConfig has no field of ours), written as whitespace- or
 * comma-separated key=value items:
 *
 *     legacy_config: "period_ms=50 clock=monotonic"
 *
 * An unknown key or a bad value is reported (naming the item) and that
 * option keeps its default; the other items still apply.
 */
#ifndef HOST_CLOCK_CONFIG_H
#define HOST_CLOCK_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "vp_error.h"

#define HOST_CLOCK_DEFAULT_PERIOD_MS 100u
#define HOST_CLOCK_MIN_PERIOD_MS 1u
#define HOST_CLOCK_MAX_PERIOD_MS 3600000u /* one hour */

struct host_clock_opts {
	uint32_t clock_id;  /* VP_BUILTIN_CLOCK_BOOTTIME or _MONOTONIC */
	uint32_t period_ms; /* HOST_CLOCK_MIN_PERIOD_MS..MAX */
};

/* BOOTTIME, 100 ms. */
void host_clock_opts_default(struct host_clock_opts *o);

/* "boottime" / "monotonic" (any case) to a builtin clock id. */
int host_clock_parse_clock(const char *s, uint32_t *clock_id,
			   struct vp_error *err);
/* A decimal period in ms within the limits above. */
int host_clock_parse_period(const char *s, uint32_t *period_ms,
			    struct vp_error *err);

/* The clock's name as the command line spells it. */
const char *host_clock_name(uint32_t clock_id);

/* Called once per bad item with a message naming it. */
typedef void (*host_clock_warn_fn)(void *ctx, const char *msg);

/* Applies legacy_config text (untrusted bytes, not NUL-terminated) to
 * *opts.  Returns the number of bad items (each reported through warn). */
int host_clock_apply_legacy(const char *text, size_t len,
			    struct host_clock_opts *opts,
			    host_clock_warn_fn warn, void *warn_ctx);

/* Starts from *defaults and applies the legacy_config of a serialized
 * DataSourceConfig, if it has one.  A DataSourceConfig that does not
 * parse is reported and the defaults are kept.  Returns the number of
 * problems reported. */
int host_clock_opts_from_ds_config(const uint8_t *cfg, size_t len,
				   const struct host_clock_opts *defaults,
				   struct host_clock_opts *out,
				   host_clock_warn_fn warn, void *warn_ctx);

#endif
