/*
 * test_rewrite.c - every timestamp kind and id the rewriter touches, with a
 * known synthetic clock map, so each expected value can be computed here:
 *   BOOTTIME  -> host = t + 1e9 + (t - 5e9) / 10000   (100 ppm drift)
 *   MONOTONIC -> host = t + 3e9
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "packet_build.h"
#include "pb_wire.h"
#include "perfetto_fields.h"
#include "rewrite.h"

static uint64_t host_boot(uint64_t t)
{
	return t + 1000000000ull + (uint64_t)(((int64_t)t - 5000000000ll) / 10000);
}

static uint64_t host_mono(uint64_t t) { return t + 3000000000ull; }

static bool test_map(void *ctx, uint32_t clock, uint64_t in, uint64_t *out)
{
	(void)ctx;
	if (clock == BUILTIN_CLOCK_BOOTTIME) {
		*out = host_boot(in);
		return true;
	}
	if (clock == BUILTIN_CLOCK_MONOTONIC) {
		*out = host_mono(in);
		return true;
	}
	return false;
}

static struct rewriter *new_rw(bool remap)
{
	struct rewrite_cfg cfg = {
		.path = "guest.pb",
		.map = test_map,
		.target_clock = BUILTIN_CLOCK_BOOTTIME,
		.trace_clock = BUILTIN_CLOCK_BOOTTIME,
		.seq_offset = 100,
		.machine_id = remap ? 0 : 7,
		.remap_ids = remap,
		.pid_offset = 1u << 22,
		.uuid_key = 0x9e3779b97f4a7c15ull * 3,
	};
	return rewriter_new(&cfg);
}

/* ---- tiny decoder for the checks ---- */

/* The n-th field `num` of a message (0-based); false if absent. */
static bool field(const uint8_t *p, size_t len, uint32_t num, int nth,
		  struct pb_field *out)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == num && nth-- == 0) {
			*out = f;
			return true;
		}
	assert_int_equal(r.err, PB_OK);
	return false;
}

static uint64_t u(const uint8_t *p, size_t len, uint32_t num)
{
	struct pb_field f;
	assert_true(field(p, len, num, 0, &f));
	return f.val;
}

static struct pb_field sub(const uint8_t *p, size_t len, uint32_t num, int nth)
{
	struct pb_field f;
	assert_true(field(p, len, num, nth, &f));
	return f;
}

static void rewrite(struct rewriter *rw, struct pb_buf *in, struct pb_buf *out)
{
	struct vp_error err = {{0}};
	pb_buf_reset(out);
	int rc = rewrite_packet(rw, in->data, in->len, 1000, out, &err);
	if (rc)
		print_error("%s\n", err.msg);
	assert_int_equal(rc, 0);
}

/* ---- tests ---- */

static void test_packet_timestamp_and_identity(void **state)
{
	(void)state;
	struct rewriter *rw = new_rw(false);
	struct pb_buf in, out;
	pb_buf_init(&in);
	pb_buf_init(&out);

	pb_put_varint(&in, TP_TIMESTAMP, 7000000000ull);
	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 3);
	pb_put_varint(&in, 9000, 42); /* unknown: must survive as is */
	pb_put_string(&in, 9001, "opaque");
	pb_put_varint(&in, TP_MACHINE_ID, 55); /* replaced by ours */
	rewrite(rw, &in, &out);

	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP), host_boot(7000000000ull));
	assert_int_equal(u(out.data, out.len, TP_TRUSTED_PACKET_SEQUENCE_ID), 103);
	assert_int_equal(u(out.data, out.len, 9000), 42);
	struct pb_field f = sub(out.data, out.len, 9001, 0);
	assert_memory_equal(f.data, "opaque", 6);
	assert_int_equal(u(out.data, out.len, TP_MACHINE_ID), 7);
	assert_false(field(out.data, out.len, TP_MACHINE_ID, 1, &f));
	assert_false(field(out.data, out.len, TP_TIMESTAMP_CLOCK_ID, 0, &f));

	/* sequence id 0 ("no sequence") stays 0 */
	pb_buf_reset(&in);
	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 0);
	rewrite(rw, &in, &out);
	assert_int_equal(u(out.data, out.len, TP_TRUSTED_PACKET_SEQUENCE_ID), 0);

	pb_buf_free(&in);
	pb_buf_free(&out);
	rewriter_free(rw);
}

