/*
 * sync_skim.c - scans a large packet for clock-sync data reading only the
 * parts the scanner looks at (sync_skim.h).
 */
#include "sync_skim.h"

#include <stdbool.h>
#include <stdint.h>

#include "merge_limits.h"
#include "perfetto_fields.h"

/* A body shorter than this is copied: skipping it would save less than
 * the bookkeeping costs. */
#define ELIDE_MIN 256u
/* What is read at each field: its tag and length, and the head of a body
 * (a bundle's cpu is its first field). */
#define HEAD_PEEK 64u

/* A stand-in packet longer than this is not built: the packet is read
 * whole instead (only an input made to defeat the skim has one). */
#define STANDIN_MAX (4u << 20)

/* Appends field h, at file offset pos, to out as it is: its length; 0
 * when the file ends before it, SIZE_MAX on a read error. */
static size_t copy_field(struct trace_reader *rd, uint64_t pos,
			 const struct trace_field_head *h, struct pb_buf *out,
			 struct vp_error *err)
{
	const uint8_t *p = h->p;
	size_t got = h->got, size = (size_t)h->size;

	if (size > got) {
		p = trace_reader_peek(rd, pos, size, &got, err);
		if (!p)
			return SIZE_MAX;
		if (got < size)
			return 0;
	}
	pb_put_raw(out, p, size);
	return size;
}

/* Appends to out what the scanner needs of field h at file offset pos,
 * whose path from the packet is path[0..depth) and its own number
 * (sync_scan_need), and returns its length in the file; 0 when the skim
 * cannot go on exactly, SIZE_MAX on a read error. */
static size_t skim_need(struct trace_reader *rd, uint32_t *path, size_t depth,
			uint64_t pos, const struct trace_field_head *h,
			struct pb_buf *out, struct vp_error *err)
{
	path[depth] = h->num;
	enum sync_need need = sync_scan_need(path, depth + 1);
	size_t size = (size_t)h->size, body = size - h->hdr;
	if (need == SYNC_SKIP)
		return size;
	if (h->wt == PB_WT_LEN && need == SYNC_NAME && body > SYNC_NAME_MAX) {
		pb_put_bytes(out, h->num, "", 0); /* matches none, as it */
		return size;
	}
	if (h->wt == PB_WT_LEN && need == SYNC_FIELDS && body >= ELIDE_MIN &&
	    depth + 1 < SYNC_NEED_DEPTH) {
		size_t mark = pb_begin_nested(out, h->num);
		for (uint64_t p = pos + h->hdr; p < pos + size;) {
			struct trace_field_head sub;
			int rc = trace_reader_field_head(rd, p, pos + size,
							 HEAD_PEEK, &sub, err);
			if (rc <= 0)
				return rc < 0 ? SIZE_MAX : 0;
			size_t n = skim_need(rd, path, depth + 1, p, &sub, out,
					     err);
			if (n == 0 || n == SIZE_MAX)
				return n;
			p += n;
		}
		pb_end_nested(out, mark);
		return out->len > STANDIN_MAX ? 0 : size;
	}
	size_t n = copy_field(rd, pos, h, out, err);
	return n != SIZE_MAX && out->len > STANDIN_MAX ? 0 : n;
}

/* Appends the field at file offset pos (of the packet ending at end) to
 * out as the scanner needs it, and returns its length in the file; 0
 * when the skim cannot go on exactly (see the header), SIZE_MAX on a
 * read error. */
static size_t skim_field(struct sync_skim *k, uint64_t pos, uint64_t end,
			 struct pb_buf *out, struct vp_error *err)
{
	struct trace_reader *rd = k->rd;
	struct trace_field_head h;
	int rc = trace_reader_field_head(rd, pos, end, HEAD_PEEK, &h, err);

