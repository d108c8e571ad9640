/*
 * shm_abi.h - Perfetto's SharedMemoryABI: the layout of the buffer a
 * producer writes chunks into and the service copies them out of.
 *
 * The shared memory buffer (SMB) is a run of pages (4-64 KiB, a multiple of
 * 4 KiB).  Each page starts with an 8-byte header: an atomic uint32 with a
 * 2-bit state per chunk (chunk i in bits 2i..2i+1) and the page layout in
 * bits 28-30, then 4 reserved bytes.  A layout splits the page into 1, 2,
 * 4, 7 or 14 chunks of align4((page_size - 8) / n) bytes.  A chunk starts
 * with an 8-byte header: chunk_id (uint32, per writer, increasing),
 * writer_id (uint16), and a uint16 holding the packet count (low 10 bits)
 * and flags (high 6 bits).  Then fragments: a 4-byte "redundant" varint
 * length (always 4 bytes: 0x80|b0, 0x80|b1, 0x80|b2, b3) and its bytes.
 *
 * Chunk states: FREE -> BEING_WRITTEN (producer) -> COMPLETE (producer) ->
 * BEING_READ (service) -> FREE (service).  All transitions are
 * compare-and-swap on the page header, so producer threads and the service
 * can race safely.  The service must treat the memory as hostile: it copies
 * a chunk out (vp_smb_copy_chunk) before parsing it, and validates every
 * index and layout it is given.
 */
#ifndef VP_SHM_ABI_H
#define VP_SHM_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vp_error.h"

#define VP_SMB_PAGE_HEADER_SIZE 8u
#define VP_SMB_CHUNK_HEADER_SIZE 8u
#define VP_SMB_MIN_PAGE_SIZE 4096u
#define VP_SMB_MAX_PAGE_SIZE 65536u
#define VP_SMB_MAX_CHUNKS_PER_PAGE 14u
#define VP_SMB_DEFAULT_PAGE_SIZE 4096u
#define VP_SMB_DEFAULT_SIZE (256u * 1024u) /* traced's default for producers */
#define VP_SMB_MAX_SIZE (32u * 1024u * 1024u)

/* The numbers below are Perfetto's shared memory ABI (page and chunk
 * header bits), not protobuf fields: they stay here, not in protos/. */

/* Page layouts (bits 28-30 of the page header). */
enum vp_page_layout {
	VP_PAGE_NOT_PARTITIONED = 0,
	VP_PAGE_DIV_1 = 1,  /* 1 chunk */
	VP_PAGE_DIV_2 = 2,  /* 2 chunks */
	VP_PAGE_DIV_4 = 3,  /* 4 chunks */
	VP_PAGE_DIV_7 = 4,  /* 7 chunks */
	VP_PAGE_DIV_14 = 5, /* 14 chunks */
};

enum vp_chunk_state {
	VP_CHUNK_FREE = 0,
	VP_CHUNK_BEING_WRITTEN = 1,
	VP_CHUNK_BEING_READ = 2,
	VP_CHUNK_COMPLETE = 3,
};

/* Chunk header flags (the high 6 bits of the packets word). */
#define VP_CHUNK_FIRST_PACKET_CONTINUES 0x01u /* from the previous chunk */
#define VP_CHUNK_LAST_PACKET_CONTINUES 0x02u  /* on the next chunk */
#define VP_CHUNK_NEEDS_PATCHING 0x04u
#define VP_CHUNK_MAX_PACKETS 1023u

/* A fragment's length prefix: 4-byte redundant varint. */
#define VP_FRAGMENT_LEN_SIZE 4u

/* A fragment length no chunk can hold (2^28 - 1, Perfetto's
 * kPacketSizeDropPacket): a writer that runs out of chunks writes it over
 * the length of the last fragment of the chunk it hands back, so that the
 * service learns of the loss even if the writer never gets a chunk again.
 * That fragment is discarded and counted as trace_writer_packet_loss, not
 * as an ABI violation. */
#define VP_FRAGMENT_DROP_PACKET 0x0fffffffu

/* Writes v (< 2^28) as a 4-byte redundant varint at p. */
static inline void vp_write_redundant_varint(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(0x80u | (v & 0x7fu));
	p[1] = (uint8_t)(0x80u | ((v >> 7) & 0x7fu));
	p[2] = (uint8_t)(0x80u | ((v >> 14) & 0x7fu));
	p[3] = (uint8_t)((v >> 21) & 0x7fu);
}

/* The chunk header as it sits in memory (little-endian, 8 bytes). */
struct vp_chunk_header {
	uint32_t chunk_id;
	uint16_t writer_id;
	uint16_t packets; /* count | flags << 10 */
};

