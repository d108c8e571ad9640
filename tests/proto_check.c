/*
 * proto_check.c - "no unknown fields" checker for Perfetto trace files.
 *
 * Usage: proto_check FILE.pb [FILE.pb...]
 *
 * Reads each file as a serialized perfetto.protos.Trace, i.e. a sequence of
 * top-level fields "0x0A <varint length> <TracePacket>", streaming through a
 * bounded buffer (one packet of at most 64 MiB is held at a time).  Every
 * packet is unpacked with the protobuf-c code generated from protos/, and
 * the resulting message tree is walked generically through the
 * ProtobufCMessageDescriptors.  Every message that kept unknown fields is
 * reported as
 *
 *   FILE: packet N (byte offset O): unknown field NUM in perfetto.protos.X.Y (at PATH)
 *
 * where N counts packets from 0, O is the file offset of the packet's tag byte
 * and PATH is the field path from the packet (e.g. "track_event.
 * debug_annotations[1]").  A top-level field other than packet = 1 is
 * reported the same way, as an unknown field of perfetto.protos.Trace.  An
 * enum field holding a value its proto2 enum does not declare (which protoc
 * would print as an unknown field, but protobuf-c keeps) is reported as
 * "unknown value V of enum E in field NUM (name) of MESSAGE".
 *
 * Exit status: 0 if no file has unknown fields (prints "FILE: N packets, no
 * unknown fields"), 1 if some unknown field was found, 2 on a usage error, an
 * unreadable file, a malformed top level or a packet that fails to unpack
 * (the message names the file and the byte offset).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "perfetto/trace/trace.pb-c.h"

#define MAX_PACKET_SIZE (64u * 1024u * 1024u)
#define READ_CHUNK (1u * 1024u * 1024u)
#define MAX_REPORTS_PER_FILE 200
#define MAX_PATH_LEN 512

enum { EXIT_CLEAN = 0, EXIT_UNKNOWN = 1, EXIT_BAD = 2 };

/* ------------------------------------------------------------------------ */
/* Streaming reader: buf[lo, hi) holds the bytes at file offsets            */
/* [base + lo, base + hi).                                                   */

struct reader {
	FILE *f;
	const char *name;
	uint8_t *buf;
	size_t cap;
	size_t lo;
	size_t hi;
	uint64_t base;
	bool eof;
	bool io_error;
};

static uint64_t rd_offset(const struct reader *rd)
{
	return rd->base + rd->lo;
}

static size_t rd_avail(const struct reader *rd)
{
	return rd->hi - rd->lo;
}

/*
 * Make at least `want` bytes available at buf + lo, unless the file ends
 * first.  Returns false only on allocation or read errors.
 */
static bool rd_fill(struct reader *rd, size_t want)
{
	while (rd_avail(rd) < want && !rd->eof) {
		if (rd->lo > 0) {
			/* Slide the unread bytes to the front. */
			size_t n = rd_avail(rd);
			memmove(rd->buf, rd->buf + rd->lo, n);
			rd->base += rd->lo;
			rd->lo = 0;
			rd->hi = n;
		}
		size_t need = want > READ_CHUNK ? want : READ_CHUNK;
		if (rd->cap < need) {
			uint8_t *nb = realloc(rd->buf, need);
			if (!nb) {
				fprintf(stderr, "%s: out of memory (%zu bytes)\n",
				        rd->name, need);
				return false;
			}
			rd->buf = nb;
			rd->cap = need;
		}
		size_t got = fread(rd->buf + rd->hi, 1, rd->cap - rd->hi, rd->f);
		rd->hi += got;
		if (got == 0) {
			if (ferror(rd->f)) {
				fprintf(stderr, "%s: read error at byte offset %" PRIu64
				        ": %s\n", rd->name, rd->base + rd->hi,
				        strerror(errno));
				rd->io_error = true;
				return false;
			}
			rd->eof = true;
		}
	}
	return true;
}

/*
 * Decode a varint from p[0, n).  Returns its length in bytes, 0 if
 * the bytes end before the varint does, or -1 if it is longer than 10 bytes.
 */
static int decode_varint(const uint8_t *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n && i < 10; i++) {
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*out = v;
			return (int)i + 1;
		}
	}
	return n >= 10 ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                 */

