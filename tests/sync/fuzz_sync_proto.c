/*
 * fuzz_sync_proto.c - libFuzzer target for the sync exchange decoder: any
 * byte stream, fed in pieces whose sizes come from the input, must decode
 * without reading out of bounds, and every frame it yields must re-encode
 * to bytes that decode to the same frame.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "sync_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reencode(const struct vp_sync_msg *m)
{
	uint8_t buf[VP_SYNC_MAX_FRAME];
	size_t len = m->type == VP_SYNC_REQUEST
			     ? vp_sync_encode_request(buf, m->seq)
			     : vp_sync_encode_reply(buf, m->seq, m->host_counter);
	struct vp_sync_decoder d;
	struct vp_sync_msg again;
	bool got;
	vp_sync_decoder_init(&d);
	if (vp_sync_decode(&d, buf, len, &again, &got) != len || !got ||
	    again.type != m->type || again.seq != m->seq ||
	    again.host_counter != m->host_counter)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vp_sync_decoder d;
	size_t off = 0;
	size_t step = size ? (size_t)(data[0] % 32) + 1 : 1;

	vp_sync_decoder_init(&d);
	while (off < size) {
		size_t piece = size - off < step ? size - off : step;
		size_t used = 0;
		while (used < piece) {
			struct vp_sync_msg m;
			bool got;
			size_t n = vp_sync_decode(&d, data + off + used,
						  piece - used, &m, &got);
			if (n == 0 || n > piece - used)
				abort();
			used += n;
			if (got)
				check_reencode(&m);
		}
		off += piece;
	}
	if (d.len >= VP_SYNC_MAX_FRAME)
		abort();
	return 0;
}