static inline uint16_t vp_chunk_packets_word(unsigned count, unsigned flags)
{
	return (uint16_t)((count & 0x3ffu) | ((flags & 0x3fu) << 10));
}

/* A mapped SMB.  Both sides build one over the same memory. */
struct vp_smb {
	uint8_t *base;
	size_t size;
	size_t page_size;
	size_t num_pages;
};

/* Checks page_size and size (size a multiple of page_size, page_size a
 * multiple of 4 KiB within limits) and fills smb. */
int vp_smb_init(struct vp_smb *smb, void *base, size_t size,
		size_t page_size, struct vp_error *err);

/* Creates an anonymous shared memory file (memfd, sealed against
 * shrinking) of `size` bytes and maps it.  *fd_out is the fd to pass to the
 * other side. */
int vp_smb_create(struct vp_smb *smb, size_t size, size_t page_size,
		  int *fd_out, struct vp_error *err);
/* Maps an fd received from the service (size from fstat). */
int vp_smb_map(struct vp_smb *smb, int fd, size_t page_size,
	       struct vp_error *err);
void vp_smb_unmap(struct vp_smb *smb);

unsigned vp_smb_chunks_per_layout(enum vp_page_layout layout);
size_t vp_smb_chunk_size(const struct vp_smb *smb, enum vp_page_layout l);

/* --- producer side --- */

/* A chunk acquired for writing. */
struct vp_smb_chunk {
	uint8_t *begin;   /* the chunk header */
	size_t size;      /* header included */
	uint32_t page;
	uint32_t chunk;   /* index within the page */
};

/* Finds a free chunk, partitioning a free page with `layout` if needed,
 * marks it BEING_WRITTEN and writes its header (chunk_id, writer_id, zero
 * packets).  Starts the search at *cursor (a page index the caller keeps
 * per writer, to spread writers over pages) and updates it.  Returns false
 * when every chunk is taken (the SMB is full). */
bool vp_smb_acquire_chunk_for_writing(struct vp_smb *smb,
				      enum vp_page_layout layout,
				      uint16_t writer_id, uint32_t chunk_id,
				      uint32_t *cursor,
				      struct vp_smb_chunk *out);
/* Stores the final packet count and flags, then BEING_WRITTEN -> COMPLETE
 * (release ordering: the service sees the bytes once it sees COMPLETE). */
void vp_smb_release_chunk_as_complete(struct vp_smb *smb,
				      const struct vp_smb_chunk *c,
				      unsigned packet_count, unsigned flags);

/* --- service side --- */

/* COMPLETE -> BEING_READ for (page, chunk) if the page's layout has that
 * chunk and it is complete.  With `scrape` also takes a BEING_WRITTEN chunk
 * (for reading what a dead producer left); *was_complete says which. */
bool vp_smb_try_acquire_chunk_for_reading(struct vp_smb *smb, uint32_t page,
					  uint32_t chunk, bool scrape,
					  bool *was_complete);
/* Copies the chunk (header included) into dst (at least
 * VP_SMB_MAX_PAGE_SIZE bytes) and returns its size, 0 if (page, chunk) is
 * not valid under the current layout. */
size_t vp_smb_copy_chunk(const struct vp_smb *smb, uint32_t page,
			 uint32_t chunk, uint8_t *dst);
/* Copies a chunk out of a live producer's SMB without taking it: the
 * service's scraping at flush and at stop.  A COMPLETE chunk (not yet
 * committed) is copied whole, *was_complete true; a BEING_WRITTEN chunk
 * only when its packet count (loaded with acquire ordering, before the
 * bytes) is at least 2, as the last packet may still be written: the copy's
 * header carries that count, so a reader takes the packets before the last.
 * The chunk stays the writer's, in its state.  Returns the copy's size
 * (header included), 0 if there is nothing to scrape. */
size_t vp_smb_scrape_chunk(const struct vp_smb *smb, uint32_t page,
			   uint32_t chunk, uint8_t *dst, bool *was_complete);
/* BEING_READ -> FREE; when the whole page is free its layout is cleared so
 * it can be partitioned again. */
void vp_smb_release_chunk_as_free(struct vp_smb *smb, uint32_t page,
				  uint32_t chunk);

/* The state of one chunk and the layout of its page (tests, scraping). */
enum vp_chunk_state vp_smb_chunk_state(const struct vp_smb *smb,
				       uint32_t page, uint32_t chunk);
enum vp_page_layout vp_smb_page_layout(const struct vp_smb *smb,
				       uint32_t page);

#endif
