/*
 * fuzz_trace_buffer.c - libFuzzer target for shm.
 *
 * The input is a script of operations against a small trace buffer (4-16
 * KiB, either fill policy) and a 4-page shared memory buffer whose bytes,
 * page headers included, the script also controls:
 *   raw chunk bytes, structured chunks (ids near each other, flags,
 *   fragment lengths of the script's choosing), patches, read passes,
 *   producer_gone, service-side SMB calls (acquire for reading / copy /
 *   free) on hostile page headers, pokes at page headers, and producer-side
 *   acquire/release.
 * Nothing may crash, leak or read out of bounds, and the buffer's
 * accounting must stay within its size.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm_abi.h"
#include "trace_buffer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct script {
	const uint8_t *p;
	size_t n;
};

static uint32_t take(struct script *s, unsigned bytes)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < bytes; i++) {
		v <<= 8;
		if (s->n) {
			v |= *s->p++;
			s->n--;
		}
	}
	return v;
}

#define SMB_PAGES 4u
#define SMB_PAGE 4096u

static uint8_t smb_mem[SMB_PAGES * SMB_PAGE];
static uint8_t chunk_buf[VP_SMB_MAX_PAGE_SIZE];

static void check(struct vp_trace_buffer *tb)
{
	if (vp_trace_buffer_used(tb) > vp_trace_buffer_size(tb))
		abort();
}

static void op_raw_chunk(struct script *s, struct vp_trace_buffer *tb)
{
	uint16_t producer = (uint16_t)(take(s, 1) % 4);
	bool complete = take(s, 1) & 1;
	size_t len = take(s, 2) % 2200;
	memset(chunk_buf, 0, len);
	size_t have = len < s->n ? len : s->n;
	memcpy(chunk_buf, s->p, have);
	s->p += have;
	s->n -= have;
	vp_trace_buffer_copy_chunk(tb, producer, NULL, chunk_buf, len, complete);
}

static void op_chunk(struct script *s, struct vp_trace_buffer *tb,
		     uint32_t base_id)
{
	uint16_t producer = (uint16_t)(take(s, 1) % 4);
	uint16_t writer = (uint16_t)(take(s, 1) % 3);
	uint32_t id = base_id + (uint32_t)(int8_t)take(s, 1);
	unsigned flags = take(s, 1);
	bool complete = !(flags & 0x80);
	unsigned count = take(s, 1) % 12;
	size_t cap = 8 + (size_t)take(s, 1) * 8;
	size_t off = VP_SMB_CHUNK_HEADER_SIZE;

	memset(chunk_buf, 0, cap);
	memcpy(chunk_buf, &id, 4);
	memcpy(chunk_buf + 4, &writer, 2);
	for (unsigned i = 0; i < count && off + 4 <= cap; i++) {
		uint32_t len = take(s, 1);
		if (len == 0xff)
			len = take(s, 2); /* sometimes past the end */
		vp_write_redundant_varint(chunk_buf + off, len);
		off += 4;
		for (uint32_t k = 0; k < len && off < cap; k++)
			chunk_buf[off++] = (uint8_t)(i + k);
	}
	uint16_t w = vp_chunk_packets_word(count, flags & 0x3f);
	memcpy(chunk_buf + 6, &w, 2);
	struct vp_tb_sequence_meta meta = {writer, 1, 2, 0};
	vp_trace_buffer_copy_chunk(tb, producer, &meta, chunk_buf, cap,
				   complete);
}

static void op_patch(struct script *s, struct vp_trace_buffer *tb,
		     uint32_t base_id)
{
	struct vp_tb_patch patches[3];
	uint16_t producer = (uint16_t)(take(s, 1) % 4);
	uint16_t writer = (uint16_t)(take(s, 1) % 3);
	uint32_t id = base_id + (uint32_t)(int8_t)take(s, 1);
	size_t n = take(s, 1) % 4;
	bool more = take(s, 1) & 1;
	for (size_t i = 0; i < n; i++) {
		patches[i].offset = take(s, 2);
		if (patches[i].offset == 0xffff)
			patches[i].offset = UINT32_MAX - take(s, 1);
		uint32_t v = take(s, 4);
		memcpy(patches[i].data, &v, 4);
	}
	vp_trace_buffer_patch_chunk(tb, producer, writer, id, patches, n, more);
}

static void op_read(struct script *s, struct vp_trace_buffer *tb)
{
	struct pb_buf out;
	struct vp_tb_packet_info info;
	unsigned max = take(s, 1);

	pb_buf_init(&out);
	vp_trace_buffer_begin_read(tb);
	for (unsigned i = 0; i < max; i++) {
		size_t before = out.len;
		if (vp_trace_buffer_read_packet(tb, &out, &info) != 1)
			break;
		if (out.len <= before || out.len - before > VP_SMB_MAX_PAGE_SIZE * 64u)
			abort();
	}
	pb_buf_free(&out);
}

