/*
 * compressed.c - compressed_packets in the merge (see compressed.h): the
 * packets inside inflated and handed out a chunk at a time, and the
 * rewritten ones deflated again as they come.
 *
 * Nothing here holds a whole inflated payload: a compressed packet of a
 * few MiB may inflate to 64 MiB (TRACE_MAX_PACKET, the most one may), and
 * a hostile one is made to.  The inflated bytes go through a buffer of
 * INFLATE_CHUNK plus the packet inside being framed, when it is small; a
 * larger one goes to a file of its own as it comes (struct
 * compressed_spill), and other large records are dropped as they come,
 * as the small ones are.  A large compressed packet is read from the
 * file a piece at a time (compressed_each_packet_at).  The deflated
 * output
 * grows with what it is (about as large as the input).  zlib's deflate
 * writes the same bytes however its input is split, when nothing is
 * flushed before the end, so the output is what deflating the whole
 * would give.
 */
#include "compressed.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "merge.h"
#include "perfetto_fields.h"
#include "trace_io.h"

/* Inflated bytes asked of zlib at a time, deflated bytes made room for
 * at a time (fuzz builds make them small, meson.build). */
#ifndef INFLATE_CHUNK
#define INFLATE_CHUNK (256u << 10)
#endif
#ifndef DEFLATE_CHUNK
#define DEFLATE_CHUNK (64u << 10)
#endif

static int over_budget(const char *path, uint64_t off,
		       const struct inflate_budget *budget, struct vp_error *err)
{
	return vp_errorf(err, "%s: byte offset %llu: compressed_packets inflate "
			 "to over %llu bytes in all (a compression bomb?); "
			 "--max-inflate sets the cap (default %llu MiB)", path,
			 (unsigned long long)off,
			 (unsigned long long)budget->max,
			 (unsigned long long)(MERGE_DEFAULT_MAX_INFLATE >> 20));
}

static int malformed_inside(const char *path, uint64_t off, const uint8_t *p,
			    size_t n, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, n);
	while (pb_next(&r, &f))
		;
	return vp_errorf(err, "%s: byte offset %llu: malformed packet inside "
			 "compressed_packets: %s", path, (unsigned long long)off,
			 pb_err_str(r.err ? r.err : PB_ERR_TRUNCATED));
}

/* A varint at *p (before end): 1 read, 0 when it may still be cut short
 * (fewer than ten bytes left), -1 when malformed. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	const uint8_t *q = *p;

	if (pb_read_varint(&q, end, v)) {
		*p = q;
		return 1;
	}
	return end - *p < PB_MAX_VARINT_LEN ? 0 : -1;
}

/* The size of the record that p[0..n) starts with: > 0 when all of it is
 * there, 0 when more bytes are needed to tell, -1 when it is malformed. */
static long long record_size(const uint8_t *p, size_t n, uint32_t *num,
			     uint8_t *wt)
{
	const uint8_t *q = p, *end = p + n;
	uint64_t tag, v;
	int r = read_varint(&q, end, &tag);

	if (r <= 0)
		return r;
	*num = (uint32_t)(tag >> 3);
	*wt = (uint8_t)(tag & 7);
	if (tag >> 3 == 0 || tag >> 3 > PB_MAX_FIELD_NUMBER)
		return -1;
	switch (tag & 7) {
	case PB_WT_VARINT:
		r = read_varint(&q, end, &v);
		return r <= 0 ? r : (long long)(q - p);
	case PB_WT_FIXED64:
		return end - q < 8 ? 0 : (long long)(q - p) + 8;
	case PB_WT_FIXED32:
		return end - q < 4 ? 0 : (long long)(q - p) + 4;
	case PB_WT_LEN:
		r = read_varint(&q, end, &v);
		if (r <= 0)
			return r;
		if (v > (uint64_t)(end - q))
			return 0;
		return (long long)(q - p) + (long long)v;
	default:
		return -1;
	}
}

/* The tag and length of the length-delimited record p[0..n) starts
 * with: true, with its size in all, when both are there. */