struct ctx {
	const char *file;
	uint64_t packet_index;
	uint64_t packet_offset;
	uint64_t unknown_total;
	uint64_t packets_with_unknown;
	bool current_packet_has_unknown;
	char path[MAX_PATH_LEN];
};

static bool count_finding(struct ctx *c)
{
	c->unknown_total++;
	if (!c->current_packet_has_unknown) {
		c->current_packet_has_unknown = true;
		c->packets_with_unknown++;
	}
	return c->unknown_total <= MAX_REPORTS_PER_FILE;
}

/* TracePacket fields named by --allow: expected unknown fields (a test
 * trace that carries one on purpose to show it survives a merge). */
static uint32_t allowed[16];
static size_t n_allowed;

static bool is_allowed(uint32_t tag, const char *path)
{
	for (size_t i = 0; !path[0] && i < n_allowed; i++)
		if (allowed[i] == tag)
			return true;
	return false;
}

static void report_unknown(struct ctx *c, uint32_t tag, const char *msg_name,
                           const char *path)
{
	if (is_allowed(tag, path))
		return;
	if (count_finding(c)) {
		printf("%s: packet %" PRIu64 " (byte offset %" PRIu64
		       "): unknown field %" PRIu32 " in %s (at %s)\n",
		       c->file, c->packet_index, c->packet_offset, tag, msg_name,
		       path[0] ? path : "<packet>");
	}
}

/*
 * protoc treats a proto2 enum value it does not know as an unknown field;
 * protobuf-c keeps it in the enum field.  Report it the same way so both
 * checkers agree.
 */
static void report_enum_value(struct ctx *c, const ProtobufCFieldDescriptor *fd,
                              const char *msg_name, int32_t value)
{
	if (count_finding(c)) {
		const ProtobufCEnumDescriptor *ed = fd->descriptor;
		printf("%s: packet %" PRIu64 " (byte offset %" PRIu64
		       "): unknown value %" PRId32 " of enum %s in field %" PRIu32
		       " (%s) of %s (at %s)\n",
		       c->file, c->packet_index, c->packet_offset, value, ed->name,
		       fd->id, fd->name, msg_name,
		       c->path[0] ? c->path : "<packet>");
	}
}

static void check_enum_field(struct ctx *c, const ProtobufCMessage *m,
                             const ProtobufCFieldDescriptor *fd)
{
	const char *base = (const char *)m;
	const ProtobufCEnumDescriptor *ed = fd->descriptor;
	int32_t v;

	if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t count;
		const int32_t *vals;
		memcpy(&count, base + fd->quantifier_offset, sizeof(count));
		memcpy(&vals, base + fd->offset, sizeof(vals));
		for (size_t k = 0; k < count; k++) {
			memcpy(&v, &vals[k], sizeof(v));
			if (!protobuf_c_enum_descriptor_get_value(ed, v))
				report_enum_value(c, fd, m->descriptor->name, v);
		}
		return;
	}
	if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t which;
		memcpy(&which, base + fd->quantifier_offset, sizeof(which));
		if (which != fd->id)
			return;
	} else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL &&
	           fd->quantifier_offset != 0) {
		protobuf_c_boolean has;
		memcpy(&has, base + fd->quantifier_offset, sizeof(has));
		if (!has)
			return;
	} else if (fd->label != PROTOBUF_C_LABEL_REQUIRED) {
		return; /* no presence information (proto3): nothing to check */
	}
	memcpy(&v, base + fd->offset, sizeof(v));
	if (!protobuf_c_enum_descriptor_get_value(ed, v))
		report_enum_value(c, fd, m->descriptor->name, v);
}

/* Append ".name" or ".name[i]" to c->path; returns the previous length. */
static size_t path_push(struct ctx *c, const char *name, long index)
{
	size_t len = strlen(c->path);
	size_t room = sizeof(c->path) - len;
	int n;
	if (index >= 0)
		n = snprintf(c->path + len, room, "%s%s[%ld]", len ? "." : "",
		             name, index);
	else
		n = snprintf(c->path + len, room, "%s%s", len ? "." : "", name);
	if (n < 0 || (size_t)n >= room) {
		/* Keep the path readable when it is very deep. */
		c->path[sizeof(c->path) - 4] = '\0';
		strcat(c->path, "...");
	}
	return len;
}

