/*
 * test_pb_wire.c - the protobuf wire scanner and writer, including
 * malformed input: every error names the right offset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"

static void test_varint_roundtrip(void **state)
{
	(void)state;
	static const uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384,
					UINT32_MAX, (uint64_t)1 << 35,
					UINT64_MAX - 1, UINT64_MAX};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		uint8_t buf[PB_MAX_VARINT_LEN];
		size_t n = pb_encode_varint(buf, vals[i]);
		assert_int_equal(n, pb_varint_size(vals[i]));
		const uint8_t *p = buf;
		uint64_t out = 0;
		assert_true(pb_read_varint(&p, buf + n, &out));
		assert_int_equal(out, vals[i]);
		assert_ptr_equal(p, buf + n);
		/* one byte short: truncated */
		p = buf;
		assert_false(pb_read_varint(&p, buf + n - 1, &out));
	}
}

/* Every length from one to ten bytes, with the buffer ending right after
 * the varint or going on, and values at each length's edges: the two-
 * and three-byte shortcuts of pb_read_varint give what the loop gives. */
static void test_varint_lengths(void **state)
{
	(void)state;
	for (unsigned bits = 0; bits <= 64; bits++) {
		uint64_t base = bits == 64 ? UINT64_MAX
				: bits ? ((uint64_t)1 << bits) - 1 : 0;
		for (int d = 0; d <= 1; d++) {
			uint64_t v = bits < 64 ? base + (uint64_t)d : base;
			uint8_t buf[PB_MAX_VARINT_LEN + 4];
			memset(buf, 0xff, sizeof(buf));
			size_t n = pb_encode_varint(buf, v);
			for (size_t extra = 0; extra <= 4; extra++) {
				const uint8_t *p = buf;
				uint64_t out = 0;
				assert_true(pb_read_varint(&p, buf + n + extra,
							   &out));
				assert_int_equal(out, v);
				assert_ptr_equal(p, buf + n);
			}
			for (size_t cut = 0; cut < n; cut++) {
				const uint8_t *p = buf;
				uint64_t out = 0;
				assert_false(pb_read_varint(&p, buf + cut, &out));
				assert_ptr_equal(p, buf);
			}
		}
	}
}

static void test_varint_overlong(void **state)
{
	(void)state;
	/* 11 continuation bytes: more than 64 bits */
	uint8_t buf[11];
	memset(buf, 0x80, sizeof(buf));
	const uint8_t *p = buf;
	uint64_t v;
	assert_false(pb_read_varint(&p, buf + sizeof(buf), &v));
	/* 10th byte carrying more than the top bit */
	uint8_t b2[10];
	memset(b2, 0xff, 9);
	b2[9] = 0x02;
	p = b2;
	assert_false(pb_read_varint(&p, b2 + 10, &v));
	b2[9] = 0x01;
	p = b2;
	assert_true(pb_read_varint(&p, b2 + 10, &v));
	assert_int_equal(v, UINT64_MAX);
}

static void test_writer_and_scanner(void **state)
{
	(void)state;
	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_varint(&b, 1, 150);
	pb_put_fixed64(&b, 2, 0x1122334455667788ull);
	pb_put_fixed32(&b, 3, 0xdeadbeef);
	pb_put_string(&b, 4, "hello");
	size_t m = pb_begin_nested(&b, 5);
	pb_put_varint(&b, 1, 7);
	size_t m2 = pb_begin_nested(&b, 2);
	for (int i = 0; i < 200; i++) /* a body over 127 bytes: 2-byte length */
		pb_put_raw_varint(&b, (uint64_t)i);
	pb_end_nested(&b, m2);
	pb_end_nested(&b, m);
	pb_put_sint(&b, 6, -3);
	pb_put_double(&b, 7, 1.5);

	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, b.data, b.len);
	assert_true(pb_next(&r, &f));
	assert_int_equal(f.num, 1);
	assert_int_equal(f.wt, PB_WT_VARINT);
	assert_int_equal(f.val, 150);
	assert_true(pb_next(&r, &f));
	assert_int_equal(f.wt, PB_WT_FIXED64);
	assert_int_equal(f.val, 0x1122334455667788ull);
	assert_true(pb_next(&r, &f));
	assert_int_equal(f.wt, PB_WT_FIXED32);
	assert_int_equal(f.val, 0xdeadbeef);
	assert_true(pb_next(&r, &f));
	assert_int_equal(f.len, 5);
	assert_memory_equal(f.data, "hello", 5);
	assert_true(pb_next(&r, &f));
	assert_int_equal(f.num, 5);
	/* nested: minimal length encoding after back-patching */
	struct pb_reader nr;
	struct pb_field nf;
	pb_reader_init(&nr, f.data, f.len);
	assert_true(pb_next(&nr, &nf));
	assert_int_equal(nf.val, 7);
	assert_true(pb_next(&nr, &nf));
	assert_int_equal(nf.start[1], (uint8_t)(0x80 | (nf.len & 0x7f)));
	struct pb_packed_iter it;
	uint64_t v, want = 0;
	pb_packed_init(&it, nf.data, nf.len);
	while (pb_packed_next(&it, &v))
		assert_int_equal(v, want++);
	assert_false(it.bad);
	assert_int_equal(want, 200);
	assert_false(pb_next(&nr, &nf));
	assert_int_equal(nr.err, PB_OK);
	assert_true(pb_next(&r, &f));
	assert_int_equal(pb_zigzag_decode(f.val), -3);
	assert_true(pb_next(&r, &f));
	double d;
	memcpy(&d, &f.val, 8);
	assert_true(d == 1.5);
	assert_false(pb_next(&r, &f));
	assert_int_equal(r.err, PB_OK);
	pb_buf_free(&b);
}

