/*
 * test_core.c - unit tests of shm: the shared memory ABI (layouts,
 * the chunk state machine on both sides, hostile indices, memfd mapping)
 * and the trace buffer (fragment joining, loss accounting, ring and
 * discard policies, patching, rewrites, malformed chunks, chunk_id
 * wrap-around, and a randomized multi-writer round trip).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <unistd.h>

#include "shm_abi.h"
#include "trace_buffer.h"

/* ---- helpers: building chunks ---------------------------------------- */

struct tchunk {
	uint8_t b[VP_SMB_MAX_PAGE_SIZE];
	size_t len; /* bytes used */
	size_t cap; /* chunk size */
	unsigned count;
};

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void tc_begin(struct tchunk *c, uint32_t id, uint16_t writer, size_t cap)
{
	memset(c->b, 0, cap);
	put_le32(c->b, id);
	c->b[4] = (uint8_t)writer;
	c->b[5] = (uint8_t)(writer >> 8);
	c->len = VP_SMB_CHUNK_HEADER_SIZE;
	c->cap = cap;
	c->count = 0;
}

static void tc_frag(struct tchunk *c, const void *p, size_t n)
{
	assert_true(c->len + VP_FRAGMENT_LEN_SIZE + n <= c->cap);
	vp_write_redundant_varint(c->b + c->len, (uint32_t)n);
	memcpy(c->b + c->len + VP_FRAGMENT_LEN_SIZE, p, n);
	c->len += VP_FRAGMENT_LEN_SIZE + n;
	c->count++;
}

static void tc_str(struct tchunk *c, const char *s)
{
	tc_frag(c, s, strlen(s));
}

static void tc_end(struct tchunk *c, unsigned flags)
{
	uint16_t w = vp_chunk_packets_word(c->count, flags);
	c->b[6] = (uint8_t)w;
	c->b[7] = (uint8_t)(w >> 8);
}

static const struct vp_tb_sequence_meta meta1 = {7, 1000, 42, 0};

static int commit(struct vp_trace_buffer *tb, uint16_t producer,
		  struct tchunk *c, bool complete)
{
	return vp_trace_buffer_copy_chunk(tb, producer, &meta1, c->b, c->cap,
					  complete);
}

/* Reads one packet as a NUL-terminated string into s (of 4096). */
static int rd(struct vp_trace_buffer *tb, char *s,
	      struct vp_tb_packet_info *info)
{
	struct pb_buf b;
	pb_buf_init(&b);
	memset(info, 0, sizeof(*info));
	int r = vp_trace_buffer_read_packet(tb, &b, info);
	s[0] = 0;
	if (r == 1) {
		assert_true(b.len < 4096);
		memcpy(s, b.data, b.len);
		s[b.len] = 0;
	}
	pb_buf_free(&b);
	return r;
}

static void expect_pkt(struct vp_trace_buffer *tb, const char *want,
		       bool dropped)
{
	char s[4096];
	struct vp_tb_packet_info info;
	assert_int_equal(rd(tb, s, &info), 1);
	assert_string_equal(s, want);
	assert_int_equal(info.previous_packet_dropped, dropped);
}

static void expect_none(struct vp_trace_buffer *tb)
{
	char s[4096];
	struct vp_tb_packet_info info;
	assert_int_equal(rd(tb, s, &info), 0);
}

static struct vp_trace_buffer *new_tb(size_t size, enum vp_fill_policy p)
{
	struct vp_trace_buffer *tb;
	struct vp_error err;
	assert_int_equal(vp_trace_buffer_new(&tb, size, p, &err), 0);
	return tb;
}

static struct vp_tb_stats stats(struct vp_trace_buffer *tb)
{
	struct vp_tb_stats st;
	vp_trace_buffer_get_stats(tb, &st);
	return st;
}

/* ---- shared memory ABI ----------------------------------------------- */

static void test_smb_layouts(void **state)
{
	(void)state;
	static uint8_t mem[65536 * 2];
	struct vp_smb smb;
	struct vp_error err;

	assert_int_equal(vp_smb_chunks_per_layout(VP_PAGE_NOT_PARTITIONED), 0);
	assert_int_equal(vp_smb_chunks_per_layout(VP_PAGE_DIV_1), 1);
	assert_int_equal(vp_smb_chunks_per_layout(VP_PAGE_DIV_2), 2);
	assert_int_equal(vp_smb_chunks_per_layout(VP_PAGE_DIV_4), 4);
	assert_int_equal(vp_smb_chunks_per_layout(VP_PAGE_DIV_7), 7);
	assert_int_equal(vp_smb_chunks_per_layout(VP_PAGE_DIV_14), 14);
	assert_int_equal(vp_smb_chunks_per_layout((enum vp_page_layout)6), 0);

	assert_int_equal(vp_smb_init(&smb, mem, 8192, 4096, &err), 0);
	assert_int_equal(smb.num_pages, 2);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_DIV_1), 4088);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_DIV_2), 2044);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_DIV_4), 1020);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_DIV_7), 584);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_DIV_14), 292);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_NOT_PARTITIONED), 0);
	assert_int_equal(vp_smb_init(&smb, mem, sizeof(mem), 65536, &err), 0);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_DIV_7), 9360);
	assert_int_equal(vp_smb_chunk_size(&smb, VP_PAGE_DIV_14), 4680);

	/* bad geometry */
	assert_int_equal(vp_smb_init(&smb, mem, 8192, 5000, &err), -1);
	assert_non_null(strstr(err.msg, "page size"));
	assert_int_equal(vp_smb_init(&smb, mem, 6144, 4096, &err), -1);
	assert_int_equal(vp_smb_init(&smb, mem, 0, 4096, &err), -1);
	assert_int_equal(vp_smb_init(&smb, mem, 8192, 2048, &err), -1);
	assert_int_equal(vp_smb_init(&smb, NULL, 8192, 4096, &err), -1);
}

