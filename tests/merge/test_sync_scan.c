/*
 * test_sync_scan.c - what the sync scanner takes for clock-sync data and
 * what it must not: literal and interned names, uint and int values,
 * interning cleared with the sequence's incremental state, iids scoped to
 * their sequence, the SDK's incremental clock 64 never taken for the
 * counter, exchanges and kvm_tsc records, malformed data with offsets;
 * the skim of large packets (sync_skim.h) finding what the plain scan
 * of the same file finds, falling back where it must; and a trace
 * scanned in two parts and joined giving what one scan does, split
 * anywhere, or saying it cannot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "packet_build.h"
#include "pb_wire.h"
#include "perfetto_fields.h"
#include "sync_scan.h"
#include "sync_skim.h"
#include "trace_io.h"

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

/* ---- the skim of large packets ----------------------------------------- */

/* An ftrace bundle of about `size` bytes: compact_sched timestamps, and
 * the cpu (when cpu >= 0) before them or after them. */
static void put_bundle(struct pb_buf *b, int cpu, bool cpu_last, size_t size)
{
	size_t m = pb_begin_nested(b, TP_FTRACE_EVENTS);
	if (cpu >= 0 && !cpu_last)
		pb_put_varint(b, FB_CPU, (uint64_t)cpu);
	size_t cs = pb_begin_nested(b, FB_COMPACT_SCHED);
	size_t ts = pb_begin_nested(b, CSCHED_SWITCH_TIMESTAMP);
	for (size_t i = 0; i < size / 2; i++)
		pb_put_raw_varint(b, 1000 + i % 300);
	pb_end_nested(b, ts);
	pb_end_nested(b, cs);
	if (cpu >= 0 && cpu_last)
		pb_put_varint(b, FB_CPU, (uint64_t)cpu);
	pb_end_nested(b, m);
}

static void put_sync_snapshot(struct pb_buf *b, uint64_t boot, uint64_t ctr)
{
	size_t m = pb_begin_nested(b, TP_CLOCK_SNAPSHOT);
	put_clock(b, BUILTIN_CLOCK_BOOTTIME, boot, false, 0);
	put_clock(b, CPU_COUNTER_CLOCK_ID, ctr, false, 0);
	pb_end_nested(b, m);
}

static void put_kvm(struct pb_buf *b, uint64_t ts, int64_t vcpu, int64_t off)
{
	pb_put_varint(b, TP_TIMESTAMP, ts);
	size_t m = pb_begin_nested(b, TP_TRACK_EVENT);
	pb_put_string(b, TE_CATEGORIES, "vperfetto");
	pb_put_string(b, TE_NAME, "kvm_tsc");
	put_annotation(b, "vm_pid", 0, DA_INT_VALUE, 4242);
	put_annotation(b, "vcpu", 0, DA_INT_VALUE, (uint64_t)vcpu);
	put_annotation(b, "tsc_offset", 0, DA_INT_VALUE, (uint64_t)off);
	pb_end_nested(b, m);
}

/* More samples than SYNC_MAX_SAMPLES: an even spread of them is kept
 * (every stride-th of those offered, in order), the rest counted; a
 * kvm_tsc record that repeats its vCPU's values is not kept. */
