/*
 * clock_config.c - parsing of the clock_sync options: the command-line
 * values and the per-session legacy_config overrides (see clock_config.h).
 */
#include "clock_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "vp_clock.h"

/* sync/ stands alone, so vp_clock.h keeps its own copies of these. */
_Static_assert(VP_BUILTIN_CLOCK_REALTIME == BUILTIN_CLOCK_REALTIME &&
		       VP_BUILTIN_CLOCK_MONOTONIC == BUILTIN_CLOCK_MONOTONIC &&
		       VP_BUILTIN_CLOCK_MONOTONIC_RAW ==
			       BUILTIN_CLOCK_MONOTONIC_RAW &&
		       VP_BUILTIN_CLOCK_BOOTTIME == BUILTIN_CLOCK_BOOTTIME &&
		       VP_CLOCK_ID_CPU_COUNTER == CPU_COUNTER_CLOCK_ID,
	       "vp_clock.h follows protos/");

/* The longest item quoted back in a message. */
#define QUOTE_MAX 64

void host_clock_opts_default(struct host_clock_opts *o)
{
	o->clock_id = VP_BUILTIN_CLOCK_BOOTTIME;
	o->period_ms = HOST_CLOCK_DEFAULT_PERIOD_MS;
}

const char *host_clock_name(uint32_t clock_id)
{
	switch (clock_id) {
	case VP_BUILTIN_CLOCK_BOOTTIME:
		return "boottime";
	case VP_BUILTIN_CLOCK_MONOTONIC:
		return "monotonic";
	}
	return "unknown";
}

int host_clock_parse_clock(const char *s, uint32_t *clock_id,
			   struct vp_error *err)
{
	if (strcasecmp(s, "boottime") == 0) {
		*clock_id = VP_BUILTIN_CLOCK_BOOTTIME;
		return 0;
	}
	if (strcasecmp(s, "monotonic") == 0) {
		*clock_id = VP_BUILTIN_CLOCK_MONOTONIC;
		return 0;
	}
	return vp_errorf(err, "clock \"%s\": want boottime or monotonic", s);
}

int host_clock_parse_period(const char *s, uint32_t *period_ms,
			    struct vp_error *err)
{
	char *end;

	/* strtoull accepts a sign and leading blanks: refuse both. */
	if (!isdigit((unsigned char)s[0]))
		return vp_errorf(err, "period \"%s\": not a number of ms", s);
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end != '\0')
		return vp_errorf(err, "period \"%s\": not a number of ms", s);
	if (errno == ERANGE || v < HOST_CLOCK_MIN_PERIOD_MS ||
	    v > HOST_CLOCK_MAX_PERIOD_MS)
		return vp_errorf(err, "period \"%s\": want %u..%u ms", s,
				 HOST_CLOCK_MIN_PERIOD_MS,
				 HOST_CLOCK_MAX_PERIOD_MS);
	*period_ms = (uint32_t)v;
	return 0;
}

/* Copies an untrusted item into out as printable text, escaping the rest
 * and cutting it short. */
static void quote(char *out, size_t cap, const char *p, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 5 < cap; i++) {
		unsigned char c = (unsigned char)p[i];
		if (i == QUOTE_MAX) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (isprint(c) && c != '\\' && c != '"')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
	}
	out[o] = '\0';
}

static void warnf(host_clock_warn_fn warn, void *ctx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void warnf(host_clock_warn_fn warn, void *ctx, const char *fmt, ...)
{
	char msg[VP_ERROR_MAX];
	va_list ap;

	if (!warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	warn(ctx, msg);
}

static bool is_sep(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' ||
	       c == ';';
}

/* One key=value item, item[0..len) with no separator inside. */
static int apply_item(const char *item, size_t len,
		      struct host_clock_opts *opts, host_clock_warn_fn warn,
		      void *ctx)
{
	char shown[QUOTE_MAX * 4 + 8];
	char value[QUOTE_MAX + 1];
	struct vp_error e;
	const char *eq = memchr(item, '=', len);

	quote(shown, sizeof(shown), item, len);
	if (!eq) {
		warnf(warn, ctx, "legacy_config item \"%s\": want key=value",
		      shown);
		return 1;
	}
	size_t klen = (size_t)(eq - item), vlen = len - klen - 1;
	bool is_period = klen == 9 && memcmp(item, "period_ms", 9) == 0;
	bool is_clock = klen == 5 && memcmp(item, "clock", 5) == 0;
	if (!is_period && !is_clock) {
		warnf(warn, ctx,
		      "legacy_config item \"%s\": unknown key (known: "
		      "period_ms, clock)",
		      shown);
		return 1;
	}
	/* Values are short; a long one or one with a NUL is bad anyway. */
	if (vlen == 0 || vlen > QUOTE_MAX || memchr(eq + 1, '\0', vlen)) {
		warnf(warn, ctx, "legacy_config item \"%s\": bad value", shown);
		return 1;
	}
	memcpy(value, eq + 1, vlen);
	value[vlen] = '\0';
	int rc = is_period ? host_clock_parse_period(value, &opts->period_ms, &e)
			   : host_clock_parse_clock(value, &opts->clock_id, &e);
	if (rc < 0) {
		/* e.msg quotes the raw value: say why without it. */
		if (is_period)
			warnf(warn, ctx,
			      "legacy_config item \"%s\": want a period of "
			      "%u..%u ms",
			      shown, HOST_CLOCK_MIN_PERIOD_MS,
			      HOST_CLOCK_MAX_PERIOD_MS);
		else
			warnf(warn, ctx,
			      "legacy_config item \"%s\": want boottime or "
			      "monotonic",
			      shown);
		return 1;
	}
	return 0;
}

int host_clock_apply_legacy(const char *text, size_t len,
			    struct host_clock_opts *opts,
			    host_clock_warn_fn warn, void *warn_ctx)
{
	int bad = 0;
	size_t i = 0;

	while (i < len) {
		while (i < len && is_sep(text[i]))
			i++;
		size_t start = i;
		while (i < len && !is_sep(text[i]))
			i++;
		if (i > start)
			bad += apply_item(text + start, i - start, opts, warn,
					  warn_ctx);
	}
	return bad;
}

int host_clock_opts_from_ds_config(const uint8_t *cfg, size_t len,
				   const struct host_clock_opts *defaults,
				   struct host_clock_opts *out,
				   host_clock_warn_fn warn, void *warn_ctx)
{
	struct pb_reader r;
	struct pb_field f;
	const uint8_t *legacy = NULL;
	size_t legacy_len = 0;

	*out = *defaults;
	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f))
		if (f.num == DSC_LEGACY_CONFIG && f.wt == PB_WT_LEN) {
			legacy = f.data; /* the last one wins, as in protobuf */
			legacy_len = f.len;
		}
	if (r.err) {
		warnf(warn, warn_ctx,
		      "DataSourceConfig: byte offset %zu: %s; using the "
		      "defaults",
		      r.err_off, pb_err_str(r.err));
		return 1;
	}
	if (!legacy)
		return 0;
	return host_clock_apply_legacy((const char *)legacy, legacy_len, out,
				       warn, warn_ctx);
}