static bool record_head(const uint8_t *p, size_t n, uint32_t *num,
			uint64_t *size)
{
	const uint8_t *q = p, *end = p + n;
	uint64_t tag, v;

	/* a length past what the payload may inflate to is taken as it
	 * says: the inflate stops at its cap, in bounded memory */
	if (read_varint(&q, end, &tag) <= 0 || (tag & 7) != PB_WT_LEN ||
	    read_varint(&q, end, &v) <= 0 || v > UINT64_MAX / 2)
		return false;
	*num = (uint32_t)(tag >> 3);
	*size = (uint64_t)(q - p) + v;
	return true;
}

/* A record too large to frame in memory, on its way out of the
 * inflated bytes: to a file of its own (a packet), or dropped. */
struct spilling {
	const struct compressed_spill *conf;
	int fd;          /* the packet's file, or -1 (dropped, or none) */
	uint64_t left;   /* its bytes still to come; 0: none under way */
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static const char *spill_dir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}

/* An unlinked file in dir, or -1 (errno says why). */
static int spill_file(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR &&
			errno != EINVAL))
		return fd;
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/.vperfetto-spill.XXXXXX", dir);
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd >= 0)
		unlink(tmpl);
	return fd;
}

/* Starts taking the record of `size` bytes at the start of the
 * unframed bytes out of memory.  Where no file can be made (no $TMPDIR
 * to write in), the records of this payload are framed in memory, as
 * without a spill: more memory, the same output. */
static void spill_begin(struct spilling *sp, uint32_t num, uint64_t size)
{
	sp->fd = -1;
	if (num == TRACE_PACKET_FIELD) {
		sp->fd = spill_file(spill_dir());
		if (sp->fd < 0) {
			sp->conf = NULL;
			return;
		}
	}
	sp->left = size; /* not a packet: dropped, as frame_packets drops it */
}

/* Takes up to n bytes at p of the record under way; *used counts them.
 * Hands the packet to large() once whole. */
static int spill_more(const char *path, uint64_t off, struct spilling *sp,
		      const uint8_t *p, size_t n, size_t *used, void *ctx,
		      struct vp_error *err)
{
	if (n > sp->left)
		n = (size_t)sp->left;
	if (sp->fd >= 0 && write_all(sp->fd, p, n) < 0) {
		int e = errno;
		close(sp->fd);
		sp->fd = -1;
		return vp_errorf(err, "%s: byte offset %llu: cannot write a "
				 "packet inside compressed_packets aside in "
				 "%s: %s", path, (unsigned long long)off,
				 spill_dir(), strerror(e ? e : ENOSPC));
	}
	*used += n;
	sp->left -= n;
	if (sp->left || sp->fd < 0)
		return 0;
	int fd = sp->fd;
	sp->fd = -1;
	return sp->conf->large(ctx, fd, off, err);
}

/* Hands each whole packet at the start of b to fn and drops it (with any
 * other whole record); what is left is the start of the next.  With
 * sp->conf, a record too large to frame goes through sp instead. */
static int frame_packets(const char *path, uint64_t off, struct pb_buf *b,
			 packet_fn fn, compressed_flush_fn flush,
			 struct spilling *sp, void *ctx, struct vp_error *err)
{
	size_t used = 0;

	for (;;) {
		uint32_t num = 0;
		uint8_t wt = 0;
		uint64_t size;
		if (sp->left) {
			if (spill_more(path, off, sp, b->data + used,
				       b->len - used, &used, ctx, err) < 0)
				return -1;
			if (sp->left)
				break;
			continue;
		}
		long long n = record_size(b->data + used, b->len - used, &num,
					  &wt);
		if (n < 0)
			return malformed_inside(path, off, b->data + used,
						b->len - used, err);
		if (n == 0 && sp->conf &&
		    record_head(b->data + used, b->len - used, &num, &size) &&
		    size > COMPRESSED_SPILL_MIN) {
			/* the packets before it go first, in order */
			if (flush && num == TRACE_PACKET_FIELD &&
			    flush(ctx, err) < 0)
				return -1;
			spill_begin(sp, num, size);
			continue;
		}
		if (n == 0)
			break;
		if (num == TRACE_PACKET_FIELD && wt == PB_WT_LEN) {
			const uint8_t *q = b->data + used, *end = q + n;
			uint64_t tag = 0, len = 0;
			pb_read_varint(&q, end, &tag);
			pb_read_varint(&q, end, &len);
			int rc = fn(ctx, q, (size_t)len, off, err);
			if (rc > 0)
				return vp_errorf(err, "%s: byte offset %llu: "
						 "compressed_packets inside "
						 "compressed_packets", path,
						 (unsigned long long)off);
			if (rc < 0)
				return -1;
		}
		used += (size_t)n;
	}
	memmove(b->data, b->data + used, b->len - used);
	b->len -= used;
	return 0;
}

