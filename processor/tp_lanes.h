/*
 * tp_lanes.h - sets of interchangeable tracks, as Perfetto's
 * TrackCompressor keeps them.
 *
 * Tracks that a UI would draw as one row (the async tracks of one parent
 * with one name, say) form a set, known by a key the caller makes.  A
 * set has lanes, each a track made on first use; a slice goes to the lane
 * of its cookie (a track uuid), or else to a lane with nothing open
 * (which then takes the cookie), or else to a new lane.  So tracks share
 * a row while their slices do not overlap, and split when they do.
 */
#ifndef VP_TP_LANES_H
#define VP_TP_LANES_H

#include <stddef.h>
#include <stdint.h>

struct tp_lanes;

struct tp_lanes *tp_lanes_new(void);
void tp_lanes_free(struct tp_lanes *c);

/* The set with this key (four words the caller fills), made the first
 * time; sets are numbered in order of creation. */
uint32_t tp_lanes_set(struct tp_lanes *c, const uint64_t key[4]);

/* The lane a slice beginning / ending under cookie goes to. */
uint32_t tp_lanes_begin(struct tp_lanes *c, uint32_t set,
			   int64_t cookie);
uint32_t tp_lanes_end(struct tp_lanes *c, uint32_t set, int64_t cookie);
/* The first lane (made for cookie 0 if the set has none): the track
 * children of the set's tracks hang below. */
uint32_t tp_lanes_default(struct tp_lanes *c, uint32_t set);

/* The track of a lane: -1 until the caller makes it and stores it here. */
int64_t *tp_lanes_track(struct tp_lanes *c, uint32_t set,
			   uint32_t lane);

#endif
