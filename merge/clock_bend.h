/*
 * clock_bend.h - the bends of a clock inside one segment of its fit: a
 * continuous piecewise-linear correction to the segment's line, for a
 * clock whose rate against the counter changed while no step happened
 * (NTP retuning BOOTTIME's frequency; a long trace bends by microseconds).
 *
 * Internal to the clock model: the fit (clock_model.c) calls cm_bend_fit
 * once per segment, evaluation adds cm_bend_at to the line, and
 * clock_map.c's short cut remembers the piece it used last.
 */
#ifndef VP_CLOCK_BEND_H
#define VP_CLOCK_BEND_H

#include <stddef.h>
#include <stdint.h>

#include "clock_model.h"

__extension__ typedef __int128 cm_i128;

/* What cm_bend_fit reads and may change. */
struct cm_bend_input {
	const uint64_t *x;     /* counters, sorted, of n samples */
	const int64_t *r;      /* residuals against the line, ns */
	const double *w;       /* weights */
	unsigned char *used;   /* in: the line fit's choice; out: the
				* corrected model's (only when it bends) */
	size_t n;
	const struct cm_fit_opts *o;
};

/* Knots of the correction, at least 2, into *knots (malloc'd; the caller
 * frees it), or 0 when the residuals show no bend of more than
 * o->min_bend_ns (or it is 0) that persists for CM_BEND_MIN_SAMPLES
 * samples: then nothing, used[] included, was changed. */
#define CM_BEND_MIN_SAMPLES 8
size_t cm_bend_fit(const struct cm_bend_input *in, struct cm_knot **knots);

/* The correction, ns, at counter xq (CM_Q_BITS fractional bits): linear
 * between knots, and the end pieces' lines beyond them. */
cm_i128 cm_bend_at(const struct cm_knot *k, size_t n, cm_i128 xq);

/* The piece cm_bend_at uses at xq: the last knot at or before it, but at
 * most the last but one (and the first for an xq before it). */
size_t cm_bend_piece_for(const struct cm_knot *k, size_t n, cm_i128 xq);

/* The same on the piece that starts at knot k (the last but one holds the
 * piece beyond the last knot too): what cm_bend_at gives once it has
 * found the knot, and clock_map's short cut with the knot it remembers. */
static inline cm_i128 cm_bend_piece(const struct cm_knot *k, cm_i128 xq)
{
	const cm_i128 lim = (cm_i128)1 << 62, far = (cm_i128)1 << 82;
	cm_i128 dx = xq - ((cm_i128)k->x << CM_Q_BITS), p;

	if (dx >= INT64_MIN && dx <= INT64_MAX) {
		p = (cm_i128)(int64_t)dx * k->rate_q; /* one 64 x 64 multiply */
	} else {
		/* beyond any counter: the product stays within 128 bits */
		dx = dx > far ? far : dx < -far ? -far : dx;
		p = dx * k->rate_q;
	}
	cm_i128 v = (cm_i128)k->c + ((p + ((cm_i128)1 << (k->rshift - 1))) >>
				     k->rshift);
	return v > lim ? lim : v < -lim ? -lim : v;
}

#endif /* VP_CLOCK_BEND_H */