static void path_pop(struct ctx *c, size_t len)
{
	c->path[len] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Generic walk over a protobuf-c message tree                               */

static void walk(struct ctx *c, const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < m->n_unknown_fields; i++)
		report_unknown(c, m->unknown_fields[i].tag, d->name, c->path);

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		if (fd->type == PROTOBUF_C_TYPE_ENUM) {
			check_enum_field(c, m, fd);
			continue;
		}
		if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		const char *base = (const char *)m;

		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t count;
			ProtobufCMessage *const *items;
			memcpy(&count, base + fd->quantifier_offset, sizeof(count));
			memcpy(&items, base + fd->offset, sizeof(items));
			for (size_t k = 0; k < count; k++) {
				if (!items[k])
					continue;
				size_t saved = path_push(c, fd->name, (long)k);
				walk(c, items[k]);
				path_pop(c, saved);
			}
			continue;
		}

		if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			/* The member storage is a union: only trust the pointer
			 * when the oneof case selects this field. */
			uint32_t which;
			memcpy(&which, base + fd->quantifier_offset, sizeof(which));
			if (which != fd->id)
				continue;
		}

		const ProtobufCMessage *sub;
		memcpy(&sub, base + fd->offset, sizeof(sub));
		if (!sub)
			continue;
		size_t saved = path_push(c, fd->name, -1);
		walk(c, sub);
		path_pop(c, saved);
	}
}

/* ------------------------------------------------------------------------ */
/* Top level                                                                 */

