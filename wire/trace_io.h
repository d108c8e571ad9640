/*
 * trace_io.h - streaming reader and crash-safe writer of Perfetto trace files.
 *
 * A trace file is a serialized `Trace { repeated TracePacket packet = 1; }`,
 * i.e. a run of top-level records `tag varint-length bytes`.  The reader
 * hands them out one at a time from a fixed-size buffer, so memory does not
 * grow with the file; a record larger than the buffer (up to
 * TRACE_MAX_PACKET) gets a buffer of its own for as long as it is current.
 * Offsets are 64-bit, so files over 4 GiB are fine.
 *
 * The writer writes to a temporary file beside the destination and renames
 * it into place only on trace_writer_commit(), after fsync (out_file.h).
 * Until then the destination is untouched; trace_writer_abort() removes the
 * temporary.
 */
#ifndef VP_TRACE_IO_H
#define VP_TRACE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vp_error.h"

#define TRACE_MAX_PACKET (64u << 20)   /* largest record accepted */
#define TRACE_READ_BUF (1u << 20)      /* the reader's fixed buffer */
/* Trace.packet, spelled out so this header does not pull in every
 * generated name; trace_reader.c checks it against protos/. */
#define TRACE_PACKET_FIELD 1

/* One top-level record.  Pointers stay valid until the next call. */
struct trace_record {
	uint32_t field;       /* field number in Trace (1 for a packet) */
	const uint8_t *data;  /* payload of a length-delimited record */
	size_t len;
	const uint8_t *raw;   /* the whole record: tag, length, payload */
	size_t raw_len;
	uint64_t offset;      /* file offset of the tag */
	uint64_t data_offset; /* file offset of the payload */
	/* Apart from field: the reader stores the two one at a time, and a
	 * test of both at once, as compilers make it of adjacent fields,
	 * would be one load spanning two stores, which waits for them to
	 * retire (about 5 ns a record when every packet is tested). */
	uint8_t wt;           /* wire type */
};

struct trace_reader;

int trace_reader_open(struct trace_reader **out, const char *path,
		      struct vp_error *err);
/* The same for a file already open (fd, which the reader takes over and
 * closes, also on failure); path names it in messages. */
int trace_reader_open_fd(struct trace_reader **out, int fd, const char *path,
			 struct vp_error *err);
/* 1: a record in *rec; 0: clean end of file; -1: error (err says where). */
int trace_reader_next(struct trace_reader *r, struct trace_record *rec,
		      struct vp_error *err);
/* Like trace_reader_next, but a record of more than whole_max bytes (tag
 * and length included) is not read: rec->raw and rec->data are NULL, and
 * the reader stands at its payload.  The caller reads what it needs of it
 * with trace_reader_peek, then goes on with trace_reader_seek: to the
 * record's end (rec->offset + rec->raw_len) to skip the rest, or to
 * rec->offset to read it whole after all.  Nothing checks that a record
 * skipped this way is all there. */
int trace_reader_next_head(struct trace_reader *r, struct trace_record *rec,
			   size_t whole_max, struct vp_error *err);
/* Up to n bytes (at most TRACE_PEEK_MAX) at file offset off, which
 * becomes the reader's position; *got says how many there are (fewer
 * only at the end of the file).  Valid until the next call.  NULL on a
 * read error. */
#define TRACE_PEEK_MAX 4096u
const uint8_t *trace_reader_peek(struct trace_reader *r, uint64_t off,
				 size_t n, size_t *got, struct vp_error *err);
/* Moves the reader to file offset off: the next record is read from
 * there.  Within what the reader holds this costs no system call. */
int trace_reader_seek(struct trace_reader *r, uint64_t off,
		      struct vp_error *err);
/* Hands the file's bytes [off, off + len) to fn, in pieces of at most
 * TRACE_READ_BUF read into the reader's own buffer, and leaves the
 * reader at off + len: a record of any size passes with no buffer of
 * its size.  Returns 0; -1 when fn fails (its message) or on a read
 * error or a file that ends first (err names the file and offset). */
typedef int (*trace_piece_fn)(void *ctx, const uint8_t *p, size_t n,
			      struct vp_error *err);
int trace_reader_pass(struct trace_reader *r, uint64_t off, uint64_t len,
		      trace_piece_fn fn, void *ctx, struct vp_error *err);
/* After trace_reader_next_head left `head` unread: reads it whole into
 * *whole after all (whole may be head).  1, or -1 (also when the file
 * ends before the record does, naming its offset). */
int trace_reader_reread(struct trace_reader *r, const struct trace_record *head,
			struct trace_record *whole, struct vp_error *err);
