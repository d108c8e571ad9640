/*
 * test_trace_model.c - the trace model: a packet's envelope decoded in
 * one walk, and the sequence state rules the merge and the processor
 * share (clears, losses, packets needing state, defaults).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "trace_model.h"

/* A packet: the fields given as (num, value) varints, optionally with
 * TracePacketDefaults naming a clock and a track_event payload. */
struct spec {
	uint64_t ts, clock, seq, flags, dropped, cleared, machine;
	int defaults_clock; /* -1: no defaults */
	bool track_event;
};

static void build(struct pb_buf *b, const struct spec *s)
{
	pb_buf_init(b);
	if (s->ts)
		pb_put_varint(b, TP_TIMESTAMP, s->ts);
	if (s->clock)
		pb_put_varint(b, TP_TIMESTAMP_CLOCK_ID, s->clock);
	if (s->seq)
		pb_put_varint(b, TP_TRUSTED_PACKET_SEQUENCE_ID, s->seq);
	if (s->flags)
		pb_put_varint(b, TP_SEQUENCE_FLAGS, s->flags);
	if (s->dropped)
		pb_put_varint(b, TP_PREVIOUS_PACKET_DROPPED, s->dropped);
	if (s->cleared)
		pb_put_varint(b, TP_INCREMENTAL_STATE_CLEARED, s->cleared);
	if (s->machine)
		pb_put_varint(b, TP_MACHINE_ID, s->machine);
	if (s->defaults_clock >= 0) {
		size_t m = pb_begin_nested(b, TP_TRACE_PACKET_DEFAULTS);
		pb_put_varint(b, TPD_TIMESTAMP_CLOCK_ID,
			      (uint64_t)s->defaults_clock);
		pb_end_nested(b, m);
	}
	if (s->track_event)
		pb_put_bytes(b, TP_TRACK_EVENT, "\x08\x01", 2);
}

static unsigned feed(struct vp_seq_state *st, const struct spec *s,
		     struct vp_packet *p, struct pb_buf *b)
{
	build(b, s);
	assert_true(vp_packet_decode(p, b->data, b->len));
	return vp_seq_update(st, p);
}

static void test_envelope(void **state)
{
	(void)state;
	struct pb_buf b;
	struct vp_packet p;
	struct spec s = {.ts = 1234, .clock = 64, .seq = 7, .flags = 2,
			 .machine = 3, .defaults_clock = 6,
			 .track_event = true};

	build(&b, &s);
	assert_true(vp_packet_decode(&p, b.data, b.len));
	assert_true(p.has_ts && p.ts == 1234);
	assert_true(p.has_clock_id && p.clock_id == 64);
	assert_true(p.has_seq_id && p.seq_id == 7);
	assert_int_equal(p.seq_flags, 2);
	assert_false(p.clears_state);
	assert_true(p.has_machine_id && p.machine_id == 3);
	assert_non_null(p.defaults.data);
	assert_null(p.interned.data);
	assert_int_equal(p.payload_num, TP_TRACK_EVENT);
	assert_int_equal(p.payload.len, 2);
	assert_int_equal(p.n_fields, 7);

	/* every field again, in order; the envelope-only walk agrees */
	size_t i = 0, n = 0;
	struct pb_reader r;
	struct pb_field spare;
	const struct pb_field *f;
	uint32_t last = 0;
	while (vp_packet_field(&p, &i, &r, &spare, &f)) {
		n++;
		last = f->num;
	}
	assert_int_equal(n, 7);
	assert_int_equal(last, TP_TRACK_EVENT);
	struct vp_packet q;
	assert_true(vp_packet_envelope(&q, b.data, b.len));
	assert_int_equal(q.ts, 1234);
	assert_int_equal(q.payload_num, TP_TRACK_EVENT);
	i = n = 0;
	while (vp_packet_field(&q, &i, &r, &spare, &f))
		n++;
	assert_int_equal(n, 7);
	pb_buf_free(&b);
}