static int check_file(const char *name)
{
	struct reader rd = { .name = name };
	struct ctx c = { .file = name };
	uint64_t packets = 0;
	int status = EXIT_CLEAN;

	rd.f = fopen(name, "rb");
	if (!rd.f) {
		fprintf(stderr, "%s: cannot open: %s\n", name, strerror(errno));
		return EXIT_BAD;
	}

	for (;;) {
		if (!rd_fill(&rd, 10)) {
			status = EXIT_BAD;
			break;
		}
		if (rd_avail(&rd) == 0)
			break; /* clean end of file */

		uint64_t field_offset = rd_offset(&rd);
		uint64_t tag;
		int tl = decode_varint(rd.buf + rd.lo, rd_avail(&rd), &tag);
		if (tl <= 0) {
			fprintf(stderr, "%s: malformed top-level field tag at byte "
			        "offset %" PRIu64 "%s\n", name, field_offset,
			        tl == 0 ? " (file ends inside the tag)" : "");
			status = EXIT_BAD;
			break;
		}
		uint64_t field_no = tag >> 3;
		unsigned wire_type = (unsigned)(tag & 7);
		if (field_no == 0 || field_no > 0x1fffffff) {
			fprintf(stderr, "%s: invalid field number %" PRIu64
			        " at byte offset %" PRIu64 "\n", name, field_no,
			        field_offset);
			status = EXIT_BAD;
			break;
		}
		rd.lo += (size_t)tl;

		/* Size of the field's value, per wire type. */
		uint64_t value_len = 0;
		if (wire_type == 2) {
			if (!rd_fill(&rd, 10)) {
				status = EXIT_BAD;
				break;
			}
			int ll = decode_varint(rd.buf + rd.lo, rd_avail(&rd),
			                       &value_len);
			if (ll <= 0) {
				fprintf(stderr, "%s: malformed length of the field at "
				        "byte offset %" PRIu64 "\n", name,
				        field_offset);
				status = EXIT_BAD;
				break;
			}
			rd.lo += (size_t)ll;
		} else if (wire_type == 0) {
			if (!rd_fill(&rd, 10)) {
				status = EXIT_BAD;
				break;
			}
			uint64_t dummy;
			int vl = decode_varint(rd.buf + rd.lo, rd_avail(&rd), &dummy);
			if (vl <= 0) {
				fprintf(stderr, "%s: malformed varint in the field at "
				        "byte offset %" PRIu64 "\n", name,
				        field_offset);
				status = EXIT_BAD;
				break;
			}
			value_len = (uint64_t)vl;
		} else if (wire_type == 1) {
			value_len = 8;
		} else if (wire_type == 5) {
			value_len = 4;
		} else {
			fprintf(stderr, "%s: unsupported wire type %u at byte offset "
			        "%" PRIu64 " (not a Trace?)\n", name, wire_type,
			        field_offset);
			status = EXIT_BAD;
			break;
		}

		if (value_len > MAX_PACKET_SIZE) {
			fprintf(stderr, "%s: field at byte offset %" PRIu64 " is %"
			        PRIu64 " bytes, over the %u byte limit\n", name,
			        field_offset, value_len, MAX_PACKET_SIZE);
			status = EXIT_BAD;
			break;
		}
		if (!rd_fill(&rd, (size_t)value_len)) {
			status = EXIT_BAD;
			break;
		}
		if (rd_avail(&rd) < value_len) {
			fprintf(stderr, "%s: truncated: the field at byte offset %"
			        PRIu64 " needs %" PRIu64 " bytes, %zu left\n", name,
			        field_offset, value_len, rd_avail(&rd));
			status = EXIT_BAD;
			break;
		}

		if (field_no != 1 || wire_type != 2) {
			/* Not a packet: an unknown field of Trace itself. */
			c.packet_index = packets;
			c.packet_offset = field_offset;
			c.current_packet_has_unknown = false;
			c.path[0] = '\0';
			report_unknown(&c, (uint32_t)field_no, "perfetto.protos.Trace",
			               "<trace>");
			rd.lo += (size_t)value_len;
			continue;
		}

		Perfetto__Protos__TracePacket *pkt =
			perfetto__protos__trace_packet__unpack(
				NULL, (size_t)value_len, rd.buf + rd.lo);
		if (!pkt) {
			fprintf(stderr, "%s: packet %" PRIu64 " (byte offset %" PRIu64
			        ", %" PRIu64 " bytes) fails to unpack as "
			        "perfetto.protos.TracePacket\n", name, packets,
			        field_offset, value_len);
			status = EXIT_BAD;
			break;
		}
		c.packet_index = packets;
		c.packet_offset = field_offset;
		c.current_packet_has_unknown = false;
		c.path[0] = '\0';
		walk(&c, &pkt->base);
		perfetto__protos__trace_packet__free_unpacked(pkt, NULL);

		rd.lo += (size_t)value_len;
		packets++;
	}

	fclose(rd.f);
	free(rd.buf);

	if (status == EXIT_BAD)
		return EXIT_BAD;
	if (c.unknown_total > 0) {
		if (c.unknown_total > MAX_REPORTS_PER_FILE)
			printf("%s: ... %" PRIu64 " more not shown\n", name,
			       c.unknown_total - MAX_REPORTS_PER_FILE);
		printf("%s: %" PRIu64 " packets, %" PRIu64 " unknown fields/values in %"
		       PRIu64 " packets\n", name, packets, c.unknown_total,
		       c.packets_with_unknown);
		return EXIT_UNKNOWN;
	}
	printf("%s: %" PRIu64 " packets, no unknown fields\n", name, packets);
	return EXIT_CLEAN;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: %s [--allow FIELD]... FILE.pb [FILE.pb...]\n"
		        "Checks that every TracePacket decodes with vperfetto's "
		        "protos without unknown fields.\n", argv[0]);
		return EXIT_BAD;
	}
	int worst = EXIT_CLEAN, first = 1;
	while (first + 1 < argc && !strcmp(argv[first], "--allow")) {
		char *end;
		unsigned long v = strtoul(argv[first + 1], &end, 10);
		if (*end || !v || n_allowed == sizeof(allowed) / sizeof(allowed[0])) {
			fprintf(stderr, "%s: bad --allow '%s'\n", argv[0],
			        argv[first + 1]);
			return EXIT_BAD;
		}
		allowed[n_allowed++] = (uint32_t)v;
		first += 2;
	}
	if (first >= argc) {
		fprintf(stderr, "usage: %s [--allow FIELD]... FILE.pb...\n", argv[0]);
		return EXIT_BAD;
	}
	for (int i = first; i < argc; i++) {
		int s = check_file(argv[i]);
		if (s > worst)
			worst = s;
	}
	return worst;
}
