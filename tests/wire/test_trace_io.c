/*
 * test_trace_io.c - the streaming trace reader and the crash-safe writer:
 * packets that straddle buffer refills, packets larger than the buffer,
 * files over 4 GiB (sparse), malformed framing with byte offsets, a cap
 * on what is held of one record, and a
 * writer that never leaves a partial or empty output behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/uio.h>

#include "pb_wire.h"
#include "trace_io.h"

static char dir[] = "/tmp/vp_test_trace_io.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static void write_file(const char *path, const void *p, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, len, f), len);
	fclose(f);
}

/* Packets of growing sizes, each filled with a pattern of its index, some
 * larger than the reader's buffer. */
static size_t packet_size(size_t i)
{
	static const size_t sizes[] = {0, 1, 127, 128, 4095, 70000, 1000003,
				       (1u << 20) + 17, 3 << 20, 5};
	return sizes[i % 10];
}

/* Writes n packets of packet_size(i) bytes, each filled with its index. */
static void write_sized_packets(const char *path, size_t n)
{
	struct vp_error err = {{0}};
	struct trace_writer *w;
	uint8_t *buf = malloc(3 << 20);

	assert_non_null(buf);
	assert_int_equal(trace_writer_open(&w, path, &err), 0);
	for (size_t i = 0; i < n; i++) {
		memset(buf, (int)(i & 0xff), packet_size(i));
		assert_int_equal(trace_writer_packet(w, buf, packet_size(i), &err), 0);
	}
	assert_int_equal(trace_writer_commit(w, &err), 0);
	free(buf);
}

static void test_roundtrip_straddling(void **state)
{
	(void)state;
	char path[256];
	struct vp_error err = {{0}};
	path_of(path, sizeof(path), "rt.pb");
	size_t n_packets = 60;
	write_sized_packets(path, n_packets);

	struct trace_reader *r;
	struct trace_record rec;
	assert_int_equal(trace_reader_open(&r, path, &err), 0);
	for (int pass = 0; pass < 2; pass++) {
		uint64_t expect_off = 0;
		for (size_t i = 0; i < n_packets; i++) {
			assert_int_equal(trace_reader_next(r, &rec, &err), 1);
			assert_int_equal(rec.field, 1);
			assert_int_equal(rec.len, packet_size(i));
			assert_int_equal(rec.offset, expect_off);
			for (size_t k = 0; k < rec.len; k += 997)
				assert_int_equal(rec.data[k], i & 0xff);
			expect_off += rec.raw_len;
		}
		assert_int_equal(trace_reader_next(r, &rec, &err), 0);
		assert_int_equal(trace_reader_pos(r), trace_reader_size(r));
		assert_int_equal(trace_reader_rewind(r, &err), 0);
	}
	trace_reader_close(r);
}

/* trace_reader_next_head on the same file: small records whole, large ones
 * left for peeks, and after a seek back a large one read whole, a skipped
 * one stepped over; a peek past the end says how much there was. */
