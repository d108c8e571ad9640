/*
 * test_trace_filter.c - the trace_filter bytecode parser and the packet
 * filter (service/trace_filter.c) on hand-built bytecode and packets.
 *
 * The facts checked are Perfetto's (src/protozero/filtering/): the
 * checksum (FNV-1a 64 of the words' 4 bytes, low 32 bits, as the last
 * word), what makes a bytecode invalid, that Trace.packet must be an
 * allowed message, and what the filter keeps and how it rewrites lengths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pb_wire.h"
#include "trace_filter.h"

/* Opcodes as Perfetto's bytecode has them. */
#define EOM 0u
#define SIMPLE(id) ((uint32_t)(id) << 3 | 1u)
#define RANGE(id) ((uint32_t)(id) << 3 | 2u)
#define NESTED(id) ((uint32_t)(id) << 3 | 3u)
#define STRING(id) ((uint32_t)(id) << 3 | 4u)

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	do {
		p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

static uint32_t checksum(const uint32_t *w, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++) {
			h ^= (w[i] >> (8 * b)) & 0xff;
			h *= 0x100000001b3ull;
		}
	return (uint32_t)h;
}

/* Encodes words and their checksum into buf; returns the length. */
static size_t encode(const uint32_t *w, size_t n, uint8_t *buf)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += put_varint(buf + len, w[i]);
	return len + put_varint(buf + len, checksum(w, n));
}

static struct vp_trace_filter *load(const uint32_t *w, size_t n,
				    enum vp_tf_load *why)
{
	uint8_t buf[4096];
	size_t len = encode(w, n, buf);
	return vp_trace_filter_new(buf, len, NULL, 0, why);
}

#define LOAD(why, ...)                                                    \
	({                                                                \
		static const uint32_t w_[] = {__VA_ARGS__};               \
		load(w_, sizeof(w_) / sizeof(w_[0]), why);                \
	})

static void test_checksum_matches_perfetto(void **state)
{
	(void)state;
	/* The bytecode of a config that worked against Perfetto's traced:
	 * Trace.packet -> message 1, message 1 allows fields 1..899. */
	static const uint8_t bc[] = {0x0b, 0x01, 0x00, 0x0a, 0x83, 0x07, 0x00,
				     0x9b, 0x92, 0xd4, 0xb4, 0x08};
	enum vp_tf_load why;
	struct vp_trace_filter *f =
		vp_trace_filter_new(bc, sizeof(bc), NULL, 0, &why);
	assert_non_null(f);
	assert_int_equal(vp_trace_filter_messages(f), 2);
	struct vp_tf_query q = vp_trace_filter_query(f, 1, 899);
	assert_true(q.allowed);
	assert_false(q.nested);
	assert_false(vp_trace_filter_query(f, 1, 900).allowed);
	assert_true(vp_trace_filter_query(f, 1, 1).allowed);
	assert_true(vp_trace_filter_query(f, 1, 127).allowed);
	assert_true(vp_trace_filter_query(f, 1, 128).allowed);
	q = vp_trace_filter_query(f, 0, 1);
	assert_true(q.allowed && q.nested);
	assert_int_equal(q.nested_index, 1);
	assert_false(vp_trace_filter_query(f, 2, 1).allowed);
	vp_trace_filter_free(f);

	/* One bit off in the checksum: refused. */
	uint8_t bad[sizeof(bc)];
	memcpy(bad, bc, sizeof(bc));
	bad[7] ^= 1;
	assert_null(vp_trace_filter_new(bad, sizeof(bad), NULL, 0, &why));
	assert_int_equal(why, TF_LOAD_INVALID);
}