static void test_monotonic_relabelled(void **state)
{
	(void)state;
	struct rewriter *rw = new_rw(false);
	struct pb_buf in, out;
	pb_buf_init(&in);
	pb_buf_init(&out);

	/* explicit clock id: replaced in place */
	pb_put_varint(&in, TP_TIMESTAMP, 2000);
	pb_put_varint(&in, TP_TIMESTAMP_CLOCK_ID, BUILTIN_CLOCK_MONOTONIC);
	rewrite(rw, &in, &out);
	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP), host_mono(2000));
	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP_CLOCK_ID), BUILTIN_CLOCK_BOOTTIME);

	/* clock from the sequence defaults: an explicit id is added */
	pb_buf_reset(&in);
	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 5);
	pb_put_varint(&in, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	size_t m = pb_begin_nested(&in, TP_TRACE_PACKET_DEFAULTS);
	pb_put_varint(&in, TPD_TIMESTAMP_CLOCK_ID, BUILTIN_CLOCK_MONOTONIC);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);
	pb_buf_reset(&in);
	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 5);
	pb_put_varint(&in, TP_TIMESTAMP, 9000);
	rewrite(rw, &in, &out);
	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP), host_mono(9000));
	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP_CLOCK_ID), BUILTIN_CLOCK_BOOTTIME);

	/* REALTIME can't be mapped: left alone and counted */
	pb_buf_reset(&in);
	pb_put_varint(&in, TP_TIMESTAMP, 123);
	pb_put_varint(&in, TP_TIMESTAMP_CLOCK_ID, BUILTIN_CLOCK_REALTIME);
	uint64_t before = rewriter_stats(rw)->ts_unmapped;
	rewrite(rw, &in, &out);
	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP), 123);
	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP_CLOCK_ID), BUILTIN_CLOCK_REALTIME);
	assert_int_equal(rewriter_stats(rw)->ts_unmapped, before + 1);

	pb_buf_free(&in);
	pb_buf_free(&out);
	rewriter_free(rw);
}

/* A snapshot anchoring scoped clock 64 (incremental, unit 1000 ns) and 65
 * (absolute, unit 10 ns) at BOOTTIME B; then deltas on 64. */