static void test_heads_peeks_seeks(void **state)
{
	(void)state;
	char path[256];
	struct vp_error err = {{0}};
	path_of(path, sizeof(path), "heads.pb");
	size_t n_packets = 30;
	write_sized_packets(path, n_packets);

	struct trace_reader *r;
	struct trace_record rec;
	size_t got;
	assert_int_equal(trace_reader_open(&r, path, &err), 0);
	for (size_t i = 0; i < n_packets; i++) {
		assert_int_equal(trace_reader_next_head(r, &rec, 4096, &err), 1);
		assert_int_equal(rec.len, packet_size(i));
		if (rec.raw_len <= 4096) {
			assert_non_null(rec.data);
			continue;
		}
		assert_null(rec.data);
		assert_int_equal(trace_reader_pos(r), rec.data_offset);
		/* the payload's last bytes, then its first ones again */
		const uint8_t *p = trace_reader_peek(r, rec.data_offset + rec.len - 3,
						     3, &got, &err);
		assert_non_null(p);
		assert_int_equal(got, 3);
		assert_int_equal(p[2], i & 0xff);
		p = trace_reader_peek(r, rec.data_offset, 100, &got, &err);
		assert_int_equal(got, 100);
		assert_int_equal(p[0], i & 0xff);
		if (i % 4 == 1) { /* read it aside, as a worker does */
			uint8_t *copy = malloc(rec.raw_len);
			assert_non_null(copy);
			assert_int_equal(trace_reader_read_at(r, rec.offset, copy,
							      rec.raw_len, &err), 0);
			assert_int_equal(copy[rec.raw_len - 1], i & 0xff);
			free(copy);
		}
		if (i % 2) { /* step over it */
			assert_int_equal(trace_reader_seek(r, rec.offset + rec.raw_len,
							   &err), 0);
			continue;
		}
		/* or read it whole after all */
		struct trace_record head = rec;
		assert_int_equal(trace_reader_seek(r, rec.offset, &err), 0);
		assert_int_equal(trace_reader_next(r, &rec, &err), 1);
		assert_int_equal(rec.offset, head.offset);
		assert_int_equal(rec.len, head.len);
		for (size_t k = 0; k < rec.len; k += 997)
			assert_int_equal(rec.data[k], i & 0xff);
	}
	assert_int_equal(trace_reader_next_head(r, &rec, 4096, &err), 0);
	/* past the end: what there is, and then nothing */
	uint64_t size = trace_reader_size(r);
	assert_non_null(trace_reader_peek(r, size - 2, 64, &got, &err));
	assert_int_equal(got, 2);
	assert_non_null(trace_reader_peek(r, size + 10, 64, &got, &err));
	assert_int_equal(got, 0);
	assert_true(trace_reader_bytes_read(r) < size);
	/* bytes past the end (the file changed): an error naming where */
	uint8_t tail[8];
	assert_int_equal(trace_reader_read_at(r, size - 4, tail, 8, &err), -1);
	char want[64];
	snprintf(want, sizeof(want), "byte offset %llu: the file ends",
		 (unsigned long long)size);
	assert_non_null(strstr(err.msg, want));
	trace_reader_close(r);
}

/* trace_reader_limit_whole: a record over the cap is refused when a call
 * would read it whole, naming it and the caller's reason, and can still
 * be stepped over and passed in pieces; records under it read as ever. */
static int count_piece(void *ctx, const uint8_t *p, size_t n,
		       struct vp_error *err)
{
	(void)p;
	(void)err;
	*(uint64_t *)ctx += n;
	return 0;
}

static void test_limit_whole(void **state)
{
	(void)state;
	char path[256];
	struct vp_error err = {{0}};
	path_of(path, sizeof(path), "limit.pb");
	write_sized_packets(path, 10); /* up to 3 MiB */

	struct trace_reader *r;
	struct trace_record rec;
	uint64_t passed = 0;
	assert_int_equal(trace_reader_open(&r, path, &err), 0);
	trace_reader_limit_whole(r, 2u << 20, "because the test says so");
	for (size_t i = 0; i < 8; i++) { /* all below 2 MiB, one of them
					  * over the buffer */
		assert_int_equal(trace_reader_next(r, &rec, &err), 1);
		assert_int_equal(rec.len, packet_size(i));
	}
	/* 3 MiB: its head, then the whole refused */
	assert_int_equal(trace_reader_next_head(r, &rec, 4096, &err), 1);
	assert_int_equal(rec.len, 3u << 20);
	struct trace_record head = rec;
	assert_int_equal(trace_reader_reread(r, &head, &rec, &err), -1);
	char want[128];
	snprintf(want, sizeof(want), "byte offset %llu: a packet of 3.0 MiB "
		 "because the test says so; at most 2 MiB",
		 (unsigned long long)head.offset);
	assert_non_null(strstr(err.msg, want));
	/* in pieces it passes, and the next record reads */
	assert_int_equal(trace_reader_pass(r, head.offset, head.raw_len,
					   count_piece, &passed, &err), 0);
	assert_int_equal(passed, head.raw_len);
	assert_int_equal(trace_reader_next(r, &rec, &err), 1);
	assert_int_equal(rec.len, packet_size(9));
	assert_int_equal(trace_reader_next(r, &rec, &err), 0);
	trace_reader_close(r);
}

/* trace_writer_rawv: small pieces buffered, large ones written from
 * where they are, more large ones in a call than one writev takes, calls
 * that fill the buffer: the file holds every piece, in order. */
