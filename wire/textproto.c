/*
 * textproto.c - protobuf text format parser and printer driven by the
 * protobuf-c descriptors (see textproto.h).
 *
 * The parser is a hand-written lexer plus a recursive-descent parser, one
 * recursion per nested message.  It builds the message in place through the
 * descriptor offsets, keeping it valid for protobuf_c_message_free_unpacked()
 * at every step: a value is fully built (string copied, submessage
 * initialised) before it is stored, and a repeated array grows only once the
 * new element is ready.  On error the caller frees the partial message.
 *
 * The printer walks the same descriptors and writes what the parser reads.
 */
#include "textproto.h"

#include <ctype.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH VP_TEXTPROTO_MAX_DEPTH

/* ------------------------------------------------------------------------ */
/* Lexer                                                                    */
/* ------------------------------------------------------------------------ */

enum tok_kind {
	T_EOF,
	T_IDENT,  /* name, true, inf, ENUM_VALUE */
	T_NUMBER, /* 12, 0x1f, 1.5e3, .5f; validated when used */
	T_STRING, /* one quoted literal, quotes included */
	T_PUNCT,  /* one of { } < > [ ] : , ; - */
	T_ERROR,  /* bad input; msg says what */
};

struct token {
	enum tok_kind kind;
	const char *s; /* raw text */
	size_t len;
	unsigned line, col;
	const char *msg; /* T_ERROR only */
	bool show;       /* T_ERROR: quote the offending text after msg */
};

struct parser {
	const char *p, *end;
	const char *name; /* file name for messages */
	unsigned line;
	const char *line_start;
	struct token tok; /* lookahead */
	bool have_tok;
	/* Names of the message fields enclosing the current message. */
	const char *path[MAX_DEPTH];
	int depth;
	struct vp_error *err;
};

static bool is_ident_start(int c)
{
	return isalpha(c) || c == '_';
}

static bool is_ident_char(int c)
{
	return isalnum(c) || c == '_';
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end) {
		char c = *ps->p;
		if (c == '\n') {
			ps->p++;
			ps->line++;
			ps->line_start = ps->p;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' ||
			   c == '\f') {
			ps->p++;
		} else if (c == '#') {
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
		} else {
			break;
		}
	}
}

/* A quoted literal: ends at the matching quote on the same line. */
static void lex_string(struct parser *ps, struct token *t)
{
	char quote = *ps->p;
	const char *q = ps->p + 1;

	while (q < ps->end && *q != quote && *q != '\n') {
		if (*q == '\\') {
			if (q + 1 >= ps->end || q[1] == '\n')
				break;
			q++;
		}
		q++;
	}
	if (q >= ps->end || *q != quote) {
		t->kind = T_ERROR;
		t->msg = "unterminated string";
		t->len = 1;
		ps->p = q; /* resume after the bad literal */
		return;
	}
	t->kind = T_STRING;
	t->len = (size_t)(q + 1 - ps->p);
	ps->p = q + 1;
}

/* A number-like run: digits, letters, '_', '.', and a sign after an
 * exponent.  Whether it is a valid number is decided when it is used. */
static void lex_number(struct parser *ps, struct token *t)
{
	const char *q = ps->p;
	bool hex = q + 1 < ps->end && q[0] == '0' && (q[1] == 'x' || q[1] == 'X');

	while (q < ps->end) {
		char c = *q;
		if (is_ident_char((unsigned char)c) || c == '.') {
			q++;
		} else if ((c == '+' || c == '-') && !hex && q > ps->p &&
			   (q[-1] == 'e' || q[-1] == 'E')) {
			q++;
		} else {
			break;
		}
	}
	t->kind = T_NUMBER;
	t->len = (size_t)(q - ps->p);
	ps->p = q;
}

static void lex(struct parser *ps, struct token *t)
{
	skip_space(ps);
	memset(t, 0, sizeof(*t));
	t->s = ps->p;
	t->line = ps->line;
	t->col = (unsigned)(ps->p - ps->line_start) + 1;
	if (ps->p >= ps->end) {
		t->kind = T_EOF;
		return;
	}
	unsigned char c = (unsigned char)*ps->p;
	if (is_ident_start(c)) {
		const char *q = ps->p;
		while (q < ps->end && is_ident_char((unsigned char)*q))
			q++;
		t->kind = T_IDENT;
		t->len = (size_t)(q - ps->p);
		ps->p = q;
	} else if (isdigit(c) || (c == '.' && ps->p + 1 < ps->end &&
				  isdigit((unsigned char)ps->p[1]))) {
		lex_number(ps, t);
	} else if (c == '"' || c == '\'') {
		lex_string(ps, t);
	} else if (strchr("{}<>[]:,;-", c) && c != '\0') {
		t->kind = T_PUNCT;
		t->len = 1;
		ps->p++;
	} else {
		t->kind = T_ERROR;
		t->msg = "unexpected character";
		t->show = true;
		t->len = 1;
		ps->p++;
	}
}