/* A clock id of 0 is no clock, in a packet or in its defaults. */
static void test_clock_zero_is_none(void **state)
{
	(void)state;
	struct pb_buf b;
	struct vp_packet p;
	struct vp_seq_state st = {0};

	pb_buf_init(&b);
	pb_put_varint(&b, TP_TIMESTAMP, 5);
	pb_put_varint(&b, TP_TIMESTAMP_CLOCK_ID, 0);
	assert_true(vp_packet_decode(&p, b.data, b.len));
	assert_false(p.has_clock_id);
	assert_int_equal(vp_seq_packet_clock(&st, &p, 6), 6);
	pb_buf_free(&b);

	struct spec s = {.seq = 1, .flags = 1, .defaults_clock = 0};
	feed(&st, &s, &p, &b);
	pb_buf_free(&b);
	assert_false(st.has_default_clock);
	s = (struct spec){.seq = 1, .defaults_clock = 3};
	feed(&st, &s, &p, &b);
	pb_buf_free(&b);
	assert_int_equal(vp_seq_packet_clock(&st, &p, 6), 3);
}

static void test_sequence_rules(void **state)
{
	(void)state;
	struct pb_buf b;
	struct vp_packet p;
	struct vp_seq_state st = {0};
	unsigned ev;

	/* needs state before any clear: skipped, defaults still taken */
	struct spec s = {.seq = 1, .flags = 2, .defaults_clock = 64};
	ev = feed(&st, &s, &p, &b);
	pb_buf_free(&b);
	assert_true(ev & VP_SEQ_SKIP);
	assert_true(ev & VP_SEQ_DEFAULTS);
	assert_true(st.has_default_clock && st.default_clock == 64);
	assert_int_equal(st.skipped, 1);

	/* the first clear after a packet starts generation 1, drops the
	 * defaults and makes the state valid */
	s = (struct spec){.seq = 1, .flags = 3, .defaults_clock = -1};
	ev = feed(&st, &s, &p, &b);
	pb_buf_free(&b);
	assert_int_equal(ev, VP_SEQ_CLEARED | VP_SEQ_NEW_GENERATION);
	assert_int_equal(st.generation, 1);
	assert_false(st.has_default_clock);
	assert_true(st.valid);

	/* a plain packet needing state reads */
	s = (struct spec){.seq = 1, .flags = 2, .defaults_clock = -1};
	assert_int_equal(feed(&st, &s, &p, &b), 0);
	pb_buf_free(&b);

	/* a loss invalidates; the next packet needing state is skipped */
	s = (struct spec){.seq = 1, .dropped = 1, .defaults_clock = -1};
	assert_int_equal(feed(&st, &s, &p, &b), VP_SEQ_LOST);
	pb_buf_free(&b);
	assert_false(st.valid);
	assert_int_equal(st.losses, 1);
	s = (struct spec){.seq = 1, .flags = 2, .defaults_clock = -1};
	assert_int_equal(feed(&st, &s, &p, &b), VP_SEQ_SKIP);
	pb_buf_free(&b);

	/* a loss in a packet that clears (the old field) stays valid */
	s = (struct spec){.seq = 1, .dropped = 1, .cleared = 1,
			  .flags = 2, .defaults_clock = -1};
	ev = feed(&st, &s, &p, &b);
	pb_buf_free(&b);
	assert_int_equal(ev, VP_SEQ_CLEARED | VP_SEQ_NEW_GENERATION);
	assert_true(st.valid);
	assert_int_equal(st.generation, 2);
	assert_int_equal(st.losses, 2);
	assert_int_equal(st.packets, 6);
}

/* A first packet's loss mark is no loss: nothing came before it. */
static void test_first_packet_loss(void **state)
{
	(void)state;
	struct pb_buf b;
	struct vp_packet p;
	struct vp_seq_state st = {0};
	struct spec s = {.seq = 9, .dropped = 1, .flags = 1,
			 .defaults_clock = -1};

	assert_int_equal(feed(&st, &s, &p, &b), VP_SEQ_CLEARED);
	pb_buf_free(&b);
	assert_int_equal(st.losses, 0);
	assert_int_equal(st.generation, 0);
}