static void test_smb_acquire_until_full(void **state)
{
	(void)state;
	static uint8_t mem[4096 * 3];
	struct vp_smb smb;
	struct vp_error err;
	struct vp_smb_chunk c;
	uint32_t cursor = 1;

	memset(mem, 0, sizeof(mem));
	assert_int_equal(vp_smb_init(&smb, mem, sizeof(mem), 4096, &err), 0);
	for (unsigned i = 0; i < 12; i++) {
		assert_true(vp_smb_acquire_chunk_for_writing(
			&smb, VP_PAGE_DIV_4, 3, 100 + i, &cursor, &c));
		assert_int_equal(c.size, 1020);
		/* the cursor's page fills first */
		assert_int_equal(c.page, (1 + i / 4) % 3);
		assert_int_equal(c.chunk, i % 4);
		assert_ptr_equal(c.begin, mem + c.page * 4096 + 8 + c.chunk * 1020);
		assert_int_equal(c.begin[0], 100 + i);
		assert_int_equal(c.begin[4], 3);
		assert_int_equal(vp_smb_chunk_state(&smb, c.page, c.chunk),
				 VP_CHUNK_BEING_WRITTEN);
	}
	assert_false(vp_smb_acquire_chunk_for_writing(&smb, VP_PAGE_DIV_4, 3,
						      1, &cursor, &c));
	for (uint32_t p = 0; p < 3; p++)
		assert_int_equal(vp_smb_page_layout(&smb, p), VP_PAGE_DIV_4);
	/* an invalid layout is refused */
	assert_false(vp_smb_acquire_chunk_for_writing(
		&smb, VP_PAGE_NOT_PARTITIONED, 3, 1, &cursor, &c));
}

static void test_smb_complete_read_free(void **state)
{
	(void)state;
	static uint8_t mem[4096 * 2];
	static uint8_t dst[VP_SMB_MAX_PAGE_SIZE];
	struct vp_smb smb;
	struct vp_error err;
	struct vp_smb_chunk c[2];
	uint32_t cursor = 0;
	bool was_complete;

	memset(mem, 0, sizeof(mem));
	assert_int_equal(vp_smb_init(&smb, mem, sizeof(mem), 4096, &err), 0);
	for (int i = 0; i < 2; i++)
		assert_true(vp_smb_acquire_chunk_for_writing(
			&smb, VP_PAGE_DIV_2, 9, (uint32_t)i, &cursor, &c[i]));
	assert_int_equal(c[0].page, 0);
	assert_int_equal(c[1].page, 0);
	memcpy(c[0].begin + 8, "\x85\x80\x80\x00hello", 9);
	/* not complete yet: the service cannot take it */
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 0, false,
							  &was_complete));
	vp_smb_release_chunk_as_complete(&smb, &c[0], 1, 0);
	assert_int_equal(vp_smb_chunk_state(&smb, 0, 0), VP_CHUNK_COMPLETE);
	assert_true(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 0, false,
							 &was_complete));
	assert_true(was_complete);
	assert_int_equal(vp_smb_chunk_state(&smb, 0, 0), VP_CHUNK_BEING_READ);
	/* twice: no */
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 0, false,
							  &was_complete));
	assert_int_equal(vp_smb_copy_chunk(&smb, 0, 0, dst), 2044);
	assert_memory_equal(dst + 8, "\x85\x80\x80\x00hello", 9);
	assert_int_equal(dst[6], 1); /* packet count */
	vp_smb_release_chunk_as_free(&smb, 0, 0);
	assert_int_equal(vp_smb_chunk_state(&smb, 0, 0), VP_CHUNK_FREE);
	/* chunk 1 still held: the page keeps its layout */
	assert_int_equal(vp_smb_page_layout(&smb, 0), VP_PAGE_DIV_2);

	/* scraping takes a chunk still being written */
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 1, false,
							  &was_complete));
	assert_true(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 1, true,
							 &was_complete));
	assert_false(was_complete);
	/* the producer's late release must not resurrect it */
	vp_smb_release_chunk_as_complete(&smb, &c[1], 0, 0);
	assert_int_equal(vp_smb_chunk_state(&smb, 0, 1), VP_CHUNK_BEING_READ);
	vp_smb_release_chunk_as_free(&smb, 0, 1);
	/* every chunk free: unpartitioned, reusable with another layout */
	assert_int_equal(vp_smb_page_layout(&smb, 0), VP_PAGE_NOT_PARTITIONED);
	cursor = 0;
	assert_true(vp_smb_acquire_chunk_for_writing(&smb, VP_PAGE_DIV_14, 9, 5,
						     &cursor, &c[0]));
	assert_int_equal(c[0].page, 0);
	assert_int_equal(c[0].size, 292);
	assert_int_equal(vp_smb_page_layout(&smb, 0), VP_PAGE_DIV_14);
	/* releasing as free a chunk not being read changes nothing */
	vp_smb_release_chunk_as_free(&smb, 0, 0);
	assert_int_equal(vp_smb_chunk_state(&smb, 0, 0), VP_CHUNK_BEING_WRITTEN);
}

static void test_smb_bad_indices(void **state)
{
	(void)state;
	static uint8_t mem[4096 * 2];
	static uint8_t dst[VP_SMB_MAX_PAGE_SIZE];
	struct vp_smb smb;
	struct vp_error err;
	bool wc;

	memset(mem, 0, sizeof(mem));
	assert_int_equal(vp_smb_init(&smb, mem, sizeof(mem), 4096, &err), 0);
	/* unpartitioned page */
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 0, true, &wc));
	assert_int_equal(vp_smb_copy_chunk(&smb, 0, 0, dst), 0);
	/* page 0: DIV_4, all four complete (the producer wrote this) */
	uint32_t hdr = (3u << 28) | 0xffu;
	memcpy(mem, &hdr, 4);
	assert_int_equal(vp_smb_page_layout(&smb, 0), VP_PAGE_DIV_4);
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 2, 0, false, &wc));
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, UINT32_MAX, 0,
							  false, &wc));
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 4, false, &wc));
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 13, false, &wc));
	assert_int_equal(vp_smb_copy_chunk(&smb, 0, 4, dst), 0);
	assert_int_equal(vp_smb_copy_chunk(&smb, 2, 0, dst), 0);
	assert_int_equal(vp_smb_chunk_state(&smb, 0, 7), VP_CHUNK_FREE);
	assert_true(vp_smb_try_acquire_chunk_for_reading(&smb, 0, 3, false, &wc));
	assert_int_equal(vp_smb_copy_chunk(&smb, 0, 3, dst), 1020);
	vp_smb_release_chunk_as_free(&smb, 0, 3);
	vp_smb_release_chunk_as_free(&smb, 0, 9); /* ignored */
	vp_smb_release_chunk_as_free(&smb, 5, 0); /* ignored */
	assert_int_equal(vp_smb_chunk_state(&smb, 0, 3), VP_CHUNK_FREE);
	/* layouts 6 and 7 do not exist */
	hdr = (7u << 28) | 0x3u;
	memcpy(mem + 4096, &hdr, 4);
	assert_int_equal(vp_smb_page_layout(&smb, 1), VP_PAGE_NOT_PARTITIONED);
	assert_false(vp_smb_try_acquire_chunk_for_reading(&smb, 1, 0, false, &wc));
	assert_int_equal(vp_smb_copy_chunk(&smb, 1, 0, dst), 0);
	/* and a writer skips such a page, as well as state without layout */
	hdr = 0x3u;
	memcpy(mem, &hdr, 4);
	struct vp_smb_chunk c;
	uint32_t cursor = 0;
	assert_false(vp_smb_acquire_chunk_for_writing(&smb, VP_PAGE_DIV_1, 1, 1,
						      &cursor, &c));
}

