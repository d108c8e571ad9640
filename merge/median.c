/*
 * median.c - the median of an array of long doubles in O(n), for the
 * robust statistics of the clock fits (median.h).
 */
#include "median.h"

#include <stddef.h>
#include <stdlib.h>

static int cmp_ld(const void *a, const void *b)
{
	long double p = *(const long double *)a, q = *(const long double *)b;
	return p < q ? -1 : p > q ? 1 : 0;
}

static void swap_ld(long double *a, long double *b)
{
	long double t = *a;
	*a = *b;
	*b = t;
}

/* The k-th smallest of v[0..n) (k < n), with every element before it no
 * larger and every one after it no smaller.  Reorders v.  Quickselect,
 * three ways (ties, which residuals in whole ns have many, end a round):
 * O(n) on most inputs; after about 2 log2(n) rounds without an end
 * (inputs made to defeat the pivot) what is left is sorted: O(n log n)
 * at worst. */
static long double select_ld(long double *v, size_t n, size_t k)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)k;
	unsigned rounds = 8;

	for (size_t m = n; m > 1; m >>= 1)
		rounds += 2;
	while (hi > lo) {
		if (rounds-- == 0) {
			qsort(v + lo, (size_t)(hi - lo + 1), sizeof(*v), cmp_ld);
			break;
		}
		/* the median of the first, middle and last as the pivot */
		long double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
		long double p = a < b ? (b < c ? b : a < c ? c : a)
				      : (a < c ? a : b < c ? c : b);
		/* v[lo..lt) < p, v[lt..i) == p, v(gt..hi] > p */
		ptrdiff_t lt = lo, i = lo, gt = hi;
		while (i <= gt) {
			if (v[i] < p)
				swap_ld(&v[lt++], &v[i++]);
			else if (p < v[i])
				swap_ld(&v[i], &v[gt--]);
			else
				i++;
		}
		if (want < lt)
			hi = lt - 1;
		else if (want > gt)
			lo = gt + 1;
		else
			return v[want]; /* among those equal to the pivot */
	}
	return v[want];
}

/* Median of v[0..n), n > 0: the middle value, or the mean of the two in
 * the middle.  Reorders v. */
long double median_ld(long double *v, size_t n)
{
	long double upper = select_ld(v, n, n / 2);

	if (n % 2)
		return upper;
	/* the largest of the n/2 before it is the other middle value */
	long double lower = v[0];
	for (size_t i = 1; i < n / 2; i++)
		if (v[i] > lower)
			lower = v[i];
	return (lower + upper) / 2;
}
