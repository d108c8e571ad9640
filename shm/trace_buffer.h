/*
 * trace_buffer.h - the central buffer of a tracing session: chunks in,
 * whole packets out.
 *
 * The service copies each committed chunk (header and fragments, exactly
 * as in the shared memory ABI, see shm_abi.h) into a trace buffer of a
 * fixed byte size.  A sequence is one writer of one producer:
 * (producer_id, writer_id).  Reading walks every sequence in chunk_id order
 * and reassembles packets whose fragments span chunks; read chunks are
 * freed.  The in-process backend of the SDK uses the same buffer.
 *
 * When the buffer is full, a RING_BUFFER overwrites its oldest chunks and a
 * DISCARD buffer drops the new chunk.  Either way the loss is counted, and
 * the next packet read from a sequence that lost data (overwritten or
 * discarded chunks, a chunk_id gap, a fragment chain that does not join)
 * reports previous_packet_dropped.  Nothing the producer wrote is trusted:
 * a malformed chunk (bad fragment lengths, packet count over what fits) is
 * rejected or truncated at the damage and counted in abi_violations.
 *
 * Not thread-safe; the service uses it from its loop thread, the in-process
 * backend under its lock.
 */
#ifndef VP_TRACE_BUFFER_H
#define VP_TRACE_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "vp_error.h"

struct vp_trace_buffer;

/* TraceConfig.BufferConfig.FillPolicy, whose values these are. */
enum vp_fill_policy {
	VP_FILL_RING_BUFFER = FILL_RING_BUFFER,
	VP_FILL_DISCARD = FILL_DISCARD,
};

/* Who wrote a sequence: stamped by the service onto every packet read. */
struct vp_tb_sequence_meta {
	uint32_t sequence_id; /* trusted_packet_sequence_id */
	int32_t uid;          /* trusted_uid */
	int32_t pid;          /* trusted_pid */
	uint32_t machine_id;  /* 0 for the local machine */
};

/* One 4-byte patch (Perfetto's patch size) at an offset from the first
 * byte after the chunk header. */
#define VP_TB_PATCH_SIZE 4u
struct vp_tb_patch {
	uint32_t offset;
	uint8_t data[VP_TB_PATCH_SIZE];
};

/* Counters, named as TraceStats.BufferStats has them. */
struct vp_tb_stats {
	uint64_t buffer_size;
	uint64_t bytes_written;
	uint64_t bytes_overwritten;
	uint64_t bytes_read;
	uint64_t padding_bytes_written;
	uint64_t padding_bytes_cleared;
	uint64_t chunks_written;
	uint64_t chunks_rewritten;
	uint64_t chunks_overwritten;
	uint64_t chunks_discarded;
	uint64_t chunks_read;
	uint64_t chunks_committed_out_of_order;
	uint64_t write_wrap_count;
	uint64_t patches_succeeded;
	uint64_t patches_failed;
	uint64_t readaheads_succeeded;
	uint64_t readaheads_failed;
	uint64_t abi_violations;
	uint64_t trace_writer_packet_loss;
};

/* size is rounded down to a multiple of 4 KiB; at least 4 KiB. */
int vp_trace_buffer_new(struct vp_trace_buffer **out, size_t size,
			enum vp_fill_policy policy, struct vp_error *err);
void vp_trace_buffer_free(struct vp_trace_buffer *tb);
/* A copy of tb (its chunks, sequences, what was already read from them,
 * its stats), for a cloned session.  NULL when out of memory. */
struct vp_trace_buffer *vp_trace_buffer_clone(const struct vp_trace_buffer *tb);
/* Calls fn for each sequence the buffer holds chunks of. */
void vp_trace_buffer_for_each_sequence(
	const struct vp_trace_buffer *tb,
	void (*fn)(void *ctx, uint16_t producer_id, uint16_t writer_id,
		   const struct vp_tb_sequence_meta *meta),
	void *ctx);

/* Copies one chunk in.  `chunk` points at the chunk header; len is the
 * chunk's size (header included; the bytes after the last fragment are
 * ignored).  `complete` is false for a chunk committed or scraped before
 * its writer finished it: its last fragment is not read until a complete
 * copy of the same chunk replaces it.  A chunk with the same (producer,
 * writer, chunk_id) as one still in the buffer replaces it (counted in
 * chunks_rewritten).  Returns 0, or -1 if the chunk was rejected
 * (malformed: abi_violations; no room in a DISCARD buffer:
 * chunks_discarded). */
int vp_trace_buffer_copy_chunk(struct vp_trace_buffer *tb,
			       uint16_t producer_id,
			       const struct vp_tb_sequence_meta *meta,
			       const uint8_t *chunk, size_t len, bool complete);

/* Applies patches to chunk (producer, writer, chunk_id) if it is still in
 * the buffer.  Patches that fall outside the chunk's payload fail.  With
 * `more_pending` the chunk stays unreadable until a later call without it.
 * Returns 0 if all applied, -1 otherwise (patches_failed). */
int vp_trace_buffer_patch_chunk(struct vp_trace_buffer *tb,
				uint16_t producer_id, uint16_t writer_id,
				uint32_t chunk_id,
				const struct vp_tb_patch *patches,
				size_t n_patches, bool more_pending);

/* Forgets the sequences of a producer that went away, after its chunks
 * have been read or overwritten (chunks already in stay readable). */
void vp_trace_buffer_producer_gone(struct vp_trace_buffer *tb,
				   uint16_t producer_id);

struct vp_tb_packet_info {
	struct vp_tb_sequence_meta meta;
	uint16_t producer_id;
	uint16_t writer_id;
	/* Data of this sequence was lost (overwritten, discarded, a chunk_id
	 * gap, a broken fragment chain) since the last packet read from it. */
	bool previous_packet_dropped;
	/* The first packet read from this sequence.  Perfetto's service sets
	 * TracePacket.previous_packet_dropped (42) on it as well, and
	 * first_packet_on_sequence (87). */
	bool first_packet_on_sequence;
};

/* Starts a read pass over every sequence. */
void vp_trace_buffer_begin_read(struct vp_trace_buffer *tb);
/* Appends the next complete packet's bytes to out (as the producer wrote
 * them, fragments joined) and fills info.  Returns 1, or 0 when nothing more
 * can be read in this pass (an incomplete packet waits for its next chunk).
 * Chunks whose packets have all been read are freed. */
int vp_trace_buffer_read_packet(struct vp_trace_buffer *tb,
				struct pb_buf *out,
				struct vp_tb_packet_info *info);

/* The packet just read (info) was dropped by the caller: the next packet
 * of its sequence reports previous_packet_dropped, as for any loss. */
void vp_trace_buffer_packet_dropped(struct vp_trace_buffer *tb,
				    const struct vp_tb_packet_info *info);

void vp_trace_buffer_get_stats(const struct vp_trace_buffer *tb,
			       struct vp_tb_stats *out);
/* Bytes of chunks held now (not yet read nor overwritten). */
size_t vp_trace_buffer_used(const struct vp_trace_buffer *tb);
size_t vp_trace_buffer_size(const struct vp_trace_buffer *tb);
enum vp_fill_policy vp_trace_buffer_policy(const struct vp_trace_buffer *tb);

#endif