static void test_smb_memfd(void **state)
{
	(void)state;
	struct vp_smb a, b;
	struct vp_error err;
	int fd;

	assert_int_equal(vp_smb_create(&a, 64 * 1024, 8192, &fd, &err), 0);
	assert_true(fd >= 0);
	assert_int_equal(a.num_pages, 8);
	int seals = fcntl(fd, F_GET_SEALS);
	assert_true(seals & F_SEAL_SHRINK);
	assert_true(seals & F_SEAL_GROW);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(ftruncate(fd, 4096), -1);
	assert_int_equal(vp_smb_map(&b, fd, 8192, &err), 0);
	assert_int_equal(b.size, 64 * 1024);
	assert_ptr_not_equal(a.base, b.base);

	/* a producer writes through one mapping, the service reads the other */
	struct vp_smb_chunk c;
	uint32_t cursor = 3;
	assert_true(vp_smb_acquire_chunk_for_writing(&a, VP_PAGE_DIV_7, 2, 77,
						     &cursor, &c));
	memset(c.begin + 8, 0xab, 100);
	vp_smb_release_chunk_as_complete(&a, &c, 1, VP_CHUNK_NEEDS_PATCHING);
	bool wc;
	assert_true(vp_smb_try_acquire_chunk_for_reading(&b, c.page, c.chunk,
							 false, &wc));
	uint8_t *dst = malloc(VP_SMB_MAX_PAGE_SIZE);
	assert_int_equal(vp_smb_copy_chunk(&b, c.page, c.chunk, dst),
			 ((8192 - 8) / 7) & ~3u);
	assert_int_equal(dst[0], 77);
	assert_int_equal(dst[8], 0xab);
	assert_int_equal(dst[7] >> 2, VP_CHUNK_NEEDS_PATCHING);
	vp_smb_release_chunk_as_free(&b, c.page, c.chunk);
	assert_int_equal(vp_smb_page_layout(&a, c.page), VP_PAGE_NOT_PARTITIONED);
	free(dst);

	/* a page size the file does not divide into */
	struct vp_smb bad;
	assert_int_equal(vp_smb_map(&bad, fd, 12288,
				    &err), -1);
	assert_int_equal(vp_smb_map(&bad, -1, 4096, &err), -1);
	vp_smb_unmap(&b);
	vp_smb_unmap(&a);
	assert_null(a.base);
	close(fd);
}

/* ---- trace buffer: basics -------------------------------------------- */

static void test_tb_single_chunk(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;
	char s[4096];
	struct vp_tb_packet_info info;

	assert_int_equal(vp_trace_buffer_size(tb), 65536);
	assert_int_equal(vp_trace_buffer_policy(tb), VP_FILL_RING_BUFFER);
	tc_begin(&c, 0, 5, 1020);
	tc_str(&c, "one");
	tc_str(&c, "two");
	tc_str(&c, "three");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 3, &c, true), 0);
	assert_true(vp_trace_buffer_used(tb) >= 1020);
	vp_trace_buffer_begin_read(tb);
	assert_int_equal(rd(tb, s, &info), 1);
	assert_string_equal(s, "one");
	assert_false(info.previous_packet_dropped);
	assert_true(info.first_packet_on_sequence);
	assert_int_equal(info.producer_id, 3);
	assert_int_equal(info.writer_id, 5);
	assert_int_equal(info.meta.sequence_id, 7);
	assert_int_equal(info.meta.uid, 1000);
	assert_int_equal(info.meta.pid, 42);
	assert_int_equal(rd(tb, s, &info), 1);
	assert_string_equal(s, "two");
	assert_false(info.first_packet_on_sequence);
	expect_pkt(tb, "three", false);
	expect_none(tb);
	struct vp_tb_stats st = stats(tb);
	assert_int_equal(st.chunks_written, 1);
	assert_int_equal(st.chunks_read, 1);
	assert_int_equal(st.bytes_written, 1020);
	assert_int_equal(st.bytes_read, 1020);
	assert_int_equal(st.buffer_size, 65536);
	assert_int_equal(vp_trace_buffer_used(tb), 0);
	vp_trace_buffer_free(tb);
}

static void test_tb_new_args(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb;
	struct vp_error err;

	assert_int_equal(vp_trace_buffer_new(&tb, 10000, VP_FILL_DISCARD, &err), 0);
	assert_int_equal(vp_trace_buffer_size(tb), 8192);
	vp_trace_buffer_free(tb);
	assert_int_equal(vp_trace_buffer_new(&tb, 100, VP_FILL_DISCARD, &err), 0);
	assert_int_equal(vp_trace_buffer_size(tb), 4096);
	vp_trace_buffer_free(tb);
	assert_int_equal(vp_trace_buffer_new(&tb, 8192, (enum vp_fill_policy)3,
					     &err), -1);
	assert_non_null(strstr(err.msg, "policy"));
	assert_null(tb);
}

