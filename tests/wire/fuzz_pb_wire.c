/*
 * fuzz_pb_wire.c - libFuzzer target: the wire scanner on arbitrary bytes,
 * descending into every length-delimited field as if it were a message and
 * walking it as packed varints, and re-encoding what it read.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const uint8_t *p, size_t len, int depth, struct pb_buf *out)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.end > p + len || f.start < p)
			__builtin_trap();
		switch (f.wt) {
		case PB_WT_VARINT:
			pb_put_varint(out, f.num, f.val);
			break;
		case PB_WT_FIXED64:
			pb_put_fixed64(out, f.num, f.val);
			break;
		case PB_WT_FIXED32:
			pb_put_fixed32(out, f.num, (uint32_t)f.val);
			break;
		case PB_WT_LEN: {
			struct pb_packed_iter it;
			uint64_t v;
			pb_packed_init(&it, f.data, f.len);
			while (pb_packed_next(&it, &v))
				;
			size_t m = pb_begin_nested(out, f.num);
			if (depth < 16)
				walk(f.data, f.len, depth + 1, out);
			pb_end_nested(out, m);
			break;
		}
		}
	}
	if (r.err != PB_OK && r.err_off >= len)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pb_buf out;
	pb_buf_init(&out);
	walk(data, size, 0, &out);
	/* What was re-encoded must scan cleanly. */
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, out.data, out.len);
	while (pb_next(&r, &f))
		;
	if (r.err != PB_OK)
		__builtin_trap();
	pb_buf_free(&out);
	return 0;
}
