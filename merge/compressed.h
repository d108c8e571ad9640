/*
 * compressed.h - compressed_packets (zlib) in the merge: the packets
 * inside one inflated and handed out as they come, a chunk at a time, and
 * a stream that deflates rewritten packets again (compressed.c).  Memory
 * stays within a chunk and the packet being framed, whatever the payload
 * inflates to.
 */
#ifndef VP_MERGE_COMPRESSED_H
#define VP_MERGE_COMPRESSED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "pb_wire.h"
#include "vp_error.h"

/* What the compressed_packets of one trace may still inflate to. */
struct inflate_budget {
	uint64_t used, max;
};

/* Called for a packet: 0, 1 when it holds compressed_packets, -1 with a
 * message. */
typedef int (*packet_fn)(void *ctx, const uint8_t *pkt, size_t len,
			 uint64_t off, struct vp_error *err);
/* Called after each chunk's packets: 0, or -1 with a message. */
typedef int (*compressed_flush_fn)(void *ctx, struct vp_error *err);

/* A packet inside of more than this many bytes is not framed in memory:
 * as it inflates it goes to an unlinked file of its own in $TMPDIR
 * (default /tmp), a trace of that one record, which the caller's large()
 * then reads as it reads a large packet of a trace (where no such file
 * can be made, it is framed in memory after all).  (Fuzz builds make it
 * small, meson.build.) */
#ifndef COMPRESSED_SPILL_MIN
#define COMPRESSED_SPILL_MIN (1u << 20)
#endif

/* Who takes such packets: large() owns fd (at its start: the record's
 * tag and length, then its bytes) and returns 0, or -1 with a message. */
struct compressed_spill {
	int (*large)(void *ctx, int fd, uint64_t off, struct vp_error *err);
};

/* Inflates each compressed_packets field of packet pkt (at file offset
 * off) through scratch and calls fn for each packet inside as soon as it
 * is whole (with off: the packets inside report the outer packet's
 * offset), then flush (may be NULL) after each chunk of them; with
 * spill, a packet of more than COMPRESSED_SPILL_MIN bytes goes to
 * spill->large instead (after a flush), and another record as large is
 * skipped as it comes, so that memory stays within a few chunks.  Fails on
 * a payload that inflates to more than TRACE_MAX_PACKET or past the
 * budget, on corrupt zlib data, a malformed packet inside and
 * compressed_packets inside compressed_packets. */
int compressed_each_packet(const char *path, const uint8_t *pkt, size_t len,
			   uint64_t off, struct pb_buf *scratch,
			   struct inflate_budget *budget, packet_fn fn,
			   compressed_flush_fn flush,
			   const struct compressed_spill *spill, void *ctx,
			   struct vp_error *err);

struct trace_reader;
/* The same for the one compressed_packets field of a large packet (at
 * file offset off) whose payload is the len bytes of rd's file at `at`:
 * read from the file a piece at a time, never whole. */
int compressed_each_packet_at(const char *path, struct trace_reader *rd,
			      uint64_t at, uint64_t len, uint64_t off,
			      struct pb_buf *scratch,
			      struct inflate_budget *budget, packet_fn fn,
			      compressed_flush_fn flush,
			      const struct compressed_spill *spill, void *ctx,
			      struct vp_error *err);

/* A zlib stream of rewritten packets: put them as they come, the last
 * call with finish; the output is what one deflate of them all gives. */
struct deflate_stream {
	z_stream z;
	bool open;
};

int deflate_stream_begin(struct deflate_stream *d, int level,
			 const char *path, struct vp_error *err);
/* Deflates p[0..n) into out; path and off name the packet in messages. */
int deflate_stream_put(struct deflate_stream *d, const uint8_t *p, size_t n,
		       bool finish, struct pb_buf *out, const char *path,
		       uint64_t off, struct vp_error *err);
void deflate_stream_end(struct deflate_stream *d);

/* Fails with err's message said of the packet inside compressed_packets
 * (of the packet at off) that was written aside: offsets in that file
 * are no offsets of the input's, so the compressed packet's comes
 * first. */
int compressed_aside_error(const char *path, uint64_t off,
			   struct vp_error *err);

#endif
