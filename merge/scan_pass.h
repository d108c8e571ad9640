/*
 * scan_pass.h - pass 1 of the merge: the sync scan of each input (the
 * guests' and the host's, the host copied to the output as it is
 * scanned), up to `threads` at once.  Each scan has its own reader and
 * scanner, and none writes anything another reads (only the host's
 * writes the output).  A thread left with no input of its own takes the
 * second half of a guest's scan still going (scan_split.h).
 */
#ifndef VP_MERGE_SCAN_PASS_H
#define VP_MERGE_SCAN_PASS_H

#include <signal.h>
#include <stdint.h>

#include "progress.h"
#include "sync_scan.h"
#include "vp_error.h"

struct trace_writer;

/* One input of pass 1: a guest, or the host (copied as it is scanned). */
struct scan_item {
	/* in */
	const char *path;
	struct trace_writer *copy_to; /* the host's: the output */
	/* called with its data by the thread that scanned it, when it
	 * scanned without error, while the other scans go on (the host's
	 * clock model) */
	void (*done)(void *ctx, const struct sync_data *d);
	void *done_ctx;
	/* out */
	struct sync_scanner *sc;       /* the caller frees it */
	int status;                    /* MERGE_OK or a merge status */
	struct vp_error err;
	unsigned parts;                /* a guest's scan was in this many
					* parts at once, */
	uint64_t split_at;             /* the second from this offset (0:
					* in one) */
};

/* Scans items[0..n) on up to `threads` threads.  A thread that cannot be
 * had leaves its share to the others. */
void scan_inputs(struct scan_item *items, size_t n, unsigned threads,
		 struct progress *pg, uint64_t max_inflate,
		 volatile sig_atomic_t *cancel);

#endif