static void test_invalid_bytecode(void **state)
{
	(void)state;
	enum vp_tf_load why;
	/* Nothing at all, and a truncated varint. */
	assert_null(vp_trace_filter_new(NULL, 0, NULL, 0, &why));
	assert_int_equal(why, TF_LOAD_INVALID);
	static const uint8_t trunc[] = {0x0b, 0x81};
	assert_null(vp_trace_filter_new(trunc, 2, NULL, 0, &why));
	/* A field id 0. */
	assert_null(LOAD(&why, NESTED(1), 1, EOM, SIMPLE(0), EOM));
	assert_int_equal(why, TF_LOAD_INVALID);
	/* An unknown opcode. */
	assert_null(LOAD(&why, NESTED(1), 1, EOM, (5u << 3) | 6u, EOM));
	/* A nested field without its index, a range without its length. */
	assert_null(LOAD(&why, NESTED(1), 1, EOM, NESTED(2)));
	assert_null(LOAD(&why, NESTED(1), 1, EOM, RANGE(2)));
	/* The last word is not an end of message. */
	assert_null(LOAD(&why, NESTED(1), 1, EOM, SIMPLE(2)));
	/* A nested index past the last message. */
	assert_null(LOAD(&why, NESTED(1), 1, EOM, NESTED(2), 2, EOM));
	/* Overlapping ranges (200..300, then 250). */
	assert_null(LOAD(&why, NESTED(1), 1, EOM, RANGE(200), 100,
			 SIMPLE(250), EOM));
	assert_int_equal(why, TF_LOAD_INVALID);
}

static void test_root(void **state)
{
	(void)state;
	enum vp_tf_load why;
	/* Trace.packet a simple field, or absent: no root. */
	assert_null(LOAD(&why, SIMPLE(1), EOM));
	assert_int_equal(why, TF_LOAD_NO_ROOT);
	assert_null(LOAD(&why, SIMPLE(2), EOM));
	assert_int_equal(why, TF_LOAD_NO_ROOT);
	/* Only the checksum: valid bytecode, no root. */
	uint8_t only[8];
	size_t n = encode(NULL, 0, only);
	assert_null(vp_trace_filter_new(only, n, NULL, 0, &why));
	assert_int_equal(why, TF_LOAD_NO_ROOT);
}

static void test_caps(void **state)
{
	(void)state;
	enum vp_tf_load why;
	size_t n = TF_MAX_MESSAGES + 4;
	uint32_t *w = calloc(n, sizeof(*w));
	w[0] = NESTED(1);
	w[1] = 1;
	uint8_t *buf = malloc(n * 5 + 5);
	size_t len = encode(w, n, buf);
	assert_null(vp_trace_filter_new(buf, len, NULL, 0, &why));
	assert_int_equal(why, TF_LOAD_TOO_LARGE);
	/* One message under the cap loads. */
	len = encode(w, TF_MAX_MESSAGES + 1, buf);
	struct vp_trace_filter *f =
		vp_trace_filter_new(buf, len, NULL, 0, &why);
	assert_non_null(f);
	vp_trace_filter_free(f);
	free(w);
	free(buf);
}

/* Trace.packet -> 1; TracePacket (1): 8 (timestamp), 10 simple,
 * 11 -> message 2, 12 a string field, 500 simple (a range of one);
 * message 2: field 1 only. */
static struct vp_trace_filter *packet_filter(void)
{
	enum vp_tf_load why;
	struct vp_trace_filter *f =
		LOAD(&why, NESTED(1), 1, EOM, SIMPLE(8), SIMPLE(10),
		     NESTED(11), 2, STRING(12), SIMPLE(500), EOM, SIMPLE(1),
		     EOM);
	assert_non_null(f);
	return f;
}