static void test_tb_fragmented(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;

	/* "hello world" over 2 chunks, "abcdef" over 3 */
	tc_begin(&c, 10, 1, 292);
	tc_str(&c, "p0");
	tc_str(&c, "hello ");
	tc_end(&c, VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "p0", false);
	expect_none(tb); /* the rest of "hello " is not in yet */

	tc_begin(&c, 11, 1, 292);
	tc_str(&c, "world");
	tc_str(&c, "ab");
	tc_end(&c, VP_CHUNK_FIRST_PACKET_CONTINUES |
			   VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 12, 1, 292);
	tc_str(&c, "cd");
	tc_end(&c, VP_CHUNK_FIRST_PACKET_CONTINUES |
			   VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "hello world", false);
	expect_none(tb);
	tc_begin(&c, 13, 1, 292);
	tc_str(&c, "ef");
	tc_str(&c, "last");
	tc_end(&c, VP_CHUNK_FIRST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "abcdef", false);
	expect_pkt(tb, "last", false);
	expect_none(tb);
	struct vp_tb_stats st = stats(tb);
	assert_int_equal(st.chunks_read, 4);
	assert_int_equal(st.readaheads_succeeded, 2);
	assert_int_equal(st.trace_writer_packet_loss, 0);
	assert_int_equal(vp_trace_buffer_used(tb), 0);
	vp_trace_buffer_free(tb);
}

static void test_tb_interleaved(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(1 << 20, VP_FILL_RING_BUFFER);
	static struct tchunk c;
	char s[4096], want[64];
	struct vp_tb_packet_info info;
	unsigned next[3][2] = {{0}};

	/* 3 producers x 2 writers, 5 chunks each, committed round-robin */
	for (uint32_t id = 0; id < 5; id++)
		for (uint16_t p = 1; p <= 3; p++)
			for (uint16_t w = 1; w <= 2; w++) {
				tc_begin(&c, id, w, 584);
				for (int k = 0; k < 4; k++) {
					snprintf(want, sizeof(want), "%u/%u/%u",
						 p, w, id * 4 + k);
					tc_str(&c, want);
				}
				tc_end(&c, 0);
				assert_int_equal(commit(tb, p, &c, true), 0);
			}
	vp_trace_buffer_begin_read(tb);
	unsigned n = 0;
	while (rd(tb, s, &info) == 1) {
		unsigned p = info.producer_id, w = info.writer_id;
		assert_true(p >= 1 && p <= 3 && w >= 1 && w <= 2);
		snprintf(want, sizeof(want), "%u/%u/%u", p, w,
			 next[p - 1][w - 1]++);
		assert_string_equal(s, want);
		assert_false(info.previous_packet_dropped);
		n++;
	}
	assert_int_equal(n, 3 * 2 * 20);
	assert_int_equal(vp_trace_buffer_used(tb), 0);
	vp_trace_buffer_free(tb);
}

static void test_tb_zero_length_fragment(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;

	tc_begin(&c, 0, 1, 292);
	tc_str(&c, "a");
	tc_frag(&c, "", 0);
	tc_str(&c, "b");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "a", false);
	expect_pkt(tb, "b", false);
	expect_none(tb);
	vp_trace_buffer_free(tb);
}

/* ---- trace buffer: loss ---------------------------------------------- */

static void test_tb_ring_overwrite(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(8192, VP_FILL_RING_BUFFER);
	static struct tchunk c;
	char s[4096], want[32];
	struct vp_tb_packet_info info;

	/* 20 chunks of ~1 KiB into 8 KiB: the oldest are overwritten */
	for (uint32_t id = 0; id < 20; id++) {
		tc_begin(&c, id, 1, 1020);
		snprintf(want, sizeof(want), "pkt%u", id);
		tc_str(&c, want);
		tc_end(&c, 0);
		assert_int_equal(commit(tb, 1, &c, true), 0);
		assert_true(vp_trace_buffer_used(tb) <= 8192);
	}
	struct vp_tb_stats st = stats(tb);
	assert_true(st.chunks_overwritten >= 12);
	assert_int_equal(st.bytes_overwritten, st.chunks_overwritten * 1020);
	assert_true(st.write_wrap_count >= 1);
	uint64_t kept = 20 - st.chunks_overwritten;

	vp_trace_buffer_begin_read(tb);
	assert_int_equal(rd(tb, s, &info), 1);
	assert_true(info.previous_packet_dropped);
	snprintf(want, sizeof(want), "pkt%u", (unsigned)(20 - kept));
	assert_string_equal(s, want);
	for (uint64_t k = 1; k < kept; k++) {
		snprintf(want, sizeof(want), "pkt%u", (unsigned)(20 - kept + k));
		expect_pkt(tb, want, false);
	}
	expect_none(tb);
	st = stats(tb);
	assert_int_equal(st.trace_writer_packet_loss, 1);
	assert_int_equal(st.chunks_read, kept);

	/* read space is reused without overwriting anything */
	uint64_t before = st.chunks_overwritten;
	for (uint32_t id = 20; id < 24; id++) {
		tc_begin(&c, id, 1, 1020);
		tc_str(&c, "x");
		tc_end(&c, 0);
		assert_int_equal(commit(tb, 1, &c, true), 0);
	}
	assert_int_equal(stats(tb).chunks_overwritten, before);
	vp_trace_buffer_free(tb);
}