static void test_writer_pieces(void **state)
{
	(void)state;
	char path[256];
	struct vp_error err = {{0}};
	struct trace_writer *w;
	path_of(path, sizeof(path), "pieces.pb");

	size_t cap = 40u << 20, at = 0;
	uint8_t *src = malloc(cap);
	assert_non_null(src);
	uint32_t x = 12345;
	for (size_t i = 0; i < cap; i++)
		src[i] = (uint8_t)(i * 7 + i / 4099);
	assert_int_equal(trace_writer_open(&w, path, &err), 0);
	for (int call = 0; call < 400 && at < cap - (12u << 20); call++) {
		struct iovec iov[100];
		int n = 1 + call % 100;
		for (int k = 0; k < n; k++) {
			x = x * 1103515245u + 12345u;
			size_t len = (x >> 8) % 4 == 0 ? 16384 + (x >> 12) % 70000
							: (x >> 12) % 600;
			if (call % 50 == 49)
				len = 40000; /* a call of large pieces only */
			if (at + len > cap)
				len = 0;
			iov[k] = (struct iovec){src + at, len};
			at += len;
		}
		assert_int_equal(trace_writer_rawv(w, iov, n, &err), 0);
	}
	/* small pieces only, more than the buffer holds, then one large */
	for (int call = 0; call < 60; call++) {
		struct iovec iov[100];
		for (int k = 0; k < 100; k++) {
			x = x * 1103515245u + 12345u;
			size_t len = (x >> 12) % 600;
			iov[k] = (struct iovec){src + at, len};
			at += len;
		}
		iov[99].iov_len = call == 59 ? 100000 : iov[99].iov_len;
		at += call == 59 ? 100000 - (x >> 12) % 600 : 0;
		assert_int_equal(trace_writer_rawv(w, iov, 100, &err), 0);
	}
	/* small ones, a large one, then more small ones than the buffer has
	 * room for behind it, and more large ones than a writev takes */
	static struct iovec many[3100];
	size_t sizes[] = {500, 40000};
	for (int k = 0; k < 3100; k++) {
		size_t len = k == 1 || (k > 3000 && k < 3060) ? sizes[1] : sizes[0];
		many[k] = (struct iovec){src + at, len};
		at += len;
	}
	assert_int_equal(trace_writer_rawv(w, many, 3100, &err), 0);
	assert_int_equal(trace_writer_bytes(w), at);
	assert_int_equal(trace_writer_commit(w, &err), 0);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	uint8_t *back = malloc(at + 1);
	assert_non_null(back);
	assert_int_equal(fread(back, 1, at + 1, f), at);
	fclose(f);
	assert_memory_equal(back, src, at);
	free(back);
	free(src);
}

static void expect_error(const char *name, const void *bytes, size_t len,
			 int good, const char *needle)
{
	char path[256];
	struct vp_error err = {{0}};
	struct trace_reader *r;
	struct trace_record rec;
	int rc, n = 0;

	path_of(path, sizeof(path), name);
	write_file(path, bytes, len);
	assert_int_equal(trace_reader_open(&r, path, &err), 0);
	while ((rc = trace_reader_next(r, &rec, &err)) > 0)
		n++;
	trace_reader_close(r);
	print_message("%s: %s\n", name, err.msg);
	assert_int_equal(rc, -1);
	assert_int_equal(n, good);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, needle));
}

static void test_malformed(void **state)
{
	(void)state;
	/* a good packet, then a packet that claims 100 bytes and has 3 */
	const uint8_t trunc[] = {0x0a, 0x02, 0x08, 0x01, 0x0a, 0x64, 1, 2, 3};
	expect_error("trunc.pb", trunc, sizeof(trunc), 1, "byte offset 4");
	/* a length varint cut by the end of file */
	const uint8_t cutlen[] = {0x0a, 0x00, 0x0a, 0xff};
	expect_error("cutlen.pb", cutlen, sizeof(cutlen), 1, "byte offset 2");
	/* over the 64 MiB limit */
	const uint8_t huge[] = {0x0a, 0x80, 0x80, 0x80, 0x40};
	expect_error("huge.pb", huge, sizeof(huge), 0, "over the 64 MiB limit");
	/* wire type 3 at top level */
	const uint8_t wt[] = {0x0a, 0x00, 0x0b};
	expect_error("wt.pb", wt, sizeof(wt), 1, "invalid wire type");
	/* field number 0: text or garbage, not a trace */
	/* text: 'h' reads as field 13 varint 'e', then 'l' has wire type 4 */
	const char *text = "hello, I am not a trace";
	expect_error("text.pb", text, strlen(text), 1, "byte offset 2");
	const uint8_t zero[] = {0x00, 0x00};
	expect_error("zero.pb", zero, sizeof(zero), 0, "invalid field number");
}

