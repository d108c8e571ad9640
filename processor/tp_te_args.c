/*
 * tp_te_args.c - the args of a track event (see tp_te_args.h).
 *
 * Keys are Perfetto's: "debug.<name>" for an annotation, ".<key>" for a
 * dict entry, "[i]" for an array element (the flat key without it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_ctx.h"
#include "tp_json.h"
#include "tp_seq.h"
#include "tp_te_args.h"
#include "tp_te_intern.h"
#include "tp_te_state.h"
#include "u64map.h"
#include "vp_alloc.h"

#define MAX_NESTING 64

struct tp_te_args {
	/* distinct (category << 32 | name) of events, in order of use */
	struct u64map annotations;
	uint64_t *annotation_keys;
	size_t nannotations, capannotations;
	struct tp_args_builder b;
	tp_str s_passthrough; /* "legacy_event.passthrough_utid" */
};

static struct tp_te_args *A(struct tp_ctx *ctx)
{
	return ctx->te->args;
}

struct tp_te_args *tp_te_args_new(struct tp_ctx *ctx)
{
	struct tp_te_args *a = vp_xcalloc(1, sizeof *a);
	u64map_init(&a->annotations);
	tp_args_builder_init(&a->b);
	a->s_passthrough = tp_s(ctx, "legacy_event.passthrough_utid");
	return a;
}

void tp_te_args_free(struct tp_te_args *a)
{
	if (!a)
		return;
	u64map_free(&a->annotations);
	free(a->annotation_keys);
	tp_args_builder_free(&a->b);
	free(a);
}

tp_str tp_te_passthrough_key(struct tp_ctx *ctx)
{
	return A(ctx)->s_passthrough;
}

static void nested_value(struct tp_ctx *ctx, const uint8_t *p, size_t len,
			 const char *flat, const char *key, int depth,
			 struct tp_args_builder *b);

static void add_arg(struct tp_ctx *ctx, struct tp_args_builder *b,
		    const char *flat, const char *key, struct tp_arg *a)
{
	a->flat_key = tp_s(ctx, flat);
	a->key = strcmp(flat, key) == 0 ? a->flat_key : tp_s(ctx, key);
	tp_args_add(b, a);
}

/* The value of a DebugAnnotation (or a dict entry / array element). */
static void annotation_value(struct tp_ctx *ctx, uint32_t gen,
			     const uint8_t *p, size_t len, const char *flat,
			     const char *key, tp_str key_id, int depth,
			     struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	struct tp_arg a;
	char fk[TE_KEY_MAX], k[TE_KEY_MAX];
	unsigned idx = 0;

	if (depth > MAX_NESTING) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	memset(&a, 0, sizeof a);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		bool have = true;
		switch (f.num) {
		case DA_BOOL_VALUE:
			a.type = TP_ARG_BOOL;
			a.i = f.val != 0;
			break;
		case DA_UINT_VALUE:
			a.type = TP_ARG_UINT;
			a.i = (int64_t)f.val;
			break;
		case DA_INT_VALUE:
			a.type = TP_ARG_INT;
			a.i = (int64_t)f.val;
			break;
		case DA_DOUBLE_VALUE:
			if (f.wt != PB_WT_FIXED64)
				continue;
			a.type = TP_ARG_REAL;
			memcpy(&a.d, &f.val, 8);
			break;
		case DA_STRING_VALUE:
			if (f.wt != PB_WT_LEN)
				continue;
			a.type = TP_ARG_STRING;
			a.s = tp_te_intern_bytes(ctx, f.data, f.len);
			break;
		case DA_STRING_VALUE_IID:
			a.type = TP_ARG_STRING;
			a.s = tp_te_interned(ctx, gen,
					     ID_DEBUG_ANNOTATION_STRING_VALUES,
					     f.val);
			if (!a.s) {
				tp_stat_inc(ctx, "track_event_parser_errors");
				continue;
			}
			break;
		case DA_POINTER_VALUE:
			a.type = TP_ARG_POINTER;
			a.i = (int64_t)f.val;
			break;
		case DA_LEGACY_JSON_VALUE:
			if (f.wt == PB_WT_LEN)
				tp_json_to_args(ctx, (const char *)f.data, f.len,
						flat, key, b);
			have = false;
			break;
		case DA_NESTED_VALUE:
			if (f.wt == PB_WT_LEN)
				nested_value(ctx, f.data, f.len, flat, key,
					     depth + 1, b);
			have = false;
			break;
		case DA_DICT_ENTRIES: {
			if (f.wt != PB_WT_LEN)
				continue;
			/* The entry's own name. */
			struct pb_reader r2;
			struct pb_field g;
			const char *cn = NULL;
			size_t cl = 0;
			pb_reader_init(&r2, f.data, f.len);
			while (pb_next(&r2, &g)) {
				if (g.num == DA_NAME && g.wt == PB_WT_LEN) {
					cn = (const char *)g.data;
					cl = strnlen(cn, g.len);
				} else if (g.num == DA_NAME_IID) {
					tp_str s = tp_te_interned(
						ctx, gen,
						ID_DEBUG_ANNOTATION_NAMES, g.val);
					if (s) {
						cn = tp_str_get(ctx->pool, s);
						cl = tp_str_len(ctx->pool, s);
					}
				}
			}
			if (!cn)
				continue;
			tp_te_arg_key(fk, sizeof fk, flat, cn, cl);
			tp_te_arg_key(k, sizeof k, key, cn, cl);
			annotation_value(ctx, gen, f.data, f.len, fk, k, 0,
					 depth + 1, b);
			have = false;
			break;
		}
		case DA_ARRAY_VALUES:
			if (f.wt != PB_WT_LEN)
				continue;
			snprintf(k, sizeof k, "%s[%u]", key, idx++);
			annotation_value(ctx, gen, f.data, f.len, flat, k, 0,
					 depth + 1, b);
			have = false;
			break;
		default:
			have = false;
			break;
		}
		if (!have)
			continue;
		if (key_id) {
			a.flat_key = a.key = key_id;
			tp_args_add(b, &a);
		} else {
			add_arg(ctx, b, flat, key, &a);
		}
	}
}