static void test_scoped_clocks(void **state)
{
	(void)state;
	struct rewriter *rw = new_rw(false);
	struct pb_buf in, out;
	pb_buf_init(&in);
	pb_buf_init(&out);
	const uint64_t B = 6000000000ull, X = 1000, Y = 500;

	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 9);
	pb_put_varint(&in, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	size_t m = pb_begin_nested(&in, TP_CLOCK_SNAPSHOT);
	put_clock(&in, BUILTIN_CLOCK_BOOTTIME, B, false, 0);
	put_clock(&in, BUILTIN_CLOCK_MONOTONIC, 777, false, 0);
	put_clock(&in, 64, X, true, 1000);
	put_clock(&in, 65, Y, false, 10);
	pb_end_nested(&in, m);
	m = pb_begin_nested(&in, TP_TRACE_PACKET_DEFAULTS);
	pb_put_varint(&in, TPD_TIMESTAMP_CLOCK_ID, 64);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);

	/* the snapshot: BOOTTIME and MONOTONIC entries mapped (legacy and
	 * relabelled timestamps sit on the host axis, so a processor that
	 * converts MONOTONIC through the snapshot must find it there too);
	 * the sequence-scoped ones as they were */
	struct pb_field snap = sub(out.data, out.len, TP_CLOCK_SNAPSHOT, 0);
	struct pb_field c0 = sub(snap.data, snap.len, CS_CLOCKS, 0);
	struct pb_field c1 = sub(snap.data, snap.len, CS_CLOCKS, 1);
	struct pb_field c2 = sub(snap.data, snap.len, CS_CLOCKS, 2);
	uint64_t Bo = host_boot(B);
	assert_int_equal(u(c0.data, c0.len, CLK_TIMESTAMP), Bo);
	assert_int_equal(u(c1.data, c1.len, CLK_TIMESTAMP), host_mono(777));
	assert_int_equal(u(c2.data, c2.len, CLK_TIMESTAMP), X);
	assert_int_equal(u(c2.data, c2.len, CLK_UNIT_MULTIPLIER_NS), 1000);

	/* deltas: resolve the output as a reader would and compare */
	uint64_t in_abs = X, out_abs = X;
	static const uint64_t deltas[] = {0, 1, 5, 1000, 123456, 7, 999999, 3};
	for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
		pb_buf_reset(&in);
		pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 9);
		pb_put_varint(&in, TP_TIMESTAMP, deltas[i]);
		rewrite(rw, &in, &out);
		in_abs += deltas[i];
		out_abs += u(out.data, out.len, TP_TIMESTAMP);
		uint64_t guest = B + (in_abs - X) * 1000;
		int64_t host = (int64_t)(Bo + (out_abs - X) * 1000);
		int64_t want = (int64_t)host_boot(guest);
		assert_true(host - want <= 500 && want - host <= 500);
		assert_false(field(out.data, out.len, TP_TIMESTAMP_CLOCK_ID, 0,
				   &c0));
	}
	/* clock 65, not incremental */
	pb_buf_reset(&in);
	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 9);
	pb_put_varint(&in, TP_TIMESTAMP_CLOCK_ID, 65);
	pb_put_varint(&in, TP_TIMESTAMP, Y + 100000000);
	rewrite(rw, &in, &out);
	uint64_t o = u(out.data, out.len, TP_TIMESTAMP);
	int64_t host = (int64_t)(Bo + (o - Y) * 10);
	int64_t want = (int64_t)host_boot(B + 100000000ull * 10);
	assert_true(host - want <= 5 && want - host <= 5);
	assert_int_equal(rewriter_stats(rw)->ts_scoped, 9);

	/* another sequence does not see these clocks */
	pb_buf_reset(&in);
	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 10);
	pb_put_varint(&in, TP_TIMESTAMP_CLOCK_ID, 64);
	pb_put_varint(&in, TP_TIMESTAMP, 55);
	rewrite(rw, &in, &out);
	assert_int_equal(u(out.data, out.len, TP_TIMESTAMP), 55);

	pb_buf_free(&in);
	pb_buf_free(&out);
	rewriter_free(rw);
}

/* Legacy microseconds are MONOTONIC (as Perfetto reads them): they go
 * through the guest's MONOTONIC map. */
static void test_legacy_us(void **state)
{
	(void)state;
	struct rewriter *rw = new_rw(false);
	struct pb_buf in, out;
	pb_buf_init(&in);
	pb_buf_init(&out);
	const int64_t ref = 8000000; /* us */

	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 4);
	pb_put_varint(&in, TP_INCREMENTAL_STATE_CLEARED, 1);
	size_t m = pb_begin_nested(&in, TP_THREAD_DESCRIPTOR);
	pb_put_varint(&in, THD_PID, 10);
	pb_put_varint(&in, THD_TID, 11);
	pb_put_varint(&in, THD_REFERENCE_TIMESTAMP_US, (uint64_t)ref);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);
	struct pb_field td = sub(out.data, out.len, TP_THREAD_DESCRIPTOR, 0);
	int64_t ref_out = (int64_t)u(td.data, td.len, THD_REFERENCE_TIMESTAMP_US);
	assert_int_equal(ref_out, (host_mono((uint64_t)ref * 1000) + 500) / 1000);
	assert_int_equal(u(td.data, td.len, THD_PID), 10);

	int64_t in_us = ref, out_us = ref_out;
	static const int64_t deltas[] = {5, 0, 100000, 3, 2500000};
	for (size_t i = 0; i < 5; i++) {
		pb_buf_reset(&in);
		pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 4);
		m = pb_begin_nested(&in, TP_TRACK_EVENT);
		pb_put_varint(&in, TE_TYPE, TE_TYPE_INSTANT);
		pb_put_varint(&in, TE_TIMESTAMP_DELTA_US, (uint64_t)deltas[i]);
		pb_end_nested(&in, m);
		rewrite(rw, &in, &out);
		struct pb_field te = sub(out.data, out.len, TP_TRACK_EVENT, 0);
		in_us += deltas[i];
		out_us += (int64_t)u(te.data, te.len, TE_TIMESTAMP_DELTA_US);
		int64_t want = (int64_t)(host_mono((uint64_t)in_us * 1000) + 500) / 1000;
		assert_int_equal(out_us, want);
		assert_int_equal(u(te.data, te.len, TE_TYPE), TE_TYPE_INSTANT);
	}
	/* absolute us */
	pb_buf_reset(&in);
	pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 4);
	m = pb_begin_nested(&in, TP_TRACK_EVENT);
	pb_put_varint(&in, TE_TIMESTAMP_ABSOLUTE_US, 9000000);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);
	struct pb_field te = sub(out.data, out.len, TP_TRACK_EVENT, 0);
	assert_int_equal(u(te.data, te.len, TE_TIMESTAMP_ABSOLUTE_US),
			 (host_mono(9000000000ull) + 500) / 1000);
	assert_int_equal(rewriter_stats(rw)->ts_legacy_us, 7);

	pb_buf_free(&in);
	pb_buf_free(&out);
	rewriter_free(rw);
}

