/*
 * tp_compress.h - sets of slice tracks that share one identity, as
 * Perfetto's TrackCompressor keeps them.
 *
 * Async slices that may overlap (atrace's S/F and G/H, ion and dma buffer
 * allocations ...) do not get a track each: a set of tracks with the same
 * type and dimensions is shared, a slice going on the first track of the
 * set that has nothing open (or that its cookie already owns), and a new
 * track made only when all are busy.  Each track of a set has the set's
 * dimension args plus `track_compressor_idx`, its index in the set.
 */
#ifndef VP_TP_COMPRESS_H
#define VP_TP_COMPRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_args.h"
#include "tp_tracks.h"

struct tp_ctx;

struct tp_compress *tp_compress_new(void);
void tp_compress_free(struct tp_compress *c);

/* The set is named by s (machine, type, utid, upid; name and the other
 * fields only matter when a track is made) and dims (its dimension args
 * without the index, NULL for none). */

/* The track for a slice beginning with `cookie`.  saturating: a begin on a
 * track its cookie holds open counts once (atrace's unnestable async
 * slices); else begins nest. */
uint32_t tp_compress_begin(struct tp_ctx *ctx, const struct tp_track_spec *s,
			   const struct tp_args_builder *dims, int64_t cookie,
			   bool saturating);
/* The track for the end of a slice with `cookie`. */
uint32_t tp_compress_end(struct tp_ctx *ctx, const struct tp_track_spec *s,
			 const struct tp_args_builder *dims, int64_t cookie);
/* The track for a slice [ts, ts + dur] known whole (an instant when dur is
 * 0): the first track of the set free by ts. */
uint32_t tp_compress_scoped(struct tp_ctx *ctx, const struct tp_track_spec *s,
			    const struct tp_args_builder *dims, int64_t ts,
			    int64_t dur);

#endif