static void test_thinning(void **state)
{
	(void)state;
	struct sync_scanner *s = sync_scanner_new("x.pb");
	struct pb_buf b;
	const size_t n = 3 * SYNC_MAX_SAMPLES + 5;
	pb_buf_init(&b);

	for (size_t i = 0; i < n; i++) {
		put_sync_snapshot(&b, 1000000 + 3 * i, 5000 + i);
		scan(s, &b);
	}
	struct sync_data *d = sync_scanner_data(s);
	/* offered 3 * 2^17 + 5: thinned twice, every 4th kept */
	assert_int_equal(d->boot.thin.offered, n);
	assert_int_equal(d->boot.thin.stride, 4);
	assert_int_equal(d->boot.n, (n + 3) / 4);
	assert_true(d->boot.n <= SYNC_MAX_SAMPLES);
	for (size_t i = 0; i < d->boot.n; i++) {
		assert_int_equal(d->boot.v[i].x, 5000 + 4 * i);
		assert_int_equal(d->boot.v[i].y, 1000000 + 12 * i);
	}
	assert_int_equal(sync_data_thinned(d), n - d->boot.n);

	/* vcpu 0: 7, 7 (kept once), 8; vcpu 1: 7 between them */
	put_kvm(&b, 10, 0, 7);
	scan(s, &b);
	put_kvm(&b, 11, 1, 7);
	scan(s, &b);
	put_kvm(&b, 12, 0, 7);
	scan(s, &b);
	put_kvm(&b, 13, 0, 8);
	scan(s, &b);
	assert_int_equal(d->n_kvm, 3);
	assert_int_equal(d->kvm[0].ts, 10);
	assert_int_equal(d->kvm[1].ts, 11);
	assert_int_equal(d->kvm[2].ts, 13);
	assert_int_equal(d->n_kvm_dropped, 0);

	/* changes past SYNC_MAX_KVM are counted, not kept; a repeat of the
	 * last one kept is no change and no drop */
	for (size_t i = d->n_kvm; i < SYNC_MAX_KVM + 100; i++) {
		put_kvm(&b, 100 + i, 0, (int64_t)(9 + i));
		scan(s, &b);
	}
	assert_int_equal(d->n_kvm, SYNC_MAX_KVM);
	assert_int_equal(d->n_kvm_dropped, 100);
	put_kvm(&b, 1u << 30, 0, d->kvm[d->n_kvm - 1].tsc_offset);
	scan(s, &b);
	assert_int_equal(d->n_kvm_dropped, 100);
	pb_buf_free(&b);
	sync_scanner_free(s);
}

/* With more inputs than a host and a guest, each keeps its share: of
 * five, 2/5 of SYNC_MAX_SAMPLES samples and of SYNC_MAX_KVM changes; of
 * many, no fewer than SYNC_MIN_SAMPLES and SYNC_MIN_KVM. */
static void test_thinning_shared(void **state)
{
	(void)state;
	struct sync_scanner *s = sync_scanner_new("x.pb");
	struct pb_buf b;
	const size_t n = SYNC_MAX_SAMPLES + 7;
	pb_buf_init(&b);

	sync_scanner_share(s, 2); /* a host and a guest: as without */
	struct sync_data *d = sync_scanner_data(s);
	assert_int_equal(sync_data_max_samples(d), SYNC_MAX_SAMPLES);
	assert_int_equal(sync_data_max_kvm(d), SYNC_MAX_KVM);
	sync_scanner_share(s, 5);
	assert_int_equal(sync_data_max_samples(d), 2 * SYNC_MAX_SAMPLES / 5);
	assert_int_equal(sync_data_max_kvm(d), 2 * SYNC_MAX_KVM / 5);
	for (size_t i = 0; i < n; i++) {
		put_sync_snapshot(&b, 1000000 + 3 * i, 5000 + i);
		scan(s, &b);
	}
	assert_true(d->boot.n <= 2 * SYNC_MAX_SAMPLES / 5);
	assert_int_equal(d->boot.thin.stride, 4);
	assert_int_equal(d->boot.n, (n + 3) / 4);
	for (size_t i = 0; i < 2 * SYNC_MAX_KVM / 5 + 10; i++) {
		put_kvm(&b, 100 + i, 0, (int64_t)(9 + i));
		scan(s, &b);
	}
	assert_int_equal(d->n_kvm, 2 * SYNC_MAX_KVM / 5);
	assert_int_equal(d->n_kvm_dropped, 10);
	pb_buf_free(&b);
	sync_scanner_free(s);

	s = sync_scanner_new("y.pb");
	sync_scanner_share(s, 1000);
	assert_int_equal(sync_data_max_samples(sync_scanner_data(s)),
			 SYNC_MIN_SAMPLES);
	assert_int_equal(sync_data_max_kvm(sync_scanner_data(s)), SYNC_MIN_KVM);
	sync_scanner_free(s);
}

/* Appends packet p to the trace t and empties p. */
static void add_packet(struct pb_buf *t, struct pb_buf *p)
{
	pb_put_bytes(t, TRACE_PACKET_FIELD, p->data, p->len);
	pb_buf_reset(p);
}