static void test_ftrace(void **state)
{
	(void)state;
	struct rewriter *rw = new_rw(false);
	struct pb_buf in, out;
	pb_buf_init(&in);
	pb_buf_init(&out);

	/* boot clock: every event, plus the bundle's cropping timestamps */
	size_t m = pb_begin_nested(&in, TP_FTRACE_EVENTS);
	pb_put_varint(&in, FB_CPU, 2);
	for (int i = 0; i < 3; i++) {
		size_t e = pb_begin_nested(&in, FB_EVENT);
		pb_put_varint(&in, FE_TIMESTAMP, 6000000000ull + (uint64_t)i * 1000);
		pb_put_varint(&in, FE_PID, 77);
		pb_end_nested(&in, e);
	}
	pb_put_varint(&in, FB_PREVIOUS_BUNDLE_END_TIMESTAMP, 5999999000ull);
	size_t cs = pb_begin_nested(&in, FB_COMPACT_SCHED);
	static const uint64_t sw[] = {6100000000ull, 10, 0, 5000, 1};
	size_t p = pb_begin_nested(&in, CSCHED_SWITCH_TIMESTAMP);
	for (int i = 0; i < 5; i++)
		pb_put_raw_varint(&in, sw[i]);
	pb_end_nested(&in, p);
	p = pb_begin_nested(&in, CSCHED_SWITCH_NEXT_PID);
	for (int i = 0; i < 5; i++)
		pb_put_raw_varint(&in, (uint64_t)i);
	pb_end_nested(&in, p);
	p = pb_begin_nested(&in, CSCHED_WAKING_TIMESTAMP);
	pb_put_raw_varint(&in, 6200000000ull);
	pb_put_raw_varint(&in, 250);
	pb_end_nested(&in, p);
	pb_end_nested(&in, cs);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);

	struct pb_field b = sub(out.data, out.len, TP_FTRACE_EVENTS, 0);
	assert_int_equal(u(b.data, b.len, FB_CPU), 2);
	for (int i = 0; i < 3; i++) {
		struct pb_field e = sub(b.data, b.len, FB_EVENT, i);
		assert_int_equal(u(e.data, e.len, FE_TIMESTAMP),
				 host_boot(6000000000ull + (uint64_t)i * 1000));
		assert_int_equal(u(e.data, e.len, FE_PID), 77);
	}
	assert_int_equal(u(b.data, b.len, FB_PREVIOUS_BUNDLE_END_TIMESTAMP),
			 host_boot(5999999000ull));
	struct pb_field c = sub(b.data, b.len, FB_COMPACT_SCHED, 0);
	struct pb_field st = sub(c.data, c.len, CSCHED_SWITCH_TIMESTAMP, 0);
	struct pb_packed_iter it;
	uint64_t v = 0, in_abs = 0, out_abs = 0;
	pb_packed_init(&it, st.data, st.len);
	for (int i = 0; i < 5; i++) {
		assert_true(pb_packed_next(&it, &v));
		in_abs += sw[i];
		out_abs += v;
		assert_int_equal(out_abs, host_boot(in_abs));
	}
	assert_false(pb_packed_next(&it, &v));
	struct pb_field wk = sub(c.data, c.len, CSCHED_WAKING_TIMESTAMP, 0);
	pb_packed_init(&it, wk.data, wk.len);
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, host_boot(6200000000ull));
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, host_boot(6200000250ull) - host_boot(6200000000ull));
	assert_int_equal(rewriter_stats(rw)->ts_compact, 7);
	assert_int_equal(rewriter_stats(rw)->ts_ftrace, 4);

	/* a bundle on another ftrace clock: only boot_timestamp moves */
	pb_buf_reset(&in);
	m = pb_begin_nested(&in, TP_FTRACE_EVENTS);
	pb_put_varint(&in, FB_FTRACE_CLOCK, 2);
	pb_put_varint(&in, FB_FTRACE_TIMESTAMP, 111);
	pb_put_varint(&in, FB_BOOT_TIMESTAMP, 7000000000ull);
	size_t e = pb_begin_nested(&in, FB_EVENT);
	pb_put_varint(&in, FE_TIMESTAMP, 222);
	pb_end_nested(&in, e);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);
	b = sub(out.data, out.len, TP_FTRACE_EVENTS, 0);
	assert_int_equal(u(b.data, b.len, FB_FTRACE_TIMESTAMP), 111);
	assert_int_equal(u(b.data, b.len, FB_BOOT_TIMESTAMP), host_boot(7000000000ull));
	struct pb_field ev = sub(b.data, b.len, FB_EVENT, 0);
	assert_int_equal(u(ev.data, ev.len, FE_TIMESTAMP), 222);

	pb_buf_free(&in);
	pb_buf_free(&out);
	rewriter_free(rw);
}

