/*
 * pbtxt_wire.c - protobuf bytes printed as text, the way Perfetto's trace
 * processor prints them (the metadata row trace_config_pbtxt).
 *
 * vp_textproto_print() prints a decoded protobuf-c message; this prints
 * raw bytes, which may hold fields our schema does not know, walking them
 * in wire order with a protobuf-c descriptor for names and types.  The
 * rules are those of Perfetto's printer, so that the text is the same:
 *   - fields in the order they are on the wire, one per line, nested
 *     messages as `name {` ... `}` indented by two spaces;
 *   - integers by their declared type, enums by value name, doubles and
 *     floats with six decimals (C's %f);
 *   - a field the descriptor does not know (or whose wire type does not
 *     fit its declared type) prints by number: varints as signed 64-bit,
 *     fixed32/64 as zero-padded hex, length-delimited as a quoted string;
 *   - a length-delimited field of a scalar type is a packed array: one
 *     line per value;
 *   - strings are quoted with Java's TextFormat escapes (\a \b \f \n \r
 *     \t \v \\ \' \") and octal for any byte outside 0x20..0x7e;
 *   - bytes that do not parse end the message with an "# Extra bytes"
 *     comment.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pb_wire.h"
#include "textproto.h"
#include "vp_alloc.h"

/* Nesting deeper than this prints the rest of the message as bytes: the
 * input is untrusted and the printer recurses once per level. */
#define PBTXT_MAX_DEPTH 64

struct pbtxt {
	char *p;
	size_t len, cap;
};

static void put(struct pbtxt *t, const char *s, size_t n)
{
	VP_XGROW(t->p, t->cap, t->len + n + 1);
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = 0;
}

static void puts_(struct pbtxt *t, const char *s)
{
	put(t, s, strlen(s));
}

static void newline(struct pbtxt *t, int depth)
{
	put(t, "\n", 1);
	for (int i = 0; i < depth; i++)
		put(t, "  ", 2);
}

static void quoted(struct pbtxt *t, const uint8_t *s, size_t n)
{
	put(t, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		const char *esc = NULL;
		switch (s[i]) {
		case '\a': esc = "\\a"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		case '\v': esc = "\\v"; break;
		case '\\': esc = "\\\\"; break;
		case '\'': esc = "\\'"; break;
		case '"': esc = "\\\""; break;
		}
		if (esc) {
			puts_(t, esc);
		} else if (s[i] >= 0x20 && s[i] <= 0x7e) {
			put(t, (const char *)&s[i], 1);
		} else {
			char oct[5];
			snprintf(oct, sizeof(oct), "\\%03o", s[i]);
			puts_(t, oct);
		}
	}
	put(t, "\"", 1);
}

/* "name: " or "number: ". */
static void key(struct pbtxt *t, const char *name, uint32_t num)
{
	char buf[16];
	if (name) {
		puts_(t, name);
	} else {
		snprintf(buf, sizeof(buf), "%" PRIu32, num);
		puts_(t, buf);
	}
	puts_(t, ": ");
}

static void unknown_varint(struct pbtxt *t, uint32_t num, int64_t v)
{
	char buf[24];
	key(t, NULL, num);
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	puts_(t, buf);
}

static void enum_value(struct pbtxt *t, const ProtobufCFieldDescriptor *fd,
		       uint32_t num, int32_t v)
{
	const ProtobufCEnumValue *ev =
		fd->descriptor ? protobuf_c_enum_descriptor_get_value(
					 fd->descriptor, v)
			       : NULL;
	if (!ev) {
		unknown_varint(t, num, v);
		return;
	}
	key(t, fd->name, num);
	puts_(t, ev->name);
}

static int32_t unzigzag32(uint64_t v)
{
	return (int32_t)((uint32_t)v >> 1 ^ -(uint32_t)(v & 1));
}

static int64_t unzigzag64(uint64_t v)
{
	return (int64_t)(v >> 1 ^ -(v & 1));
}

