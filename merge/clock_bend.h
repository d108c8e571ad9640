/*
 * clock_bend.h - the bends of a clock inside one segment of its fit: a
 * continuous piecewise-linear correction to the segment's line, for a
 * clock whose rate against the counter changed while no step happened
 * (NTP retuning BOOTTIME's frequency; a long trace bends by microseconds).
 *
 * Internal to clock_model.c: the fit calls cm_bend_fit once per segment,
 * and evaluation adds cm_bend_at to the line.
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

#endif /* VP_CLOCK_BEND_H */