/* One compressed_packets payload being inflated, its input given a
 * piece at a time (inflater_feed). */
struct inflater {
	const char *path;
	uint64_t off;
	z_stream z;
	bool open, ended;
	uint64_t total;
	struct pb_buf *scratch;
	struct inflate_budget *budget;
	packet_fn fn;
	compressed_flush_fn flush;
	void *ctx;
	struct spilling sp;
};

static int inflater_begin(struct inflater *in, const char *path, uint64_t off,
			  struct pb_buf *scratch, struct inflate_budget *budget,
			  packet_fn fn, compressed_flush_fn flush,
			  const struct compressed_spill *spill, void *ctx,
			  struct vp_error *err)
{
	*in = (struct inflater){
		.path = path, .off = off, .scratch = scratch,
		.budget = budget, .fn = fn, .flush = flush, .ctx = ctx,
		.sp = {spill, -1, 0},
	};
	if (inflateInit(&in->z) != Z_OK)
		return vp_errorf(err, "%s: zlib init failed", path);
	in->open = true;
	pb_buf_reset(scratch);
	return 0;
}

static void inflater_end(struct inflater *in)
{
	if (in->sp.fd >= 0)
		close(in->sp.fd);
	in->sp.fd = -1;
	if (in->open)
		inflateEnd(&in->z);
	in->open = false;
}

/* Inflates the next piece p[0..n) of the payload (the last one with
 * last), handing out the packets as they come whole. */
static int inflater_feed(struct inflater *in, const uint8_t *p, size_t n,
			 bool last, struct vp_error *err)
{
	struct pb_buf *scratch = in->scratch;
	const char *path = in->path;
	uint64_t off = in->off;
	int rc = Z_OK;

	in->z.next_in = (Bytef *)(uintptr_t)p;
	in->z.avail_in = (uInt)n;
	while (!in->ended) {
		pb_buf_reserve(scratch, INFLATE_CHUNK);
		size_t room = scratch->cap - scratch->len;
		in->z.next_out = scratch->data + scratch->len;
		in->z.avail_out = (uInt)(room < UINT32_MAX ? room : UINT32_MAX);
		uInt before = in->z.avail_out;
		rc = inflate(&in->z, Z_NO_FLUSH);
		size_t got = before - in->z.avail_out;
		scratch->len += got;
		in->total += got;
		if (in->total > TRACE_MAX_PACKET)
			return vp_errorf(err, "%s: byte offset %llu: "
					 "compressed_packets inflates to over "
					 "%u MiB", path,
					 (unsigned long long)off,
					 TRACE_MAX_PACKET >> 20);
		if (in->budget->used + in->total > in->budget->max)
			return over_budget(path, off, in->budget, err);
		if (rc != Z_OK && rc != Z_STREAM_END &&
		    !(rc == Z_BUF_ERROR && !last))
			break;
		in->ended = rc == Z_STREAM_END;
		if (frame_packets(path, off, scratch, in->fn, in->flush, &in->sp,
				  in->ctx, err) < 0 ||
		    (in->flush && in->flush(in->ctx, err) < 0))
			return -1;
		if (!got && !in->z.avail_in && !last)
			return 0; /* all of this piece is in: the next one */
	}
	if (!last)
		return 0;
	if (!in->ended)
		return vp_errorf(err, "%s: byte offset %llu: corrupt "
				 "compressed_packets (zlib: %s)", path,
				 (unsigned long long)off,
				 in->z.msg ? in->z.msg : "truncated");
	if (scratch->len || in->sp.left)
		return malformed_inside(path, off, scratch->data, scratch->len,
					err);
	in->budget->used += in->total;
	return 0;
}

static int feed_piece(void *ctx, const uint8_t *p, size_t n,
		      struct vp_error *err)
{
	return inflater_feed(ctx, p, n, false, err);
}

/* Inflates one compressed_packets payload through scratch: p[0..len),
 * or with rd the len bytes of its file at `at`, read a piece at a
 * time. */
