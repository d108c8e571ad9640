/*
 * tp_load.h - loads a Perfetto trace file into a tp_ctx: reads packets,
 * decodes their envelope (sequence, interning, defaults, clock snapshots,
 * machine, compressed_packets), hands the data fields to the modules, then
 * runs the sorted parse stage and finishes the tables.
 *
 * Bad input never stops the load: whatever is valid is kept, what is not is
 * counted in stats (and a warning names the file offset of the first bad
 * byte).  Only an unreadable file is an error.
 */
#ifndef VP_TP_LOAD_H
#define VP_TP_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_ctx.h"
#include "tp_vcpu.h"
#include "vp_error.h"

/* The most bytes all compressed_packets of one trace may inflate to,
 * unless tp_load_opts says otherwise (vperfetto_tp --max-inflate, as
 * vperfetto_merge's).  A compressed trace of 2 GiB inflated loads; a few
 * MB of compressed zeros that would inflate to many GiB is refused. */
#define TP_DEFAULT_MAX_INFLATE (2ull << 30)

struct tp_load_opts {
	bool progress; /* draw a progress bar on stderr */
	bool quiet;    /* no warnings on stderr */
	/* The inflation limit in bytes, 0 for TP_DEFAULT_MAX_INFLATE.  Past
	 * it the load stops: tp_load_file() fails, naming the byte offset of
	 * the packet that went over. */
	uint64_t max_inflate;
	/* Which VM runs which guest machine, for the vcpu tables (NULL: as
	 * the trace says; tp_vcpu.h). */
	const struct tp_vcpu_assign *vcpu_assign;
	/* Sort the whole trace at its end (Perfetto's --full-sort); else the
	 * sorter works window by window as Perfetto's does (tp_sort.h). */
	bool full_sort;
};

struct tp_ctx *tp_ctx_new(void);
void tp_ctx_free(struct tp_ctx *ctx);

/* Loads path into ctx. -1 with err set when the file cannot be read or
 * its compressed_packets inflate past the limit (tp_load_opts). */
int tp_load_file(struct tp_ctx *ctx, const char *path,
		 const struct tp_load_opts *opts, struct vp_error *err);
/* Loads a trace held in memory (the fuzzer's entry point); -1 when it
 * inflates past the limit. */
int tp_load_buffer(struct tp_ctx *ctx, const uint8_t *data, size_t len,
		   const struct tp_load_opts *opts);

#endif