static void test_tb_overwritten_beginning(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(8192, VP_FILL_RING_BUFFER);
	static struct tchunk c;

	/* chunk 0 begins a packet that chunk 1 ends; other chunks push chunk
	 * 0 out (7 records of 1 KiB fill the 8 KiB) */
	tc_begin(&c, 0, 1, 1020);
	tc_str(&c, "begin-");
	tc_end(&c, VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 1, 1, 1020);
	tc_str(&c, "end");
	tc_str(&c, "after");
	tc_end(&c, VP_CHUNK_FIRST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	for (uint32_t id = 0; id < 6; id++) {
		tc_begin(&c, id, 2, 1020);
		tc_str(&c, "other");
		tc_end(&c, 0);
		assert_int_equal(commit(tb, 1, &c, true), 0);
	}
	struct vp_tb_stats st = stats(tb);
	assert_int_equal(st.chunks_overwritten, 1);
	vp_trace_buffer_begin_read(tb);
	/* "end" is skipped: its beginning is gone */
	expect_pkt(tb, "after", true);
	for (int i = 0; i < 6; i++)
		expect_pkt(tb, "other", false);
	expect_none(tb);
	vp_trace_buffer_free(tb);
}

static void test_tb_discard(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(8192, VP_FILL_DISCARD);
	static struct tchunk c;
	int accepted = 0;

	for (uint32_t id = 0; id < 10; id++) {
		tc_begin(&c, id, 1, 1020);
		char p[16];
		snprintf(p, sizeof(p), "d%u", id);
		tc_str(&c, p);
		tc_end(&c, 0);
		if (commit(tb, 1, &c, true) == 0)
			accepted++;
		else
			assert_int_equal(accepted, 7); /* 7 records fill 8K */
	}
	struct vp_tb_stats st = stats(tb);
	assert_int_equal(st.chunks_discarded, 3);
	assert_int_equal(st.chunks_overwritten, 0);
	vp_trace_buffer_begin_read(tb);
	for (int i = 0; i < accepted; i++) {
		char p[16];
		snprintf(p, sizeof(p), "d%d", i);
		expect_pkt(tb, p, false);
	}
	expect_none(tb);
	/* room again once read; the discarded chunks show as a loss */
	tc_begin(&c, 10, 1, 1020);
	tc_str(&c, "d10");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "d10", true);
	assert_int_equal(stats(tb).trace_writer_packet_loss, 1);

	/* a chunk bigger than the whole buffer */
	static struct tchunk big;
	tc_begin(&big, 0, 9, 16384);
	tc_str(&big, "big");
	tc_end(&big, 0);
	assert_int_equal(commit(tb, 1, &big, true), -1);
	assert_int_equal(stats(tb).chunks_discarded, 4);
	/* a discarded first chunk of a sequence still reports the loss */
	tc_begin(&c, 1, 9, 1020);
	tc_str(&c, "w9");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "w9", true);
	vp_trace_buffer_free(tb);
}

static void test_tb_chunk_id_gap(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;
	const uint32_t ids[] = {0, 1, 3, 4};

	for (int i = 0; i < 4; i++) {
		tc_begin(&c, ids[i], 1, 292);
		char p[16];
		snprintf(p, sizeof(p), "c%u", ids[i]);
		tc_str(&c, p);
		tc_end(&c, 0);
		assert_int_equal(commit(tb, 1, &c, true), 0);
	}
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "c0", false);
	expect_pkt(tb, "c1", false);
	expect_pkt(tb, "c3", true);
	expect_pkt(tb, "c4", false);
	expect_none(tb);
	assert_int_equal(stats(tb).trace_writer_packet_loss, 1);

	/* a gap inside a multi-chunk packet: the packet is dropped */
	tc_begin(&c, 5, 1, 292);
	tc_str(&c, "x");
	tc_str(&c, "lost-");
	tc_end(&c, VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 7, 1, 292);
	tc_str(&c, "tail");
	tc_str(&c, "y");
	tc_end(&c, VP_CHUNK_FIRST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "x", false);
	expect_pkt(tb, "y", true);
	expect_none(tb);
	assert_int_equal(stats(tb).readaheads_failed, 1);
	vp_trace_buffer_free(tb);
}

/* A writer that found no free chunk wrote the drop marker over the length
 * of its chunk's last fragment: that packet is discarded, the loss is
 * counted once (not as an ABI violation), even when nothing follows, and
 * the next packet of the sequence says previous_packet_dropped. */
static void test_tb_writer_drop_marker(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;
	uint8_t *marker;

	tc_begin(&c, 0, 1, 292);
	tc_str(&c, "a");
	marker = c.b + c.len;
	tc_str(&c, "sacrificed");
	vp_write_redundant_varint(marker, VP_FRAGMENT_DROP_PACKET);
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "a", false);
	expect_none(tb);
	assert_int_equal(stats(tb).trace_writer_packet_loss, 1);
	assert_int_equal(stats(tb).abi_violations, 0);

	/* the writer recovers: its next chunk follows without a gap */
	tc_begin(&c, 1, 1, 292);
	tc_str(&c, "b");
	tc_str(&c, "c");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "b", true);
	expect_pkt(tb, "c", false);
	expect_none(tb);
	assert_int_equal(stats(tb).trace_writer_packet_loss, 1);

	/* a packet abandoned mid-way: the marker is on its first fragment and
	 * the chunk does not say it continues */
	tc_begin(&c, 2, 1, 292);
	tc_str(&c, "d");
	marker = c.b + c.len;
	tc_str(&c, "half-");
	vp_write_redundant_varint(marker, VP_FRAGMENT_DROP_PACKET);
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 3, 1, 292);
	tc_str(&c, "e");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "d", false);
	expect_pkt(tb, "e", true);
	expect_none(tb);
	assert_int_equal(stats(tb).trace_writer_packet_loss, 2);
	assert_int_equal(stats(tb).abi_violations, 0);

	/* a packet the reader drops (the service found it invalid): the next
	 * one says so, and the writer is not blamed */
	tc_begin(&c, 4, 1, 292);
	tc_str(&c, "bad");
	tc_str(&c, "f");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	struct pb_buf out;
	struct vp_tb_packet_info info;
	pb_buf_init(&out);
	assert_int_equal(vp_trace_buffer_read_packet(tb, &out, &info), 1);
	assert_memory_equal(out.data, "bad", 3);
	vp_trace_buffer_packet_dropped(tb, &info);
	pb_buf_free(&out);
	expect_pkt(tb, "f", true);
	expect_none(tb);
	assert_int_equal(stats(tb).trace_writer_packet_loss, 2);
	vp_trace_buffer_free(tb);
}

static void test_tb_out_of_order(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;
	const uint32_t ids[] = {0, 2, 3, 1};

	for (int i = 0; i < 4; i++) {
		tc_begin(&c, ids[i], 1, 292);
		char p[16];
		snprintf(p, sizeof(p), "c%u", ids[i]);
		tc_str(&c, p);
		tc_end(&c, 0);
		assert_int_equal(commit(tb, 1, &c, true), 0);
	}
	assert_int_equal(stats(tb).chunks_committed_out_of_order, 1);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "c0", false);
	expect_pkt(tb, "c1", false);
	expect_pkt(tb, "c2", false);
	expect_pkt(tb, "c3", false);
	expect_none(tb);

	/* a chunk older than one already being read comes too late */
	tc_begin(&c, 10, 1, 292);
	tc_str(&c, "c10a");
	tc_str(&c, "c10b");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 11, 1, 292);
	tc_str(&c, "c11");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "c10a", true); /* 4..9 never came */
	tc_begin(&c, 9, 1, 292);
	tc_str(&c, "c9");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), -1);
	expect_pkt(tb, "c10b", false);
	expect_pkt(tb, "c11", false);
	expect_none(tb);
	vp_trace_buffer_free(tb);
}

