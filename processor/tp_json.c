/*
 * tp_json.c - a small, bounds-checked JSON reader that turns a JSON value
 * into args (see tp_json.h).  Nesting is limited to JSON_MAX_DEPTH; keys
 * longer than the key buffer are cut.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_ctx.h"
#include "tp_json.h"
#include "vp_alloc.h"

#define JSON_MAX_DEPTH 64
#define JSON_KEY_MAX 1024

struct jp {
	const char *p, *end;
	struct tp_ctx *ctx;
	struct tp_args_builder *b;
	struct u64map *array_next; /* unused: indices are per array */
};

static void skip_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
				 *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static void put_utf8(char *out, size_t *n, size_t cap, unsigned cp)
{
	char tmp[4];
	size_t k = 0;
	if (cp < 0x80) {
		tmp[k++] = (char)cp;
	} else if (cp < 0x800) {
		tmp[k++] = (char)(0xc0 | cp >> 6);
		tmp[k++] = (char)(0x80 | (cp & 0x3f));
	} else {
		tmp[k++] = (char)(0xe0 | cp >> 12);
		tmp[k++] = (char)(0x80 | (cp >> 6 & 0x3f));
		tmp[k++] = (char)(0x80 | (cp & 0x3f));
	}
	for (size_t i = 0; i < k && *n < cap; i++)
		out[(*n)++] = tmp[i];
}

/* Reads a string at j->p (which is at '"') into a malloc'd buffer. */
static char *read_string(struct jp *j, size_t *out_len)
{
	size_t cap = (size_t)(j->end - j->p), n = 0;
	char *out = vp_xmalloc(cap + 1);
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		char c = *j->p++;
		if (c != '\\') {
			if (n < cap)
				out[n++] = c;
			continue;
		}
		if (j->p >= j->end)
			break;
		c = *j->p++;
		switch (c) {
		case 'n': out[n++] = '\n'; break;
		case 't': out[n++] = '\t'; break;
		case 'r': out[n++] = '\r'; break;
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'u': {
			unsigned cp = 0;
			for (int i = 0; i < 4 && j->p < j->end; i++) {
				char h = *j->p++;
				cp <<= 4;
				if (h >= '0' && h <= '9')
					cp |= (unsigned)(h - '0');
				else if (h >= 'a' && h <= 'f')
					cp |= (unsigned)(h - 'a' + 10);
				else if (h >= 'A' && h <= 'F')
					cp |= (unsigned)(h - 'A' + 10);
			}
			if (cp == 0)
				cp = ' ';
			put_utf8(out, &n, cap, cp);
			break;
		}
		default: out[n++] = c; break;
		}
	}
	if (j->p >= j->end) {
		free(out);
		return NULL;
	}
	j->p++; /* closing quote */
	out[n] = 0;
	*out_len = n;
	return out;
}

static bool parse_value(struct jp *j, const char *flat, const char *key,
			int depth);

static void add_entry(struct jp *j, const char *flat, const char *key,
		      struct tp_arg *a)
{
	a->flat_key = tp_s(j->ctx, flat);
	a->key = tp_s(j->ctx, key);
	tp_args_add(j->b, a);
}

static bool parse_object(struct jp *j, const char *flat, const char *key,
			 int depth)
{
	char fk[JSON_KEY_MAX], k[JSON_KEY_MAX];

	j->p++;
	skip_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return true;
	}
	for (;;) {
		skip_ws(j);
		if (j->p >= j->end || *j->p != '"')
			return false;
		size_t n;
		char *member = read_string(j, &n);
		if (!member)
			return false;
		snprintf(fk, sizeof fk, "%s.%s", flat, member);
		snprintf(k, sizeof k, "%s.%s", key, member);
		free(member);
		skip_ws(j);
		if (j->p >= j->end || *j->p != ':')
			return false;
		j->p++;
		if (!parse_value(j, fk, k, depth + 1))
			return false;
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			return true;
		}
		return false;
	}
}

static bool parse_array(struct jp *j, const char *flat, const char *key,
			int depth)
{
	char k[JSON_KEY_MAX];
	unsigned idx = 0;

	j->p++;
	skip_ws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		return true;
	}
	for (;;) {
		snprintf(k, sizeof k, "%s[%u]", key, idx++);
		if (!parse_value(j, flat, k, depth + 1))
			return false;
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			return true;
		}
		return false;
	}
}

static bool match_word(struct jp *j, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
		return false;
	j->p += n;
	return true;
}

static bool parse_number(struct jp *j, const char *flat, const char *key)
{
	char buf[64];
	size_t n = 0;
	bool is_real = false;
	struct tp_arg a = { 0 };

	while (j->p < j->end && n < sizeof buf - 1 &&
	       strchr("+-0123456789.eE", *j->p)) {
		if (*j->p == '.' || *j->p == 'e' || *j->p == 'E')
			is_real = true;
		buf[n++] = *j->p++;
	}
	buf[n] = 0;
	if (!n)
		return false;
	if (!is_real) {
		char *e;
		if (buf[0] == '-') {
			long long v = strtoll(buf, &e, 10);
			a.type = TP_ARG_INT;
			a.i = v;
		} else {
			unsigned long long v = strtoull(buf, &e, 10);
			if (v > (unsigned long long)INT64_MAX) {
				a.type = TP_ARG_UINT;
			} else {
				a.type = TP_ARG_INT;
			}
			a.i = (int64_t)v;
		}
	} else {
		a.type = TP_ARG_REAL;
		a.d = strtod(buf, NULL);
	}
	add_entry(j, flat, key, &a);
	return true;
}

static bool parse_value(struct jp *j, const char *flat, const char *key,
			int depth)
{
	struct tp_arg a = { 0 };

	if (depth > JSON_MAX_DEPTH)
		return false;
	skip_ws(j);
	if (j->p >= j->end)
		return false;
	switch (*j->p) {
	case '{':
		return parse_object(j, flat, key, depth);
	case '[':
		return parse_array(j, flat, key, depth);
	case '"': {
		size_t n;
		char *s = read_string(j, &n);
		if (!s)
			return false;
		a.type = TP_ARG_STRING;
		a.s = tp_intern(j->ctx->pool, s, strnlen(s, n));
		free(s);
		add_entry(j, flat, key, &a);
		return true;
	}
	case 't':
		if (!match_word(j, "true"))
			return false;
		a.type = TP_ARG_BOOL;
		a.i = 1;
		add_entry(j, flat, key, &a);
		return true;
	case 'f':
		if (!match_word(j, "false"))
			return false;
		a.type = TP_ARG_BOOL;
		add_entry(j, flat, key, &a);
		return true;
	case 'n':
		if (!match_word(j, "null"))
			return false;
		a.type = TP_ARG_NULL;
		add_entry(j, flat, key, &a);
		return true;
	default:
		return parse_number(j, flat, key);
	}
}

bool tp_json_to_args(struct tp_ctx *ctx, const char *s, size_t len,
		     const char *flat_key, const char *key,
		     struct tp_args_builder *b)
{
	struct jp j = { s, s + len, ctx, b, NULL };
	return parse_value(&j, flat_key, key, 0);
}
