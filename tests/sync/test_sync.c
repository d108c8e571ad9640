/*
 * test_sync.c - unit tests of sync: sandwich clock samples and the
 * sync exchange frames (encoding, decoding in pieces, resynchronization
 * after garbage).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sync_proto.h"
#include "vp_clock.h"

static void test_sample(void **state)
{
	(void)state;
	const clockid_t clocks[2] = {CLOCK_BOOTTIME, CLOCK_MONOTONIC};
	struct vp_clock_sample a, b;

	if (!VP_HAVE_CPU_COUNTER) {
		skip();
		return;
	}
	assert_int_equal(vp_clock_sample(clocks, 2, 5, &a), 0);
	assert_int_equal(vp_clock_sample(clocks, 2, 5, &b), 0);
	assert_true(b.counter > a.counter);
	assert_true(b.clock_ns[0] >= a.clock_ns[0]);
	assert_true(b.clock_ns[1] >= a.clock_ns[1]);
	/* A narrow sandwich: well under a millisecond of a 1+ GHz counter. */
	assert_true(a.width < 1000000);
	assert_non_null(vp_cpu_counter_name());
	/* Out of range arguments. */
	assert_int_equal(vp_clock_sample(clocks, 0, 5, &a), -1);
	assert_int_equal(vp_clock_sample(clocks, VP_CLOCK_SAMPLE_MAX + 1, 5, &a),
			 -1);
}

/* Feeds buf to the decoder in pieces of `step` bytes; collects frames. */
static size_t decode_all(struct vp_sync_decoder *d, const uint8_t *buf,
			 size_t len, size_t step, struct vp_sync_msg *out,
			 size_t max)
{
	size_t n = 0;
	for (size_t off = 0; off < len;) {
		size_t piece = len - off < step ? len - off : step;
		size_t used = 0;
		while (used < piece) {
			bool got;
			struct vp_sync_msg m;
			used += vp_sync_decode(d, buf + off + used, piece - used,
					       &m, &got);
			if (got && n < max)
				out[n++] = m;
		}
		off += piece;
	}
	return n;
}

static void test_roundtrip(void **state)
{
	(void)state;
	uint8_t buf[VP_SYNC_REQUEST_SIZE + VP_SYNC_REPLY_SIZE];
	size_t len = vp_sync_encode_request(buf, 7);
	assert_int_equal(len, 16);
	assert_memory_equal(buf, "VPSY\x01\x01\x00\x00\x07", 9);
	len += vp_sync_encode_reply(buf + len, 0x0102030405060708ull,
				    0xfedcba9876543210ull);
	assert_int_equal(len, 40);

	for (size_t step = 1; step <= len; step++) {
		struct vp_sync_decoder d;
		struct vp_sync_msg m[4];
		vp_sync_decoder_init(&d);
		assert_int_equal(decode_all(&d, buf, len, step, m, 4), 2);
		assert_int_equal(m[0].type, VP_SYNC_REQUEST);
		assert_int_equal(m[0].seq, 7);
		assert_int_equal(m[1].type, VP_SYNC_REPLY);
		assert_int_equal(m[1].seq, 0x0102030405060708ull);
		assert_int_equal(m[1].host_counter, 0xfedcba9876543210ull);
		assert_int_equal(d.skipped_bytes, 0);
		assert_int_equal(d.frames, 2);
	}
}

/* Garbage before, between and inside frames: the decoder skips it and
 * finds every whole frame. */
static void test_resync(void **state)
{
	(void)state;
	uint8_t buf[128];
	size_t len = 0;
	static const uint8_t junk1[] = "VPS\x00garbageVP";
	static const uint8_t junk2[] = {'V', 'P', 'S', 'Y', 9, 1, 0, 0};
	static const uint8_t junk3[] = {'V', 'P', 'S', 'Y', 1, 3, 0, 0};

	memcpy(buf + len, junk1, sizeof(junk1) - 1);
	len += sizeof(junk1) - 1;
	len += vp_sync_encode_request(buf + len, 1);
	memcpy(buf + len, junk2, sizeof(junk2)); /* bad version */
	len += sizeof(junk2);
	memcpy(buf + len, junk3, sizeof(junk3)); /* bad type */
	len += sizeof(junk3);
	len += vp_sync_encode_reply(buf + len, 2, 42);
	buf[len++] = 'V'; /* a partial frame at the end */

	struct vp_sync_decoder d;
	struct vp_sync_msg m[4];
	vp_sync_decoder_init(&d);
	assert_int_equal(decode_all(&d, buf, len, 3, m, 4), 2);
	assert_int_equal(m[0].seq, 1);
	assert_int_equal(m[1].seq, 2);
	assert_int_equal(m[1].host_counter, 42);
	assert_int_equal(d.skipped_bytes,
			 sizeof(junk1) - 1 + sizeof(junk2) + sizeof(junk3));
	assert_int_equal(d.len, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_resync),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