static void test_tb_patching(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;

	tc_begin(&c, 0, 1, 292);
	tc_str(&c, "size=####!");
	tc_end(&c, VP_CHUNK_NEEDS_PATCHING);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 1, 1, 292);
	tc_str(&c, "next");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_none(tb); /* blocked until patched */

	struct vp_tb_patch p = {.offset = 4 + 5, .data = {'1', '2', '3', '4'}};
	/* out of range: fails, nothing applied */
	struct vp_tb_patch bad[2] = {p, {.offset = 292 - 8 - 3}};
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 1, 0, bad, 2, false),
			 -1);
	bad[1].offset = UINT32_MAX;
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 1, 0, bad, 2, false),
			 -1);
	/* unknown chunk, writer, producer */
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 1, 5, &p, 1, false), -1);
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 2, 0, &p, 1, false), -1);
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 2, 1, 0, &p, 1, false), -1);
	assert_int_equal(stats(tb).patches_failed, 5);
	vp_trace_buffer_begin_read(tb);
	expect_none(tb);

	/* more patches pending: still blocked */
	struct vp_tb_patch first = {.offset = 4 + 5, .data = {'x', 'x', 'x', 'x'}};
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 1, 0, &first, 1, true),
			 0);
	vp_trace_buffer_begin_read(tb);
	expect_none(tb);
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 1, 0, &p, 1, false), 0);
	assert_int_equal(stats(tb).patches_succeeded, 2);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "size=1234!", false);
	expect_pkt(tb, "next", false);
	expect_none(tb);

	/* a patch can also end at the last byte of the payload */
	tc_begin(&c, 2, 1, 292);
	tc_str(&c, "z");
	tc_end(&c, VP_CHUNK_NEEDS_PATCHING);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	struct vp_tb_patch edge = {.offset = 292 - 8 - 4};
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 1, 2, &edge, 1, false),
			 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "z", false);
	vp_trace_buffer_free(tb);
}

static void test_tb_incomplete_then_complete(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;

	/* scraped while "three" was being written */
	tc_begin(&c, 0, 1, 1020);
	tc_str(&c, "one");
	tc_str(&c, "two");
	tc_str(&c, "thr");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, false), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "one", false);
	expect_pkt(tb, "two", false);
	expect_none(tb);

	/* the finished chunk replaces it; reading resumes */
	tc_begin(&c, 0, 1, 1020);
	tc_str(&c, "one");
	tc_str(&c, "two");
	tc_str(&c, "three");
	tc_str(&c, "four-");
	tc_end(&c, VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	assert_int_equal(stats(tb).chunks_rewritten, 1);
	/* a late partial copy does not undo it */
	tc_begin(&c, 0, 1, 1020);
	tc_str(&c, "one");
	tc_str(&c, "XX");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, false), 0);
	assert_int_equal(stats(tb).chunks_rewritten, 1);
	tc_begin(&c, 1, 1, 1020);
	tc_str(&c, "five");
	tc_end(&c, VP_CHUNK_FIRST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "three", false);
	expect_pkt(tb, "four-five", false);
	expect_none(tb);
	struct vp_tb_stats st = stats(tb);
	assert_int_equal(st.chunks_read, 2);
	assert_int_equal(st.trace_writer_packet_loss, 0);
	assert_int_equal(vp_trace_buffer_used(tb), 0);

	/* a bigger complete copy moves the record */
	tc_begin(&c, 2, 1, 292);
	tc_str(&c, "six");
	tc_str(&c, "sev");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, false), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "six", false);
	tc_begin(&c, 2, 1, 2044);
	tc_str(&c, "six");
	tc_str(&c, "seven");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "seven", false);
	expect_none(tb);
	assert_int_equal(vp_trace_buffer_used(tb), 0);
	vp_trace_buffer_free(tb);
}

static void test_tb_malformed(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;
	uint8_t tiny[7] = {0};

	/* shorter than a chunk header */
	assert_int_equal(vp_trace_buffer_copy_chunk(tb, 1, &meta1, tiny, 7, true),
			 -1);
	assert_int_equal(vp_trace_buffer_copy_chunk(tb, 1, NULL, NULL, 0, true),
			 -1);
	assert_int_equal(stats(tb).abi_violations, 2);

	/* packet count over what the bytes hold: truncated */
	tc_begin(&c, 0, 1, 40);
	tc_str(&c, "ok1");
	tc_str(&c, "ok2");
	c.count = 30;
	tc_end(&c, VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	assert_int_equal(stats(tb).abi_violations, 3);
	/* a fragment running past the end */
	tc_begin(&c, 1, 1, 40);
	tc_str(&c, "ok3");
	vp_write_redundant_varint(c.b + c.len, 1000);
	c.count = 2;
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	/* a length varint that does not end within 4 bytes */
	tc_begin(&c, 2, 1, 40);
	memset(c.b + 8, 0xff, 8);
	c.count = 1;
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 3, 1, 40);
	tc_str(&c, "fine");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	/* a 1-byte varint (not redundant) is still a valid length */
	tc_begin(&c, 4, 1, 40);
	c.b[8] = 3;
	memcpy(c.b + 9, "abc", 3);
	c.count = 1;
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	assert_int_equal(stats(tb).abi_violations, 5);

	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "ok1", false);
	expect_pkt(tb, "ok2", false);
	expect_pkt(tb, "ok3", true);  /* after chunk 0's damage */
	expect_pkt(tb, "fine", true); /* chunks 1 and 2 lost data too */
	expect_pkt(tb, "abc", false);
	expect_none(tb);
	assert_int_equal(vp_trace_buffer_used(tb), 0);

	/* a chunk over the maximum chunk size */
	uint8_t *huge = calloc(1, VP_SMB_MAX_PAGE_SIZE + 8);
	assert_int_equal(vp_trace_buffer_copy_chunk(tb, 1, &meta1, huge,
						    VP_SMB_MAX_PAGE_SIZE + 8,
						    true), -1);
	free(huge);
	assert_int_equal(stats(tb).abi_violations, 6);
	vp_trace_buffer_free(tb);
}