/* Each malformed buffer must fail with the given error at the given offset,
 * after `good` well-formed fields. */
struct bad_case {
	const char *name;
	uint8_t bytes[16];
	size_t len;
	int good;
	enum pb_err err;
	size_t off;
};

static void test_malformed(void **state)
{
	(void)state;
	static const struct bad_case cases[] = {
		{"len past end", {0x08, 0x01, 0x12, 0x05, 'a', 'b'}, 6, 1,
		 PB_ERR_TRUNCATED, 2},
		{"fixed64 cut", {0x09, 1, 2, 3}, 4, 0, PB_ERR_TRUNCATED, 0},
		{"fixed32 cut", {0x08, 0x00, 0x0d, 1, 2}, 5, 1, PB_ERR_TRUNCATED, 2},
		{"group", {0x08, 0x00, 0x0b}, 3, 1, PB_ERR_WIRETYPE, 2},
		{"wire type 7", {0x0f}, 1, 0, PB_ERR_WIRETYPE, 0},
		{"field 0", {0x00, 0x01}, 2, 0, PB_ERR_FIELD_NUMBER, 0},
		{"varint cut", {0x08, 0x80}, 2, 0, PB_ERR_TRUNCATED, 0},
		{"tag cut", {0x08, 0x01, 0x80}, 3, 1, PB_ERR_TRUNCATED, 2},
		{"varint overlong",
		 {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		  0x01},
		 12, 0, PB_ERR_VARINT, 0},
		{"length overflows", {0x12, 0xff, 0xff, 0xff, 0xff, 0x0f}, 6, 0,
		 PB_ERR_TRUNCATED, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *c = &cases[i];
		struct pb_reader r;
		struct pb_field f;
		int n = 0;
		pb_reader_init(&r, c->bytes, c->len);
		while (pb_next(&r, &f))
			n++;
		print_message("case %s\n", c->name);
		assert_int_equal(n, c->good);
		assert_int_equal(r.err, c->err);
		assert_int_equal(r.err_off, c->off);
		/* after an error the reader stays stopped */
		assert_false(pb_next(&r, &f));
	}
}

static void test_packed_truncated(void **state)
{
	(void)state;
	const uint8_t bytes[] = {0x01, 0x96, 0x01, 0x80};
	struct pb_packed_iter it;
	uint64_t v;
	int n = 0;
	pb_packed_init(&it, bytes, sizeof(bytes));
	while (pb_packed_next(&it, &v))
		n++;
	assert_int_equal(n, 2);
	assert_true(it.bad);
}

static void test_empty(void **state)
{
	(void)state;
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, NULL, 0);
	assert_false(pb_next(&r, &f));
	assert_int_equal(r.err, PB_OK);
}

/* pb_begin_sized/pb_end_sized write what pb_begin_nested/pb_end_nested
 * write, whatever the guess: bodies and guesses around every varint
 * length boundary, nested in another field. */
static void test_sized_nesting(void **state)
{
	(void)state;
	static const size_t sizes[] = {0, 1, 126, 127, 128, 129, 16383,
				       16384, 16385, 70000};
	const size_t n = sizeof(sizes) / sizeof(sizes[0]);
	struct pb_buf a, b;
	uint8_t *body = malloc(70000);

	assert_non_null(body);
	for (size_t i = 0; i < 70000; i++)
		body[i] = (uint8_t)(i * 7);
	pb_buf_init(&a);
	pb_buf_init(&b);
	for (size_t i = 0; i < n; i++) {
		for (size_t g = 0; g < n; g++) {
			pb_buf_reset(&a);
			pb_buf_reset(&b);
			pb_put_varint(&a, 1, 5);
			pb_put_varint(&b, 1, 5);
			size_t ma = pb_begin_nested(&a, 3);
			struct pb_sized mb = pb_begin_sized(&b, 3, sizes[g]);
			pb_put_raw(&a, body, sizes[i]);
			pb_put_raw(&b, body, sizes[i]);
			pb_end_nested(&a, ma);
			pb_end_sized(&b, mb);
			pb_put_varint(&a, 2, 9);
			pb_put_varint(&b, 2, 9);
			assert_int_equal(a.len, b.len);
			assert_memory_equal(a.data, b.data, a.len);
		}
	}
	pb_buf_free(&a);
	pb_buf_free(&b);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_roundtrip),
		cmocka_unit_test(test_varint_lengths),
		cmocka_unit_test(test_varint_overlong),
		cmocka_unit_test(test_writer_and_scanner),
		cmocka_unit_test(test_sized_nesting),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_packed_truncated),
		cmocka_unit_test(test_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