/* A trace of large packets of every kind the skim meets. */
static void build_skim_trace(struct pb_buf *t)
{
	struct pb_buf p;
	pb_buf_init(&p);

	/* a bundle with its cpu first, beside a snapshot: skimmed */
	pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 5);
	put_sync_snapshot(&p, 1000, 5000);
	put_bundle(&p, 3, false, 40000);
	pb_put_varint(&p, TP_MACHINE_ID, 9);
	add_packet(t, &p);
	/* small packets between */
	for (int i = 0; i < 50; i++) {
		pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 6);
		put_sync_snapshot(&p, 2000 + (uint64_t)i, 6000 + (uint64_t)i);
		add_packet(t, &p);
	}
	/* the cpu after the events: the skim cannot see it in the head */
	put_bundle(&p, 11, true, 30000);
	pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 7);
	add_packet(t, &p);
	/* a large track event the scanner reads: read whole */
	pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 8);
	pb_put_varint(&p, TP_TIMESTAMP, 3000);
	size_t m = pb_begin_nested(&p, TP_TRACK_EVENT);
	pb_put_string(&p, TE_CATEGORIES, "cros");
	pb_put_string(&p, TE_NAME, "guest_clock_sync");
	put_annotation(&p, "clock_sync_boottime", 0, DA_UINT_VALUE, 3000);
	put_annotation(&p, "clock_sync_cputime", 0, DA_UINT_VALUE, 7000);
	for (int i = 0; i < 2000; i++)
		put_annotation(&p, "padding", 0, DA_UINT_VALUE, (uint64_t)i);
	pb_end_nested(&p, m);
	add_packet(t, &p);
	/* a large payload the scanner never reads, and a second bundle
	 * after the first (the payload is the last) */
	pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 12);
	m = pb_begin_nested(&p, TP_PROCESS_TREE);
	for (int i = 0; i < 6000; i++)
		pb_put_varint(&p, 1, 0);
	pb_end_nested(&p, m);
	put_bundle(&p, 2, false, 20000);
	put_bundle(&p, 14, false, 20000);
	add_packet(t, &p);
	/* a large bundle without a cpu */
	put_bundle(&p, -1, false, 20000);
	add_packet(t, &p);
	/* a large record that is not a packet */
	m = pb_begin_nested(t, 7);
	for (int i = 0; i < 20000; i++)
		pb_put_raw_varint(t, 1);
	pb_end_nested(t, m);
	/* a large packet ending in a varint */
	put_bundle(&p, 4, false, 20000);
	pb_put_varint(&p, TP_TIMESTAMP, 123456789);
	add_packet(t, &p);
	pb_buf_free(&p);
}

static char *write_temp(const struct pb_buf *t, size_t len)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/vp_test_skim.XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, t->data, len), (ssize_t)len);
	close(fd);
	return path;
}

/* Scans the file packet by packet, skimming when skim: 0 or -1.  How
 * many bytes were read goes to *n_read, when not NULL. */
static int scan_file_read(struct sync_scanner *s, const char *path, bool skim,
			  uint64_t *n_read, struct vp_error *err)
{
	struct sync_skim k;
	struct trace_record rec;
	int rc;

	assert_int_equal(sync_skim_open(&k, path, s,
					skim ? SYNC_SKIM_MIN_RECORD : SIZE_MAX,
					err), 0);
	while ((rc = sync_skim_next(&k, &rec, err)) > 0) {
		if (!skim)
			assert_int_equal(rc, 1); /* every record read whole */
		if (rc == 1 && rec.field == TRACE_PACKET_FIELD &&
		    sync_scan_packet(s, rec.data, rec.len, rec.data_offset,
				     err)) {
			rc = -1;
			break;
		}
	}
	if (n_read)
		*n_read = trace_reader_bytes_read(k.rd);
	sync_skim_close(&k);
	return rc;
}

static int scan_file(struct sync_scanner *s, const char *path, bool skim,
		     struct vp_error *err)
{
	return scan_file_read(s, path, skim, NULL, err);
}