static void nested_value(struct tp_ctx *ctx, const uint8_t *p, size_t len,
			 const char *flat, const char *key, int depth,
			 struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t type = 0;
	struct tp_arg a;
	bool have = false;
	char fk[TE_KEY_MAX], k[TE_KEY_MAX];

	if (depth > MAX_NESTING) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	memset(&a, 0, sizeof a);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case NV_NESTED_TYPE: type = f.val; break;
		case NV_INT_VALUE:
			a.type = TP_ARG_INT;
			a.i = (int64_t)f.val;
			have = true;
			break;
		case NV_DOUBLE_VALUE:
			if (f.wt == PB_WT_FIXED64) {
				a.type = TP_ARG_REAL;
				memcpy(&a.d, &f.val, 8);
				have = true;
			}
			break;
		case NV_BOOL_VALUE:
			a.type = TP_ARG_BOOL;
			a.i = f.val != 0;
			have = true;
			break;
		case NV_STRING_VALUE:
			if (f.wt == PB_WT_LEN) {
				a.type = TP_ARG_STRING;
				a.s = tp_te_intern_bytes(ctx, f.data, f.len);
				have = true;
			}
			break;
		default: break;
		}
	}
	if (type == NV_DICT) {
		/* dict_keys[i] pairs with dict_values[i]. */
		struct pb_reader rk, rv;
		struct pb_field fk_f, fv;
		pb_reader_init(&rk, p, len);
		pb_reader_init(&rv, p, len);
		for (;;) {
			bool gk = false, gv = false;
			while (pb_next(&rk, &fk_f))
				if (fk_f.num == NV_DICT_KEYS &&
				    fk_f.wt == PB_WT_LEN) {
					gk = true;
					break;
				}
			while (pb_next(&rv, &fv))
				if (fv.num == NV_DICT_VALUES &&
				    fv.wt == PB_WT_LEN) {
					gv = true;
					break;
				}
			if (!gk || !gv)
				break;
			const char *kn = (const char *)fk_f.data;
			tp_te_arg_key(fk, sizeof fk, flat, kn, fk_f.len);
			tp_te_arg_key(k, sizeof k, key, kn, fk_f.len);
			nested_value(ctx, fv.data, fv.len, fk, k, depth + 1, b);
		}
		return;
	}
	if (type == NV_ARRAY) {
		unsigned idx = 0;
		pb_reader_init(&r, p, len);
		while (pb_next(&r, &f)) {
			if (f.num != NV_ARRAY_VALUES || f.wt != PB_WT_LEN)
				continue;
			snprintf(k, sizeof k, "%s[%u]", key, idx++);
			nested_value(ctx, f.data, f.len, flat, k, depth + 1, b);
		}
		return;
	}
	if (have)
		add_arg(ctx, b, flat, key, &a);
}

