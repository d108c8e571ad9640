/*
 * fuzz_host_config.c - libFuzzer target for the clock_sync options parser:
 * the input is a serialized DataSourceConfig (its legacy_config string
 * overrides the options) and, read again, the legacy_config text itself.
 * Whatever comes in, the options stay within their limits and every
 * warning is printable text.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock_config.h"
#include "vp_clock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_warning(void *ctx, const char *msg)
{
	(void)ctx;
	for (const char *p = msg; *p; p++)
		if (!isprint((unsigned char)*p))
			abort();
}

static void check_opts(const struct host_clock_opts *o)
{
	if (o->clock_id != VP_BUILTIN_CLOCK_BOOTTIME &&
	    o->clock_id != VP_BUILTIN_CLOCK_MONOTONIC)
		abort();
	if (o->period_ms < HOST_CLOCK_MIN_PERIOD_MS ||
	    o->period_ms > HOST_CLOCK_MAX_PERIOD_MS)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct host_clock_opts def, o;

	host_clock_opts_default(&def);
	host_clock_opts_from_ds_config(data, size, &def, &o, check_warning,
				       NULL);
	check_opts(&o);
	o = def;
	host_clock_apply_legacy((const char *)data, size, &o, check_warning,
				NULL);
	check_opts(&o);
	return 0;
}