static void assert_same_data(const struct sync_data *a,
			     const struct sync_data *b)
{
	assert_int_equal(a->n_packets, b->n_packets);
	assert_int_equal(a->boot.n, b->boot.n);
	for (size_t i = 0; i < a->boot.n; i++) {
		assert_int_equal(a->boot.v[i].x, b->boot.v[i].x);
		assert_int_equal(a->boot.v[i].y, b->boot.v[i].y);
	}
	assert_int_equal(a->n_snapshot_samples, b->n_snapshot_samples);
	assert_int_equal(a->n_event_samples, b->n_event_samples);
	assert_int_equal(a->max_seq_id, b->max_seq_id);
	assert_int_equal(a->max_machine_id, b->max_machine_id);
	assert_int_equal(a->have_cpu, b->have_cpu);
	assert_int_equal(a->max_cpu, b->max_cpu);
}

static void test_skim_as_plain(void **state)
{
	(void)state;
	struct pb_buf t;
	struct vp_error err = {{0}};
	pb_buf_init(&t);
	build_skim_trace(&t);
	char *path = write_temp(&t, t.len);

	struct sync_scanner *plain = sync_scanner_new(path);
	struct sync_scanner *skim = sync_scanner_new(path);
	assert_int_equal(scan_file(plain, path, false, &err), 0);
	assert_int_equal(scan_file(skim, path, true, &err), 0);
	struct sync_data *a = sync_scanner_data(plain), *b = sync_scanner_data(skim);
	assert_same_data(a, b);
	/* what the file holds, so that the comparison means something */
	assert_int_equal(a->boot.n, 52);
	assert_int_equal(a->n_event_samples, 1);
	assert_int_equal(a->max_cpu, 14);
	assert_int_equal(a->max_machine_id, 9);
	assert_int_equal(a->max_seq_id, 12);
	sync_scanner_free(plain);
	sync_scanner_free(skim);

	/* cut inside the last packet's bundle, then inside its timestamp:
	 * both scans fail, with the same message */
	size_t cuts[] = {t.len - 3000, t.len - 1};
	for (size_t i = 0; i < 2; i++) {
		unlink(path);
		path = write_temp(&t, cuts[i]);
		struct vp_error e1 = {{0}}, e2 = {{0}};
		plain = sync_scanner_new(path);
		skim = sync_scanner_new(path);
		assert_int_equal(scan_file(plain, path, false, &e1), -1);
		assert_int_equal(scan_file(skim, path, true, &e2), -1);
		print_message("%s\n", e2.msg);
		assert_string_equal(e1.msg, e2.msg);
		sync_scanner_free(plain);
		sync_scanner_free(skim);
	}
	unlink(path);
	pb_buf_free(&t);
}

/* What the skim is for: of a trace of large bundles, little is read. */
static void test_skim_reads_little(void **state)
{
	(void)state;
	struct pb_buf t, p;
	struct vp_error err = {{0}};
	uint64_t n_plain, n_skim;
	pb_buf_init(&t);
	pb_buf_init(&p);
	for (int i = 0; i < 100; i++) {
		pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 5);
		put_bundle(&p, i % 4, false, 34000);
		add_packet(&t, &p);
		put_sync_snapshot(&p, 1000 + (uint64_t)i, 5000 + (uint64_t)i);
		add_packet(&t, &p);
	}
	char *path = write_temp(&t, t.len);
	struct sync_scanner *plain = sync_scanner_new(path);
	struct sync_scanner *skim = sync_scanner_new(path);
	assert_int_equal(scan_file_read(plain, path, false, &n_plain, &err), 0);
	assert_int_equal(scan_file_read(skim, path, true, &n_skim, &err), 0);
	assert_same_data(sync_scanner_data(plain), sync_scanner_data(skim));
	assert_int_equal(sync_scanner_data(skim)->boot.n, 100);
	print_message("%zu bytes: %llu read plainly, %llu skimmed\n", t.len,
		      (unsigned long long)n_plain, (unsigned long long)n_skim);
	assert_int_equal(n_plain, t.len);
	assert_true(n_skim * 10 < t.len);
	sync_scanner_free(plain);
	sync_scanner_free(skim);
	unlink(path);
	pb_buf_free(&p);
	pb_buf_free(&t);
}

/* ---- a trace scanned in two parts at once (sync_scanner_join) ---------- */

/* The packets of trace t (records of field 1): their offsets and
 * lengths, up to max; how many. */