static void debug_annotation(struct tp_ctx *ctx, const struct ev *e,
			     const uint8_t *p, size_t len,
			     struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str key = 0;
	char buf[TE_KEY_MAX];

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == DA_NAME_IID && f.wt == PB_WT_VARINT) {
			key = tp_te_interned_debug_key(ctx, e->gen, f.val);
			if (!key) {
				tp_stat_inc(ctx, "track_event_parser_errors");
				return;
			}
		} else if (f.num == DA_NAME && f.wt == PB_WT_LEN) {
			tp_te_arg_key(buf, sizeof buf, "debug",
				      (const char *)f.data, f.len);
			key = tp_s(ctx, buf);
		}
	}
	if (!key) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	const char *ks = tp_str_get(ctx->pool, key);
	annotation_value(ctx, e->gen, p, len, ks, ks, key, 0, b);
}

/* The name of an interned histogram sample (name_iid, never with name):
 * looked up in the sequence's histogram_names. */
static void histogram_name(struct tp_ctx *ctx, const struct ev *e,
			   struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	bool has_name = false, has_iid = false;
	uint64_t iid = 0;

	pb_reader_init(&r, e->histogram, e->histogram_len);
	while (pb_next(&r, &f)) {
		if (f.num == CHS_NAME)
			has_name = true;
		else if (f.num == CHS_NAME_IID && f.wt == PB_WT_VARINT) {
			has_iid = true;
			iid = f.val;
		}
	}
	if (!has_iid)
		return;
	tp_str name = has_name ? 0 : tp_interned_str(ctx, e->gen,
						     ID_HISTOGRAM_NAMES, iid,
						     HN_NAME);
	if (!name) {
		/* both name and name_iid, or an unknown iid */
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}
	tp_str k = tp_s(ctx, "chrome_histogram_sample.name");
	tp_args_add_str(b, k, k, name);
}

/* The sample's own fields, as Perfetto reflects them into args. */
static void histogram_fields(struct tp_ctx *ctx, const struct ev *e,
			     struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str k;

	pb_reader_init(&r, e->histogram, e->histogram_len);
	while (pb_next(&r, &f)) {
		bool v = f.wt == PB_WT_VARINT;
		switch (f.num) {
		case CHS_NAME_HASH:
			if (!v)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.name_hash");
			tp_args_add_uint(b, k, k, f.val);
			break;
		case CHS_NAME:
			if (f.wt != PB_WT_LEN)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.name");
			tp_args_add_str(b, k, k,
					tp_te_intern_bytes(ctx, f.data, f.len));
			break;
		case CHS_SAMPLE:
			if (!v)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.sample");
			tp_args_add_int(b, k, k, (int64_t)f.val);
			break;
		case CHS_NAME_IID:
			if (!v)
				break;
			k = tp_s(ctx, "chrome_histogram_sample.name_iid");
			tp_args_add_uint(b, k, k, f.val);
			break;
		default: break;
		}
	}
}

/* A string field of a message, or 0 when it has none (Perfetto's null
 * string, not an empty one). */
static tp_str str_field(struct tp_ctx *ctx, const uint8_t *p, size_t len,
			uint32_t num)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str s = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == num && f.wt == PB_WT_LEN)
			s = tp_te_intern_bytes(ctx, f.data, f.len);
	return s;
}

/* A SourceLocation's line_number (0 when it has none). */
static uint32_t line_number(const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint32_t line = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == SL_LINE_NUMBER && f.wt == PB_WT_VARINT)
			line = (uint32_t)f.val;
	return line;
}

/* An interned SourceLocation by its iid: false when unknown (counted in
 * interned_data_tokenizer_errors by the lookup). */
