/*
 * shm_abi.c - Perfetto's SharedMemoryABI (see shm_abi.h): page headers
 * driven by compare-and-swap, chunk acquire/release on both sides, and the
 * memfd that carries the buffer between processes.
 *
 * The page header is a uint32 in memory shared with another process; it
 * is accessed only through C11 atomics.  On the service side every page
 * index, chunk index and layout is checked, because the producer can write
 * anything into the header at any time.
 */
#include "shm_abi.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAYOUT_SHIFT 28u
#define LAYOUT_MASK 0x7u
#define STATES_MASK 0x0fffffffu /* 2 bits for each of up to 14 chunks */

/* ---- page header ------------------------------------------------------ */

static _Atomic uint32_t *page_header(const struct vp_smb *smb, uint32_t page)
{
	return (_Atomic uint32_t *)(void *)(smb->base +
					    (size_t)page * smb->page_size);
}

static unsigned hdr_layout(uint32_t hdr)
{
	return (hdr >> LAYOUT_SHIFT) & LAYOUT_MASK;
}

static unsigned hdr_state(uint32_t hdr, uint32_t chunk)
{
	return (hdr >> (2u * chunk)) & 3u;
}

static uint32_t hdr_with_state(uint32_t hdr, uint32_t chunk, unsigned state)
{
	hdr &= ~(3u << (2u * chunk));
	return hdr | ((uint32_t)state << (2u * chunk));
}

unsigned vp_smb_chunks_per_layout(enum vp_page_layout layout)
{
	switch (layout) {
	case VP_PAGE_DIV_1: return 1;
	case VP_PAGE_DIV_2: return 2;
	case VP_PAGE_DIV_4: return 4;
	case VP_PAGE_DIV_7: return 7;
	case VP_PAGE_DIV_14: return 14;
	default: return 0;
	}
}

size_t vp_smb_chunk_size(const struct vp_smb *smb, enum vp_page_layout l)
{
	unsigned n = vp_smb_chunks_per_layout(l);

	if (!n || smb->page_size < VP_SMB_PAGE_HEADER_SIZE)
		return 0;
	return ((smb->page_size - VP_SMB_PAGE_HEADER_SIZE) / n) & ~(size_t)3;
}

static uint8_t *chunk_begin(const struct vp_smb *smb, uint32_t page,
			    uint32_t chunk, size_t chunk_size)
{
	return smb->base + (size_t)page * smb->page_size +
	       VP_SMB_PAGE_HEADER_SIZE + (size_t)chunk * chunk_size;
}

/* True when (page, chunk) exists under the layout found in hdr. */
static bool valid_chunk(const struct vp_smb *smb, uint32_t page,
			uint32_t chunk, uint32_t hdr)
{
	if (page >= smb->num_pages)
		return false;
	return chunk < vp_smb_chunks_per_layout(hdr_layout(hdr));
}

/* ---- setup ------------------------------------------------------------ */

static int check_geometry(size_t size, size_t page_size, const char *what,
			  struct vp_error *err)
{
	if (page_size < VP_SMB_MIN_PAGE_SIZE ||
	    page_size > VP_SMB_MAX_PAGE_SIZE || page_size % 4096u)
		return vp_errorf(err, "%s: page size %zu is not a multiple of "
				 "4096 in [%u, %u]", what, page_size,
				 VP_SMB_MIN_PAGE_SIZE, VP_SMB_MAX_PAGE_SIZE);
	if (size == 0 || size % page_size || size > VP_SMB_MAX_SIZE)
		return vp_errorf(err, "%s: size %zu is not a non-zero multiple "
				 "of the page size %zu up to %u", what, size,
				 page_size, VP_SMB_MAX_SIZE);
	return 0;
}

int vp_smb_init(struct vp_smb *smb, void *base, size_t size,
		size_t page_size, struct vp_error *err)
{
	memset(smb, 0, sizeof(*smb));
	if (!base)
		return vp_errorf(err, "shared memory buffer: no memory");
	if (check_geometry(size, page_size, "shared memory buffer", err))
		return -1;
	smb->base = base;
	smb->size = size;
	smb->page_size = page_size;
	smb->num_pages = size / page_size;
	return 0;
}

