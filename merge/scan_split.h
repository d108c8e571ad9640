/*
 * scan_split.h - the second half of a trace's sync scan, on a thread
 * that would otherwise idle.
 *
 * The sync scan reads every packet, in order, on one thread; for a trace
 * of small packets it is a third of the merge.  When another thread is
 * free (scan_pass.c: the host's scan ended first), it takes the second
 * half of what a guest's scan has left (before any part already taken):
 * it looks for where a record most likely begins there
 * (scan_split_find), and scans from there up to the next part with a
 * part scanner (sync_scanner_new_part), which does not know what the
 * sequences interned before.  The scanning thread stops at the first
 * record at or after that point.  Where both say the same record,
 * sync_scanner_join makes of the two what one scan would have given,
 * and the next part is joined where this one ended; where they do not
 * (the guess was wrong), or the part gave up, the scanning thread scans
 * on as if there had been no split: a split only ever costs the
 * helper's time, never a different result.
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

/* Scans the file with part (a part scanner) from offset `at` up to the
 * first record at or after `to` (UINT64_MAX: to its end), whose offset
 * (or the file's size) goes to *stop: 0; or -1 when it gives up
 * (malformed data, compressed packets, a full log, cancel): the caller
 * then does without it. */
int scan_split_part(const char *path, uint64_t at, uint64_t to,
		    struct sync_scanner *part, volatile sig_atomic_t *cancel,
		    uint64_t *stop);

/* sync_read_fn (sync_scan.h) on a trace reader (trace_reader_read_at),
 * for the join to read again the packets a part kept by their offset. */
int scan_split_read(void *rd, uint64_t off, void *buf, size_t len);

#endif