static const struct token *peek(struct parser *ps)
{
	if (!ps->have_tok) {
		lex(ps, &ps->tok);
		ps->have_tok = true;
	}
	return &ps->tok;
}

static void advance(struct parser *ps)
{
	peek(ps);
	ps->have_tok = false;
}

static bool is_punct(const struct token *t, char c)
{
	return t->kind == T_PUNCT && t->s[0] == c;
}

static bool tok_is(const struct token *t, const char *word)
{
	return t->kind == T_IDENT && strlen(word) == t->len &&
	       memcmp(t->s, word, t->len) == 0;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* "NAME:LINE:COL: field 'a.b.c': MSG".  field (length flen) is the field
 * being parsed, or NULL to name only the enclosing message's field. */
static int fail_msg(struct parser *ps, unsigned line, unsigned col,
		    const char *field, size_t flen, const char *what)
{
	char path[8192];
	size_t n = 0;

	path[0] = '\0';
	for (int i = 0; i < ps->depth && n < sizeof(path); i++)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "%s%s",
				      i ? "." : "", ps->path[i]);
	if (field && n < sizeof(path))
		n += (size_t)snprintf(path + n, sizeof(path) - n, "%s%.*s",
				      n ? "." : "",
				      (int)(flen < 200 ? flen : 200), field);
	if (n >= sizeof(path))
		n = sizeof(path) - 1;
	/* A very deep path keeps its ends, so the message still fits. */
	if (n > 200) {
		size_t head = 96, tail = n - 96;
		while (head > 0 && path[head] != '.')
			head--;
		while (tail < n && path[tail] != '.')
			tail++;
		if (head == 0 || tail == n) {
			head = 96;
			tail = n - 96;
		}
		memcpy(path + head, "...", 3);
		memmove(path + head + 3, path + tail + (path[tail] == '.'),
			n - tail + 1 - (path[tail] == '.'));
	}
	if (path[0])
		return vp_errorf(ps->err, "%s:%u:%u: field '%s': %s", ps->name,
				 line, col, path, what);
	return vp_errorf(ps->err, "%s:%u:%u: %s", ps->name, line, col, what);
}