static int map_fd(struct vp_smb *smb, int fd, size_t size, size_t page_size,
		  struct vp_error *err)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return vp_errorf(err, "shared memory fd %d: mmap of %zu bytes: "
				 "%s", fd, size, strerror(errno));
	if (vp_smb_init(smb, p, size, page_size, err)) {
		munmap(p, size);
		return -1;
	}
	return 0;
}

int vp_smb_create(struct vp_smb *smb, size_t size, size_t page_size,
		  int *fd_out, struct vp_error *err)
{
	memset(smb, 0, sizeof(*smb));
	*fd_out = -1;
	if (check_geometry(size, page_size, "shared memory buffer", err))
		return -1;
	int fd = memfd_create("vperfetto_smb", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return vp_errorf(err, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)size) < 0) {
		vp_errorf(err, "memfd: ftruncate to %zu bytes: %s", size,
			  strerror(errno));
		goto fail;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		vp_errorf(err, "memfd: sealing: %s", strerror(errno));
		goto fail;
	}
	if (map_fd(smb, fd, size, page_size, err))
		goto fail;
	*fd_out = fd;
	return 0;
fail:
	close(fd);
	return -1;
}

/* A peer that could shrink the file under our mapping could make every
 * access fault (SIGBUS): require the shrink seal where sealing exists. */
static int ensure_shrink_seal(int fd, struct vp_error *err)
{
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0)
		return 0; /* not a memfd: sealing does not apply */
	if (seals & F_SEAL_SHRINK)
		return 0;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0)
		return 0;
	return vp_errorf(err, "shared memory fd %d: not sealed against "
			 "shrinking and cannot be sealed: %s", fd,
			 strerror(errno));
}

int vp_smb_map(struct vp_smb *smb, int fd, size_t page_size,
	       struct vp_error *err)
{
	struct stat st;

	memset(smb, 0, sizeof(*smb));
	if (fstat(fd, &st) < 0)
		return vp_errorf(err, "shared memory fd %d: fstat: %s", fd,
				 strerror(errno));
	if (st.st_size <= 0)
		return vp_errorf(err, "shared memory fd %d: empty", fd);
	size_t size = (size_t)st.st_size;
	if (check_geometry(size, page_size, "shared memory fd", err))
		return -1;
	if (ensure_shrink_seal(fd, err))
		return -1;
	return map_fd(smb, fd, size, page_size, err);
}

void vp_smb_unmap(struct vp_smb *smb)
{
	if (smb->base)
		munmap(smb->base, smb->size);
	memset(smb, 0, sizeof(*smb));
}

/* ---- producer side ---------------------------------------------------- */

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	put_le16(p, (uint16_t)v);
	put_le16(p + 2, (uint16_t)(v >> 16));
}

/* Partitions a page that has no layout yet.  Returns the header now in
 * place (partitioned by us or by a racing writer), or 0 if the page holds
 * state bits without a layout (corrupt: skip it). */
static uint32_t partition_page(_Atomic uint32_t *hp, uint32_t hdr,
			       enum vp_page_layout layout)
{
	uint32_t want = (uint32_t)layout << LAYOUT_SHIFT;

	while (hdr_layout(hdr) == VP_PAGE_NOT_PARTITIONED) {
		if (hdr != 0)
			return 0;
		if (atomic_compare_exchange_weak_explicit(
			    hp, &hdr, want, memory_order_acq_rel,
			    memory_order_acquire))
			return want;
	}
	return hdr;
}

/* Takes a free chunk of one page; true with *chunk set on success. */
static bool take_chunk_in_page(_Atomic uint32_t *hp,
			       enum vp_page_layout layout, uint32_t *chunk)
{
	uint32_t hdr = atomic_load_explicit(hp, memory_order_acquire);

