/*
 * textproto.h - protobuf text format, parsed and printed through the
 * protobuf-c descriptors.
 *
 * The parser accepts what `perfetto --txt` accepts for a TraceConfig:
 * `field: value` and `field { ... }` (also `field: { ... }` and `< ... >`),
 * repeated fields by repetition or `[a, b]` lists, enum values by name or
 * number, strings in "..." or '...' with C escapes and adjacent literals
 * concatenated, integers in decimal, hex and octal, floats, true/false,
 * `#` comments, optional `,` or `;` between fields.  Unknown fields, values
 * out of range for the field's type, unknown enum names and a second value
 * for a non-repeated field are errors that name the file, line, column and
 * field.  Messages nested deeper than VP_TEXTPROTO_MAX_DEPTH levels are
 * rejected (the input is untrusted; the parser recurses once per level).
 * Extensions, Any expansion and groups are not supported.  A string field
 * may not contain a NUL byte (use a bytes field).
 *
 * Works for any message type; vperfetto uses it for TraceConfig.
 */
#ifndef VP_TEXTPROTO_H
#define VP_TEXTPROTO_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "vp_error.h"

/* Deepest accepted nesting of messages below the root message. */
#define VP_TEXTPROTO_MAX_DEPTH 100

/* Parses text (len bytes, need not be NUL-terminated) as a message of type
 * desc.  `name` is the file name used in error messages.  On success *out
 * is a new message (free with protobuf_c_message_free_unpacked(*out,
 * NULL)); on error *out is NULL and err says where: "NAME:LINE:COL: field
 * 'x': ...". */
int vp_textproto_parse(const ProtobufCMessageDescriptor *desc,
		       const char *text, size_t len, const char *name,
		       ProtobufCMessage **out, struct vp_error *err);

/* Prints msg in text format (two-space indent), for --query and tests.
 * Returns a malloc'd NUL-terminated string, or NULL when out of memory.
 * Fields are printed in field-number order; unknown fields are left out.
 * vp_textproto_parse() of the result gives back an equal message. */
char *vp_textproto_print(const ProtobufCMessage *msg);

/* Prints the protobuf bytes data[0..len) as a message of type desc, in
 * wire order, as Perfetto's trace processor prints them (pbtxt_wire.c
 * says how); fields desc does not know print by number.  Returns a
 * malloc'd NUL-terminated string; aborts when out of memory. */
char *vp_textproto_print_wire(const ProtobufCMessageDescriptor *desc,
			      const void *data, size_t len);

#endif