static int inflate_each(const char *path, uint64_t off, const uint8_t *p,
			struct trace_reader *rd, uint64_t at, uint64_t len,
			struct pb_buf *scratch, struct inflate_budget *budget,
			packet_fn fn, compressed_flush_fn flush,
			const struct compressed_spill *spill, void *ctx,
			struct vp_error *err)
{
	struct inflater in;
	int rc = inflater_begin(&in, path, off, scratch, budget, fn, flush,
				spill, ctx, err);

	if (rc == 0)
		rc = rd ? trace_reader_pass(rd, at, len, feed_piece, &in, err)
			: inflater_feed(&in, p, (size_t)len, false, err);
	if (rc == 0)
		rc = inflater_feed(&in, NULL, 0, true, err);
	inflater_end(&in);
	return rc;
}

int compressed_each_packet(const char *path, const uint8_t *pkt, size_t len,
			   uint64_t off, struct pb_buf *scratch,
			   struct inflate_budget *budget, packet_fn fn,
			   compressed_flush_fn flush,
			   const struct compressed_spill *spill, void *ctx,
			   struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, pkt, len);
	while (pb_next(&r, &f)) {
		if (f.num != TP_COMPRESSED_PACKETS || f.wt != PB_WT_LEN)
			continue;
		if (inflate_each(path, off, f.data, NULL, 0, f.len, scratch,
				 budget, fn, flush, spill, ctx, err) < 0)
			return -1;
	}
	return 0;
}

int compressed_each_packet_at(const char *path, struct trace_reader *rd,
			      uint64_t at, uint64_t len, uint64_t off,
			      struct pb_buf *scratch,
			      struct inflate_budget *budget, packet_fn fn,
			      compressed_flush_fn flush,
			      const struct compressed_spill *spill, void *ctx,
			      struct vp_error *err)
{
	return inflate_each(path, off, NULL, rd, at, len, scratch, budget, fn,
			    flush, spill, ctx, err);
}

/* ---- deflating again ----------------------------------------------------- */

int deflate_stream_begin(struct deflate_stream *d, int level,
			 const char *path, struct vp_error *err)
{
	memset(&d->z, 0, sizeof(d->z));
	d->open = deflateInit(&d->z, level) == Z_OK;
	if (!d->open)
		return vp_errorf(err, "%s: zlib init failed", path);
	return 0;
}

int deflate_stream_put(struct deflate_stream *d, const uint8_t *p, size_t n,
		       bool finish, struct pb_buf *out, const char *path,
		       uint64_t off, struct vp_error *err)
{
	int rc;

	d->z.next_in = (Bytef *)(uintptr_t)p;
	d->z.avail_in = (uInt)n;
	do {
		pb_buf_reserve(out, DEFLATE_CHUNK);
		size_t room = out->cap - out->len;
		d->z.next_out = out->data + out->len;
		d->z.avail_out = (uInt)(room < UINT32_MAX ? room : UINT32_MAX);
		uInt before = d->z.avail_out;
		rc = deflate(&d->z, finish ? Z_FINISH : Z_NO_FLUSH);
		out->len += before - d->z.avail_out;
	} while (rc == Z_OK && (finish || d->z.avail_in || !d->z.avail_out));
	if (finish ? rc != Z_STREAM_END : rc != Z_OK && rc != Z_BUF_ERROR)
		return vp_errorf(err, "%s: byte offset %llu: could not compress "
				 "the rewritten compressed_packets", path,
				 (unsigned long long)off);
	return 0;
}

void deflate_stream_end(struct deflate_stream *d)
{
	if (d->open)
		deflateEnd(&d->z);
	d->open = false;
}

int compressed_aside_error(const char *path, uint64_t off,
			   struct vp_error *err)
{
	char head[VP_ERROR_MAX], rest[VP_ERROR_MAX];
	size_t n = strlen(path);

	snprintf(head, sizeof(head), "%s: byte offset %llu: ", path,
		 (unsigned long long)off);
	if (strncmp(err->msg, head, strlen(head)) == 0)
		return -1; /* said of the compressed packet already */
	snprintf(rest, sizeof(rest), "%s",
		 strncmp(err->msg, path, n) == 0 && err->msg[n] == ':'
			 ? err->msg + n + 2 : err->msg);
	return vp_errorf(err, "%sin a packet inside compressed_packets (at "
			 "offsets of its own): %s", head, rest);
}
