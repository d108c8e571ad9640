/*
 * trace_reader.c - streaming reader of top-level trace records (trace_io.h).
 *
 * The reader keeps a window [head, fill) of the file in a fixed buffer.  A
 * record is returned in place when it fits; one larger than the buffer is
 * read into a separate allocation that is released on the next call.
 *
 * A reader that only needs parts of large records (trace_reader_next_head)
 * skips the rest: every read says its file offset (pread), so a skip
 * costs no system call of its own.  Then it reads small: a refill after a skip
 * asks for READ_MIN bytes and each further refill doubles that up to the
 * whole buffer, so a run of small records is still read in large blocks
 * while the bytes of a skipped record are mostly never copied.
 */
#include "trace_io.h"
#include "pb_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfetto_fields.h"

_Static_assert(TRACE_PACKET_FIELD == TRACE_PACKET, "Trace.packet");

/* Tag and length varints of a record take at most this many bytes. */
#define RECORD_HEADER_MAX (2 * PB_MAX_VARINT_LEN)
/* The first read after a skip. */
#define READ_MIN 2048u
_Static_assert(TRACE_PEEK_MAX < TRACE_READ_BUF,
	       "a peek fits the buffer");

struct trace_reader {
	int fd;
	char *path;
	uint64_t size;     /* file size at open */
	uint64_t buf_off;  /* file offset of buf[0] */
	size_t head, fill; /* unconsumed window in buf */
	bool eof;          /* read() returned 0 */
	size_t chunk;      /* how much the next refill asks for */
	uint64_t n_read;   /* bytes read from the file in all */
	uint8_t *big;      /* current oversized record, if any */
	size_t whole_max;  /* the largest record read whole */
	const char *whole_why; /* what reads records whole, for messages */
	uint8_t buf[TRACE_READ_BUF];
};

int trace_reader_open(struct trace_reader **out, const char *path,
		      struct vp_error *err)
{
	/* O_NONBLOCK: a FIFO with no writer would block the open itself,
	 * before it can be told apart and refused. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return vp_errorf(err, "%s: cannot open: %s", path, strerror(errno));
	return trace_reader_open_fd(out, fd, path, err);
}

int trace_reader_open_fd(struct trace_reader **out, int fd, const char *path,
			 struct vp_error *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return vp_errorf(err, "%s: not a regular file", path);
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	struct trace_reader *r = malloc(sizeof(*r));
	char *p = strdup(path);
	if (!r || !p) {
		free(r);
		free(p);
		close(fd);
		return vp_errorf(err, "%s: out of memory", path);
	}
	r->fd = fd;
	r->path = p;
	r->size = (uint64_t)st.st_size;
	r->buf_off = 0;
	r->head = r->fill = 0;
	r->eof = false;
	r->chunk = sizeof(r->buf);
	r->n_read = 0;
	r->big = NULL;
	r->whole_max = SIZE_MAX;
	r->whole_why = NULL;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	*out = r;
	return 0;
}

void trace_reader_close(struct trace_reader *r)
{
	if (!r)
		return;
	close(r->fd);
	free(r->big);
	free(r->path);
	free(r);
}

uint64_t trace_reader_size(const struct trace_reader *r) { return r->size; }
uint64_t trace_reader_bytes_read(const struct trace_reader *r) { return r->n_read; }
const char *trace_reader_path(const struct trace_reader *r) { return r->path; }

uint64_t trace_reader_pos(const struct trace_reader *r)
{
	return r->buf_off + r->head;
}

/* Empties the window, which now starts at file offset off. */
static int reposition(struct trace_reader *r, uint64_t off,
		      struct vp_error *err)
{
	if (off > INT64_MAX)
		return vp_errorf(err, "%s: cannot seek to byte offset %llu: "
				 "out of range", r->path,
				 (unsigned long long)off);
	free(r->big);
	r->big = NULL;
	r->buf_off = off;
	r->head = r->fill = 0;
	r->eof = false;
	return 0;
}

int trace_reader_reread(struct trace_reader *r, const struct trace_record *head,
			struct trace_record *whole, struct vp_error *err)
{
	uint64_t at = head->offset;

	if (trace_reader_seek(r, at, err) < 0)
		return -1;
	int rc = trace_reader_next(r, whole, err);
	if (rc == 0) /* the file shrank since its header was read */
		return vp_errorf(err, "%s: byte offset %llu: the file ends "
				 "before this record", r->path,
				 (unsigned long long)at);
	return rc < 0 ? -1 : 1;
}

int trace_reader_field_head(struct trace_reader *r, uint64_t off,
			    uint64_t end, size_t want,
			    struct trace_field_head *h, struct vp_error *err)
{
	uint64_t tag, v;