static size_t packets_of(const struct pb_buf *t, uint64_t *off, size_t *len,
			 size_t max)
{
	size_t n = 0;
	const uint8_t *p = t->data, *end = t->data + t->len;

	while (p < end && n < max) {
		uint64_t l = 0;
		assert_int_equal(*p++, TRACE_PACKET_FIELD << 3 | PB_WT_LEN);
		assert_true(pb_read_varint(&p, end, &l));
		off[n] = (uint64_t)(p - t->data);
		len[n++] = (size_t)l;
		p += l;
	}
	return n;
}

/* Scans packets [from, to) of t with s (a part told they are the
 * file's bytes when in_file): what the first failure returned, else 0. */
static int scan_range_in(struct sync_scanner *s, const struct pb_buf *t,
			 const uint64_t *off, const size_t *len, size_t from,
			 size_t to, bool in_file)
{
	struct vp_error err = {{0}};

	for (size_t i = from; i < to; i++) {
		int rc = in_file ? sync_scan_part_packet(s, t->data + off[i],
							 len[i], off[i], &err)
				 : sync_scan_packet(s, t->data + off[i], len[i],
						    off[i], &err);
		if (rc)
			return rc;
	}
	return 0;
}

static int scan_range(struct sync_scanner *s, const struct pb_buf *t,
		      const uint64_t *off, const size_t *len, size_t from,
		      size_t to)
{
	return scan_range_in(s, t, off, len, from, to, false);
}

/* sync_read_fn over a trace in memory. */
static int read_mem(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct pb_buf *t = ctx;
	if (off > t->len || len > t->len - off)
		return -1;
	memcpy(buf, t->data + off, len);
	return 0;
}

static void assert_same_samples(const struct sample_vec *a,
				const struct sample_vec *b)
{
	assert_int_equal(a->n, b->n);
	assert_int_equal(a->thin.offered, b->thin.offered);
	for (size_t i = 0; i < a->n; i++) {
		assert_int_equal(a->v[i].x, b->v[i].x);
		assert_int_equal(a->v[i].y, b->v[i].y);
	}
}

/* Everything a scan gives, the same. */
static void assert_same_all(const struct sync_data *a, const struct sync_data *b)
{
	assert_same_samples(&a->boot, &b->boot);
	assert_same_samples(&a->mono, &b->mono);
	assert_same_samples(&a->realtime, &b->realtime);
	assert_int_equal(a->n_ex, b->n_ex);
	assert_memory_equal(a->ex, b->ex, a->n_ex * sizeof(*a->ex));
	assert_int_equal(a->n_kvm, b->n_kvm);
	assert_memory_equal(a->kvm, b->kvm, a->n_kvm * sizeof(*a->kvm));
	assert_int_equal(a->n_kvm_dropped, b->n_kvm_dropped);
	assert_int_equal(a->n_snapshot_samples, b->n_snapshot_samples);
	assert_int_equal(a->n_event_samples, b->n_event_samples);
	assert_int_equal(a->n_incremental_64, b->n_incremental_64);
	assert_int_equal(a->n_bad_sync_events, b->n_bad_sync_events);
	assert_int_equal(a->n_compressed, b->n_compressed);
	assert_int_equal(a->max_seq_id, b->max_seq_id);
	assert_int_equal(a->n_sequences, b->n_sequences);
	assert_int_equal(a->max_machine_id, b->max_machine_id);
	assert_int_equal(a->have_cpu, b->have_cpu);
	assert_int_equal(a->max_cpu, b->max_cpu);
	assert_int_equal(a->trace_clock, b->trace_clock);
	assert_int_equal(a->n_packets, b->n_packets);
	assert_memory_equal(a->seq_load, b->seq_load, sizeof(a->seq_load));
}

/* A sync event on seq, its names interned (iids 1, 5, 7, 8) or literal,
 * with pad more debug annotations. */