static void test_tb_chunk_id_wrap(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;

	tc_begin(&c, 0xfffffffeu, 1, 292);
	tc_str(&c, "a");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	/* 0 before 0xffffffff: out of order across the wrap */
	tc_begin(&c, 0, 1, 292);
	tc_str(&c, "-c");
	tc_str(&c, "d");
	tc_end(&c, VP_CHUNK_FIRST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	tc_begin(&c, 0xffffffffu, 1, 292);
	tc_str(&c, "b");
	tc_str(&c, "wrap");
	tc_end(&c, VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	assert_int_equal(stats(tb).chunks_committed_out_of_order, 1);
	tc_begin(&c, 1, 1, 292);
	tc_str(&c, "e");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "a", false);
	expect_pkt(tb, "b", false);
	expect_pkt(tb, "wrap-c", false);
	expect_pkt(tb, "d", false);
	expect_pkt(tb, "e", false);
	expect_none(tb);
	assert_int_equal(stats(tb).trace_writer_packet_loss, 0);
	vp_trace_buffer_free(tb);
}

static void test_tb_producer_gone(void **state)
{
	(void)state;
	struct vp_trace_buffer *tb = new_tb(65536, VP_FILL_RING_BUFFER);
	static struct tchunk c;

	/* producer 1: a packet whose end never comes */
	tc_begin(&c, 0, 1, 292);
	tc_str(&c, "p1");
	tc_str(&c, "half");
	tc_end(&c, VP_CHUNK_LAST_PACKET_CONTINUES);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	/* producer 1, writer 2: a chunk scraped mid-write */
	tc_begin(&c, 0, 2, 292);
	tc_str(&c, "w2");
	tc_str(&c, "partial");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, false), 0);
	/* producer 2 is alive */
	tc_begin(&c, 0, 1, 292);
	tc_str(&c, "p2");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 2, &c, true), 0);

	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "p1", false);
	expect_pkt(tb, "w2", false);
	expect_pkt(tb, "p2", false);
	expect_none(tb);
	assert_true(vp_trace_buffer_used(tb) > 0);

	vp_trace_buffer_producer_gone(tb, 1);
	vp_trace_buffer_begin_read(tb);
	expect_none(tb);
	assert_int_equal(vp_trace_buffer_used(tb), 0);
	assert_int_equal(stats(tb).readaheads_failed, 1);
	/* producer 1's sequences are forgotten: patches find nothing */
	struct vp_tb_patch p = {0};
	assert_int_equal(vp_trace_buffer_patch_chunk(tb, 1, 1, 0, &p, 1, false),
			 -1);
	/* a new producer with the same id starts afresh */
	tc_begin(&c, 0, 1, 292);
	tc_str(&c, "new");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	char s[4096];
	struct vp_tb_packet_info info;
	vp_trace_buffer_begin_read(tb);
	assert_int_equal(rd(tb, s, &info), 1);
	assert_string_equal(s, "new");
	assert_true(info.first_packet_on_sequence);
	assert_false(info.previous_packet_dropped);
	/* gone while chunks are still unread: they stay readable */
	tc_begin(&c, 1, 1, 292);
	tc_str(&c, "still");
	tc_end(&c, 0);
	assert_int_equal(commit(tb, 1, &c, true), 0);
	vp_trace_buffer_producer_gone(tb, 1);
	vp_trace_buffer_begin_read(tb);
	expect_pkt(tb, "still", false);
	expect_none(tb);
	vp_trace_buffer_free(tb);
}

/* ---- randomized round trip ------------------------------------------- */

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

/* Packet k of writer w: its length and bytes follow from (w, k). */
static uint32_t pkt_len(unsigned w, uint32_t k, size_t chunk)
{
	uint32_t h = (w * 2654435761u) ^ (k * 40503u);
	h ^= h >> 13;
	h *= 0x5bd1e995u;
	h ^= h >> 15;
	if (h % 10 == 0)
		return 1 + h % (uint32_t)(3 * chunk); /* spans chunks */
	return 1 + (h >> 4) % 200;
}

static uint8_t pkt_byte(unsigned w, uint32_t k, uint32_t i)
{
	return (uint8_t)(w * 31 + k * 7 + i * 13 + (i >> 8));
}

#define N_WRITERS 7
#define MAX_QUEUE 4096

/* A reference chunk writer: fills chunks the way a trace writer does and
 * queues them for commit. */
struct ref_writer {
	uint16_t producer_id, writer_id;
	size_t cap;
	uint32_t next_chunk_id;
	struct tchunk cur;
	bool open, cur_first_continues;
	struct tchunk *queue[MAX_QUEUE];
	unsigned q_head, q_len;
	uint32_t written; /* packets written */
	uint32_t read;    /* packets read back */
};

static void rw_close(struct ref_writer *w, bool last_continues)
{
	unsigned flags = 0;
	if (w->cur_first_continues)
		flags |= VP_CHUNK_FIRST_PACKET_CONTINUES;
	if (last_continues)
		flags |= VP_CHUNK_LAST_PACKET_CONTINUES;
	tc_end(&w->cur, flags);
	assert_true(w->q_len < MAX_QUEUE);
	struct tchunk *q = malloc(sizeof(*q));
	memcpy(q, &w->cur, sizeof(*q));
	w->queue[(w->q_head + w->q_len++) % MAX_QUEUE] = q;
	w->open = false;
}

static void rw_open(struct ref_writer *w, bool first_continues)
{
	tc_begin(&w->cur, w->next_chunk_id++, w->writer_id, w->cap);
	w->open = true;
	w->cur_first_continues = first_continues;
}

static void rw_packet(struct ref_writer *w, unsigned wi)
{
	uint32_t k = w->written++, len = pkt_len(wi, k, w->cap), off = 0;
	static uint8_t buf[3 * 4096 + 1];
	bool started = false;

	for (uint32_t i = 0; i < len; i++)
		buf[i] = pkt_byte(wi, k, i);
	for (;;) {
		if (!w->open)
			rw_open(w, started);
		size_t room = w->cap - w->cur.len;
		if (room <= VP_FRAGMENT_LEN_SIZE) {
			rw_close(w, started);
			continue;
		}
		size_t n = len - off;
		if (n > room - VP_FRAGMENT_LEN_SIZE)
			n = room - VP_FRAGMENT_LEN_SIZE;
		tc_frag(&w->cur, buf + off, n);
		off += (uint32_t)n;
		started = true;
		if (off == len)
			return;
	}
}