	if (want > end - off)
		want = (size_t)(end - off);
	h->p = trace_reader_peek(r, off, want, &h->got, err);
	if (!h->p)
		return -1;
	if (h->got < want)
		return 0;
	const uint8_t *q = h->p, *e = h->p + h->got;
	if (!pb_read_varint(&q, e, &tag) || (tag >> 3) == 0 ||
	    (tag >> 3) > PB_MAX_FIELD_NUMBER)
		return 0;
	h->num = (uint32_t)(tag >> 3);
	h->wt = (uint8_t)(tag & 7);
	switch (h->wt) {
	case PB_WT_VARINT:
		if (!pb_read_varint(&q, e, &v))
			return 0;
		h->hdr = (size_t)(q - h->p);
		h->size = h->hdr;
		break;
	case PB_WT_LEN:
		if (!pb_read_varint(&q, e, &v))
			return 0;
		h->hdr = (size_t)(q - h->p);
		h->size = h->hdr + v;
		if (v > end - off - h->hdr)
			return 0;
		break;
	case PB_WT_FIXED64:
	case PB_WT_FIXED32:
		h->hdr = (size_t)(q - h->p);
		h->size = h->hdr + (h->wt == PB_WT_FIXED64 ? 8 : 4);
		break;
	default:
		return 0;
	}
	return h->size <= end - off;
}

int trace_reader_rewind(struct trace_reader *r, struct vp_error *err)
{
	r->chunk = sizeof(r->buf);
	return reposition(r, 0, err);
}

int trace_reader_seek(struct trace_reader *r, uint64_t off,
		      struct vp_error *err)
{
	uint64_t end = r->buf_off + r->fill;