static bool source_location(struct tp_ctx *ctx, const struct ev *e,
			    uint64_t iid, const uint8_t **p, size_t *len)
{
	return tp_interned(ctx, e->gen, ID_SOURCE_LOCATIONS, iid, p, len);
}

/* source_location_iid: the interned location as source.*, its file name
 * with '/' for every '\', its function name null when it has none, its
 * line 0; a zero or unknown iid is a parser error. */
static void source_location_args(struct tp_ctx *ctx, const struct ev *e,
				 struct tp_args_builder *b)
{
	const uint8_t *p;
	size_t len;
	tp_str k;

	if (!e->source_location_iid ||
	    !source_location(ctx, e, e->source_location_iid, &p, &len)) {
		parser_error(ctx);
		return;
	}
	tp_str file = str_field(ctx, p, len, SL_FILE_NAME);
	const char *fs = file ? tp_str_get(ctx->pool, file) : "";
	if (strchr(fs, '\\')) {
		char *n = vp_xstrdup(fs);
		for (char *c = n; *c; c++)
			if (*c == '\\')
				*c = '/';
		file = tp_intern_cstr(ctx->pool, n);
		free(n);
	} else if (!file) {
		file = tp_s(ctx, ""); /* Perfetto's copy of the name: "" */
	}
	k = tp_s(ctx, "source.file_name");
	tp_args_add_str(b, k, k, file);
	k = tp_s(ctx, "source.function_name");
	tp_args_add_str(b, k, k, str_field(ctx, p, len, SL_FUNCTION_NAME));
	k = tp_s(ctx, "source.line_number");
	tp_args_add_uint(b, k, k, line_number(p, len));
}

/* LogMessage's priority as Android's (the same numbers, 0 for any other
 * value). */
static int64_t log_priority(uint64_t prio)
{
	return prio <= 7 ? (int64_t)prio : 0;
}

/* A log message's tag: its source location's file name as written, ':'
 * and its line number (0 when none). */
static tp_str location_tag(struct tp_ctx *ctx, const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	const uint8_t *name = NULL;
	size_t n = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == SL_FILE_NAME && f.wt == PB_WT_LEN) {
			name = f.data;
			n = f.len;
		}
	return tp_intern_fmt(ctx->pool, "%.*s:%" PRIu32, (int)n,
			     name ? (const char *)name : "",
			     line_number(p, len));
}

/* log_message: its interned body, then its interned source location (as
 * written, the path not normalized, the line an int) and its priority.
 * An event off a thread, an unknown body or an unknown location is a
 * parser error; what was added before it stays, as in Perfetto.  Each
 * also makes a row of the android_logs view (__intrinsic_logs): the
 * event's time and thread, the priority (INFO without one), the source
 * location as "file:line" (the path as written) for the tag, the body. */
static void log_message_args(struct tp_ctx *ctx, const struct ev *e,
			     struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t body_iid = 0, loc_iid = 0, prio = 0;
	bool has_loc = false, has_prio = false;
	const uint8_t *p;
	size_t len;
	tp_str k, body;

	if (!e->has_utid) {
		parser_error(ctx);
		return;
	}
	pb_reader_init(&r, e->log_message, e->log_message_len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (f.num == LM_BODY_IID)
			body_iid = f.val;
		else if (f.num == LM_SOURCE_LOCATION_IID) {
			has_loc = true;
			loc_iid = f.val;
		} else if (f.num == LM_PRIO) {
			has_prio = true;
			prio = f.val;
		}
	}
	if (!tp_interned(ctx, e->gen, ID_LOG_MESSAGE_BODY, body_iid, &p,
			 &len)) {
		parser_error(ctx);
		return;
	}
	body = str_field(ctx, p, len, LMB_BODY);
	k = tp_s(ctx, "track_event.log_message.message");
	tp_args_add_str(b, k, k, body);
	tp_str tag = 0;
	if (has_loc) {
		if (!source_location(ctx, e, loc_iid, &p, &len)) {
			parser_error(ctx);
			return;
		}
		tag = location_tag(ctx, p, len);
		k = tp_s(ctx, "track_event.log_message.file_name");
		tp_args_add_str(b, k, k, str_field(ctx, p, len, SL_FILE_NAME));
		k = tp_s(ctx, "track_event.log_message.function_name");
		tp_args_add_str(b, k, k,
				str_field(ctx, p, len, SL_FUNCTION_NAME));
		k = tp_s(ctx, "track_event.log_message.line_number");
		tp_args_add_int(b, k, k, line_number(p, len));
	}
	if (has_prio) {
		k = tp_s(ctx, "track_event.priority");
		tp_args_add_int(b, k, k, log_priority(prio));
	}
	struct tp_table *t = tp_tab(ctx, TP_T_LOGS);
	uint32_t row = tp_table_add_row(t);
	tp_set_int(t, TP_LOGS_ts, row, e->ts);
	tp_set_int(t, TP_LOGS_utid, row, e->utid);
	tp_set_int(t, TP_LOGS_prio, row,
		   has_prio ? log_priority(prio) : ALOG_PRIO_INFO);
	tp_set_str(t, TP_LOGS_log_source, row, tp_s(ctx, "android_logcat"));
	if (tag)
		tp_set_str(t, TP_LOGS_tag, row, tag);
	tp_set_str(t, TP_LOGS_msg, row, body);
}