static void put_sync_event_pad(struct pb_buf *p, uint32_t seq, bool interned,
			       uint64_t boot, uint64_t ctr, int pad)
{
	pb_put_varint(p, TP_TRUSTED_PACKET_SEQUENCE_ID, seq);
	pb_put_varint(p, TP_TIMESTAMP, boot);
	size_t m = pb_begin_nested(p, TP_TRACK_EVENT);
	if (interned) {
		pb_put_varint(p, TE_CATEGORY_IIDS, 1);
		pb_put_varint(p, TE_NAME_IID, 5);
		put_annotation(p, NULL, 7, DA_UINT_VALUE, boot);
		put_annotation(p, NULL, 8, DA_UINT_VALUE, ctr);
	} else {
		pb_put_string(p, TE_CATEGORIES, "cros");
		pb_put_string(p, TE_NAME, "guest_clock_sync");
		put_annotation(p, "clock_sync_boottime", 0, DA_UINT_VALUE, boot);
		put_annotation(p, "clock_sync_cputime", 0, DA_UINT_VALUE, ctr);
	}
	for (int i = 0; i < pad; i++)
		put_annotation(p, "padding", 0, DA_UINT_VALUE, 1);
	pb_end_nested(p, m);
}

static void put_sync_event(struct pb_buf *p, uint32_t seq, bool interned,
			   uint64_t boot, uint64_t ctr)
{
	put_sync_event_pad(p, seq, interned, boot, ctr, 0);
}

/* Our names interned on seq, its state cleared first (or not). */
static void put_our_interning(struct pb_buf *p, uint32_t seq, bool clear)
{
	pb_put_varint(p, TP_TRUSTED_PACKET_SEQUENCE_ID, seq);
	if (clear)
		pb_put_varint(p, TP_SEQUENCE_FLAGS,
			      SEQ_INCREMENTAL_STATE_CLEARED);
	size_t m = pb_begin_nested(p, TP_INTERNED_DATA);
	put_interned(p, ID_EVENT_CATEGORIES, 1, "cros");
	put_interned(p, ID_EVENT_NAMES, 5, "guest_clock_sync");
	put_interned(p, ID_DEBUG_ANNOTATION_NAMES, 7, "clock_sync_boottime");
	put_interned(p, ID_DEBUG_ANNOTATION_NAMES, 8, "clock_sync_cputime");
	pb_end_nested(p, m);
}

/* A trace with every kind of result, interning that reaches across any
 * split point, clears, and results whose order matters. */
static void build_split_trace(struct pb_buf *t)
{
	struct pb_buf p;
	pb_buf_init(&p);

	put_our_interning(&p, 1, true);
	add_packet(t, &p);
	/* the same iids, other strings: nothing of ours on seq 3 */
	pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 3);
	pb_put_varint(&p, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	size_t m = pb_begin_nested(&p, TP_INTERNED_DATA);
	put_interned(&p, ID_EVENT_NAMES, 5, "other");
	pb_end_nested(&p, m);
	add_packet(t, &p);
	for (int i = 0; i < 12; i++) {
		put_sync_event(&p, 1, true, 1000 + 10 * (uint64_t)i,
			       50000 + 100 * (uint64_t)i);
		add_packet(t, &p);
		put_sync_event(&p, 3, true, 7, 7); /* not ours */
		add_packet(t, &p);
		put_sync_event(&p, 2, false, 2000 + (uint64_t)i, 90000);
		add_packet(t, &p);
		put_kvm(&p, 100 + (uint64_t)i, i % 2, 40 + i / 4);
		add_packet(t, &p);
		m = pb_begin_nested(&p, TP_CLOCK_SNAPSHOT);
		put_clock(&p, BUILTIN_CLOCK_BOOTTIME, 3000 + (uint64_t)i, false, 0);
		put_clock(&p, BUILTIN_CLOCK_REALTIME, 9000 + (uint64_t)i, false, 0);
		put_clock(&p, CPU_COUNTER_CLOCK_ID, 70000 + (uint64_t)i, i == 5, 0);
		pb_put_varint(&p, CS_PRIMARY_TRACE_CLOCK,
			      i % 3 ? BUILTIN_CLOCK_BOOTTIME
				    : BUILTIN_CLOCK_MONOTONIC);
		pb_end_nested(&p, m);
		pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 300 + (uint64_t)i);
		add_packet(t, &p);
		if (i == 6) { /* seq 1 cleared: its iids mean nothing till */
			pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 1);
			pb_put_varint(&p, TP_SEQUENCE_FLAGS,
				      SEQ_INCREMENTAL_STATE_CLEARED);
			add_packet(t, &p);
		}
		if (i == 8) { /* ... interned again */
			put_our_interning(&p, 1, false);
			add_packet(t, &p);
		}
		if (i % 4 == 0) {
			m = pb_begin_nested(&p, TP_TRACK_EVENT);
			pb_put_string(&p, TE_CATEGORIES, "cros");
			pb_put_string(&p, TE_NAME, "guest_clock_sync_exchange");
			put_annotation(&p, "guest_cputime_send", 0,
				       DA_UINT_VALUE, 100 + (uint64_t)i);
			put_annotation(&p, "guest_cputime_recv", 0,
				       DA_UINT_VALUE, 180 + (uint64_t)i);
			put_annotation(&p, "host_cputime", 0, DA_UINT_VALUE,
				       5000 + (uint64_t)i);
			pb_end_nested(&p, m);
			pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 1);
			pb_put_varint(&p, TP_MACHINE_ID, (uint64_t)i);
			add_packet(t, &p);
			put_bundle(&p, i, false, 64);
			pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 4);
			add_packet(t, &p);
		}
	}
	/* a sync event missing its counter, after interning */
	pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 1);
	m = pb_begin_nested(&p, TP_TRACK_EVENT);
	pb_put_varint(&p, TE_CATEGORY_IIDS, 1);
	pb_put_varint(&p, TE_NAME_IID, 5);
	put_annotation(&p, NULL, 7, DA_UINT_VALUE, 1);
	pb_end_nested(&p, m);
	add_packet(t, &p);
	pb_buf_free(&p);
}