static void test_remap_ids(void **state)
{
	(void)state;
	struct rewriter *rw = new_rw(true);
	struct pb_buf in, out;
	pb_buf_init(&in);
	pb_buf_init(&out);
	const uint64_t key = 0x9e3779b97f4a7c15ull * 3;

	pb_put_varint(&in, TP_TRUSTED_PID, 1234);
	size_t m = pb_begin_nested(&in, TP_TRACK_DESCRIPTOR);
	pb_put_varint(&in, TD_UUID, 555);
	pb_put_varint(&in, TD_PARENT_UUID, 0);
	size_t t = pb_begin_nested(&in, TD_THREAD);
	pb_put_varint(&in, THD_PID, 1234);
	pb_put_varint(&in, THD_TID, 1240);
	pb_end_nested(&in, t);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);
	uint32_t off = 1u << 22;
	assert_int_equal(u(out.data, out.len, TP_TRUSTED_PID), 1234 + off);
	struct pb_field td = sub(out.data, out.len, TP_TRACK_DESCRIPTOR, 0);
	assert_int_equal(u(td.data, td.len, TD_UUID), rewrite_remap_uuid(555, key));
	assert_int_equal(u(td.data, td.len, TD_PARENT_UUID), 0);
	struct pb_field th = sub(td.data, td.len, TD_THREAD, 0);
	assert_int_equal(u(th.data, th.len, THD_PID), 1234 + off);
	assert_int_equal(u(th.data, th.len, THD_TID), 1240 + off);
	/* no machine id without machine ids */
	struct pb_field f;
	assert_false(field(out.data, out.len, TP_MACHINE_ID, 0, &f));

	/* a track event's uuid and extra counter uuids (packed) */
	pb_buf_reset(&in);
	m = pb_begin_nested(&in, TP_TRACK_EVENT);
	pb_put_varint(&in, TE_TRACK_UUID, 555);
	size_t p = pb_begin_nested(&in, TE_EXTRA_COUNTER_TRACK_UUIDS);
	pb_put_raw_varint(&in, 1);
	pb_put_raw_varint(&in, 0);
	pb_end_nested(&in, p);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);
	struct pb_field te = sub(out.data, out.len, TP_TRACK_EVENT, 0);
	assert_int_equal(u(te.data, te.len, TE_TRACK_UUID),
			 rewrite_remap_uuid(555, key));
	struct pb_field ex = sub(te.data, te.len, TE_EXTRA_COUNTER_TRACK_UUIDS, 0);
	struct pb_packed_iter it;
	uint64_t v;
	pb_packed_init(&it, ex.data, ex.len);
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, rewrite_remap_uuid(1, key));
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, 0);

	/* pid 0 (idle) stays 0 in sched_switch */
	pb_buf_reset(&in);
	m = pb_begin_nested(&in, TP_FTRACE_EVENTS);
	size_t e = pb_begin_nested(&in, FB_EVENT);
	pb_put_varint(&in, FE_PID, 0);
	size_t s = pb_begin_nested(&in, FE_SCHED_SWITCH);
	pb_put_varint(&in, SS_PREV_PID, 0);
	pb_put_varint(&in, SS_NEXT_PID, 99);
	pb_end_nested(&in, s);
	pb_end_nested(&in, e);
	pb_end_nested(&in, m);
	rewrite(rw, &in, &out);
	struct pb_field b = sub(out.data, out.len, TP_FTRACE_EVENTS, 0);
	struct pb_field ev = sub(b.data, b.len, FB_EVENT, 0);
	struct pb_field ss = sub(ev.data, ev.len, FE_SCHED_SWITCH, 0);
	assert_int_equal(u(ev.data, ev.len, FE_PID), 0);
	assert_int_equal(u(ss.data, ss.len, SS_PREV_PID), 0);
	assert_int_equal(u(ss.data, ss.len, SS_NEXT_PID), 99 + off);

	pb_buf_free(&in);
	pb_buf_free(&out);
	rewriter_free(rw);
}