static void rw_commit_one(struct vp_trace_buffer *tb, struct ref_writer *w)
{
	struct tchunk *q = w->queue[w->q_head];
	/* now and then two chunks swap places (an out-of-order commit) */
	if (w->q_len >= 2 && rnd() % 8 == 0) {
		struct tchunk *q2 = w->queue[(w->q_head + 1) % MAX_QUEUE];
		assert_int_equal(commit(tb, w->producer_id, q2, true), 0);
		assert_int_equal(commit(tb, w->producer_id, q, true), 0);
		free(q2);
		w->q_head = (w->q_head + 1) % MAX_QUEUE;
		w->q_len--;
	} else {
		assert_int_equal(commit(tb, w->producer_id, q, true), 0);
	}
	free(q);
	w->q_head = (w->q_head + 1) % MAX_QUEUE;
	w->q_len--;
}

static void drain(struct vp_trace_buffer *tb, struct ref_writer *ws)
{
	struct pb_buf b;
	struct vp_tb_packet_info info;

	pb_buf_init(&b);
	vp_trace_buffer_begin_read(tb);
	for (;;) {
		pb_buf_reset(&b);
		if (vp_trace_buffer_read_packet(tb, &b, &info) != 1)
			break;
		unsigned wi = N_WRITERS;
		for (unsigned i = 0; i < N_WRITERS; i++)
			if (ws[i].producer_id == info.producer_id &&
			    ws[i].writer_id == info.writer_id)
				wi = i;
		assert_true(wi < N_WRITERS);
		struct ref_writer *w = &ws[wi];
		uint32_t k = w->read++;
		assert_true(k < w->written);
		assert_false(info.previous_packet_dropped);
		assert_int_equal(info.first_packet_on_sequence, k == 0);
		assert_int_equal(b.len, pkt_len(wi, k, w->cap));
		for (uint32_t i = 0; i < b.len; i++)
			if (b.data[i] != pkt_byte(wi, k, i))
				fail_msg("writer %u packet %u byte %u differs",
					 wi, k, i);
	}
	pb_buf_free(&b);
}

static void test_tb_random_round_trip(void **state)
{
	(void)state;
	static const size_t caps[] = {292, 584, 1020, 2044, 4088};
	static struct ref_writer ws[N_WRITERS];

	for (uint64_t seed = 1; seed <= 6; seed++) {
		rng_state = seed * 0x9e3779b97f4a7c15ull;
		struct vp_trace_buffer *tb = new_tb(32 << 20, seed % 2 ?
						    VP_FILL_RING_BUFFER :
						    VP_FILL_DISCARD);
		memset(ws, 0, sizeof(ws));
		for (unsigned i = 0; i < N_WRITERS; i++) {
			ws[i].producer_id = (uint16_t)(1 + i % 3);
			ws[i].writer_id = (uint16_t)(1 + i / 3);
			ws[i].cap = caps[(i + seed) % 5];
			ws[i].next_chunk_id = i == 2 ? 0xfffffff0u : rnd() % 3;
		}
		for (int step = 0; step < 30000; step++) {
			struct ref_writer *w = &ws[rnd() % N_WRITERS];
			uint32_t op = rnd() % 100;
			if (op < 55) {
				rw_packet(w, (unsigned)(w - ws));
			} else if (op < 95) {
				if (w->q_len)
					rw_commit_one(tb, w);
			} else if (op < 97) {
				/* scrape the open chunk: an incomplete copy */
				if (!w->q_len && w->open && w->cur.count) {
					struct tchunk *t = malloc(sizeof(*t));
					memcpy(t, &w->cur, sizeof(*t));
					tc_end(t, w->cur_first_continues ?
					       VP_CHUNK_FIRST_PACKET_CONTINUES : 0);
					assert_int_equal(commit(tb, w->producer_id,
								t, false), 0);
					free(t);
				}
			} else {
				drain(tb, ws);
			}
		}
		for (unsigned i = 0; i < N_WRITERS; i++) {
			if (ws[i].open)
				rw_close(&ws[i], false);
			while (ws[i].q_len)
				rw_commit_one(tb, &ws[i]);
		}
		drain(tb, ws);
		for (unsigned i = 0; i < N_WRITERS; i++)
			assert_int_equal(ws[i].read, ws[i].written);
		struct vp_tb_stats st = stats(tb);
		assert_int_equal(st.abi_violations, 0);
		assert_int_equal(st.chunks_overwritten, 0);
		assert_int_equal(st.chunks_discarded, 0);
		assert_int_equal(st.trace_writer_packet_loss, 0);
		assert_true(st.chunks_committed_out_of_order > 0);
		assert_true(st.readaheads_succeeded > 0);
		assert_int_equal(vp_trace_buffer_used(tb), 0);
		vp_trace_buffer_free(tb);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smb_layouts),
		cmocka_unit_test(test_smb_acquire_until_full),
		cmocka_unit_test(test_smb_complete_read_free),
		cmocka_unit_test(test_smb_bad_indices),
		cmocka_unit_test(test_smb_memfd),
		cmocka_unit_test(test_tb_single_chunk),
		cmocka_unit_test(test_tb_new_args),
		cmocka_unit_test(test_tb_fragmented),
		cmocka_unit_test(test_tb_interleaved),
		cmocka_unit_test(test_tb_zero_length_fragment),
		cmocka_unit_test(test_tb_ring_overwrite),
		cmocka_unit_test(test_tb_overwritten_beginning),
		cmocka_unit_test(test_tb_discard),
		cmocka_unit_test(test_tb_chunk_id_gap),
		cmocka_unit_test(test_tb_writer_drop_marker),
		cmocka_unit_test(test_tb_out_of_order),
		cmocka_unit_test(test_tb_patching),
		cmocka_unit_test(test_tb_incomplete_then_complete),
		cmocka_unit_test(test_tb_malformed),
		cmocka_unit_test(test_tb_chunk_id_wrap),
		cmocka_unit_test(test_tb_producer_gone),
		cmocka_unit_test(test_tb_random_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