	for (;;) {
		hdr = partition_page(hp, hdr, layout);
		unsigned n = vp_smb_chunks_per_layout(hdr_layout(hdr));
		uint32_t i;
		for (i = 0; i < n; i++)
			if (hdr_state(hdr, i) == VP_CHUNK_FREE)
				break;
		if (i >= n)
			return false; /* full, or no usable layout */
		uint32_t next = hdr_with_state(hdr, i, VP_CHUNK_BEING_WRITTEN);
		if (atomic_compare_exchange_weak_explicit(
			    hp, &hdr, next, memory_order_acq_rel,
			    memory_order_acquire)) {
			*chunk = i;
			return true;
		}
		/* hdr now holds the current value: look again. */
	}
}

bool vp_smb_acquire_chunk_for_writing(struct vp_smb *smb,
				      enum vp_page_layout layout,
				      uint16_t writer_id, uint32_t chunk_id,
				      uint32_t *cursor,
				      struct vp_smb_chunk *out)
{
	if (!vp_smb_chunks_per_layout(layout) || !smb->num_pages)
		return false;
	size_t start = *cursor % smb->num_pages;
	for (size_t k = 0; k < smb->num_pages; k++) {
		uint32_t page = (uint32_t)((start + k) % smb->num_pages);
		_Atomic uint32_t *hp = page_header(smb, page);
		uint32_t chunk;
		if (!take_chunk_in_page(hp, layout, &chunk))
			continue;
		/* The layout cannot change while we hold a chunk of it. */
		uint32_t hdr = atomic_load_explicit(hp, memory_order_acquire);
		size_t csize = vp_smb_chunk_size(smb, hdr_layout(hdr));
		out->begin = chunk_begin(smb, page, chunk, csize);
		out->size = csize;
		out->page = page;
		out->chunk = chunk;
		put_le32(out->begin, chunk_id);
		put_le16(out->begin + 4, writer_id);
		put_le16(out->begin + 6, 0);
		*cursor = page;
		return true;
	}
	return false;
}

void vp_smb_release_chunk_as_complete(struct vp_smb *smb,
				      const struct vp_smb_chunk *c,
				      unsigned packet_count, unsigned flags)
{
	if (c->page >= smb->num_pages || c->chunk >= VP_SMB_MAX_CHUNKS_PER_PAGE)
		return;
	put_le16(c->begin + 6, vp_chunk_packets_word(packet_count, flags));
	_Atomic uint32_t *hp = page_header(smb, c->page);
	uint32_t hdr = atomic_load_explicit(hp, memory_order_relaxed);
	do {
		if (hdr_state(hdr, c->chunk) != VP_CHUNK_BEING_WRITTEN)
			return; /* scraped by the service: nothing to hand over */
	} while (!atomic_compare_exchange_weak_explicit(
		hp, &hdr, hdr_with_state(hdr, c->chunk, VP_CHUNK_COMPLETE),
		memory_order_release, memory_order_relaxed));
}

/* ---- service side ----------------------------------------------------- */

bool vp_smb_try_acquire_chunk_for_reading(struct vp_smb *smb, uint32_t page,
					  uint32_t chunk, bool scrape,
					  bool *was_complete)
{
	if (page >= smb->num_pages)
		return false;
	_Atomic uint32_t *hp = page_header(smb, page);
	uint32_t hdr = atomic_load_explicit(hp, memory_order_acquire);
	for (;;) {
		if (!valid_chunk(smb, page, chunk, hdr))
			return false;
		unsigned s = hdr_state(hdr, chunk);
		if (s != VP_CHUNK_COMPLETE &&
		    !(scrape && s == VP_CHUNK_BEING_WRITTEN))
			return false;
		if (atomic_compare_exchange_weak_explicit(
			    hp, &hdr, hdr_with_state(hdr, chunk,
						     VP_CHUNK_BEING_READ),
			    memory_order_acq_rel, memory_order_acquire)) {
			if (was_complete)
				*was_complete = s == VP_CHUNK_COMPLETE;
			return true;
		}
	}
}