/* The uuid permutation never produces 0 from a non-zero uuid and never
 * maps two uuids to one (checked on a sample, and by construction). */
static void test_uuid_permutation(void **state)
{
	(void)state;
	const uint64_t key = 0x9e3779b97f4a7c15ull * 5;
	assert_int_equal(rewrite_remap_uuid(0, key), 0);
	uint64_t x = 1;
	for (int i = 0; i < 100000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t y = rewrite_remap_uuid(x, key);
		if (x)
			assert_true(y != 0);
		assert_true(rewrite_remap_uuid(x + 1, key) != y);
	}
}

static void test_malformed_offsets(void **state)
{
	(void)state;
	struct rewriter *rw = new_rw(false);
	struct pb_buf in, out;
	struct vp_error err = {{0}};
	pb_buf_init(&in);
	pb_buf_init(&out);

	/* a track_event whose inner field claims more bytes than it has */
	pb_put_varint(&in, TP_TIMESTAMP, 5);
	pb_put_tag(&in, TP_TRACK_EVENT, PB_WT_LEN);
	pb_put_raw_varint(&in, 3);
	const uint8_t inner[] = {0x0a /* field 1 LEN */, 0x10, 0x00};
	pb_put_raw(&in, inner, 3);
	pb_buf_reset(&out);
	assert_int_equal(rewrite_packet(rw, in.data, in.len, 1000, &out, &err), -1);
	print_message("%s\n", err.msg);
	/* packet at 1000; timestamp 2 bytes; track_event tag + len 2 bytes */
	assert_non_null(strstr(err.msg, "guest.pb: byte offset 1004"));
	assert_non_null(strstr(err.msg, "track_event"));

	pb_buf_free(&in);
	pb_buf_free(&out);
	rewriter_free(rw);
}

/* A map that leaves some times unmapped and sends some back in time, so
 * that compact_sched lists meet every case: mapped, unmapped, clamped. */
/* rewrite_field_passes: a field of a number it names is copied byte for
 * byte and never read, whatever it holds (here bytes that are no message
 * at all), by a rewriter of either configuration; and so is one that
 * rewrite_field_passes_ids_kept names, by a rewriter that keeps ids. */
