/*
 * fuzz_sync_skim.c - libFuzzer target: the skim of large packets
 * (sync_skim.h) against the plain sync scan, on an arbitrary file.  Every
 * record is skimmed (a bound of 0 bytes), so the skim's walk, its elided
 * bodies and each of its ways back to the plain scan are reached with
 * small inputs.  Both scans must find the same data, or fail with the
 * same message.  Then the scan split (scan_split.h): up to where the
 * split finds a record, and from there with a part scanner; joined (or,
 * where the join says it cannot be, scanned on) they must give what the
 * plain scan did.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "scan_split.h"
#include "sync_scan.h"
#include "sync_skim.h"
#include "trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 0 or -1, as the merge's guest scan; compressed packets count as a
 * failure here (the merge inflates them, which is not what is tested).
 * whole_max SIZE_MAX reads every record whole: the plain scan. */
static int scan_from_to(struct sync_scanner *s, const char *path,
			size_t whole_max, uint64_t from, uint64_t to,
			struct vp_error *err)
{
	struct sync_skim k;
	struct trace_record rec;
	int rc = sync_skim_open(&k, path, s, whole_max, err);

	if (rc == 0 && from)
		rc = trace_reader_seek(k.rd, from, err);
	while (rc == 0 && trace_reader_pos(k.rd) < to &&
	       (rc = sync_skim_next(&k, &rec, err)) > 0) {
		if (rc == 1 && rec.field == TRACE_PACKET_FIELD &&
		    rec.wt == PB_WT_LEN &&
		    sync_scan_packet(s, rec.data, rec.len, rec.data_offset,
				     err)) {
			rc = -1;
			break;
		}
		rc = 0;
	}
	if (rc == 0 && trace_reader_pos(k.rd) != to && to != UINT64_MAX)
		rc = 1; /* stopped past `to`: not at a record there */
	sync_skim_close(&k);
	return rc;
}

static int scan(struct sync_scanner *s, const char *path, size_t whole_max,
		struct vp_error *err)
{
	return scan_from_to(s, path, whole_max, 0, UINT64_MAX, err);
}

static bool same_samples(const struct sample_vec *a, const struct sample_vec *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].x != b->v[i].x || a->v[i].y != b->v[i].y)
			return false;
	return true;
}

static bool same_data(const struct sync_data *a, const struct sync_data *b)
{
	return same_samples(&a->boot, &b->boot) &&
	       same_samples(&a->mono, &b->mono) &&
	       same_samples(&a->realtime, &b->realtime) &&
	       a->n_snapshot_samples == b->n_snapshot_samples &&
	       a->n_event_samples == b->n_event_samples &&
	       a->n_incremental_64 == b->n_incremental_64 &&
	       a->n_bad_sync_events == b->n_bad_sync_events &&
	       a->n_ex == b->n_ex && a->n_kvm == b->n_kvm &&
	       a->max_seq_id == b->max_seq_id &&
	       a->max_machine_id == b->max_machine_id &&
	       a->have_cpu == b->have_cpu && a->max_cpu == b->max_cpu &&
	       a->trace_clock == b->trace_clock &&
	       a->n_packets == b->n_packets &&
	       a->n_sequences == b->n_sequences &&
	       (!a->n_ex || !memcmp(a->ex, b->ex, a->n_ex * sizeof(*a->ex))) &&
	       (!a->n_kvm ||
		!memcmp(a->kvm, b->kvm, a->n_kvm * sizeof(*a->kvm)));
	/* not seq_load: a skimmed packet weighs what was read of it */
}

/* sync_read_fn on the input (ctx: its bytes, as a struct input). */
struct input {
	const uint8_t *data;
	size_t size;
};

static int read_input(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct input *in = ctx;
	if (off > in->size || len > in->size - off)
		return -1;
	memcpy(buf, in->data + off, len);
	return 0;
}

/* The scan in two parts, from a point the input's last byte picks: when
 * the split finds a record there and both parts scan, the join (or the
 * scan on from the first part) gives the plain scan's data. */
static void check_split(const char *path, const uint8_t *data, size_t size,
			const struct sync_data *want)
{
	uint64_t at = 0, stop = 0, from = size ? size * data[size - 1] / 256 : 0;
	struct vp_error err = {{0}};

	if (scan_split_find(path, from, size, &at, &err) != 1)
		return;
	struct sync_scanner *a = sync_scanner_new(path);
	struct sync_scanner *b = sync_scanner_new_part(path);
	if (scan_from_to(a, path, 0, 0, at, &err) == 0 &&
	    scan_split_part(path, at, UINT64_MAX, b, NULL, &stop) == 0 &&
	    stop == size) {
		struct input in = {data, size};
		int rc = sync_scanner_join(a, b, read_input, &in);
		if (rc == 1)
			rc = scan_from_to(a, path, 0, at, UINT64_MAX, &err);
		if (rc != 0 || !same_data(sync_scanner_data(a), want)) {
			fprintf(stderr, "split at %llu: %d\n",
				(unsigned long long)at, rc);
			__builtin_trap();
		}
	}
	sync_scanner_free(a);
	sync_scanner_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz_skim", 0);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	struct sync_scanner *plain = sync_scanner_new(path);
	struct sync_scanner *skim = sync_scanner_new(path);
	struct vp_error e1 = {{0}}, e2 = {{0}};
	int r1 = scan(plain, path, SIZE_MAX, &e1);
	int r2 = scan(skim, path, 0, &e2);
	if (r1 != r2 || (r1 < 0 && strcmp(e1.msg, e2.msg) != 0)) {
		fprintf(stderr, "plain: %d %s\nskim:  %d %s\n", r1,
			r1 < 0 ? e1.msg : "", r2, r2 < 0 ? e2.msg : "");
		__builtin_trap();
	}
	if (r1 == 0 &&
	    !same_data(sync_scanner_data(plain), sync_scanner_data(skim)))
		__builtin_trap();
	if (r1 == 0)
		check_split(path, data, size, sync_scanner_data(plain));
	sync_scanner_free(plain);
	sync_scanner_free(skim);
	close(fd);
	return 0;
}
