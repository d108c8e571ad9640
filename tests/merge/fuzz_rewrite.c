/*
 * fuzz_rewrite.c - libFuzzer target: the sync scanner and the packet
 * rewriter on arbitrary packets, with a synthetic clock map so that every
 * mapping path (scoped clocks, legacy us, ftrace, compact_sched, snapshots)
 * runs.  The input is a run of `varint length, packet bytes`; the first
 * byte picks the options (machine id or id remapping).  Whatever the
 * rewriter writes must scan as a well-formed message.
 */
#include <stdint.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "rewrite.h"
#include "sync_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool fuzz_map(void *ctx, uint32_t clock, uint64_t in, uint64_t *out)
{
	(void)ctx;
	if (clock != BUILTIN_CLOCK_BOOTTIME && clock != BUILTIN_CLOCK_MONOTONIC)
		return false;
	*out = in + (in >> 12) + 1000; /* monotonic, with drift */
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t opts = data[0];
	struct rewrite_cfg cfg = {
		.path = "fuzz.pb",
		.map = fuzz_map,
		.target_clock = (opts & 1) ? BUILTIN_CLOCK_MONOTONIC
					   : BUILTIN_CLOCK_BOOTTIME,
		.trace_clock = BUILTIN_CLOCK_BOOTTIME,
		.seq_offset = 1000,
		.machine_id = (opts & 2) ? 0 : 1,
		.remap_ids = (opts & 2) != 0,
		.pid_offset = 1u << 22,
		.uuid_key = 0x9e3779b97f4a7c15ull,
	};
	struct rewriter *rw = rewriter_new(&cfg);
	struct sync_scanner *sc = sync_scanner_new("fuzz.pb");
	struct pb_buf out;
	struct vp_error err;
	const uint8_t *p = data + 1, *end = data + size;

	pb_buf_init(&out);
	while (p < end) {
		uint64_t len;
		if (!pb_read_varint(&p, end, &len) || len > (uint64_t)(end - p))
			break;
		uint64_t off = (uint64_t)(p - data);
		sync_scan_packet(sc, p, (size_t)len, off, &err);
		pb_buf_reset(&out);
		if (rewrite_packet(rw, p, (size_t)len, off, &out, &err) == 0) {
			struct pb_reader r;
			struct pb_field f;
			pb_reader_init(&r, out.data, out.len);
			while (pb_next(&r, &f))
				;
			if (r.err != PB_OK)
				__builtin_trap();
		}
		p += len;
	}
	pb_buf_free(&out);
	sync_scanner_free(sc);
	rewriter_free(rw);
	return 0;
}