static void test_passing_fields(void **state)
{
	static const uint8_t junk[] = {0xff, 0xff, 0xff, 0x07, 0x0b, 0x00};
	struct pb_buf in, out, want;
	unsigned n_pass = 0;

	(void)state;
	pb_buf_init(&in);
	pb_buf_init(&out);
	pb_buf_init(&want);
	for (int remap = 0; remap < 2; remap++) {
		struct rewriter *rw = new_rw(remap);
		for (uint32_t num = 1; num <= 1200; num++) {
			if (remap ? !rewrite_field_passes(num)
				  : !rewrite_field_passes_ids_kept(num))
				continue;
			n_pass += !remap;
			pb_buf_reset(&in);
			pb_buf_reset(&want);
			pb_put_varint(&in, TP_TIMESTAMP, 7000000000ull);
			pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 3);
			pb_put_bytes(&want, num, junk, sizeof(junk));
			pb_put_raw(&in, want.data, want.len);
			rewrite(rw, &in, &out);
			assert_non_null(memmem(out.data, out.len, want.data,
					       want.len));
		}
		rewriter_free(rw);
	}
	/* what the rewrite reads does not pass; most numbers do */
	assert_false(rewrite_field_passes(TP_TRACK_EVENT));
	assert_false(rewrite_field_passes(TP_FTRACE_EVENTS));
	assert_false(rewrite_field_passes(TP_CLOCK_SNAPSHOT));
	assert_false(rewrite_field_passes(TP_COMPRESSED_PACKETS));
	assert_true(rewrite_field_passes(TP_INTERNED_DATA));
	assert_true(rewrite_field_passes(9000));
	assert_false(rewrite_field_passes(TP_PROCESS_TREE));
	assert_true(rewrite_field_passes_ids_kept(TP_PROCESS_TREE));
	assert_false(rewrite_field_passes_ids_kept(TP_TRACK_EVENT));
	assert_false(rewrite_field_passes_ids_kept(TP_TRACE_PACKET_DEFAULTS));
	assert_true(n_pass > 1100);

	/* rewrite_field_passes_in: the same inside a track event that the
	 * rewrite edits (its track uuid remapped, or its time mapped) */
	struct pb_buf te;
	pb_buf_init(&te);
	for (int remap = 0; remap < 2; remap++) {
		struct rewriter *rw = new_rw(remap);
		for (uint32_t sub = 1; sub <= 200; sub++) {
			if (!rewrite_field_passes_in(TP_TRACK_EVENT, sub))
				continue;
			pb_buf_reset(&in);
			pb_buf_reset(&te);
			pb_buf_reset(&want);
			pb_put_varint(&te, TE_TRACK_UUID, 77);
			pb_put_varint(&te, TE_TIMESTAMP_ABSOLUTE_US, 7000000);
			pb_put_bytes(&want, sub, junk, sizeof(junk));
			pb_put_raw(&te, want.data, want.len);
			pb_put_varint(&in, TP_TIMESTAMP, 7000000000ull);
			pb_put_varint(&in, TP_TRUSTED_PACKET_SEQUENCE_ID, 3);
			pb_put_bytes(&in, TP_TRACK_EVENT, te.data, te.len);
			rewrite(rw, &in, &out);
			assert_non_null(memmem(out.data, out.len, want.data,
					       want.len));
		}
		rewriter_free(rw);
	}
	pb_buf_free(&te);
	assert_true(rewrite_field_passes_in(TP_TRACK_EVENT, 0));
	assert_true(rewrite_field_passes_in(TP_TRACK_EVENT,
					    TE_DEBUG_ANNOTATIONS));
	assert_false(rewrite_field_passes_in(TP_TRACK_EVENT, TE_TRACK_UUID));
	assert_false(rewrite_field_passes_in(TP_FTRACE_EVENTS, 0));
	pb_buf_free(&in);
	pb_buf_free(&out);
	pb_buf_free(&want);
}

static bool odd_map(void *ctx, uint32_t clock, uint64_t in, uint64_t *out)
{
	(void)ctx;
	if (clock != BUILTIN_CLOCK_BOOTTIME || in % 7 == 3)
		return false;
	*out = in % 11 == 5 ? in / 2 : host_boot(in);
	return true;
}

static void odd_map_many(void *ctx, uint32_t clock, const uint64_t *in,
			 uint64_t *out, bool *ok, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ok[i] = odd_map(ctx, clock, in[i], &out[i]);
}

/* Long compact_sched lists rewritten through map_many (in batches) give
 * the bytes and counts of the map taken one time after the other. */
