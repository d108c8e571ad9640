/*
 * test_sync_scan.c - what the sync scanner takes for clock-sync data and
 * what it must not: literal and interned names, uint and int values,
 * interning cleared with the sequence's incremental state, iids scoped to
 * their sequence, the SDK's incremental clock 64 never taken for the
 * counter, exchanges and kvm_tsc records, malformed data with offsets.
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
#include "sync_scan.h"

static void scan(struct sync_scanner *s, struct pb_buf *b)
{
	struct vp_error err = {{0}};
	int rc = sync_scan_packet(s, b->data, b->len, 0, &err);
	if (rc)
		print_error("%s\n", err.msg);
	assert_int_equal(rc, 0);
	pb_buf_reset(b);
}

static void test_literal_and_interned(void **state)
{
	(void)state;
	struct sync_scanner *s = sync_scanner_new("g.pb");
	struct pb_buf b;
	pb_buf_init(&b);

	/* literal names, uint values */
	pb_put_varint(&b, TP_TRUSTED_PACKET_SEQUENCE_ID, 1);
	size_t m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_string(&b, TE_CATEGORIES, "cros");
	pb_put_string(&b, TE_NAME, "guest_clock_sync");
	put_annotation(&b, "clock_sync_boottime", 0, DA_UINT_VALUE, 1000);
	put_annotation(&b, "clock_sync_monotonic", 0, DA_UINT_VALUE, 900);
	put_annotation(&b, "clock_sync_cputime", 0, DA_UINT_VALUE, 3000);
	pb_end_nested(&b, m);
	scan(s, &b);

	/* interned on sequence 2, int values */
	pb_put_varint(&b, TP_TRUSTED_PACKET_SEQUENCE_ID, 2);
	pb_put_varint(&b, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	m = pb_begin_nested(&b, TP_INTERNED_DATA);
	put_interned(&b, ID_EVENT_CATEGORIES, 1, "cros");
	put_interned(&b, ID_EVENT_NAMES, 5, "guest_clock_sync");
	put_interned(&b, ID_DEBUG_ANNOTATION_NAMES, 7, "clock_sync_boottime");
	put_interned(&b, ID_DEBUG_ANNOTATION_NAMES, 8, "clock_sync_cputime");
	pb_end_nested(&b, m);
	m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_varint(&b, TE_CATEGORY_IIDS, 1);
	pb_put_varint(&b, TE_NAME_IID, 5);
	put_annotation(&b, NULL, 7, DA_INT_VALUE, 2000);
	put_annotation(&b, NULL, 8, DA_INT_VALUE, 6000);
	pb_end_nested(&b, m);
	scan(s, &b);

	/* the same iids on sequence 3 mean nothing */
	pb_put_varint(&b, TP_TRUSTED_PACKET_SEQUENCE_ID, 3);
	m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_varint(&b, TE_CATEGORY_IIDS, 1);
	pb_put_varint(&b, TE_NAME_IID, 5);
	put_annotation(&b, NULL, 7, DA_UINT_VALUE, 1);
	put_annotation(&b, NULL, 8, DA_UINT_VALUE, 2);
	pb_end_nested(&b, m);
	scan(s, &b);

	/* sequence 2 clears its state: the old iids are gone */
	pb_put_varint(&b, TP_TRUSTED_PACKET_SEQUENCE_ID, 2);
	pb_put_varint(&b, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_varint(&b, TE_CATEGORY_IIDS, 1);
	pb_put_varint(&b, TE_NAME_IID, 5);
	put_annotation(&b, NULL, 7, DA_UINT_VALUE, 1);
	put_annotation(&b, NULL, 8, DA_UINT_VALUE, 2);
	pb_end_nested(&b, m);
	scan(s, &b);

	/* another category with the same name is not ours */
	m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_string(&b, TE_CATEGORIES, "other");
	pb_put_string(&b, TE_NAME, "guest_clock_sync");
	put_annotation(&b, "clock_sync_boottime", 0, DA_UINT_VALUE, 1);
	put_annotation(&b, "clock_sync_cputime", 0, DA_UINT_VALUE, 2);
	pb_end_nested(&b, m);
	scan(s, &b);

	struct sync_data *d = sync_scanner_data(s);
	assert_int_equal(d->boot.n, 2);
	assert_int_equal(d->boot.v[0].x, 3000);
	assert_int_equal(d->boot.v[0].y, 1000);
	assert_int_equal(d->boot.v[1].x, 6000);
	assert_int_equal(d->boot.v[1].y, 2000);
	assert_int_equal(d->mono.n, 1);
	assert_int_equal(d->n_event_samples, 2);
	assert_int_equal(d->max_seq_id, 3);
	pb_buf_free(&b);
	sync_scanner_free(s);
}

static void test_snapshots(void **state)
{
	(void)state;
	struct sync_scanner *s = sync_scanner_new("h.pb");
	struct pb_buf b;
	pb_buf_init(&b);

	/* the counter form */
	size_t m = pb_begin_nested(&b, TP_CLOCK_SNAPSHOT);
	put_clock(&b, BUILTIN_CLOCK_BOOTTIME, 5000, false, 0);
	put_clock(&b, CPU_COUNTER_CLOCK_ID, 15000, false, 0);
	pb_end_nested(&b, m);
	scan(s, &b);
	/* the SDK's incremental clock 64: never the counter */
	m = pb_begin_nested(&b, TP_CLOCK_SNAPSHOT);
	put_clock(&b, BUILTIN_CLOCK_BOOTTIME, 6000, false, 0);
	put_clock(&b, CPU_COUNTER_CLOCK_ID, 6, true, 1000);
	pb_end_nested(&b, m);
	scan(s, &b);
	/* clock 64 with a unit multiplier is not the counter either */
	m = pb_begin_nested(&b, TP_CLOCK_SNAPSHOT);
	put_clock(&b, BUILTIN_CLOCK_BOOTTIME, 7000, false, 0);
	put_clock(&b, CPU_COUNTER_CLOCK_ID, 7, false, 1000);
	pb_end_nested(&b, m);
	scan(s, &b);
	/* traced's builtin snapshot: no counter */
	m = pb_begin_nested(&b, TP_CLOCK_SNAPSHOT);
	put_clock(&b, BUILTIN_CLOCK_BOOTTIME, 8000, false, 0);
	put_clock(&b, BUILTIN_CLOCK_MONOTONIC, 7900, false, 0);
	put_clock(&b, BUILTIN_CLOCK_REALTIME, 99999, false, 0);
	pb_end_nested(&b, m);
	scan(s, &b);
	/* MONOTONIC form */
	m = pb_begin_nested(&b, TP_CLOCK_SNAPSHOT);
	put_clock(&b, BUILTIN_CLOCK_MONOTONIC, 8500, false, 0);
	put_clock(&b, CPU_COUNTER_CLOCK_ID, 25000, false, 0);
	pb_put_varint(&b, CS_PRIMARY_TRACE_CLOCK, BUILTIN_CLOCK_MONOTONIC);
	pb_end_nested(&b, m);
	scan(s, &b);

	struct sync_data *d = sync_scanner_data(s);
	assert_int_equal(d->boot.n, 1);
	assert_int_equal(d->boot.v[0].x, 15000);
	assert_int_equal(d->mono.n, 1);
	assert_int_equal(d->mono.v[0].x, 25000);
	assert_int_equal(d->n_incremental_64, 2);
	assert_int_equal(d->n_snapshot_samples, 2);
	assert_int_equal(d->trace_clock, BUILTIN_CLOCK_MONOTONIC);
	pb_buf_free(&b);
	sync_scanner_free(s);
}

static void test_exchanges_and_kvm(void **state)
{
	(void)state;
	struct sync_scanner *s = sync_scanner_new("x.pb");
	struct pb_buf b;
	pb_buf_init(&b);

	size_t m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_string(&b, TE_CATEGORIES, "cros");
	pb_put_string(&b, TE_NAME, "guest_clock_sync_exchange");
	put_annotation(&b, "sync_seq", 0, DA_UINT_VALUE, 4);
	put_annotation(&b, "guest_cputime_send", 0, DA_UINT_VALUE, 100);
	put_annotation(&b, "guest_cputime_recv", 0, DA_UINT_VALUE, 180);
	put_annotation(&b, "host_cputime", 0, DA_UINT_VALUE, 5000140);
	pb_end_nested(&b, m);
	scan(s, &b);
	/* recv before send: not an exchange */
	m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_string(&b, TE_CATEGORIES, "cros");
	pb_put_string(&b, TE_NAME, "guest_clock_sync_exchange");
	put_annotation(&b, "guest_cputime_send", 0, DA_UINT_VALUE, 200);
	put_annotation(&b, "guest_cputime_recv", 0, DA_UINT_VALUE, 100);
	put_annotation(&b, "host_cputime", 0, DA_UINT_VALUE, 1);
	pb_end_nested(&b, m);
	scan(s, &b);
	/* kvm_tsc with a negative offset as int_value */
	pb_put_varint(&b, TP_TIMESTAMP, 777);
	m = pb_begin_nested(&b, TP_TRACK_EVENT);
	pb_put_string(&b, TE_CATEGORIES, "vperfetto");
	pb_put_string(&b, TE_NAME, "kvm_tsc");
	put_annotation(&b, "vm_pid", 0, DA_INT_VALUE, 4242);
	put_annotation(&b, "vcpu", 0, DA_INT_VALUE, 0);
	put_annotation(&b, "tsc_offset", 0, DA_INT_VALUE, (uint64_t)-123456789ll);
	put_annotation(&b, "tsc_scaling_ratio", 0, DA_UINT_VALUE, 1ull << 48);
	put_annotation(&b, "tsc_scaling_frac_bits", 0, DA_UINT_VALUE, 48);
	pb_end_nested(&b, m);
	scan(s, &b);

	struct sync_data *d = sync_scanner_data(s);
	assert_int_equal(d->n_ex, 1);
	assert_int_equal(d->ex[0].guest_send, 100);
	assert_int_equal(d->ex[0].host, 5000140);
	assert_int_equal(d->ex[0].seq, 4);
	assert_int_equal(d->n_bad_sync_events, 1);
	assert_int_equal(d->n_kvm, 1);
	assert_int_equal(d->kvm[0].vm_pid, 4242);
	assert_int_equal(d->kvm[0].tsc_offset, -123456789ll);
	assert_int_equal(d->kvm[0].ratio, 1ull << 48);
	assert_int_equal(d->kvm[0].frac_bits, 48);
	assert_int_equal(d->kvm[0].ts, 777);
	pb_buf_free(&b);
	sync_scanner_free(s);
}

static void test_malformed(void **state)
{
	(void)state;
	struct sync_scanner *s = sync_scanner_new("m.pb");
	struct vp_error err = {{0}};
	/* clock_snapshot (field 6) whose Clock entry is cut short */
	const uint8_t pkt[] = {0x32, 0x04, 0x0a, 0x02, 0x08, 0x80};
	assert_int_equal(sync_scan_packet(s, pkt, sizeof(pkt), 500, &err), -1);
	print_message("%s\n", err.msg);
	assert_non_null(strstr(err.msg, "m.pb: byte offset 504"));
	sync_scanner_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_literal_and_interned),
		cmocka_unit_test(test_snapshots),
		cmocka_unit_test(test_exchanges_and_kvm),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
