/*
 * fuzz_rewrite.c - libFuzzer target: the sync scanner and the packet
 * rewriter on arbitrary packets, with a synthetic clock map so that every
 * mapping path (scoped clocks, legacy us, ftrace, compact_sched, snapshots)
 * runs.  The input is a run of `varint length, packet bytes`; the first
 * byte picks the options: bit 0 the MONOTONIC axis, bit 1 id remapping
 * with android_log times moved (else a machine id), bit 2 with bit 0
 * BOOTTIME onto the output's (--clock monotonic's boot_map).  Whatever the
 * rewriter writes must scan as a well-formed message, and an ftrace
 * bundle's events rewritten as pieces (rewrite_piece, the path of a
 * packet too large to hold) must come out as they do in the packet, a
 * measuring pass counting nothing.
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

/* --no-machine-id's REALTIME map of android_log entries: odd values fail
 * (left as they are, counted). */
static bool fuzz_log_map(void *ctx, uint32_t clock, uint64_t in,
			 uint64_t *out)
{
	(void)ctx;
	if (clock != BUILTIN_CLOCK_REALTIME || (in & 1))
		return false;
	*out = in + 7000;
	return true;
}

/* --clock monotonic's map of BOOTTIME onto the output's BOOTTIME (ftrace
 * times, snapshots' BOOTTIME entries): values past 2^62 fail. */
static bool fuzz_boot_map(void *ctx, uint32_t clock, uint64_t in,
			  uint64_t *out)
{
	(void)ctx;
	if (clock != BUILTIN_CLOCK_BOOTTIME || in >> 62)
		return false;
	*out = in + (in >> 12) + 5000000;
	return true;
}

/* The event fields (LEN fields 2) of the first ftrace bundle of packet
 * p, joined into out; false when it has none. */
static bool bundle_events(const uint8_t *p, size_t len, struct pb_buf *out,
			  struct pb_field *bundle)
{
	struct pb_reader r, br;
	struct pb_field f, e;

	pb_buf_reset(out);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != TP_FTRACE_EVENTS || f.wt != PB_WT_LEN)
			continue;
		*bundle = f;
		pb_reader_init(&br, f.data, f.len);
		while (pb_next(&br, &e))
			if (e.num == 2 && e.wt == PB_WT_LEN)
				pb_put_raw(out, e.start,
					   (size_t)(e.end - e.start));
		return br.err == PB_OK;
	}
	return false;
}

/* rewrite_piece on the events of the packet just rewritten into out. */
static void check_pieces(struct rewriter *rw, const uint8_t *p, size_t len,
			 uint64_t off, const struct pb_buf *out)
{
	struct pb_buf in_ev, out_ev, piece;
	struct pb_field bundle, outer;
	struct pb_reader r;
	struct vp_error err;

	pb_buf_init(&in_ev);
	pb_buf_init(&out_ev);
	pb_buf_init(&piece);
	pb_reader_init(&r, out->data, out->len);
	if (bundle_events(p, len, &in_ev, &bundle) && pb_next(&r, &outer) &&
	    bundle_events(outer.data, outer.len, &out_ev, &bundle)) {
		struct rewrite_stats before = *rewriter_stats(rw);
		bundle_events(p, len, &in_ev, &bundle);
		if (rewrite_piece(rw, TP_FTRACE_EVENTS, bundle.data,
				  bundle.len, in_ev.data, in_ev.len, off, false,
				  &piece, &err) != 0 ||
		    piece.len != out_ev.len ||
		    (piece.len &&
		     memcmp(piece.data, out_ev.data, piece.len) != 0) ||
		    memcmp(&before, rewriter_stats(rw), sizeof(before)) != 0)
			__builtin_trap();
	}
	pb_buf_free(&in_ev);
	pb_buf_free(&out_ev);
	pb_buf_free(&piece);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t opts = data[0];
	struct rewrite_cfg cfg = {
		.path = "fuzz.pb",
		.map = fuzz_map,
		.log_map = (opts & 2) ? fuzz_log_map : NULL,
		.boot_map = (opts & 5) == 5 ? fuzz_boot_map : NULL,
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
		/* framed as a Trace.packet, as the merge writes it */
		struct pb_sized m = pb_begin_sized(&out, 1, (size_t)len);
		if (rewrite_packet(rw, p, (size_t)len, off, &out, &err) == 0) {
			struct pb_reader r;
			struct pb_field f;
			pb_end_sized(&out, m);
			pb_reader_init(&r, out.data, out.len);
			while (pb_next(&r, &f)) {
				struct pb_reader in;
				pb_reader_init(&in, f.data, f.len);
				while (pb_next(&in, &f))
					;
				if (in.err != PB_OK)
					__builtin_trap();
			}
			if (r.err != PB_OK)
				__builtin_trap();
			check_pieces(rw, p, (size_t)len, off, &out);
		}
		p += len;
	}
	pb_buf_free(&out);
	sync_scanner_free(sc);
	rewriter_free(rw);
	return 0;
}