	/* Within the window (or at its end): no system call. */
	if (!r->big && off >= r->buf_off && off <= end) {
		r->head = (size_t)(off - r->buf_off);
		return 0;
	}
	r->chunk = READ_MIN; /* bytes were skipped: read small for a while */
	return reposition(r, off, err);
}

/* Reads up to len bytes at p, retrying short reads; returns bytes read
 * (less than len only at end of file) or -1. */
static ssize_t read_full(int fd, uint8_t *p, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, p + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int trace_reader_read_at(struct trace_reader *r, uint64_t off, void *buf,
			 size_t len, struct vp_error *err)
{
	ssize_t got = read_full(r->fd, buf, len, off);

	if (got < 0)
		return vp_errorf(err, "%s: byte offset %llu: read: %s", r->path,
				 (unsigned long long)off, strerror(errno));
	if ((size_t)got < len)
		return vp_errorf(err, "%s: byte offset %llu: the file ends "
				 "before this record (it changed while being "
				 "read)", r->path,
				 (unsigned long long)(off + (uint64_t)got));
	return 0;
}

/* Slides the unconsumed window to the front and reads at least `want`
 * more bytes (r->chunk, when that is more and fits). */
static int refill_want(struct trace_reader *r, size_t want,
		       struct vp_error *err)
{
	size_t keep = r->fill - r->head, room = sizeof(r->buf) - keep;

	if (r->eof)
		return 0;
	memmove(r->buf, r->buf + r->head, keep);
	r->buf_off += r->head;
	r->head = 0;
	r->fill = keep;
	if (want < r->chunk)
		want = r->chunk;
	if (want > room)
		want = room;
	if (r->chunk < sizeof(r->buf))
		r->chunk *= 2;
	ssize_t n = read_full(r->fd, r->buf + keep, want, r->buf_off + keep);
	if (n < 0)
		return vp_errorf(err, "%s: read error at byte offset %llu: %s",
				 r->path, (unsigned long long)(r->buf_off + keep),
				 strerror(errno));
	r->fill += (size_t)n;
	r->n_read += (size_t)n;
	if ((size_t)n < want)
		r->eof = true;
	return 0;
}

static int refill(struct trace_reader *r, struct vp_error *err)
{
	return refill_want(r, 0, err);
}

int trace_reader_pass(struct trace_reader *r, uint64_t off, uint64_t len,
		      trace_piece_fn fn, void *ctx, struct vp_error *err)
{
	if (len > INT64_MAX || off > INT64_MAX - len)
		return vp_errorf(err, "%s: byte offset %llu: a range of %llu "
				 "bytes is out of range", r->path,
				 (unsigned long long)off,
				 (unsigned long long)len);
	if (reposition(r, off, err) < 0)
		return -1;
	while (len) {
		size_t want = len < sizeof(r->buf) ? (size_t)len
						   : sizeof(r->buf);
		ssize_t n = read_full(r->fd, r->buf, want, r->buf_off);
		if (n < 0)
			return vp_errorf(err, "%s: read error at byte offset "
					 "%llu: %s", r->path,
					 (unsigned long long)r->buf_off,
					 strerror(errno));
		r->n_read += (size_t)n;
		if ((size_t)n < want)
			return vp_errorf(err, "%s: byte offset %llu: the file "
					 "ends %llu bytes before the record "
					 "does", r->path,
					 (unsigned long long)(r->buf_off + n),
					 (unsigned long long)(len - n));
		r->buf_off += (uint64_t)n;
		len -= (uint64_t)n;
		if (fn(ctx, r->buf, (size_t)n, err) < 0)
			return -1;
	}
	return 0;
}

static int truncated(struct trace_reader *r, uint64_t at, const char *what,
		     uint64_t want, struct vp_error *err)
{
	uint64_t end = r->buf_off + r->fill;

	/* short of the end of the file, the window says too little */
	if (!r->eof && r->size > end)
		end = r->size;
	return vp_errorf(err,
			 "%s: byte offset %llu: truncated %s (needs %llu bytes, "
			 "the file ends after %llu)",
			 r->path, (unsigned long long)at, what,
			 (unsigned long long)want, (unsigned long long)(end - at));
}

void trace_reader_limit_whole(struct trace_reader *r, size_t max,
			      const char *why)
{
	r->whole_max = max;
	r->whole_why = why;
}

/* Reads a record too large for the window into r->big. */
static int read_big(struct trace_reader *r, struct trace_record *rec,
		    size_t hdr, size_t total, struct vp_error *err)
{
	uint64_t at = trace_reader_pos(r);
	size_t have = r->fill - r->head;

	if (total > r->whole_max)
		return vp_errorf(err, "%s: byte offset %llu: a packet of %.1f "
				 "MiB %s; at most %zu MiB of one is held in "
				 "memory",
				 r->path, (unsigned long long)at,
				 total / 1048576.0,
				 r->whole_why ? r->whole_why
					      : "would be read whole",
				 r->whole_max >> 20);
	r->big = malloc(total);
	if (!r->big)
		return vp_errorf(err, "%s: byte offset %llu: out of memory for "
				 "a %zu-byte packet", r->path,
				 (unsigned long long)at, total);
	memcpy(r->big, r->buf + r->head, have);
	ssize_t n = read_full(r->fd, r->big + have, total - have, at + have);
	if (n < 0)
		return vp_errorf(err, "%s: read error: %s", r->path,
				 strerror(errno));
	r->n_read += (size_t)n;
	if ((size_t)n < total - have) {
		r->fill = r->head + have + (size_t)n; /* for the message */
		return truncated(r, at, "packet", total, err);
	}
	/* The window is now empty and starts right after the record. */
	r->buf_off = at + total;
	r->head = r->fill = 0;
	rec->raw = r->big;
	rec->raw_len = total;
	rec->data = r->big + hdr;
	return 1;
}

/* Reads the tag and length of the record at the reader's position into
 * rec (not its bytes) and *hdr: 1, 0 at a clean end of file, or -1. */
static inline __attribute__((always_inline)) int
read_head(struct trace_reader *r, struct trace_record *rec,
		     size_t *hdr, struct vp_error *err)
{
	if (r->big) { /* rare: no call to free() for every record */
		free(r->big);
		r->big = NULL;
	}

	if (r->fill - r->head < RECORD_HEADER_MAX && refill(r, err) < 0)
		return -1;
	if (r->head == r->fill)
		return 0;

	const uint8_t *start = r->buf + r->head, *end = r->buf + r->fill;
	const uint8_t *p = start;
	uint64_t at = trace_reader_pos(r), tag, len = 0;

	if (!pb_read_varint(&p, end, &tag)) {
		if (r->fill - r->head < PB_MAX_VARINT_LEN)
			return truncated(r, at, "record tag", r->fill - r->head + 1,
					 err);
		return vp_errorf(err, "%s: byte offset %llu: malformed varint in "
				 "record tag", r->path, (unsigned long long)at);
	}
	uint32_t field = (uint32_t)(tag >> 3);
	uint8_t wt = (uint8_t)(tag & 7);
	if (field == 0 || (tag >> 3) > PB_MAX_FIELD_NUMBER)
		return vp_errorf(err, "%s: byte offset %llu: invalid field number "
				 "%llu (not a Perfetto trace?)", r->path,
				 (unsigned long long)at,
				 (unsigned long long)(tag >> 3));

	switch (wt) {
	case PB_WT_LEN:
		if (!pb_read_varint(&p, end, &len)) {
			if (end - p >= PB_MAX_VARINT_LEN)
				return vp_errorf(err, "%s: byte offset %llu: "
						 "malformed varint in record "
						 "length", r->path,
						 (unsigned long long)at);
			return truncated(r, at, "record length",
					 (uint64_t)(end - start) + 1, err);
		}
		if (len > TRACE_MAX_PACKET)
			return vp_errorf(err, "%s: byte offset %llu: record of %llu "
					 "bytes is over the %u MiB limit (corrupt "
					 "length?)", r->path, (unsigned long long)at,
					 (unsigned long long)len,
					 TRACE_MAX_PACKET >> 20);
		break;
	case PB_WT_VARINT: {
		uint64_t v;
		if (!pb_read_varint(&p, end, &v)) {
			if (end - p >= PB_MAX_VARINT_LEN)
				return vp_errorf(err, "%s: byte offset %llu: "
						 "malformed varint in record",
						 r->path, (unsigned long long)at);
			return truncated(r, at, "record", (uint64_t)(end - start) + 1,
					 err);
		}
		break;
	}
	case PB_WT_FIXED64:
		len = 8;
		break;
	case PB_WT_FIXED32:
		len = 4;
		break;
	default:
		return vp_errorf(err, "%s: byte offset %llu: invalid wire type %u "
				 "(not a Perfetto trace?)", r->path,
				 (unsigned long long)at, wt);
	}

	*hdr = (size_t)(p - start);
	rec->field = field;
	rec->wt = wt;
	rec->len = wt == PB_WT_VARINT ? 0 : (size_t)len;
	rec->offset = at;
	rec->data_offset = at + *hdr;
	rec->raw_len = *hdr + (size_t)len;
	rec->raw = rec->data = NULL;
	return 1;
}

/* The bytes of the record read_head found. */
static inline __attribute__((always_inline)) int
read_body(struct trace_reader *r, struct trace_record *rec,
		     size_t hdr, struct vp_error *err)
{
	size_t total = rec->raw_len;

	if (total > sizeof(r->buf))
		return read_big(r, rec, hdr, total, err);
	if (r->fill - r->head < total) {
		if (refill_want(r, total - (r->fill - r->head), err) < 0)
			return -1;
		if (r->fill - r->head < total)
			return truncated(r, rec->offset,
					 rec->wt == PB_WT_LEN ? "packet" : "record",
					 total, err);
	}
	rec->raw = r->buf + r->head;
	rec->data = rec->raw + hdr;
	r->head += total;
	return 1;
}

int trace_reader_next(struct trace_reader *r, struct trace_record *rec,
		      struct vp_error *err)
{
	size_t hdr = 0;
	int rc = read_head(r, rec, &hdr, err);

	return rc <= 0 ? rc : read_body(r, rec, hdr, err);
}

int trace_reader_next_head(struct trace_reader *r, struct trace_record *rec,
			   size_t whole_max, struct vp_error *err)
{
	size_t hdr = 0;

	if (r->n_read == 0) /* a skimming reader starts small too */
		r->chunk = READ_MIN;
	int rc = read_head(r, rec, &hdr, err);

	if (rc <= 0 || rec->raw_len <= whole_max)
		return rc <= 0 ? rc : read_body(r, rec, hdr, err);
	r->head += hdr; /* at the payload; read_head made sure it is here */
	return 1;
}

const uint8_t *trace_reader_peek(struct trace_reader *r, uint64_t off,
				 size_t n, size_t *got, struct vp_error *err)
{
	if (n > TRACE_PEEK_MAX)
		n = TRACE_PEEK_MAX;
	if (trace_reader_seek(r, off, err) < 0)
		return NULL;
	size_t have = r->fill - r->head;
	if (have < n && refill_want(r, n - have, err) < 0)
		return NULL;
	have = r->fill - r->head;
	*got = have < n ? have : n;
	return r->buf + r->head;
}
