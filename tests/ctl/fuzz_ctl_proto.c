/*
 * fuzz_ctl_proto.c - libFuzzer target for the guest control protocol's
 * stream decoder and payload parser (ctl/ctl_proto.h): arbitrary
 * bytes, fed in pieces whose sizes come from the input, must never crash,
 * and every frame that comes out must parse or be refused cleanly, and
 * re-encode to a frame that decodes again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_frame(const struct vp_ctl_frame *f)
{
	struct vp_ctl_msg *m = malloc(sizeof(*m));
	struct vp_error e;
	uint8_t *out;
	size_t len;

	if (!m)
		return;
	if (vp_ctl_parse_payload(f->type, f->id, f->payload, f->len, m, &e) == 0 &&
	    vp_ctl_encode(m, &out, &len, &e) == 0) {
		struct vp_ctl_decoder d;
		struct vp_ctl_frame g;
		bool got;
		vp_ctl_decoder_init(&d);
		size_t used = vp_ctl_decode(&d, out, len, &g, &got);
		if (!got || used != len || g.type != f->type || g.id != f->id)
			abort();
		vp_ctl_decoder_free(&d);
		free(out);
	}
	free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vp_ctl_decoder d;
	size_t off = 0;

	if (size == 0)
		return 0;
	/* The first byte picks the piece size: split input must decode
	 * like whole input. */
	size_t piece = (size_t)data[0] % 64 + 1;
	data++;
	size--;
	vp_ctl_decoder_init(&d);
	while (off < size) {
		size_t n = size - off < piece ? size - off : piece;
		size_t pos = 0;
		bool got;
		struct vp_ctl_frame f;
		do {
			pos += vp_ctl_decode(&d, data + off + pos, n - pos, &f,
					     &got);
			if (got)
				check_frame(&f);
		} while (got || pos < n);
		off += n;
	}
	vp_ctl_decoder_free(&d);
	return 0;
}