/* Split at every packet (and at every two), the parts joined give what
 * one scan does. */
static void test_split_join(void **state)
{
	(void)state;
	struct pb_buf t;
	uint64_t off[256];
	size_t len[256];
	pb_buf_init(&t);
	build_split_trace(&t);
	size_t n = packets_of(&t, off, len, 256);
	assert_true(n > 60 && n < 256);

	struct sync_scanner *whole = sync_scanner_new("s.pb");
	assert_int_equal(scan_range(whole, &t, off, len, 0, n), 0);
	const struct sync_data *w = sync_scanner_data(whole);
	assert_true(w->boot.n > 20 && w->n_kvm > 4 && w->n_ex == 3 &&
		    w->realtime.n == 12 && w->n_bad_sync_events == 1);

	/* the part's packets kept as they are, and by their offset */
	for (size_t k = 0; k <= 2 * n + 1; k++) {
		bool in_file = k > n;
		size_t at = in_file ? k - n - 1 : k;
		struct sync_scanner *a = sync_scanner_new("s.pb");
		struct sync_scanner *b = sync_scanner_new_part("s.pb");
		assert_int_equal(scan_range(a, &t, off, len, 0, at), 0);
		assert_int_equal(scan_range_in(b, &t, off, len, at, n, in_file),
				 0);
		assert_int_equal(sync_scanner_join(a, b, read_mem, &t), 0);
		assert_same_all(sync_scanner_data(a), w);
		sync_scanner_free(a);
		sync_scanner_free(b);
	}
	/* three parts, joined one after the other: each join leaves the
	 * first part's state as if it had scanned the part itself */
	for (size_t k1 = 0; k1 <= n; k1++)
		for (size_t k2 = k1; k2 <= n; k2++) {
			struct sync_scanner *a = sync_scanner_new("s.pb");
			struct sync_scanner *b = sync_scanner_new_part("s.pb");
			struct sync_scanner *c = sync_scanner_new_part("s.pb");
			assert_int_equal(scan_range(a, &t, off, len, 0, k1), 0);
			assert_int_equal(scan_range_in(b, &t, off, len, k1, k2,
						       k2 % 2), 0);
			assert_int_equal(scan_range_in(c, &t, off, len, k2, n,
						       k1 % 2), 0);
			assert_int_equal(sync_scanner_join(a, b, read_mem, &t),
					 0);
			assert_int_equal(sync_scanner_join(a, c, read_mem, &t),
					 0);
			assert_same_all(sync_scanner_data(a), w);
			sync_scanner_free(a);
			sync_scanner_free(b);
			sync_scanner_free(c);
		}
	sync_scanner_free(whole);
	pb_buf_free(&t);
}

