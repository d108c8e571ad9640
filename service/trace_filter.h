/*
 * trace_filter.h - TraceConfig.trace_filter (trace_filter.c): Perfetto's
 * filter bytecode loaded into a bounded table, and every TracePacket a
 * session reads out passed through it, as traced does.
 *
 * The bytecode (bytecode, or bytecode_v2 when set) is a list of varints:
 * each word is (field id << 3 | opcode), some followed by an argument word
 * (a range's length, a nested field's message index, a string field's
 * semantic type); an end-of-message word closes a message; the last word
 * is the checksum (the low 32 bits of 64-bit FNV-1a over the other words'
 * 4 bytes each, little-endian).  Message 0 is perfetto.protos.Trace; its
 * field 1 (packet) must be an allowed nested message, which is where
 * filtering starts.
 *
 * Filtering keeps the allowed fields of each message and drops the rest;
 * tags and varints are written canonically, and a nested message keeps
 * its length field's size (its new length in as many bytes, as traced
 * writes it).  A packet that does not parse is an error: it reads out
 * empty, as traced has it.
 */
#ifndef VP_SVC_TRACE_FILTER_H
#define VP_SVC_TRACE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"

/* Caps, so that a config cannot make the service allocate or recurse
 * without bound (traced has none of them; real filters are far below):
 * the bytecode's size, the messages it describes, and how deep a packet's
 * messages may nest while filtered (deeper: the packet is an error). */
#define TF_MAX_BYTECODE_BYTES (1u << 20)
#define TF_MAX_MESSAGES 8192u
#define TF_MAX_DEPTH 128u

enum vp_tf_load {
	TF_LOAD_OK,
	TF_LOAD_INVALID,     /* the bytecode does not parse or check */
	TF_LOAD_NO_ROOT,     /* Trace.packet is not an allowed message */
	TF_LOAD_TOO_LARGE,   /* over one of the caps above */
};

struct vp_trace_filter;

/* Loads bytecode (and the optional bytecode_overlay_v54, NULL if none).
 * On failure returns NULL and, in *why, what failed. */
struct vp_trace_filter *vp_trace_filter_new(const uint8_t *bytecode,
					    size_t len,
					    const uint8_t *overlay,
					    size_t overlay_len,
					    enum vp_tf_load *why);
void vp_trace_filter_free(struct vp_trace_filter *f);

/* The bytecode's verdict on a field of a message (for the tests). */
struct vp_tf_query {
	bool allowed;
	bool nested;        /* a message: nested_index says which */
	bool string_field;  /* FilterString (passed as it is: no rules) */
	uint32_t nested_index;
};
struct vp_tf_query vp_trace_filter_query(const struct vp_trace_filter *f,
					 uint32_t msg, uint32_t field);
uint32_t vp_trace_filter_messages(const struct vp_trace_filter *f);

/* Filters one TracePacket (its bytes, without the Trace framing) into out
 * (reset first).  False if the packet does not parse; out is then empty. */
bool vp_trace_filter_packet(const struct vp_trace_filter *f,
			    const uint8_t *in, size_t len, struct pb_buf *out);

/* TraceStats.FilterStats, as traced counts them for a session. */
struct vp_filter_stats {
	uint64_t input_packets, input_bytes, output_bytes, errors;
	uint64_t time_taken_ns;
	uint64_t *discarded_per_buffer; /* n_discarded entries */
	size_t n_discarded;
};

void vp_filter_stats_discarded(struct vp_filter_stats *st, size_t buf_idx,
			       uint64_t bytes);
void vp_filter_stats_free(struct vp_filter_stats *st);

#endif