/* A varint of a known field, or of an unknown one. */
static void varint(struct pbtxt *t, const ProtobufCFieldDescriptor *fd,
		   uint32_t num, uint64_t v)
{
	char buf[24];
	switch (fd ? fd->type : (ProtobufCType)-1) {
	case PROTOBUF_C_TYPE_INT32:
		snprintf(buf, sizeof(buf), "%" PRId32, (int32_t)v);
		break;
	case PROTOBUF_C_TYPE_SINT32:
		snprintf(buf, sizeof(buf), "%" PRId32, unzigzag32(v));
		break;
	case PROTOBUF_C_TYPE_UINT32:
		snprintf(buf, sizeof(buf), "%" PRIu32, (uint32_t)v);
		break;
	case PROTOBUF_C_TYPE_INT64:
		snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)v);
		break;
	case PROTOBUF_C_TYPE_SINT64:
		snprintf(buf, sizeof(buf), "%" PRId64, unzigzag64(v));
		break;
	case PROTOBUF_C_TYPE_UINT64:
		snprintf(buf, sizeof(buf), "%" PRIu64, v);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		snprintf(buf, sizeof(buf), "%s", v ? "true" : "false");
		break;
	case PROTOBUF_C_TYPE_ENUM:
		enum_value(t, fd, num, (int32_t)v);
		return;
	default:
		unknown_varint(t, num, (int64_t)v);
		return;
	}
	key(t, fd->name, num);
	puts_(t, buf);
}

static void fixed32(struct pbtxt *t, const ProtobufCFieldDescriptor *fd,
		    uint32_t num, uint32_t v)
{
	char buf[48];
	float f;
	switch (fd ? fd->type : (ProtobufCType)-1) {
	case PROTOBUF_C_TYPE_SFIXED32:
		snprintf(buf, sizeof(buf), "%" PRId32, (int32_t)v);
		break;
	case PROTOBUF_C_TYPE_FIXED32:
		snprintf(buf, sizeof(buf), "%" PRIu32, v);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		memcpy(&f, &v, sizeof(f));
		snprintf(buf, sizeof(buf), "%f", (double)f);
		break;
	default:
		key(t, NULL, num);
		snprintf(buf, sizeof(buf), "0x%08" PRIx32, v);
		puts_(t, buf);
		return;
	}
	key(t, fd->name, num);
	puts_(t, buf);
}

static void fixed64(struct pbtxt *t, const ProtobufCFieldDescriptor *fd,
		    uint32_t num, uint64_t v)
{
	char buf[400];
	double d;
	switch (fd ? fd->type : (ProtobufCType)-1) {
	case PROTOBUF_C_TYPE_SFIXED64:
		snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)v);
		break;
	case PROTOBUF_C_TYPE_FIXED64:
		snprintf(buf, sizeof(buf), "%" PRIu64, v);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		memcpy(&d, &v, sizeof(d));
		snprintf(buf, sizeof(buf), "%f", d);
		break;
	default:
		key(t, NULL, num);
		snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
		puts_(t, buf);
		return;
	}
	key(t, fd->name, num);
	puts_(t, buf);
}

/* The wire type a packed array of this scalar type holds, or -1 when the
 * type cannot be packed the way Perfetto's printer reads it. */
static int packed_wire_type(ProtobufCType type)
{
	switch (type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_ENUM:
		return PB_WT_VARINT;
	case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return PB_WT_FIXED32;
	case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return PB_WT_FIXED64;
	default:
		return -1;
	}
}

/* One value of a packed array read from *p; false when it does not fit. */
static bool packed_next(const uint8_t **p, const uint8_t *end, int wt,
			uint64_t *v)
{
	if (wt == PB_WT_VARINT)
		return pb_read_varint(p, end, v);
	size_t n = wt == PB_WT_FIXED32 ? 4 : 8;
	if ((size_t)(end - *p) < n)
		return false;
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v |= (uint64_t)(*p)[i] << (8 * i);
	*p += n;
	return true;
}

