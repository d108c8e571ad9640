/*
 * fuzz_trace_filter.c - libFuzzer target for TraceConfig.trace_filter: the
 * bytecode parser (service/trace_filter.c) on a consumer's bytes, and the
 * filter on a producer's packet.
 *
 * Input: a flags byte, a 16-bit little-endian bytecode length, the
 * bytecode, then the packet.  Flags bit 0: the bytecode's varints get
 * their checksum appended here, so that the fuzzer reaches the table
 * building and the filter instead of stopping at the checksum; bit 1: the
 * bytecode's second half is a bytecode_overlay_v54 (its checksum appended
 * the same way with bit 0).
 *
 * Checked: no crash or leak, a filtered packet is never longer than its
 * input, and a failed one is empty.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "trace_filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The varints of [p, p + n) re-encoded with their FNV-1a checksum after
 * them; the bytes as they are if they do not decode. */
static void with_checksum(const uint8_t *p, size_t n, struct pb_buf *out)
{
	struct pb_packed_iter it;
	uint64_t h = 0xcbf29ce484222325ull, w;
	pb_buf_reset(out);
	pb_packed_init(&it, p, n);
	while (pb_packed_next(&it, &w)) {
		uint32_t v = (uint32_t)w;
		for (int b = 0; b < 4; b++) {
			h ^= (v >> (8 * b)) & 0xff;
			h *= 0x100000001b3ull;
		}
		pb_put_raw_varint(out, v);
	}
	if (it.bad) {
		pb_buf_reset(out);
		pb_put_raw(out, p, n);
		return;
	}
	pb_put_raw_varint(out, (uint32_t)h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	uint8_t flags = data[0];
	size_t bl = (size_t)data[1] | (size_t)data[2] << 8;
	data += 3;
	size -= 3;
	if (bl > size)
		bl = size;
	size_t ovl = (flags & 2) ? bl / 2 : 0;
	struct pb_buf bc, ov, out;
	pb_buf_init(&bc);
	pb_buf_init(&ov);
	pb_buf_init(&out);
	if (flags & 1) {
		with_checksum(data, bl - ovl, &bc);
		if (ovl)
			with_checksum(data + bl - ovl, ovl, &ov);
	} else {
		pb_put_raw(&bc, data, bl - ovl);
		pb_put_raw(&ov, data + bl - ovl, ovl);
	}
	enum vp_tf_load why;
	struct vp_trace_filter *f = vp_trace_filter_new(
		bc.data, bc.len, ov.len ? ov.data : NULL, ov.len, &why);
	if (f) {
		const uint8_t *pkt = data + bl;
		size_t pl = size - bl;
		bool ok = vp_trace_filter_packet(f, pkt, pl, &out);
		if (out.len > pl || (!ok && out.len != 0))
			abort();
		vp_trace_filter_free(f);
	}
	pb_buf_free(&bc);
	pb_buf_free(&ov);
	pb_buf_free(&out);
	return 0;
}