/* correlation_id as "tp:#<id>", correlation_id_str as it is, an interned
 * one by its iid (nothing when unknown); each under "correlation_id". */
static void correlation_args(struct tp_ctx *ctx, const struct ev *e,
			     struct tp_args_builder *b)
{
	tp_str k = tp_s(ctx, "correlation_id");

	if (e->has_correlation_id)
		tp_args_add_str(b, k, k,
				tp_intern_fmt(ctx->pool, "tp:#%" PRIu64,
					      e->correlation_id));
	if (e->correlation_id_str)
		tp_args_add_str(b, k, k,
				tp_te_intern_bytes(ctx, e->correlation_id_str,
						   e->correlation_id_str_len));
	if (e->has_correlation_id_str_iid) {
		tp_str v = tp_te_interned(ctx, e->gen, ID_CORRELATION_ID_STR,
					  e->correlation_id_str_iid);
		if (v)
			tp_args_add_str(b, k, k, v);
	}
}

/* An inline SourceLocation as Perfetto reflects it: each field under
 * "source_location.", in the order written. */
static void reflect_source_location(struct tp_ctx *ctx, const uint8_t *p,
				    size_t len, struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str k;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		bool v = f.wt == PB_WT_VARINT, l = f.wt == PB_WT_LEN;
		switch (f.num) {
		case SL_IID:
			if (!v)
				break;
			k = tp_s(ctx, "source_location.iid");
			tp_args_add_uint(b, k, k, f.val);
			break;
		case SL_FILE_NAME:
			if (!l)
				break;
			k = tp_s(ctx, "source_location.file_name");
			tp_args_add_str(b, k, k,
					tp_te_intern_bytes(ctx, f.data, f.len));
			break;
		case SL_FUNCTION_NAME:
			if (!l)
				break;
			k = tp_s(ctx, "source_location.function_name");
			tp_args_add_str(b, k, k,
					tp_te_intern_bytes(ctx, f.data, f.len));
			break;
		case SL_LINE_NUMBER:
			if (!v)
				break;
			k = tp_s(ctx, "source_location.line_number");
			tp_args_add_uint(b, k, k, (uint32_t)f.val);
			break;
		default: break;
		}
	}
}

/* The typed fields Perfetto reflects into args that we know, in the
 * order written: the histogram sample's, the source location (inline,
 * or its iid as a number, beside the source.* looked up). */
static void reflected_args(struct tp_ctx *ctx, const struct ev *e,
			   struct tp_args_builder *b)
{
	struct pb_reader r;
	struct pb_field f;
	bool histogram_done = false;
	tp_str k;

	if (!e->has_reflected) {
		if (e->histogram)
			histogram_fields(ctx, e, b);
		return;
	}
	pb_reader_init(&r, e->te, e->te_len);
	while (pb_next(&r, &f)) {
		if (f.num == TE_CHROME_HISTOGRAM_SAMPLE && e->histogram &&
		    !histogram_done) {
			histogram_fields(ctx, e, b);
			histogram_done = true;
		} else if (f.num == TE_SOURCE_LOCATION && f.wt == PB_WT_LEN) {
			reflect_source_location(ctx, f.data, f.len, b);
		} else if (f.num == TE_SOURCE_LOCATION_IID &&
			   f.wt == PB_WT_VARINT) {
			k = tp_s(ctx, "source_location_iid");
			tp_args_add_uint(b, k, k, f.val);
		}
	}
}