size_t vp_smb_copy_chunk(const struct vp_smb *smb, uint32_t page,
			 uint32_t chunk, uint8_t *dst)
{
	if (page >= smb->num_pages)
		return 0;
	uint32_t hdr = atomic_load_explicit(page_header(smb, page),
					    memory_order_acquire);
	if (!valid_chunk(smb, page, chunk, hdr))
		return 0;
	size_t csize = vp_smb_chunk_size(smb, hdr_layout(hdr));
	memcpy(dst, chunk_begin(smb, page, chunk, csize), csize);
	return csize;
}

size_t vp_smb_scrape_chunk(const struct vp_smb *smb, uint32_t page,
			   uint32_t chunk, uint8_t *dst, bool *was_complete)
{
	if (page >= smb->num_pages)
		return 0;
	uint32_t hdr = atomic_load_explicit(page_header(smb, page),
					    memory_order_acquire);
	if (!valid_chunk(smb, page, chunk, hdr))
		return 0;
	unsigned st = hdr_state(hdr, chunk);
	if (st != VP_CHUNK_COMPLETE && st != VP_CHUNK_BEING_WRITTEN)
		return 0;
	size_t csize = vp_smb_chunk_size(smb, hdr_layout(hdr));
	if (csize < VP_SMB_CHUNK_HEADER_SIZE)
		return 0;
	uint8_t *c = chunk_begin(smb, page, chunk, csize);
	/* The writer stores the packet count as a 16-bit atomic; read it
	 * before the bytes it vouches for. */
	uint16_t word = atomic_load_explicit((_Atomic uint16_t *)(void *)(c + 6),
					     memory_order_acquire);
	bool complete = st == VP_CHUNK_COMPLETE;
	if (!complete && (word & 0x3ffu) < 2)
		return 0;
	memcpy(dst, c, csize);
	dst[6] = (uint8_t)(word & 0xff);
	dst[7] = (uint8_t)(word >> 8);
	if (was_complete)
		*was_complete = complete;
	return csize;
}

void vp_smb_release_chunk_as_free(struct vp_smb *smb, uint32_t page,
				  uint32_t chunk)
{
	if (page >= smb->num_pages)
		return;
	_Atomic uint32_t *hp = page_header(smb, page);
	uint32_t hdr = atomic_load_explicit(hp, memory_order_relaxed);
	uint32_t next;
	do {
		if (!valid_chunk(smb, page, chunk, hdr) ||
		    hdr_state(hdr, chunk) != VP_CHUNK_BEING_READ)
			return;
		next = hdr_with_state(hdr, chunk, VP_CHUNK_FREE);
		if ((next & STATES_MASK) == 0)
			next = 0; /* every chunk free: unpartition the page */
	} while (!atomic_compare_exchange_weak_explicit(
		hp, &hdr, next, memory_order_release, memory_order_relaxed));
}

enum vp_chunk_state vp_smb_chunk_state(const struct vp_smb *smb,
				       uint32_t page, uint32_t chunk)
{
	if (page >= smb->num_pages)
		return VP_CHUNK_FREE;
	uint32_t hdr = atomic_load_explicit(page_header(smb, page),
					    memory_order_acquire);
	if (!valid_chunk(smb, page, chunk, hdr))
		return VP_CHUNK_FREE;
	return (enum vp_chunk_state)hdr_state(hdr, chunk);
}

enum vp_page_layout vp_smb_page_layout(const struct vp_smb *smb,
				       uint32_t page)
{
	if (page >= smb->num_pages)
		return VP_PAGE_NOT_PARTITIONED;
	uint32_t hdr = atomic_load_explicit(page_header(smb, page),
					    memory_order_acquire);
	unsigned l = hdr_layout(hdr);
	return l <= VP_PAGE_DIV_14 ? (enum vp_page_layout)l
				   : VP_PAGE_NOT_PARTITIONED;
}