static void test_filter_fields(void **state)
{
	(void)state;
	struct vp_trace_filter *f = packet_filter();
	struct pb_buf in, out, want;
	pb_buf_init(&in);
	pb_buf_init(&out);
	pb_buf_init(&want);
	pb_put_varint(&in, 8, 123456);
	pb_put_varint(&in, 9, 7);             /* dropped */
	pb_put_fixed64(&in, 10, 0x1122334455667788ull);
	pb_put_fixed32(&in, 10, 0x99);
	size_t n = pb_begin_nested(&in, 11);
	pb_put_varint(&in, 1, 5);
	pb_put_string(&in, 2, "dropped inside"); /* dropped */
	pb_end_nested(&in, n);
	pb_put_string(&in, 12, "kept string");
	pb_put_varint(&in, 500, 1);
	pb_put_string(&in, 900, "for_testing, dropped");
	pb_put_bytes(&in, 11, "", 0); /* an empty message: kept */

	pb_put_varint(&want, 8, 123456);
	pb_put_fixed64(&want, 10, 0x1122334455667788ull);
	pb_put_fixed32(&want, 10, 0x99);
	n = pb_begin_nested(&want, 11);
	pb_put_varint(&want, 1, 5);
	pb_end_nested(&want, n);
	pb_put_string(&want, 12, "kept string");
	pb_put_varint(&want, 500, 1);
	pb_put_bytes(&want, 11, "", 0);

	assert_true(vp_trace_filter_packet(f, in.data, in.len, &out));
	assert_int_equal(out.len, want.len);
	assert_memory_equal(out.data, want.data, want.len);

	/* A message the filter empties whole reads as nothing. */
	pb_buf_reset(&in);
	pb_put_varint(&in, 9, 1);
	assert_true(vp_trace_filter_packet(f, in.data, in.len, &out));
	assert_int_equal(out.len, 0);
	pb_buf_free(&in);
	pb_buf_free(&out);
	pb_buf_free(&want);
	vp_trace_filter_free(f);
}

static void test_filter_lengths(void **state)
{
	(void)state;
	struct vp_trace_filter *f = packet_filter();
	/* A nested message of 200 bytes (a 2-byte length) filtered down to
	 * 2 bytes keeps a 2-byte length field: 0x82 0x00, as traced writes
	 * it; a redundant tag (0x88 0x00 for field 1) is written canonically. */
	uint8_t in[256], *p = in;
	*p++ = (11 << 3) | 2;
	*p++ = 0xc8;
	*p++ = 0x01; /* 200 */
	*p++ = 0x88;
	*p++ = 0x00; /* field 1, varint, overlong tag */
	*p++ = 0x05;
	*p++ = (7 << 3) | 2;
	*p++ = 0xc2;
	*p++ = 0x01; /* 194 */
	memset(p, 'x', 194);
	p += 194;
	struct pb_buf out;
	pb_buf_init(&out);
	assert_true(vp_trace_filter_packet(f, in, (size_t)(p - in), &out));
	static const uint8_t want[] = {(11 << 3) | 2, 0x82, 0x00, 0x08, 0x05};
	assert_int_equal(out.len, sizeof(want));
	assert_memory_equal(out.data, want, sizeof(want));
	pb_buf_free(&out);
	vp_trace_filter_free(f);
}

/* `levels` messages each the only field 1 of the one outside it, the
 * innermost empty; written from the inside out.  Returns the length. */
static size_t nest(uint8_t *buf, size_t levels)
{
	uint8_t tmp[4 * (TF_MAX_DEPTH + 8)];
	size_t len = 0;
	for (size_t i = 0; i < levels; i++) {
		uint8_t hdr[8];
		size_t h = 0;
		hdr[h++] = 0x0a;
		h += put_varint(hdr + h, len);
		memcpy(tmp, hdr, h);
		memcpy(tmp + h, buf, len);
		len += h;
		memcpy(buf, tmp, len);
	}
	return len;
}