/* The head of the field at file offset off inside a message that ends
 * at end (a skim of a record left unread): its number, wire type, the
 * bytes of its tag and length, and its whole size.  p holds the
 * min(want, end - off) bytes read at off (valid until the next call).
 * 1; 0 when no whole field is there (malformed, running past end, or
 * the file shorter); -1 on a read error. */
struct trace_field_head {
	uint32_t num;
	uint8_t wt;
	size_t hdr;       /* tag, and length of a length-delimited field */
	uint64_t size;    /* hdr + payload (or the varint / fixed value) */
	const uint8_t *p;
	size_t got;
};
int trace_reader_field_head(struct trace_reader *r, uint64_t off,
			    uint64_t end, size_t want,
			    struct trace_field_head *h, struct vp_error *err);
/* Caps what the reader holds of one record: a record of more than max
 * bytes (tag and length included) that a call would read whole fails
 * instead, with a message naming the file, its offset and size, and
 * why (a phrase of the caller's, kept by reference, saying what needed
 * it whole).  Records larger than its buffer can still be skimmed
 * (trace_reader_next_head) and passed in pieces (trace_reader_pass).
 * By default there is no cap: a record is read whole up to
 * TRACE_MAX_PACKET, the limit of every reader. */
void trace_reader_limit_whole(struct trace_reader *r, size_t max,
			      const char *why);
/* Reads the len bytes at off into buf, all of which must be there (else
 * an error naming the offset: the file changed since the record's head
 * was read).  Touches only the reader's file, never its buffer or
 * position, so another thread may call it while the reader is in use
 * (not closed); its bytes are not counted in trace_reader_bytes_read. */
int trace_reader_read_at(struct trace_reader *r, uint64_t off, void *buf,
			 size_t len, struct vp_error *err);
/* Starts again from the beginning of the file. */
int trace_reader_rewind(struct trace_reader *r, struct vp_error *err);
uint64_t trace_reader_size(const struct trace_reader *r);
uint64_t trace_reader_pos(const struct trace_reader *r); /* bytes consumed */
uint64_t trace_reader_bytes_read(const struct trace_reader *r); /* from the file */
const char *trace_reader_path(const struct trace_reader *r);
void trace_reader_close(struct trace_reader *r);

struct trace_writer;

int trace_writer_open(struct trace_writer **out, const char *path,
		      struct vp_error *err);
/* Its writeback started by a thread of its own (vp_out_flush_behind). */
void trace_writer_flush_behind(struct trace_writer *w);
/* A trace_piece_fn (trace_reader_pass) that appends the pieces to w as
 * they are, and notes whether writing failed: an output error, not the
 * input's. */
struct trace_copy_out {
	struct trace_writer *w;
	bool failed;
};
int trace_copy_piece(void *copy_out, const uint8_t *p, size_t n,
		     struct vp_error *err);
/* Appends `0x0A varint(len) packet`. */
int trace_writer_packet(struct trace_writer *w, const void *packet, size_t len,
			struct vp_error *err);
/* Appends bytes as they are (a record copied verbatim from another trace). */
int trace_writer_raw(struct trace_writer *w, const void *p, size_t len,
		     struct vp_error *err);
struct iovec;
/* The same for n pieces, one after another; a large piece is written
 * from where it is (writev), not copied into the buffer first. */
int trace_writer_rawv(struct trace_writer *w, const struct iovec *iov, int n,
		      struct vp_error *err);
uint64_t trace_writer_bytes(const struct trace_writer *w);
/* A packet of len bytes made from the input record whose payload is at
 * in_off of path: 0 when it is no longer than a reader accepts
 * (TRACE_MAX_PACKET), else -1 with a message naming the input.  For a
 * tool that rewrites packets: one that grew past the limit would make
 * an output that its readers refuse. */
int trace_output_too_long(const char *path, uint64_t in_off, uint64_t len,
			  struct vp_error *err);
static inline int trace_output_fits(const char *path, uint64_t in_off,
				    uint64_t len, struct vp_error *err)
{
	return len <= TRACE_MAX_PACKET ? 0
				       : trace_output_too_long(path, in_off,
							       len, err);
}
/* Path of the temporary file, for cleanup from a signal handler. */
const char *trace_writer_temp_path(const struct trace_writer *w);
struct vp_out;
/* Flushes and hands over the output, still aside, to be committed with
 * others (vp_out_commit_all); frees w in all cases. */
int trace_writer_finish(struct trace_writer *w, struct vp_out **out,
			struct vp_error *err);
/* Flushes, fsyncs and renames into place; frees w in all cases. */
int trace_writer_commit(struct trace_writer *w, struct vp_error *err);
/* Removes the temporary file and frees w. */
void trace_writer_abort(struct trace_writer *w);

#endif
