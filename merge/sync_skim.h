/*
 * sync_skim.h - the sync scan of a large packet without reading all of it.
 *
 * Pass 1 of the merge needs little of a guest trace: clock snapshots,
 * interning, a few track events and the cpu of each ftrace bundle.  Most
 * of the bytes of an ftrace-heavy trace are the events inside large
 * bundles, which the scan never looks at.  For a packet that
 * trace_reader_next_head left unread, the skim reads the tag and length
 * of each top-level field, the fields the scanner reads, and the head of
 * a bundle, builds the packet the scanner would have seen with the
 * unread bodies left out (sync_scan_field_skim), and scans that.  Where
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

/* Scans the packet record `head` (from trace_reader_next_head, not read)
 * and leaves rd after it: 0.  Or reads it whole into *whole, for the
 * caller to scan: 1.  -1 on a read error.  scratch holds the packet
 * built for the scanner. */
int sync_skim_packet(struct sync_scanner *s, struct trace_reader *rd,
		     const struct trace_record *head,
		     struct trace_record *whole, struct pb_buf *scratch,
		     struct vp_error *err);

#endif
