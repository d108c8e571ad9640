/*
 * sync_skim.h - the sync scan of a file, its large packets skimmed: not
 * read whole.
 *
 * Pass 1 of the merge needs little of a guest trace: clock snapshots,
 * interning, a few track events and the cpu of each ftrace bundle.  Most
 * of the bytes of an ftrace-heavy trace are the events inside large
 * bundles, which the scan never looks at.  For a packet that
 * trace_reader_next_head left unread, the skim reads the tag and length
 * of each top-level field, the fields the scanner reads, and the head of
 * a bundle, builds the packet the scanner would have seen with the
 * unread bodies left out (sync_scan_field_skim), and scans that.  Into a
 * large track event or interned data it goes deeper (sync_scan_need):
 * the stand-in keeps their names, ids and values and leaves out the rest
 * (a long debug annotation, a long name, which match nothing).  Where
 * it cannot be exact (a compressed packet, a large field the scanner
 * reads, anything malformed or cut short) it reads the packet whole and
 * leaves the scan to the caller, so results and error messages are those
 * of the plain scan.
 */
#ifndef VP_SYNC_SKIM_H
#define VP_SYNC_SKIM_H

#include <stddef.h>

#include "pb_wire.h"
#include "sync_scan.h"
#include "trace_io.h"
#include "vp_error.h"

/* Records of more than this many bytes are skimmed; smaller ones cost
 * less to read than to skip. */
#define SYNC_SKIM_MIN_RECORD (16u << 10)

/* Scans the packets inside the compressed_packets payload of `len`
 * bytes at file offset `at` of a large packet (at offset off) from the
 * file: 0, or -1 with a message. */
typedef int (*sync_skim_compressed_fn)(void *ctx, struct trace_reader *rd,
				       uint64_t at, uint64_t len,
				       uint64_t off, struct vp_error *err);

/* A scan of one file that skims its large packets. */
struct sync_skim {
	struct trace_reader *rd;
	struct sync_scanner *sc;
	size_t whole_max;       /* records of more bytes are skimmed */
	struct pb_buf scratch;  /* the packet built for the scanner */
	/* Set by the caller after the open: a large packet's one
	 * compressed_packets field is then handed to it, not read whole. */
	sync_skim_compressed_fn compressed;
	void *compressed_ctx;
	uint64_t z_at, z_len;   /* that field's payload in this packet */
	bool have_z;
};

/* Opens path for a scan into sc: 0, or -1 (sync_skim_close it even so). */
int sync_skim_open(struct sync_skim *k, const char *path,
		   struct sync_scanner *sc, size_t whole_max,
		   struct vp_error *err);
/* The same for the file open as fd, which the skim then owns. */
int sync_skim_open_fd(struct sync_skim *k, int fd, const char *path,
		      struct sync_scanner *sc, size_t whole_max,
		      struct vp_error *err);
void sync_skim_close(struct sync_skim *k);
/* The next record of the file.  1: *rec is the whole record, for the
 * caller to scan (small, not a packet, or not to be skimmed exactly);
 * 2: a large packet, skimmed and scanned (rec has its offset and
 * raw_len, not its bytes); 0 at the end; -1 on an error.
 * sync_skim_large is its part for a record trace_reader_next_head left
 * unread. */
int sync_skim_large(struct sync_skim *k, struct trace_record *rec,
		    struct vp_error *err);
static inline int sync_skim_next(struct sync_skim *k, struct trace_record *rec,
				 struct vp_error *err)
{
	int rc = trace_reader_next_head(k->rd, rec, k->whole_max, err);

	/* inline: most records are small, and read whole */
	if (rc <= 0 || rec->raw)
		return rc;
	return sync_skim_large(k, rec, err);
}

#endif