/* Where the join cannot be exact it says so and leaves the first part
 * as it was: the rest scanned with it gives what one scan does. */
static void test_split_no_join(void **state)
{
	(void)state;
	struct pb_buf t, p;
	enum { MAX = 80000 };
	uint64_t *off = calloc(MAX, sizeof(*off));
	size_t *len = calloc(MAX, sizeof(*len));
	pb_buf_init(&t);
	pb_buf_init(&p);

	/* seq 1 interned our names; after the split come packets that
	 * read them, among many of a busy seq 2.  Kept as they are (a
	 * part keeps 4 MiB): with seq 1's few, the busy seq 2 is given
	 * up and the join is whole; with seq 1's many, they do not fit
	 * and the first part scans on.  Kept by their offsets, 16 bytes
	 * each, both fit. */
	for (int every = 7; every >= 2; every -= 5) {
		pb_buf_reset(&t);
		put_our_interning(&p, 1, true);
		add_packet(&t, &p);
		for (int i = 0; i < 70000; i++) {
			put_sync_event_pad(&p, i % every ? 2 : 1, true,
					   1000 + (uint64_t)i, 7 * (uint64_t)i,
					   10);
			add_packet(&t, &p);
		}
		size_t n = packets_of(&t, off, len, MAX);
		struct sync_scanner *whole = sync_scanner_new("o.pb");
		assert_int_equal(scan_range(whole, &t, off, len, 0, n), 0);
		for (int in_file = 0; in_file < 2; in_file++) {
			struct sync_scanner *a = sync_scanner_new("o.pb");
			struct sync_scanner *b = sync_scanner_new_part("o.pb");
			assert_int_equal(scan_range(a, &t, off, len, 0, 10), 0);
			assert_int_equal(scan_range_in(b, &t, off, len, 10, n,
						       in_file), 0);
			int rc = sync_scanner_join(a, b, read_mem, &t);
			assert_int_equal(rc, every == 2 && !in_file);
			if (rc)
				assert_int_equal(
					scan_range(a, &t, off, len, 10, n), 0);
			assert_same_all(sync_scanner_data(a),
					sync_scanner_data(whole));
			sync_scanner_free(a);
			sync_scanner_free(b);
		}
		sync_scanner_free(whole);
	}

	/* more sequences in all than a trace may have: no part has too
	 * many, the scan on from the first says which packet is one too
	 * many */
	pb_buf_reset(&t);
	for (uint32_t i = 0; i < SYNC_MAX_SEQUENCES + 10; i++) {
		pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 1000 + i);
		add_packet(&t, &p);
	}
	size_t n = packets_of(&t, off, len, MAX);
	struct sync_scanner *a = sync_scanner_new("o.pb");
	struct sync_scanner *b = sync_scanner_new_part("o.pb");
	assert_int_equal(scan_range(a, &t, off, len, 0, n / 2), 0);
	assert_int_equal(scan_range(b, &t, off, len, n / 2, n), 0);
	assert_int_equal(sync_scanner_join(a, b, read_mem, &t), 1);
	assert_int_equal(scan_range(a, &t, off, len, n / 2, n), -1);
	sync_scanner_free(a);
	sync_scanner_free(b);

	/* a part gives up at compressed packets (their inflated bytes count
	 * against a budget of the whole scan's) */
	b = sync_scanner_new_part("o.pb");
	pb_put_varint(&p, TP_TRUSTED_PACKET_SEQUENCE_ID, 1);
	pb_put_bytes(&p, TP_COMPRESSED_PACKETS, "x", 1);
	struct vp_error err = {{0}};
	assert_int_equal(sync_scan_packet(b, p.data, p.len, 0, &err), 1);
	sync_scanner_free(b);

	free(off);
	free(len);
	pb_buf_free(&p);
	pb_buf_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_literal_and_interned),
		cmocka_unit_test(test_snapshots),
		cmocka_unit_test(test_exchanges_and_kvm),
		cmocka_unit_test(test_thinning),
		cmocka_unit_test(test_thinning_shared),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_skim_as_plain),
		cmocka_unit_test(test_skim_reads_little),
		cmocka_unit_test(test_split_join),
		cmocka_unit_test(test_split_no_join),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