static void test_filter_errors(void **state)
{
	(void)state;
	struct vp_trace_filter *f = packet_filter();
	struct pb_buf out;
	pb_buf_init(&out);
	/* A truncated varint, a length past the end, a nested length past
	 * its parent's, a group, wire type 7, field 0, a cut fixed64. */
	static const uint8_t trunc[] = {0x40, 0x80};
	static const uint8_t past[] = {0x62, 0x05, 'a'};
	static const uint8_t nested_past[] = {0x5a, 0x02, 0x0a, 0x05, 'a'};
	static const uint8_t group[] = {0x43, 0x44};
	static const uint8_t wt7[] = {0x47, 0x00};
	static const uint8_t field0[] = {0x00, 0x01};
	static const uint8_t cut64[] = {0x51, 1, 2, 3};
	const struct {
		const uint8_t *p;
		size_t n;
	} bad[] = {
		{trunc, sizeof(trunc)},   {past, sizeof(past)},
		{nested_past, sizeof(nested_past)},
		{group, sizeof(group)},   {wt7, sizeof(wt7)},
		{field0, sizeof(field0)}, {cut64, sizeof(cut64)},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pb_put_varint(&out, 1, 1); /* emptied on failure */
		assert_false(vp_trace_filter_packet(f, bad[i].p, bad[i].n,
						    &out));
		assert_int_equal(out.len, 0);
	}
	/* Nesting deeper than the cap: an error, not a deep recursion. */
	enum vp_tf_load why;
	struct vp_trace_filter *rec =
		LOAD(&why, NESTED(1), 1, EOM, NESTED(1), 1, EOM);
	assert_non_null(rec);
	uint8_t deep[4 * (TF_MAX_DEPTH + 8)];
	size_t dlen = nest(deep, TF_MAX_DEPTH + 8);
	assert_false(vp_trace_filter_packet(rec, deep, dlen, &out));
	dlen = nest(deep, 16); /* ...and 16 deep is fine */
	assert_true(vp_trace_filter_packet(rec, deep, dlen, &out));
	assert_int_equal(out.len, dlen);
	vp_trace_filter_free(rec);
	pb_buf_free(&out);
	vp_trace_filter_free(f);
}

static void test_ranges_and_overlay(void **state)
{
	(void)state;
	enum vp_tf_load why;
	/* A range across the direct-index limit (120..140). */
	struct vp_trace_filter *f =
		LOAD(&why, NESTED(1), 1, EOM, RANGE(120), 20, SIMPLE(1000),
		     EOM);
	assert_non_null(f);
	assert_false(vp_trace_filter_query(f, 1, 119).allowed);
	assert_true(vp_trace_filter_query(f, 1, 120).allowed);
	assert_true(vp_trace_filter_query(f, 1, 127).allowed);
	assert_true(vp_trace_filter_query(f, 1, 128).allowed);
	assert_true(vp_trace_filter_query(f, 1, 139).allowed);
	assert_false(vp_trace_filter_query(f, 1, 140).allowed);
	assert_true(vp_trace_filter_query(f, 1, 1000).allowed);
	assert_false(vp_trace_filter_query(f, 1, 1001).allowed);
	vp_trace_filter_free(f);

	/* bytecode_overlay_v54: [message, field << 3 | opcode, argument]
	 * triples, sorted; one adds field 5 to message 1, one turns field 8
	 * into a string field. */
	uint8_t bc[64], ov[64];
	static const uint32_t base[] = {NESTED(1), 1, EOM, SIMPLE(8), EOM};
	static const uint32_t over[] = {1, SIMPLE(5), 0, 1, STRING(8), 0};
	size_t bl = encode(base, 5, bc), ol = encode(over, 6, ov);
	f = vp_trace_filter_new(bc, bl, ov, ol, &why);
	assert_non_null(f);
	assert_true(vp_trace_filter_query(f, 1, 5).allowed);
	assert_true(vp_trace_filter_query(f, 1, 8).string_field);
	vp_trace_filter_free(f);
	/* Unsorted, or naming a message that is not there: invalid. */
	static const uint32_t unsorted[] = {1, SIMPLE(8), 0, 1, SIMPLE(5), 0};
	ol = encode(unsorted, 6, ov);
	assert_null(vp_trace_filter_new(bc, bl, ov, ol, &why));
	static const uint32_t far[] = {7, SIMPLE(8), 0};
	ol = encode(far, 3, ov);
	assert_null(vp_trace_filter_new(bc, bl, ov, ol, &why));
	assert_int_equal(why, TF_LOAD_INVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checksum_matches_perfetto),
		cmocka_unit_test(test_invalid_bytecode),
		cmocka_unit_test(test_root),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_filter_fields),
		cmocka_unit_test(test_filter_lengths),
		cmocka_unit_test(test_filter_errors),
		cmocka_unit_test(test_ranges_and_overlay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