bool tp_te_event_has_args(const struct ev *e)
{
	return e->has_debug || e->has_passthrough || e->has_source_id ||
	       e->histogram || e->log_message || e->has_reflected ||
	       e->has_correlation_id || e->correlation_id_str ||
	       e->has_correlation_id_str_iid;
}

/* Perfetto's order: typed fields looked up (source location, log
 * message, histogram name), correlation ids, the legacy source id,
 * reflected typed fields, debug annotations, the passthrough thread. */
void tp_te_build_args(struct tp_ctx *ctx, const struct ev *e,
		      bool async_phase, struct tp_args_builder *b)
{
	tp_str k;

	tp_args_builder_reset(b);
	if (e->has_source_location_iid)
		source_location_args(ctx, e, b);
	if (e->log_message)
		log_message_args(ctx, e, b);
	if (e->histogram)
		histogram_name(ctx, e, b);
	correlation_args(ctx, e, b);
	if (e->has_source_id) {
		k = tp_s(ctx, "legacy_trace_source_id");
		tp_args_add_int(b, k, k, e->source_id);
	}
	reflected_args(ctx, e, b);
	if (e->has_debug) {
		struct pb_reader r;
		struct pb_field f;
		pb_reader_init(&r, e->te, e->te_len);
		while (pb_next(&r, &f))
			if (f.num == TE_DEBUG_ANNOTATIONS && f.wt == PB_WT_LEN)
				debug_annotation(ctx, e, f.data, f.len, b);
	}
	if (e->has_passthrough) {
		k = A(ctx)->s_passthrough;
		tp_args_add_uint(b, k, k, e->passthrough_utid);
	}
	if (e->le.has_phase &&
	    ((async_phase && (e->le.phase == 'S' || e->le.phase == 'T' ||
			      e->le.phase == 'p')) ||
	     e->le.phase == 'R')) {
		char ph[2] = { (char)e->le.phase, 0 };
		k = tp_s(ctx, "legacy_event.phase");
		tp_args_add_str(b, k, k, tp_s(ctx, ph));
	}
}

int64_t tp_te_event_args(struct tp_ctx *ctx, const struct ev *e,
			 bool async_phase)
{
	struct tp_args_builder *b = &A(ctx)->b;
	tp_te_build_args(ctx, e, async_phase, b);
	return b->n ? tp_args_commit(ctx, b) : -1;
}

/* Perfetto's diff tests load traces with proto content analysis, which
 * files every track event's packet under its (category, name) and gives
 * each distinct pair an arg set {event.category, event.name}; those sets
 * are part of the args its tests see, so we keep them too. */
void tp_te_note_annotation(struct tp_ctx *ctx, const struct ev *e)
{
	struct tp_te_args *s = A(ctx);
	uint64_t key = (uint64_t)e->category_id << 32 | e->name_id;
	uint64_t v;

	if (u64map_get(&s->annotations, key, &v))
		return;
	u64map_put(&s->annotations, key, s->nannotations);
	if (s->nannotations == s->capannotations) {
		s->capannotations = s->capannotations ? s->capannotations * 2
						      : 16;
		s->annotation_keys = vp_xrealloc(
			s->annotation_keys,
			s->capannotations * sizeof *s->annotation_keys);
	}
	s->annotation_keys[s->nannotations++] = key;
}

void tp_te_args_finish(struct tp_ctx *ctx)
{
	struct tp_te_args *s = A(ctx);
	tp_str kc = tp_s(ctx, "event.category"), kn = tp_s(ctx, "event.name");

	for (size_t i = 0; i < s->nannotations; i++) {
		tp_args_builder_reset(&s->b);
		tp_args_add_str(&s->b, kc, kc,
				(tp_str)(s->annotation_keys[i] >> 32));
		tp_args_add_str(&s->b, kn, kn, (tp_str)s->annotation_keys[i]);
		tp_args_commit(ctx, &s->b);
	}
}