static void test_malformed(void **state)
{
	(void)state;
	struct vp_packet p;
	/* timestamp, then a LEN field that runs past the end */
	static const uint8_t bad[] = {0x40, 0x05, 0x52, 0x09, 0x01};
	assert_false(vp_packet_decode(&p, bad, sizeof(bad)));
	assert_int_equal(p.err, PB_ERR_TRUNCATED);
	assert_int_equal(p.err_off, 2);
	assert_true(p.has_ts && p.ts == 5);

	/* malformed defaults: reported, and naming no clock */
	struct pb_buf b;
	struct vp_seq_state st = {0};
	pb_buf_init(&b);
	pb_put_bytes(&b, TP_TRACE_PACKET_DEFAULTS, "\x58\xff", 2);
	assert_true(vp_packet_decode(&p, b.data, b.len));
	assert_true(vp_seq_update(&st, &p) & VP_SEQ_BAD_DEFAULTS);
	assert_false(st.has_default_clock);
	pb_buf_free(&b);
}

/* More fields than the packet keeps: the walk goes on over the bytes. */
static void test_many_fields(void **state)
{
	(void)state;
	struct pb_buf b;
	struct vp_packet p;

	pb_buf_init(&b);
	for (int k = 0; k < VP_PACKET_MAX_FIELDS + 5; k++)
		pb_put_varint(&b, 1000 + (uint32_t)k, (uint64_t)k);
	pb_put_varint(&b, TP_TIMESTAMP, 77);
	assert_true(vp_packet_decode(&p, b.data, b.len));
	assert_int_equal(p.n_fields, VP_PACKET_MAX_FIELDS + 6);
	assert_int_equal(p.ts, 77);
	size_t i = 0, n = 0;
	struct pb_reader r;
	struct pb_field spare;
	const struct pb_field *f;
	while (vp_packet_field(&p, &i, &r, &spare, &f)) {
		if (n < VP_PACKET_MAX_FIELDS + 5)
			assert_int_equal(f->num, 1000 + n);
		n++;
	}
	assert_int_equal(n, VP_PACKET_MAX_FIELDS + 6);
	pb_buf_free(&b);
}

/* ClockSnapshot: clocks in order, primary_trace_clock wherever it is,
 * malformed entries named with the reader that failed. */
static void test_snapshot(void **state)
{
	(void)state;
	struct pb_buf b;
	struct vp_snapshot_iter it;
	struct vp_clock_reading c;

	pb_buf_init(&b);
	size_t m = pb_begin_nested(&b, CS_CLOCKS);
	pb_put_varint(&b, CLK_CLOCK_ID, 6);
	pb_put_varint(&b, CLK_TIMESTAMP, 1000);
	pb_end_nested(&b, m);
	m = pb_begin_nested(&b, CS_CLOCKS);
	pb_put_varint(&b, CLK_CLOCK_ID, 64);
	pb_put_varint(&b, CLK_TIMESTAMP, 5);
	pb_put_varint(&b, CLK_IS_INCREMENTAL, 1);
	pb_put_varint(&b, CLK_UNIT_MULTIPLIER_NS, 1000);
	pb_end_nested(&b, m);
	pb_put_varint(&b, CS_PRIMARY_TRACE_CLOCK, 6);

	vp_snapshot_begin(&it, b.data, b.len);
	assert_true(vp_snapshot_next(&it, &c));
	assert_int_equal(c.id, 6);
	assert_int_equal(c.ts, 1000);
	assert_true(c.has_ts);
	assert_false(c.incremental);
	assert_int_equal(c.unit_ns, 0);
	assert_true(vp_snapshot_next(&it, &c));
	assert_int_equal(c.id, 64);
	assert_true(c.incremental);
	assert_int_equal(c.unit_ns, 1000);
	assert_false(vp_snapshot_next(&it, &c));
	assert_null(it.bad);
	assert_true(it.has_primary);
	assert_int_equal(it.primary, 6);
	pb_buf_free(&b);

	/* an entry whose varint runs past its end */
	pb_buf_init(&b);
	pb_put_bytes(&b, CS_CLOCKS, "\x08\xff", 2);
	vp_snapshot_begin(&it, b.data, b.len);
	assert_false(vp_snapshot_next(&it, &c));
	assert_ptr_equal(it.bad, &it.cr);
	assert_string_equal(it.bad_what, "clock snapshot entry");
	assert_int_equal(it.cr.err_off, 0);
	pb_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envelope),
		cmocka_unit_test(test_clock_zero_is_none),
		cmocka_unit_test(test_sequence_rules),
		cmocka_unit_test(test_first_packet_loss),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_many_fields),
		cmocka_unit_test(test_snapshot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