	if (rc <= 0)
		return rc < 0 ? SIZE_MAX : 0;
	if (h.wt == PB_WT_LEN && h.num == TP_COMPRESSED_PACKETS) {
		if (!k->compressed || k->have_z)
			return 0; /* inflated by the caller */
		/* an empty one says to the scanner what the packet is */
		pb_put_bytes(out, h.num, "", 0);
		k->have_z = true;
		k->z_at = pos + h.hdr;
		k->z_len = h.size - h.hdr;
		return (size_t)h.size;
	}
	uint32_t path[SYNC_NEED_DEPTH] = {h.num};
	if (h.wt == PB_WT_LEN && h.size - h.hdr >= ELIDE_MIN &&
	    sync_scan_need(path, 1) == SYNC_FIELDS)
		return skim_need(rd, path, 0, pos, &h, out, err);
	if (h.wt == PB_WT_LEN && h.size - h.hdr >= ELIDE_MIN) {
		size_t mark = pb_begin_nested(out, h.num);
		if (!sync_scan_field_skim(h.num, h.p + h.hdr, h.got - h.hdr,
					  out))
			return 0;
		pb_end_nested(out, mark);
		return (size_t)h.size;
	}
	return copy_field(rd, pos, &h, out, err);
}

/* Scans the packet record `head` (from trace_reader_next_head, not read)
 * and leaves the reader after it: 0.  Or reads it whole into *whole, for
 * the caller to scan: 1.  -1 on a read error. */
static int skim_packet(struct sync_skim *k, const struct trace_record *head,
		       struct trace_record *whole, struct vp_error *err)
{
	uint64_t pos = head->data_offset, end = head->offset + head->raw_len;

	if (end > trace_reader_size(k->rd)) /* cut short: as the plain scan says */
		return trace_reader_reread(k->rd, head, whole, err);
	pb_buf_reset(&k->scratch);
	k->have_z = false;
	while (pos < end) {
		size_t n = skim_field(k, pos, end, &k->scratch, err);
		if (n == SIZE_MAX)
			return -1;
		if (n == 0)
			return trace_reader_reread(k->rd, head, whole, err);
		pos += n;
	}
	/* A failure here is in bytes the packet holds as they are; the plain
	 * scan of the whole gives it with its true offset. */
	int rc = sync_scan_packet(k->sc, k->scratch.data, k->scratch.len,
				  head->data_offset, err);
	if (rc == 1 && k->have_z) {
		/* compressed: the packets inside, from the file */
		if (k->compressed(k->compressed_ctx, k->rd, k->z_at, k->z_len,
				  head->data_offset, err) < 0)
			return -1;
		rc = 0;
	}
	if (rc != 0)
		return trace_reader_reread(k->rd, head, whole, err);
	if (trace_reader_seek(k->rd, end, err) < 0)
		return -1;
	return 0;
}

static void skim_init(struct sync_skim *k, struct sync_scanner *sc,
		      size_t whole_max)
{
	k->rd = NULL;
	k->sc = sc;
	k->whole_max = whole_max;
	pb_buf_init(&k->scratch);
	k->compressed = NULL;
	k->compressed_ctx = NULL;
	k->have_z = false;
}

int sync_skim_open(struct sync_skim *k, const char *path,
		   struct sync_scanner *sc, size_t whole_max,
		   struct vp_error *err)
{
	skim_init(k, sc, whole_max);
	return merge_reader_open(&k->rd, path, -1, err);
}

int sync_skim_open_fd(struct sync_skim *k, int fd, const char *path,
		      struct sync_scanner *sc, size_t whole_max,
		      struct vp_error *err)
{
	skim_init(k, sc, whole_max);
	return merge_reader_open(&k->rd, path, fd, err);
}

void sync_skim_close(struct sync_skim *k)
{
	pb_buf_free(&k->scratch);
	trace_reader_close(k->rd);
	k->rd = NULL;
}

int sync_skim_large(struct sync_skim *k, struct trace_record *rec,
		    struct vp_error *err)
{
	int rc;

	if (rec->field == TRACE_PACKET_FIELD && rec->wt == PB_WT_LEN)
		rc = skim_packet(k, rec, rec, err);
	else /* not a packet: read whole, as the plain scan does */
		rc = trace_reader_reread(k->rd, rec, rec, err);
	if (rc < 0)
		return -1;
	return rc == 0 ? 2 : 1;
}