static void packed(struct pbtxt *t, const ProtobufCFieldDescriptor *fd,
		   const struct pb_field *f, int wt, int depth)
{
	const uint8_t *p = f->data, *end = f->data + f->len;
	bool first = true;
	uint64_t v;
	while (p < end) {
		if (!packed_next(&p, end, wt, &v)) {
			if (!first)
				newline(t, depth);
			puts_(t, "# Packed decoding failure for field ");
			puts_(t, fd->name);
			puts_(t, "\n");
			return;
		}
		if (!first)
			newline(t, depth);
		first = false;
		if (wt == PB_WT_VARINT)
			varint(t, fd, f->num, v);
		else if (wt == PB_WT_FIXED32)
			fixed32(t, fd, f->num, (uint32_t)v);
		else
			fixed64(t, fd, f->num, v);
	}
}

static void message(struct pbtxt *t, const ProtobufCMessageDescriptor *desc,
		    const uint8_t *data, size_t len, int depth);

static void length_delimited(struct pbtxt *t,
			     const ProtobufCFieldDescriptor *fd,
			     const struct pb_field *f, int depth)
{
	ProtobufCType type = fd ? fd->type : (ProtobufCType)-1;
	int wt;
	if (type == PROTOBUF_C_TYPE_STRING || type == PROTOBUF_C_TYPE_BYTES) {
		key(t, fd->name, f->num);
		quoted(t, f->data, f->len);
		return;
	}
	if (type == PROTOBUF_C_TYPE_MESSAGE && depth < PBTXT_MAX_DEPTH) {
		puts_(t, fd->name);
		puts_(t, " {");
		message(t, fd->descriptor, f->data, f->len, depth + 1);
		newline(t, depth);
		puts_(t, "}");
		return;
	}
	if (fd && (wt = packed_wire_type(type)) >= 0) {
		packed(t, fd, f, wt, depth);
		return;
	}
	if (type == PROTOBUF_C_TYPE_BOOL || type == PROTOBUF_C_TYPE_SINT32 ||
	    type == PROTOBUF_C_TYPE_SINT64) {
		char buf[64];
		snprintf(buf, sizeof(buf),
			 "# Packed type %d not supported. Printing raw string.",
			 type == PROTOBUF_C_TYPE_BOOL     ? 8
			 : type == PROTOBUF_C_TYPE_SINT32 ? 17
							  : 18);
		puts_(t, buf);
		newline(t, depth);
	}
	key(t, NULL, f->num);
	quoted(t, f->data, f->len);
}

/* The fields of one message, each on a line of its own at this depth. */
static void message(struct pbtxt *t, const ProtobufCMessageDescriptor *desc,
		    const uint8_t *data, size_t len, int depth)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		const ProtobufCFieldDescriptor *fd =
			desc ? protobuf_c_message_descriptor_get_field(desc,
								       f.num)
			     : NULL;
		if (t->len)
			newline(t, depth);
		switch (f.wt) {
		case PB_WT_VARINT:
			varint(t, fd, f.num, f.val);
			break;
		case PB_WT_FIXED32:
			fixed32(t, fd, f.num, (uint32_t)f.val);
			break;
		case PB_WT_FIXED64:
			fixed64(t, fd, f.num, f.val);
			break;
		default:
			length_delimited(t, fd, &f, depth);
			break;
		}
	}
	if (r.err != PB_OK && r.err_off < len) {
		/* The reader stops at the bad field: the rest is printed as
		 * it is. */
		if (t->len)
			newline(t, depth);
		puts_(t, "# Extra bytes: ");
		quoted(t, data + r.err_off, len - r.err_off);
		puts_(t, "\n");
	}
}

char *vp_textproto_print_wire(const ProtobufCMessageDescriptor *desc,
			      const void *data, size_t len)
{
	struct pbtxt t = {0};
	VP_XGROW(t.p, t.cap, 1);
	t.p[0] = 0;
	message(&t, desc, data, len, 0);
	return t.p;
}
