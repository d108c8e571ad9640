/*
 * merge_limits.h - what the merge holds of one packet in memory.
 *
 * The merge streams: a packet larger than a window is skimmed (the sync
 * scan, sync_skim.h) and rewritten in pieces straight from the file
 * (partition_large.c), so a packet of 64 MiB costs a few MiB.  Some
 * parts of a packet are read and rewritten whole, though: a clock
 * snapshot, trace_packet_defaults, a single ftrace event, anything the
 * skim cannot stand in for in 4 MiB.  A packet with such a part over
 * that is held whole, and the rewrite's output of it too, so its size
 * bounds the merge's memory: MERGE_WHOLE_MAX keeps the two, and the
 * rest, under the 64 MiB the merge is held to on any input.  A larger
 * one is refused with a message naming its offset (exit 2); real
 * producers write those parts in bytes or kilobytes.  Every reader the
 * merge opens is opened here, so none goes without the cap.
 */
#ifndef VP_MERGE_LIMITS_H
#define VP_MERGE_LIMITS_H

#include "pb_wire.h"
#include "trace_io.h"

#define MERGE_WHOLE_MAX (16u << 20)

/* Opens a reader of the merge's: the file path, or fd (which it takes
 * over) when fd >= 0, capped at MERGE_WHOLE_MAX.  0, or -1 with a
 * message (trace_reader_open). */
static inline int merge_reader_open(struct trace_reader **r, const char *path,
				    int fd, struct vp_error *err)
{
	if ((fd >= 0 ? trace_reader_open_fd(r, fd, path, err)
		     : trace_reader_open(r, path, err)) < 0)
		return -1;
	trace_reader_limit_whole(*r, MERGE_WHOLE_MAX,
				 "that would be held whole (a part of it "
				 "that the merge reads whole, a clock "
				 "snapshot, packet defaults or a single "
				 "ftrace event, is over 4 MiB; or it is "
				 "malformed)");
	return 0;
}

/* Gives back a scratch buffer that grew for one large packet, so that it
 * holds no memory for the next ones. */
static inline void merge_shrink_buf(struct pb_buf *b)
{
	if (b->cap > (4u << 20)) {
		pb_buf_free(b);
		pb_buf_init(b);
	}
}

#endif
