/*
 * tp_compress.h - sets of interchangeable slice tracks, as Perfetto's
 * TrackCompressor keeps them.
 *
 * Slices that may overlap (atrace's S/F and G/H, ion and dma buffer
 * allocations, legacy async track events, descriptor tracks that merge
 * with their siblings ...) do not get a track each: tracks that a UI would
 * draw as one row form a set, and a set has lanes, each a track made on
 * first use.  A slice goes to the lane its cookie owns, else to the first
 * lane with nothing open (which its cookie then owns), else to a new lane;
 * so tracks share a row while their slices do not overlap, and split when
 * they do.  A slice known whole (scoped) goes to the first lane free by its
 * start.  A lane serves cookies or whole slices, never both, as in
 * Perfetto; a lane's index in its set is its `track_compressor_idx`.
 *
 * Two ways in.  By key: the caller names a set by words of its own and
 * makes each lane's track itself (the track_event module's descriptor
 * tracks, which keep a compressor of their own).  By track spec: the set
 * is named by a track spec and dimension args, and the lane's track is
 * made here (ctx->compress: atrace, the memory events, legacy async
 * events).
 */
#ifndef VP_TP_COMPRESS_H
#define VP_TP_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "tp_args.h"
#include "tp_tracks.h"

struct tp_ctx;
struct tp_compress;

struct tp_compress *tp_compress_new(void);
void tp_compress_free(struct tp_compress *c);

/* What a slice does on its set. */
enum tp_compress_use {
	TP_COMPRESS_BEGIN,      /* begins; begins of one cookie nest */
	TP_COMPRESS_BEGIN_ONCE, /* begins, but a begin on the lane its cookie
				 * holds open counts once (atrace's
				 * unnestable async slices) */
	TP_COMPRESS_END,        /* ends the last begin of its cookie */
	TP_COMPRESS_INSTANT,    /* begins and ends at once */
};

/* ---- by key: the caller makes the tracks ---- */

/* The set named by the n words of key, made the first time. */
uint32_t tp_compress_set(struct tp_compress *c, const uint64_t *key,
			 size_t n);
/* The lane a slice of cookie takes in set. */
uint32_t tp_compress_lane(struct tp_compress *c, uint32_t set,
			  enum tp_compress_use use, int64_t cookie);
/* The first lane (made for cookie 0 if the set has none): the track
 * children of the set's tracks hang below. */
uint32_t tp_compress_lane_first(struct tp_compress *c, uint32_t set);
/* The track of a lane: -1 until the caller makes it and stores it here. */
/* Gives a track just made for a lane of set its set's track_group_id,
 * numbered across all sets of the load in the order their first track
 * was made (Perfetto's numbering of its compressor's sets). */
void tp_compress_mark_track(struct tp_ctx *ctx, struct tp_compress *c,
			    uint32_t set, uint32_t track);
int64_t *tp_compress_lane_track(struct tp_compress *c, uint32_t set,
				uint32_t lane);

/* ---- by track spec: the tracks made here, on ctx->compress ---- */

/* The set is named by s (machine, type, event_type, utid, upid; name and
 * the other fields only matter when a track is made) and dims (its
 * dimension args without the index, NULL for none).  Each track of the
 * set has the set's dimension args plus track_compressor_idx. */

/* The track for a slice of `cookie`. */
uint32_t tp_compress_track(struct tp_ctx *ctx, const struct tp_track_spec *s,
			   const struct tp_args_builder *dims,
			   enum tp_compress_use use, int64_t cookie);
/* The track for a slice [ts, ts + dur] known whole (an instant when dur is
 * 0): the first track of the set free by ts. */
uint32_t tp_compress_scoped(struct tp_ctx *ctx, const struct tp_track_spec *s,
			    const struct tp_args_builder *dims, int64_t ts,
			    int64_t dur);

#endif
