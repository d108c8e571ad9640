/*
 * median.h - medians for the robust statistics of the clock fits
 * (clock_model.c, clock_bend.c): a median and a median absolute
 * deviation are what an outlier cannot move.
 */
#ifndef VP_MEDIAN_H
#define VP_MEDIAN_H

#include <stddef.h>

/* The median absolute deviation of a normal distribution times this is
 * its standard deviation. */
#define MAD_TO_SIGMA 1.4826L

/* Median of v[0..n), n > 0: the middle value, or the mean of the two in
 * the middle.  Reorders v.  O(n) on most inputs, O(n log n) at worst. */
long double median_ld(long double *v, size_t n);

#endif /* VP_MEDIAN_H */