static int fail(struct parser *ps, const struct token *at, const char *field,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct parser *ps, const struct token *at, const char *field,
		const char *fmt, ...)
{
	char what[VP_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fail_msg(ps, at->line, at->col, field,
			field ? strlen(field) : 0, what);
}

/* Same, at a column within the token's line (string escapes). */
static int fail_at_col(struct parser *ps, const struct token *at,
		       unsigned col, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int fail_at_col(struct parser *ps, const struct token *at,
		       unsigned col, const char *field, const char *fmt, ...)
{
	char what[VP_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fail_msg(ps, at->line, col, field, field ? strlen(field) : 0,
			what);
}

/* An unknown field: the path ends with the name as written. */
static int fail_unknown(struct parser *ps, const struct token *name,
			const ProtobufCMessageDescriptor *desc)
{
	char what[VP_ERROR_MAX];
	snprintf(what, sizeof(what), "unknown field (not in %s)", desc->name);
	return fail_msg(ps, name->line, name->col, name->s, name->len, what);
}

/* The token, quoted for a message (shortened, unprintables escaped). */
static const char *tok_text(const struct token *t, char *buf, size_t cap)
{
	size_t n = 0;
	if (t->kind == T_EOF)
		return "end of input";
	buf[n++] = '\'';
	for (size_t i = 0; i < t->len && n + 6 < cap; i++) {
		unsigned char c = (unsigned char)t->s[i];
		if (i == 40) {
			memcpy(buf + n, "...", 3);
			n += 3;
			break;
		}
		if (isprint(c))
			buf[n++] = (char)c;
		else
			n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
	}
	buf[n++] = '\'';
	buf[n] = '\0';
	return buf;
}

/* Reports t as not what was expected (or the lexer's own complaint). */
static int unexpected(struct parser *ps, const struct token *t,
		      const char *field, const char *expected)
{
	char buf[64];
	if (t->kind == T_ERROR)
		return fail(ps, t, field, "%s%s%s", t->msg, t->show ? " " : "",
			    t->show ? tok_text(t, buf, sizeof(buf)) : "");
	if (t->kind == T_EOF)
		return fail(ps, t, field, "unexpected end of input (expected %s)",
			    expected);
	return fail(ps, t, field, "expected %s, got %s", expected,
		    tok_text(t, buf, sizeof(buf)));
}

/* ------------------------------------------------------------------------ */
/* Storing values through the descriptor                                    */
/* ------------------------------------------------------------------------ */

union value {
	int32_t i32;
	uint32_t u32;
	int64_t i64;
	uint64_t u64;
	float f;
	double d;
	protobuf_c_boolean b;
	int e;
	char *str;
	ProtobufCBinaryData bin;
	ProtobufCMessage *msg;
};

static size_t value_size(ProtobufCType type)
{
	switch (type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_FLOAT:
		return sizeof(float);
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM:
		return sizeof(int);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	}
	return 0;
}

static void *member(ProtobufCMessage *m, unsigned offset)
{
	return (char *)m + offset;
}

static const void *cmember(const ProtobufCMessage *m, unsigned offset)
{
	return (const char *)m + offset;
}

static void drop_value(const ProtobufCFieldDescriptor *f, union value *v)
{
	if (f->type == PROTOBUF_C_TYPE_STRING)
		free(v->str);
	else if (f->type == PROTOBUF_C_TYPE_BYTES)
		free(v->bin.data);
	else if (f->type == PROTOBUF_C_TYPE_MESSAGE && v->msg)
		protobuf_c_message_free_unpacked(v->msg, NULL);
}

/* Stores v into field f of m (appending for a repeated field); m owns the
 * value afterwards, also on failure (then it is freed). */
static int store(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		 union value *v)
{
	size_t size = value_size(f->type);

	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t *n = member(m, f->quantifier_offset);
		void **arr = member(m, f->offset);
		if (*n >= SIZE_MAX / size / 2) {
			drop_value(f, v);
			return -1;
		}
		/* The capacity is implicit: the array grows to the next power
		 * of two whenever n reaches one (arrays start out empty). */
		if ((*n & (*n - 1)) == 0) {
			size_t cap = *n ? *n * 2 : 1;
			void *grown = realloc(*arr, cap * size);
			if (!grown) {
				drop_value(f, v);
				return -1;
			}
			*arr = grown;
		}
		memcpy((char *)*arr + *n * size, v, size);
		(*n)++;
		return 0;
	}
	memcpy(member(m, f->offset), v, size);
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		*(uint32_t *)member(m, f->quantifier_offset) = f->id;
	else if (f->label == PROTOBUF_C_LABEL_OPTIONAL &&
		 f->type != PROTOBUF_C_TYPE_STRING &&
		 f->type != PROTOBUF_C_TYPE_MESSAGE && f->quantifier_offset)
		*(protobuf_c_boolean *)member(m, f->quantifier_offset) = 1;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Scalar values                                                            */
/* ------------------------------------------------------------------------ */

struct number {
	bool is_int;
	bool special; /* inf or nan spelled out */
	bool neg;
	uint64_t mag; /* is_int */
	double d;     /* always */
};

static int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

/* Integer literal in base 8, 10 or 16.  0: ok, -1: not an integer, -2:
 * too large for 64 bits. */
static int parse_uint(const char *s, size_t len, uint64_t *out)
{
	unsigned base = 10;
	size_t i = 0;

	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		i = 2;
	} else if (len > 1 && s[0] == '0') {
		base = 8;
		i = 1;
	}
	if (i >= len)
		return -1;
	uint64_t v = 0;
	bool overflow = false;
	for (; i < len; i++) {
		unsigned d = (unsigned)digit_value(s[i]);
		if (d >= base)
			return -1;
		if (v > (UINT64_MAX - d) / base)
			overflow = true;
		v = v * base + d;
	}
	*out = v;
	return overflow ? -2 : 0;
}

/* Float literal: what strtod takes, with an optional f/F suffix. */
static bool parse_float_literal(const char *s, size_t len, double *out)
{
	char buf[128];

	if (len > 0 && (s[len - 1] == 'f' || s[len - 1] == 'F') &&
	    !(len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')))
		len--;
	if (len == 0 || len >= sizeof(buf))
		return false;
	for (size_t i = 0; i < len; i++) {
		/* strtod would also take hex floats, inf and nan spellings. */
		if (!isdigit((unsigned char)s[i]) && !strchr(".eE+-", s[i]))
			return false;
	}
	/* 09 is a bad octal number, not nine. */
	if (len > 1 && s[0] == '0') {
		size_t digits = 0;
		while (digits < len && isdigit((unsigned char)s[digits]))
			digits++;
		if (digits == len)
			return false;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	char *end;
	*out = strtod(buf, &end);
	return end == buf + len;
}

static bool word_is(const struct token *t, const char *word)
{
	return t->kind == T_IDENT && strlen(word) == t->len &&
	       strncasecmp(t->s, word, t->len) == 0;
}

static const char *type_name(ProtobufCType type)
{
	static const char *const names[] = {
		[PROTOBUF_C_TYPE_INT32] = "int32",
		[PROTOBUF_C_TYPE_SINT32] = "sint32",
		[PROTOBUF_C_TYPE_SFIXED32] = "sfixed32",
		[PROTOBUF_C_TYPE_INT64] = "int64",
		[PROTOBUF_C_TYPE_SINT64] = "sint64",
		[PROTOBUF_C_TYPE_SFIXED64] = "sfixed64",
		[PROTOBUF_C_TYPE_UINT32] = "uint32",
		[PROTOBUF_C_TYPE_FIXED32] = "fixed32",
		[PROTOBUF_C_TYPE_UINT64] = "uint64",
		[PROTOBUF_C_TYPE_FIXED64] = "fixed64",
		[PROTOBUF_C_TYPE_FLOAT] = "float",
		[PROTOBUF_C_TYPE_DOUBLE] = "double",
		[PROTOBUF_C_TYPE_BOOL] = "bool",
		[PROTOBUF_C_TYPE_ENUM] = "enum",
		[PROTOBUF_C_TYPE_STRING] = "string",
		[PROTOBUF_C_TYPE_BYTES] = "bytes",
		[PROTOBUF_C_TYPE_MESSAGE] = "message",
	};
	if ((unsigned)type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "?";
}

/* A number, with an optional leading '-'.  Float fields also take inf,
 * infinity and nan. */
static int parse_number(struct parser *ps, const ProtobufCFieldDescriptor *f,
			bool allow_float, struct number *num)
{
	const struct token *t = peek(ps);
	struct token first = *t;
	char buf[64];

	memset(num, 0, sizeof(*num));
	if (is_punct(t, '-')) {
		num->neg = true;
		advance(ps);
		t = peek(ps);
	}
	if (allow_float && t->kind == T_IDENT) {
		if (word_is(t, "inf") || word_is(t, "infinity")) {
			num->d = num->neg ? -INFINITY : INFINITY;
		} else if (word_is(t, "nan")) {
			num->d = num->neg ? -NAN : NAN;
		} else {
			return unexpected(ps, t, f->name, "a number");
		}
		num->special = true;
		advance(ps);
		return 0;
	}
	if (t->kind != T_NUMBER)
		return unexpected(ps, t, f->name, "a number");
	int r = parse_uint(t->s, t->len, &num->mag);
	if (r == -2 && !allow_float)
		return fail(ps, &first, f->name,
			    "value out of range for %s: %s%.*s",
			    type_name(f->type), num->neg ? "-" : "",
			    (int)(t->len < 40 ? t->len : 40), t->s);
	if (r == 0) {
		num->is_int = true;
		num->d = num->neg ? -(double)num->mag : (double)num->mag;
		advance(ps);
		return 0;
	}
	if (!parse_float_literal(t->s, t->len, &num->d))
		return fail(ps, t, f->name, "invalid number %s",
			    tok_text(t, buf, sizeof(buf)));
	if (!allow_float)
		return fail(ps, t, f->name, "expected an integer, got %s",
			    tok_text(t, buf, sizeof(buf)));
	if (num->neg)
		num->d = -num->d;
	advance(ps);
	return 0;
}

static int parse_integer(struct parser *ps, const ProtobufCFieldDescriptor *f,
			 union value *v)
{
	const struct token *t = peek(ps);
	struct token at = *t;
	struct number num;
	uint64_t max_pos, max_neg;
	bool sign = true;

	switch (f->type) {
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		max_pos = UINT32_MAX;
		sign = false;
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		max_pos = UINT64_MAX;
		sign = false;
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		max_pos = INT64_MAX;
		break;
	default:
		max_pos = INT32_MAX;
		break;
	}
	max_neg = sign ? max_pos + 1 : 0;
	if (parse_number(ps, f, false, &num) < 0)
		return -1;
	if (num.neg ? num.mag > max_neg : num.mag > max_pos)
		return fail(ps, &at, f->name,
			    "value out of range for %s: %s%" PRIu64,
			    type_name(f->type), num.neg ? "-" : "", num.mag);
	/* Two's complement negation in uint64_t, then narrowed. */
	uint64_t bits = num.neg ? (uint64_t)0 - num.mag : num.mag;
	if (value_size(f->type) == 4)
		v->u32 = (uint32_t)bits;
	else
		v->u64 = bits;
	return 0;
}

static int parse_floating(struct parser *ps, const ProtobufCFieldDescriptor *f,
			  union value *v)
{
	struct token at = *peek(ps);
	struct number num;

	if (parse_number(ps, f, true, &num) < 0)
		return -1;
	if (isinf(num.d) && !num.special)
		return fail(ps, &at, f->name, "value out of range for %s",
			    type_name(f->type));
	if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
		v->d = num.d;
		return 0;
	}
	/* Anything below FLT_MAX + half an ulp rounds to FLT_MAX. */
	if (isfinite(num.d) && fabs(num.d) >= 0x1.ffffffp127)
		return fail(ps, &at, f->name, "value out of range for float");
	v->f = (float)num.d;
	return 0;
}

static int parse_bool(struct parser *ps, const ProtobufCFieldDescriptor *f,
		      union value *v)
{
	const struct token *t = peek(ps);

	if (tok_is(t, "true") || tok_is(t, "True") || tok_is(t, "t")) {
		v->b = 1;
	} else if (tok_is(t, "false") || tok_is(t, "False") ||
		   tok_is(t, "f")) {
		v->b = 0;
	} else if (t->kind == T_NUMBER && t->len == 1 &&
		   (t->s[0] == '0' || t->s[0] == '1')) {
		v->b = t->s[0] == '1';
	} else {
		return unexpected(ps, t, f->name, "true or false");
	}
	advance(ps);
	return 0;
}

static int parse_enum(struct parser *ps, const ProtobufCFieldDescriptor *f,
		      union value *v)
{
	const ProtobufCEnumDescriptor *ed = f->descriptor;
	const struct token *t = peek(ps);
	char buf[64];

	if (t->kind == T_IDENT) {
		char name[128];
		const ProtobufCEnumValue *ev = NULL;
		if (t->len < sizeof(name)) {
			memcpy(name, t->s, t->len);
			name[t->len] = '\0';
			ev = protobuf_c_enum_descriptor_get_value_by_name(ed,
									  name);
		}
		if (!ev)
			return fail(ps, t, f->name,
				    "unknown enum value %s (enum %s)",
				    tok_text(t, buf, sizeof(buf)), ed->name);
		v->e = ev->value;
		advance(ps);
		return 0;
	}
	struct token at = *t;
	struct number num;
	if (parse_number(ps, f, false, &num) < 0)
		return -1;
	if (num.neg ? num.mag > (uint64_t)INT32_MAX + 1 : num.mag > INT32_MAX)
		return fail(ps, &at, f->name, "unknown enum value %s%" PRIu64
			    " (enum %s)", num.neg ? "-" : "", num.mag, ed->name);
	int value = (int)(num.neg ? -(int64_t)num.mag : (int64_t)num.mag);
	if (!protobuf_c_enum_descriptor_get_value(ed, value))
		return fail(ps, &at, f->name, "unknown enum value %d (enum %s)",
			    value, ed->name);
	v->e = value;
	return 0;
}

/* Growable byte buffer for decoded strings and printed text. */
struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_add(struct sbuf *b, const void *data, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *grown = realloc(b->p, cap);
		if (!grown) {
			b->oom = true;
			return;
		}
		b->p = grown;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_putc(struct sbuf *b, char c)
{
	sb_add(b, &c, 1);
}

static void sb_printf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void sb_utf8(struct sbuf *b, uint32_t cp)
{
	char u[4];
	if (cp < 0x80) {
		u[0] = (char)cp;
		sb_add(b, u, 1);
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		sb_add(b, u, 2);
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		sb_add(b, u, 3);
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		sb_add(b, u, 4);
	}
}

/* Decodes the escape at s[*i] (just after the backslash) into b. */
static int decode_escape(struct parser *ps, const struct token *t, size_t *i,
			 const char *field, struct sbuf *b)
{
	const char *s = t->s;
	size_t end = t->len - 1; /* closing quote */
	unsigned col = t->col + (unsigned)*i - 1;
	char c = s[*i];
	static const char simple_in[] = "abfnrtv\\'\"?";
	static const char simple_out[] = "\a\b\f\n\r\t\v\\'\"?";
	const char *k = strchr(simple_in, c);

	if (c != '\0' && k) {
		sb_putc(b, simple_out[k - simple_in]);
		(*i)++;
		return 0;
	}
	if (c >= '0' && c <= '7') {
		unsigned v = 0, n = 0;
		while (n < 3 && *i < end && s[*i] >= '0' && s[*i] <= '7') {
			v = v * 8 + (unsigned)(s[*i] - '0');
			(*i)++;
			n++;
		}
		if (v > 255)
			return fail_at_col(ps, t, col, field,
					   "octal escape out of range");
		sb_putc(b, (char)v);
		return 0;
	}
	if (c == 'x' || c == 'X') {
		unsigned v = 0, n = 0;
		(*i)++;
		while (n < 2 && *i < end && digit_value(s[*i]) < 16) {
			v = v * 16 + (unsigned)digit_value(s[*i]);
			(*i)++;
			n++;
		}
		if (n == 0)
			return fail_at_col(ps, t, col, field,
					   "\\x escape without hex digits");
		sb_putc(b, (char)v);
		return 0;
	}
	if (c == 'u' || c == 'U') {
		unsigned want = c == 'u' ? 4 : 8, n = 0;
		uint32_t cp = 0;
		(*i)++;
		while (n < want && *i < end && digit_value(s[*i]) < 16) {
			cp = cp * 16 + (uint32_t)digit_value(s[*i]);
			(*i)++;
			n++;
		}
		if (n != want || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
			return fail_at_col(ps, t, col, field,
					   "invalid \\%c escape", c);
		sb_utf8(b, cp);
		return 0;
	}
	if (isprint((unsigned char)c))
		return fail_at_col(ps, t, col, field, "invalid escape '\\%c'", c);
	return fail_at_col(ps, t, col, field, "invalid escape");
}

/* One or more adjacent quoted literals, decoded and joined. */
static int parse_string(struct parser *ps, const ProtobufCFieldDescriptor *f,
			union value *v)
{
	struct sbuf b = {0};
	const struct token *t = peek(ps);

	if (t->kind != T_STRING)
		return unexpected(ps, t, f->name, "a string");
	sb_add(&b, "", 0);
	while (t->kind == T_STRING) {
		size_t i = 1;
		while (i < t->len - 1) {
			if (t->s[i] != '\\') {
				sb_putc(&b, t->s[i++]);
				continue;
			}
			i++;
			if (decode_escape(ps, t, &i, f->name, &b) < 0) {
				free(b.p);
				return -1;
			}
		}
		advance(ps);
		t = peek(ps);
	}
	if (b.oom) {
		free(b.p);
		return vp_errorf(ps->err, "%s: out of memory", ps->name);
	}
	if (f->type == PROTOBUF_C_TYPE_BYTES) {
		v->bin.data = (uint8_t *)b.p;
		v->bin.len = b.len;
		return 0;
	}
	if (strlen(b.p) != b.len) {
		free(b.p);
		struct token at = ps->tok;
		return fail(ps, &at, f->name,
			    "string contains a NUL byte (before this token)");
	}
	v->str = b.p;
	return 0;
}

static int parse_scalar(struct parser *ps, const ProtobufCFieldDescriptor *f,
			union value *v)
{
	memset(v, 0, sizeof(*v));
	switch (f->type) {
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_DOUBLE:
		return parse_floating(ps, f, v);
	case PROTOBUF_C_TYPE_BOOL:
		return parse_bool(ps, f, v);
	case PROTOBUF_C_TYPE_ENUM:
		return parse_enum(ps, f, v);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
		return parse_string(ps, f, v);
	case PROTOBUF_C_TYPE_MESSAGE:
		return -1; /* not reached: messages go through parse_message */
	default:
		return parse_integer(ps, f, v);
	}
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                 */
/* ------------------------------------------------------------------------ */

static int parse_body(struct parser *ps, const ProtobufCMessageDescriptor *desc,
		      ProtobufCMessage *msg, char closer);

/* `{ ... }` or `< ... >`: a new submessage appended/stored into f of msg. */
static int parse_message(struct parser *ps, const ProtobufCFieldDescriptor *f,
			 ProtobufCMessage *msg)
{
	const ProtobufCMessageDescriptor *sd = f->descriptor;
	const struct token *t = peek(ps);
	char closer;

	if (is_punct(t, '{'))
		closer = '}';
	else if (is_punct(t, '<'))
		closer = '>';
	else
		return unexpected(ps, t, f->name, "'{'");
	if (ps->depth >= MAX_DEPTH)
		return fail(ps, t, f->name, "nesting deeper than %d levels",
			    MAX_DEPTH);
	advance(ps);

	union value v;
	memset(&v, 0, sizeof(v));
	v.msg = malloc(sd->sizeof_message);
	if (!v.msg)
		return vp_errorf(ps->err, "%s: out of memory", ps->name);
	protobuf_c_message_init(sd, v.msg);
	ProtobufCMessage *sub = v.msg;
	if (store(msg, f, &v) < 0)
		return vp_errorf(ps->err, "%s: out of memory", ps->name);

	ps->path[ps->depth++] = f->name;
	int r = parse_body(ps, sd, sub, closer);
	ps->depth--;
	return r;
}

/* `[v, v, ...]` after `field:` (or `field` for messages). */
static int parse_list(struct parser *ps, const ProtobufCFieldDescriptor *f,
		      ProtobufCMessage *msg)
{
	const struct token *t;

	advance(ps); /* '[' */
	t = peek(ps);
	if (is_punct(t, ']')) {
		advance(ps);
		return 0;
	}
	for (;;) {
		if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			if (parse_message(ps, f, msg) < 0)
				return -1;
		} else {
			union value v;
			if (parse_scalar(ps, f, &v) < 0)
				return -1;
			if (store(msg, f, &v) < 0)
				return vp_errorf(ps->err, "%s: out of memory",
						 ps->name);
		}
		t = peek(ps);
		if (is_punct(t, ']')) {
			advance(ps);
			return 0;
		}
		if (!is_punct(t, ','))
			return unexpected(ps, t, f->name, "',' or ']'");
		advance(ps);
	}
}

/* Rejects a second value for a non-repeated field, or a second member of
 * a oneof.  seen has one bit per field index. */
static int check_once(struct parser *ps, const struct token *name,
		      const ProtobufCMessageDescriptor *desc,
		      const ProtobufCMessage *msg, unsigned idx, uint8_t *seen)
{
	const ProtobufCFieldDescriptor *f = &desc->fields[idx];

	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return 0;
	if (seen[idx / 8] & (1u << (idx % 8)))
		return fail(ps, name, f->name, "given twice");
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t cur = *(const uint32_t *)cmember(msg,
							  f->quantifier_offset);
		if (cur != 0 && cur != f->id) {
			const ProtobufCFieldDescriptor *o =
				protobuf_c_message_descriptor_get_field(desc,
									cur);
			return fail(ps, name, f->name,
				    "oneof already set by field '%s'",
				    o ? o->name : "?");
		}
	}
	seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
	return 0;
}

static const ProtobufCFieldDescriptor *
find_field(const ProtobufCMessageDescriptor *desc, const struct token *t,
	   unsigned *idx)
{
	char name[128];
	if (t->len >= sizeof(name))
		return NULL;
	memcpy(name, t->s, t->len);
	name[t->len] = '\0';
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(desc, name);
	if (f)
		*idx = (unsigned)(f - desc->fields);
	return f;
}

/* One `name: value`, `name { ... }` or `name: [ ... ]`. */
static int parse_field(struct parser *ps, const ProtobufCMessageDescriptor *desc,
		       ProtobufCMessage *msg, uint8_t *seen)
{
	struct token name = *peek(ps);
	unsigned idx = 0;
	const ProtobufCFieldDescriptor *f = find_field(desc, &name, &idx);

	if (!f)
		return fail_unknown(ps, &name, desc);
	if (check_once(ps, &name, desc, msg, idx, seen) < 0)
		return -1;
	advance(ps);

	const struct token *t = peek(ps);
	bool colon = is_punct(t, ':');
	if (colon) {
		advance(ps);
		t = peek(ps);
	}
	if (is_punct(t, '[')) {
		if (f->label != PROTOBUF_C_LABEL_REPEATED)
			return fail(ps, t, f->name,
				    "a list for a non-repeated field");
		if (!colon && f->type != PROTOBUF_C_TYPE_MESSAGE)
			return unexpected(ps, t, f->name, "':'");
		return parse_list(ps, f, msg);
	}
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return parse_message(ps, f, msg);
	if (!colon)
		return unexpected(ps, t, f->name, "':'");

	union value v;
	if (parse_scalar(ps, f, &v) < 0)
		return -1;
	if (store(msg, f, &v) < 0)
		return vp_errorf(ps->err, "%s: out of memory", ps->name);
	return 0;
}

/* Fields up to closer ('}' or '>'), or to the end of input (closer 0). */
static int parse_body(struct parser *ps, const ProtobufCMessageDescriptor *desc,
		      ProtobufCMessage *msg, char closer)
{
	uint8_t *seen = calloc(desc->n_fields / 8 + 1, 1);
	int r = -1;

	if (!seen)
		return vp_errorf(ps->err, "%s: out of memory", ps->name);
	for (;;) {
		const struct token *t = peek(ps);
		if (closer && is_punct(t, closer)) {
			advance(ps);
			r = 0;
			break;
		}
		if (!closer && t->kind == T_EOF) {
			r = 0;
			break;
		}
		if (t->kind == T_EOF) {
			fail(ps, t, NULL, "unexpected end of input (missing '%c')",
			     closer);
			break;
		}
		if (t->kind != T_IDENT) {
			unexpected(ps, t, NULL, "a field name");
			break;
		}
		if (parse_field(ps, desc, msg, seen) < 0)
			break;
		t = peek(ps);
		if (is_punct(t, ',') || is_punct(t, ';'))
			advance(ps);
	}
	free(seen);
	return r;
}

int vp_textproto_parse(const ProtobufCMessageDescriptor *desc,
		       const char *text, size_t len, const char *name,
		       ProtobufCMessage **out, struct vp_error *err)
{
	struct parser ps = {
		.p = text,
		.end = text + len,
		.name = name ? name : "<config>",
		.line = 1,
		.line_start = text,
		.err = err,
	};
	ProtobufCMessage *msg = malloc(desc->sizeof_message);

	*out = NULL;
	if (!msg)
		return vp_errorf(err, "%s: out of memory", ps.name);
	protobuf_c_message_init(desc, msg);
	if (parse_body(&ps, desc, msg, 0) < 0) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return -1;
	}
	*out = msg;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Printer                                                                  */
/* ------------------------------------------------------------------------ */

static void print_indent(struct sbuf *b, int indent)
{
	for (int i = 0; i < indent; i++)
		sb_add(b, "  ", 2);
}

static void print_quoted(struct sbuf *b, const uint8_t *p, size_t len)
{
	sb_putc(b, '"');
	for (size_t i = 0; i < len; i++) {
		uint8_t c = p[i];
		switch (c) {
		case '"':  sb_add(b, "\\\"", 2); break;
		case '\\': sb_add(b, "\\\\", 2); break;
		case '\n': sb_add(b, "\\n", 2); break;
		case '\r': sb_add(b, "\\r", 2); break;
		case '\t': sb_add(b, "\\t", 2); break;
		default:
			if (c >= 0x20 && c < 0x7f)
				sb_putc(b, (char)c);
			else
				sb_printf(b, "\\%03o", c);
		}
	}
	sb_putc(b, '"');
}

static void print_double(struct sbuf *b, double d, int digits)
{
	if (isnan(d))
		sb_add(b, signbit(d) ? "-nan" : "nan", signbit(d) ? 4 : 3);
	else if (isinf(d))
		sb_add(b, d < 0 ? "-inf" : "inf", d < 0 ? 4 : 3);
	else
		sb_printf(b, "%.*g", digits, d);
}

static void print_value(struct sbuf *b, const ProtobufCFieldDescriptor *f,
			const void *p, int indent);

static void print_message(struct sbuf *b, const ProtobufCMessage *m,
			  int indent)
{
	const ProtobufCMessageDescriptor *desc = m->descriptor;

	for (unsigned i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[i];
		const void *p = cmember(m, f->offset);
		size_t size = value_size(f->type);

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)cmember(m, f->quantifier_offset);
			const char *arr = *(const void *const *)p;
			for (size_t k = 0; k < n; k++)
				print_value(b, f, arr + k * size, indent);
			continue;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(const uint32_t *)cmember(m, f->quantifier_offset) !=
			    f->id)
				continue;
		} else if (f->type == PROTOBUF_C_TYPE_STRING ||
			   f->type == PROTOBUF_C_TYPE_MESSAGE) {
			const void *ptr = *(const void *const *)p;
			/* protobuf-c packs neither NULL nor the default. */
			if (!ptr || ptr == f->default_value)
				continue;
			if (f->label == PROTOBUF_C_LABEL_NONE &&
			    f->type == PROTOBUF_C_TYPE_STRING &&
			    !*(const char *)ptr)
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
			if (f->quantifier_offset &&
			    !*(const protobuf_c_boolean *)cmember(
				    m, f->quantifier_offset))
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_NONE) {
			/* proto3 without presence: zero is not printed. */
			static const uint8_t zero[sizeof(ProtobufCBinaryData)];
			if (f->type == PROTOBUF_C_TYPE_BYTES ?
				    ((const ProtobufCBinaryData *)p)->len == 0 :
				    memcmp(p, zero, size) == 0)
				continue;
		}
		print_value(b, f, p, indent);
	}
}

static void print_value(struct sbuf *b, const ProtobufCFieldDescriptor *f,
			const void *p, int indent)
{
	print_indent(b, indent);
	sb_add(b, f->name, strlen(f->name));
	switch (f->type) {
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
		sb_add(b, " {\n", 3);
		if (sub)
			print_message(b, sub, indent + 1);
		print_indent(b, indent);
		sb_add(b, "}\n", 2);
		return;
	}
	default:
		break;
	}
	sb_add(b, ": ", 2);
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		sb_printf(b, "%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		sb_printf(b, "%" PRIu32, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		sb_printf(b, "%" PRId64, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		sb_printf(b, "%" PRIu64, *(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		print_double(b, *(const float *)p, 9);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		print_double(b, *(const double *)p, 17);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		sb_printf(b, "%s", *(const protobuf_c_boolean *)p ? "true" : "false");
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		if (ev)
			sb_add(b, ev->name, strlen(ev->name));
		else
			sb_printf(b, "%d", v);
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *str = *(const char *const *)p;
		print_quoted(b, (const uint8_t *)(str ? str : ""),
			     str ? strlen(str) : 0);
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *bin = p;
		print_quoted(b, bin->data, bin->data ? bin->len : 0);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		break;
	}
	sb_putc(b, '\n');
}

char *vp_textproto_print(const ProtobufCMessage *msg)
{
	struct sbuf b = {0};

	sb_add(&b, "", 0);
	print_message(&b, msg, 0);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}