static void test_compact_sched_many(void **state)
{
	(void)state;
	struct rewrite_cfg cfg = {
		.path = "guest.pb",
		.map = odd_map,
		.target_clock = BUILTIN_CLOCK_BOOTTIME,
		.trace_clock = BUILTIN_CLOCK_BOOTTIME,
		.machine_id = 7,
	};
	struct rewriter *one = rewriter_new(&cfg);
	cfg.map_many = odd_map_many;
	struct rewriter *many = rewriter_new(&cfg);
	struct pb_buf in, a, b;
	uint64_t seed = 1;

	pb_buf_init(&in);
	pb_buf_init(&a);
	pb_buf_init(&b);
	for (size_t len = 0; len < 300; len += 1 + len / 3) {
		pb_buf_reset(&in);
		size_t m = pb_begin_nested(&in, TP_FTRACE_EVENTS);
		size_t cs = pb_begin_nested(&in, FB_COMPACT_SCHED);
		for (int list = 0; list < 2; list++) {
			size_t p = pb_begin_nested(&in, list ? CSCHED_WAKING_TIMESTAMP
							     : CSCHED_SWITCH_TIMESTAMP);
			for (size_t i = 0; i < len; i++) {
				seed = seed * 6364136223846793005ull + 1;
				pb_put_raw_varint(&in, i ? (seed >> 40) % 100000
							 : 6000000000ull);
			}
			pb_end_nested(&in, p);
		}
		pb_end_nested(&in, cs);
		pb_end_nested(&in, m);
		rewrite(one, &in, &a);
		rewrite(many, &in, &b);
		assert_int_equal(a.len, b.len);
		assert_memory_equal(a.data, b.data, a.len);

		/* each output delta as the rule says: the mapped time, the
		 * input's own when unmapped, never before the previous */
		struct pb_field fb = sub(in.data, in.len, TP_FTRACE_EVENTS, 0);
		struct pb_field ci = sub(fb.data, fb.len, FB_COMPACT_SCHED, 0);
		fb = sub(a.data, a.len, TP_FTRACE_EVENTS, 0);
		struct pb_field co = sub(fb.data, fb.len, FB_COMPACT_SCHED, 0);
		for (int list = 0; list < 2 && len; list++) {
			uint32_t num = list ? CSCHED_WAKING_TIMESTAMP
					    : CSCHED_SWITCH_TIMESTAMP;
			struct pb_field li = sub(ci.data, ci.len, num, 0);
			struct pb_field lo = sub(co.data, co.len, num, 0);
			struct pb_packed_iter ii, io;
			uint64_t v, w, abs_in = 0, prev = 0;
			pb_packed_init(&ii, li.data, li.len);
			pb_packed_init(&io, lo.data, lo.len);
			while (pb_packed_next(&ii, &v)) {
				uint64_t o;
				abs_in += v;
				if (!odd_map(NULL, BUILTIN_CLOCK_BOOTTIME, abs_in,
					     &o))
					o = abs_in;
				if (o < prev)
					o = prev;
				assert_true(pb_packed_next(&io, &w));
				assert_int_equal(w, o - prev);
				prev = o;
			}
			assert_false(pb_packed_next(&io, &w));
		}
	}
	const struct rewrite_stats *s1 = rewriter_stats(one);
	const struct rewrite_stats *s2 = rewriter_stats(many);
	assert_true(s1->ts_compact > 1000 && s1->ts_unmapped > 100 &&
		    s1->clamped > 100);
	assert_int_equal(s1->ts_compact, s2->ts_compact);
	assert_int_equal(s1->ts_unmapped, s2->ts_unmapped);
	assert_int_equal(s1->clamped, s2->clamped);
	pb_buf_free(&in);
	pb_buf_free(&a);
	pb_buf_free(&b);
	rewriter_free(one);
	rewriter_free(many);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_packet_timestamp_and_identity),
		cmocka_unit_test(test_compact_sched_many),
		cmocka_unit_test(test_monotonic_relabelled),
		cmocka_unit_test(test_scoped_clocks),
		cmocka_unit_test(test_legacy_us),
		cmocka_unit_test(test_ftrace),
		cmocka_unit_test(test_remap_ids),
		cmocka_unit_test(test_uuid_permutation),
		cmocka_unit_test(test_malformed_offsets),
		cmocka_unit_test(test_passing_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