static void test_empty_and_missing(void **state)
{
	(void)state;
	char path[256];
	struct vp_error err = {{0}};
	struct trace_reader *r;
	struct trace_record rec;

	path_of(path, sizeof(path), "empty.pb");
	write_file(path, "", 0);
	assert_int_equal(trace_reader_open(&r, path, &err), 0);
	assert_int_equal(trace_reader_next(r, &rec, &err), 0);
	trace_reader_close(r);

	path_of(path, sizeof(path), "missing.pb");
	assert_int_equal(trace_reader_open(&r, path, &err), -1);
	assert_non_null(strstr(err.msg, "missing.pb"));
	assert_int_equal(trace_reader_open(&r, dir, &err), -1);
}

static void test_writer_abort_keeps_old(void **state)
{
	(void)state;
	char path[256];
	struct vp_error err = {{0}};
	struct trace_writer *w;

	path_of(path, sizeof(path), "keep.pb");
	write_file(path, "old", 3);
	assert_int_equal(trace_writer_open(&w, path, &err), 0);
	assert_int_equal(trace_writer_packet(w, "new", 3, &err), 0);
	/* the temporary sits beside the destination until commit */
	struct stat st;
	assert_int_equal(stat(trace_writer_temp_path(w), &st), 0);
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s", trace_writer_temp_path(w));
	trace_writer_abort(w);
	assert_int_equal(stat(tmp, &st), -1);
	FILE *f = fopen(path, "rb");
	char buf[8] = {0};
	assert_int_equal(fread(buf, 1, sizeof(buf), f), 3);
	fclose(f);
	assert_string_equal(buf, "old");

	/* a destination in a directory that does not exist */
	path_of(path, sizeof(path), "nodir/x.pb");
	assert_int_equal(trace_writer_open(&w, path, &err), -1);
	assert_non_null(strstr(err.msg, "nodir/x.pb"));
}

/* A sparse file over 4 GiB of 64 MiB packets whose payloads are holes. */
static void test_over_4gib(void **state)
{
	(void)state;
	char path[256];
	struct vp_error err = {{0}};
	uint8_t hdr[1 + PB_MAX_VARINT_LEN];
	const size_t payload = TRACE_MAX_PACKET;
	hdr[0] = 0x0a;
	size_t hl = 1 + pb_encode_varint(hdr + 1, payload);
	size_t n = (size_t)((4ull << 30) / (hl + payload)) + 2;

	path_of(path, sizeof(path), "big.pb");
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	assert_true(fd >= 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pwrite(fd, hdr, hl, (off_t)(i * (hl + payload))),
				 (ssize_t)hl);
	assert_int_equal(ftruncate(fd, (off_t)(n * (hl + payload))), 0);
	close(fd);

	struct trace_reader *r;
	struct trace_record rec;
	assert_int_equal(trace_reader_open(&r, path, &err), 0);
	assert_true(trace_reader_size(r) > (4ull << 30));
	size_t got = 0;
	uint64_t last = 0;
	while (trace_reader_next(r, &rec, &err) > 0) {
		assert_int_equal(rec.len, payload);
		last = rec.offset;
		got++;
	}
	assert_int_equal(got, n);
	assert_true(last > (4ull << 30));
	trace_reader_close(r);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_straddling),
		cmocka_unit_test(test_heads_peeks_seeks),
		cmocka_unit_test(test_limit_whole),
		cmocka_unit_test(test_writer_pieces),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_empty_and_missing),
		cmocka_unit_test(test_writer_abort_keeps_old),
		cmocka_unit_test(test_over_4gib),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