static void op_smb_service(struct script *s, struct vp_smb *smb,
			   struct vp_trace_buffer *tb)
{
	uint32_t page = take(s, 1) % (SMB_PAGES + 2);
	uint32_t chunk = take(s, 1) % 16;
	bool scrape = take(s, 1) & 1;
	bool was_complete = false;

	(void)vp_smb_chunk_state(smb, page, chunk);
	(void)vp_smb_page_layout(smb, page);
	if (!vp_smb_try_acquire_chunk_for_reading(smb, page, chunk, scrape,
						  &was_complete)) {
		if (vp_smb_copy_chunk(smb, page, chunk, chunk_buf) > SMB_PAGE)
			abort();
		return;
	}
	size_t len = vp_smb_copy_chunk(smb, page, chunk, chunk_buf);
	if (len > SMB_PAGE - VP_SMB_PAGE_HEADER_SIZE)
		abort();
	if (len)
		vp_trace_buffer_copy_chunk(tb, 3, NULL, chunk_buf, len,
					   was_complete);
	vp_smb_release_chunk_as_free(smb, page, chunk);
}

static void op_smb_poke(struct script *s, struct vp_smb *smb)
{
	uint32_t page = take(s, 1) % SMB_PAGES;
	uint32_t v = take(s, 4);
	atomic_store((_Atomic uint32_t *)(void *)(smb->base + page * SMB_PAGE),
		     v);
}

static void op_smb_producer(struct script *s, struct vp_smb *smb,
			    uint32_t *cursor)
{
	struct vp_smb_chunk c;
	enum vp_page_layout layout = (enum vp_page_layout)(take(s, 1) % 7);
	uint16_t writer = (uint16_t)(take(s, 1) % 3);
	uint32_t id = take(s, 1);

	if (!vp_smb_acquire_chunk_for_writing(smb, layout, writer, id, cursor,
					      &c))
		return;
	if (c.size < VP_SMB_CHUNK_HEADER_SIZE ||
	    c.begin + c.size > smb->base + smb->size)
		abort();
	size_t n = take(s, 1);
	uint8_t *p = c.begin + VP_SMB_CHUNK_HEADER_SIZE;
	size_t room = c.size - VP_SMB_CHUNK_HEADER_SIZE;
	if (n + 4 <= room) {
		vp_write_redundant_varint(p, (uint32_t)n);
		memset(p + 4, 0x5a, n);
	}
	unsigned word = take(s, 1);
	vp_smb_release_chunk_as_complete(smb, &c, word & 3, word >> 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct script s = {data, size};
	struct vp_trace_buffer *tb;
	struct vp_smb smb;
	uint32_t cursor = 0;
	unsigned cfg = take(&s, 1);
	uint32_t base_id = take(&s, 4);

	if (vp_trace_buffer_new(&tb, 4096u * (1 + (cfg & 3)),
				(cfg & 4) ? VP_FILL_DISCARD
					  : VP_FILL_RING_BUFFER, NULL))
		return 0;
	/* The SMB starts as a copy of the script, page headers included. */
	for (size_t i = 0; i < sizeof(smb_mem); i++)
		smb_mem[i] = size ? data[i % size] : 0;
	if (vp_smb_init(&smb, smb_mem, sizeof(smb_mem), SMB_PAGE, NULL))
		abort();

	while (s.n) {
		switch (take(&s, 1) % 8) {
		case 0: op_raw_chunk(&s, tb); break;
		case 1: op_chunk(&s, tb, base_id); break;
		case 2: op_patch(&s, tb, base_id); break;
		case 3: op_read(&s, tb); break;
		case 4: vp_trace_buffer_producer_gone(tb, (uint16_t)(take(&s, 1) % 4)); break;
		case 5: op_smb_service(&s, &smb, tb); break;
		case 6: op_smb_poke(&s, &smb); break;
		case 7: op_smb_producer(&s, &smb, &cursor); break;
		}
		check(tb);
	}
	struct vp_tb_stats st;
	vp_trace_buffer_get_stats(tb, &st);
	if (st.bytes_read > st.bytes_written)
		abort();
	struct script all = {(const uint8_t *)"\xff", 1};
	for (int pass = 0; pass < 4; pass++) {
		all.p = (const uint8_t *)"\xff";
		all.n = 1;
		op_read(&all, tb);
	}
	vp_trace_buffer_free(tb);
	return 0;
}
