/*
 * scan_split.h - the second half of a trace's sync scan, on a thread
 * that would otherwise idle.
 *
 * The sync scan reads every packet, in order, on one thread; for a trace
 * of small packets it is a third of the merge.  When another thread is
 * free (merge.c's scan pool: the host's scan ended first), it takes the
 * rest of a guest's scan from about half way: it looks for where a
 * record most likely begins there (scan_split_find), and scans from
 * there with a part scanner (sync_scanner_new_part), which does not
 * know what the sequences interned before.  The first thread stops at
 * the first record at or after that point.  Where both say the same
 * record, sync_scanner_join makes of the two what one scan would have
 * given; where they do not (the guess was wrong), or the part gave up,
 * the first thread scans on as if there had been no split: a split
 * only ever costs the helper's time, never a different result.
 */
#ifndef VP_SCAN_SPLIT_H
#define VP_SCAN_SPLIT_H

#include <signal.h>
#include <stdint.h>

#include "sync_scan.h"
#include "vp_error.h"

/* A guest's scan is split when this many bytes or more are left. */
#define SCAN_SPLIT_MIN (8u << 20)

/* Where, at or after offset `from` of the file (of `size` bytes), a
 * record most likely begins: *at, 1; 0 when no place looks like one
 * within a few MiB; -1 on a read error. */
int scan_split_find(const char *path, uint64_t from, uint64_t size,
		    uint64_t *at, struct vp_error *err);

/* Scans the file from offset `at` to its end with part (a part
 * scanner): 0; or -1 when it gives up (malformed data, compressed
 * packets, a full log, cancel): the caller then does without it. */
int scan_split_part(const char *path, uint64_t at, struct sync_scanner *part,
		    volatile sig_atomic_t *cancel);

/* sync_read_fn (sync_scan.h) on a trace reader (trace_reader_read_at),
 * for the join to read again the packets a part kept by their offset. */
int scan_split_read(void *rd, uint64_t off, void *buf, size_t len);

#endif
