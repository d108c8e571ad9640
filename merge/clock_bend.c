/*
 * clock_bend.c - finds where a segment's clock bends away from its line
 * and fits a continuous piecewise-linear correction through knots there
 * (clock_bend.h).
 *
 * Why a bend is not an outlier nor a step: the kernel retunes BOOTTIME's
 * rate (NTP, chrony) while the counter runs on; over a long trace the
 * clock then curves away from any one line by microseconds, smoothly.
 * A single line per segment would either reject the samples at the ends
 * as outliers or keep them and be wrong in the middle.
 *
 * How: the residuals against the line are smoothed by a running median
 * of CM_BEND_MIN_SAMPLES + 1 samples, which an outlier cannot move but a
 * bend does.  While the smoothed residual of some interval between knots
 * exceeds the threshold (min_bend_ns, or four times the read noise
 * measured from neighbouring samples when that is larger), a knot goes
 * where it is largest, at least CM_BEND_MIN_SAMPLES samples from the
 * interval's ends; the knots' values are the weighted least-squares
 * linear spline through the samples (a tridiagonal system).  Outliers
 * are spikes: samples that stand out from the running median of their
 * neighbours by more than outlier_k times the read noise.  They are set
 * aside before the knots are placed and chosen again against the
 * corrected model; a stretch of samples the model follows badly (past
 * MAX_KNOTS) stays in, so that the error bound shows it.
 */
#include "clock_bend.h"
#include "median.h"
#include "vp_alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef cm_i128 i128;

/* At most this many knots per segment: one per ~minute over hours. */
#define MAX_KNOTS 256
/* Knot-adding rounds; each round adds a knot to every interval that
 * needs one, so the count can double per round. */
#define MAX_ROUNDS 12
/* A correction beyond this (about 18 minutes) is no bend of a clock. */
#define MAX_CORRECTION_NS ((int64_t)1 << 40)

/* Median of a running window (at most CM_BEND_MIN_SAMPLES + 1 values):
 * insertion sort, which beats any call for so few. */
static long double window_median(long double *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		long double t = v[i];
		size_t j = i;
		for (; j > 0 && v[j - 1] > t; j--)
			v[j] = v[j - 1];
		v[j] = t;
	}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A linear spline: knot counters t[0..k) (strictly increasing) and the
 * values c[] there. */
struct spline {
	uint64_t t[MAX_KNOTS];
	long double c[MAX_KNOTS];
	size_t k;
};

/* The interval of x (0 .. k-2), the end ones beyond the knots; from a
 * hint, as samples come in order. */
static size_t interval_of(const struct spline *sp, uint64_t x, size_t j)
{
	while (j + 2 < sp->k && x >= sp->t[j + 1])
		j++;
	while (j > 0 && x < sp->t[j])
		j--;
	return j;
}

/* Position of x in interval j: 0 at t[j], 1 at t[j+1]. */
static long double frac_in(const struct spline *sp, size_t j, uint64_t x)
{
	long double d = x >= sp->t[j] ? (long double)(x - sp->t[j])
				      : -(long double)(sp->t[j] - x);
	return d / (long double)(sp->t[j + 1] - sp->t[j]);
}

static long double spline_at(const struct spline *sp, uint64_t x, size_t *j)
{
	*j = interval_of(sp, x, *j);
	long double u = frac_in(sp, *j, x);
	return sp->c[*j] * (1 - u) + sp->c[*j + 1] * u;
}

/* Weighted least squares for the knot values over the used samples (every
 * step-th of them: a coarse search needs no more).  Returns -1 when the
 * system is singular (an interval without samples). */
static int spline_solve(struct spline *sp, const struct cm_bend_input *in,
			size_t step)
{
	size_t k = sp->k, j = 0;
	long double *d = vp_xcalloc(k, sizeof(*d));  /* diagonal */
	long double *e = vp_xcalloc(k, sizeof(*e));  /* above it */
	long double *b = vp_xcalloc(k, sizeof(*b));
	int rc = 0;

	for (size_t i = 0; i < in->n; i += step) {
		if (!in->used[i])
			continue;
		j = interval_of(sp, in->x[i], j);
		long double u = frac_in(sp, j, in->x[i]), v = 1 - u;
		long double w = in->w[i], r = (long double)in->r[i];
		d[j] += w * v * v;
		e[j] += w * u * v;
		d[j + 1] += w * u * u;
		b[j] += w * v * r;
		b[j + 1] += w * u * r;
	}
	/* Thomas' algorithm: symmetric, so the sub-diagonal is e[] too. */
	for (size_t i = 1; i < k && rc == 0; i++) {
		if (!(d[i - 1] > 0)) {
			rc = -1;
			break;
		}
		long double f = e[i - 1] / d[i - 1];
		d[i] -= f * e[i - 1];
		b[i] -= f * b[i - 1];
	}
	if (rc == 0 && !(d[k - 1] > 0))
		rc = -1;
	for (size_t i = k; rc == 0 && i-- > 0;) {
		long double num = b[i] - (i + 1 < k ? e[i] * sp->c[i + 1] : 0);
		sp->c[i] = num / d[i];
		if (!isfinite(sp->c[i]) ||
		    fabsl(sp->c[i]) > (long double)MAX_CORRECTION_NS)
			rc = -1;
	}
	free(b);
	free(e);
	free(d);
	return rc;
}

/* Read noise of the used samples, as a standard deviation: from the
 * second differences of neighbours (r[j-1] - 2 r[j] + r[j+1]: sqrt(6)
 * times the noise), in which any line cancels and a bend moves one. */
static long double read_noise(const struct cm_bend_input *in,
			      const size_t *u, size_t m)
{
	long double *dd = vp_xcalloc(m, sizeof(*dd));

	for (size_t j = 1; j + 1 < m; j++)
		dd[j - 1] = (long double)in->r[u[j - 1]] -
			    2 * (long double)in->r[u[j]] +
			    (long double)in->r[u[j + 1]];
	long double med = median_ld(dd, m - 2);
	for (size_t j = 0; j + 2 < m; j++)
		dd[j] = fabsl(dd[j] - med);
	long double sigma = MAD_TO_SIGMA * median_ld(dd, m - 2) / sqrtl(6);
	free(dd);
	return sigma;
}

/* Running median of e[0..m) over CM_BEND_MIN_SAMPLES + 1 neighbours,
 * each window sorted afresh (window_median). */
static void smooth_sorting(const long double *e, size_t m, long double *s)
{
	const size_t h = CM_BEND_MIN_SAMPLES / 2;
	long double win[CM_BEND_MIN_SAMPLES + 1];

	for (size_t j = 0; j < m; j++) {
		size_t a = j >= h ? j - h : 0, b = j + h < m ? j + h : m - 1;
		memcpy(win, e + a, (b - a + 1) * sizeof(*win));
		s[j] = window_median(win, b - a + 1);
	}
}

/* The same, the window kept sorted as it slides: a value in, a value out
 * per sample, where sorting each window afresh cost most of a fit.  The
 * medians are the same values (a window's sorted values do not depend on
 * how they came in); with a NaN, which orders with nothing, the windows
 * are sorted afresh. */
static void smooth(const long double *e, size_t m, long double *s)
{
	const size_t h = CM_BEND_MIN_SAMPLES / 2;
	long double win[CM_BEND_MIN_SAMPLES + 1];
	size_t n = 0, in = 0, out = 0; /* win: e[out..in), sorted */

	for (size_t j = 0; j < m; j++)
		if (isnan(e[j])) {
			smooth_sorting(e, m, s);
			return;
		}
	for (size_t j = 0; j < m; j++) {
		size_t a = j >= h ? j - h : 0, b = j + h < m ? j + h : m - 1;
		for (; out < a; out++) {
			size_t i = 0;
			while (win[i] != e[out])
				i++;
			memmove(win + i, win + i + 1, (n - i - 1) * sizeof(*win));
			n--;
		}
		for (; in <= b; in++) {
			size_t i = n;
			while (i > 0 && win[i - 1] > e[in]) {
				win[i] = win[i - 1];
				i--;
			}
			win[i] = e[in];
			n++;
		}
		s[j] = n % 2 ? win[n / 2] : (win[n / 2 - 1] + win[n / 2]) / 2;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t p = *(const uint64_t *)a, q = *(const uint64_t *)b;
	return p < q ? -1 : p > q;
}

/* The first of the used samples u[0..m) at or after counter x. */
static size_t first_at(const struct cm_bend_input *in, const size_t *u,
		       size_t m, uint64_t x)
{
	size_t lo = 0, hi = m;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (in->x[u[mid]] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Weighted squared error of the continuous two-piece line through knots
 * at the samples u[a], u[b] and at t, fitted to the samples between
 * alone (every step-th of them). */
static long double local_error(const struct cm_bend_input *in,
			       const size_t *u, size_t a, size_t b,
			       uint64_t t, size_t step, struct spline *tmp)
{
	struct cm_bend_input sub = *in;
	size_t i0 = u[a], i1 = u[b];

	sub.x += i0;
	sub.r += i0;
	sub.w += i0;
	sub.used += i0;
	sub.n = i1 - i0 + 1;
	tmp->k = 3;
	tmp->t[0] = in->x[i0];
	tmp->t[1] = t;
	tmp->t[2] = in->x[i1];
	if (spline_solve(tmp, &sub, step) < 0)
		return INFINITY;
	long double sum = 0;
	size_t j = 0;
	for (size_t i = 0; i < sub.n; i += step) {
		if (!sub.used[i])
			continue;
		long double e = (long double)sub.r[i] - spline_at(tmp, sub.x[i], &j);
		sum += sub.w[i] * e * e;
	}
	return sum;
}

/* Where in the interval of used samples u[a..b] one knot fits it best:
 * at a sample, or half-way to the next one (a clock's rate changes
 * between two samples), at least CM_BEND_MIN_SAMPLES samples from both
 * ends.  Searched coarse to fine: 33 places over the interval (fitted to
 * ~4096 of its samples), then 33 around the best, fitted to the samples
 * near them (at least 512 on each side), and so on down to every one:
 * the cost does not grow with the interval. */
static uint64_t best_knot(const struct cm_bend_input *in, const size_t *u,
			  size_t a, size_t b, struct spline *tmp)
{
	const size_t M = CM_BEND_MIN_SAMPLES, NEAR = 512;
	size_t lo = a + M, hi = b - M, at = lo, fa = a, fb = b;
	uint64_t where = in->x[u[lo]];

	for (;;) {
		/* errors over other samples than the level before's */
		long double least = INFINITY;
		size_t stride = (hi - lo) / 32 ? (hi - lo) / 32 : 1;
		size_t step = (fb - fa) / 4096 ? (fb - fa) / 4096 : 1;
		for (size_t j = lo; j <= hi; j += stride) {
			uint64_t x0 = in->x[u[j]];
			for (int h = 0; h < (stride == 1 && j < b - M ? 2 : 1); h++) {
				uint64_t t = h ? x0 + (in->x[u[j + 1]] - x0) / 2 : x0;
				long double err = local_error(in, u, fa, fb, t,
							      step, tmp);
				if (err < least) {
					least = err;
					where = t;
					at = j;
				}
			}
		}
		if (stride == 1)
			return where;
		lo = at >= a + M + stride ? at - stride : a + M;
		hi = at + stride <= b - M ? at + stride : b - M;
		size_t reach = 3 * stride > NEAR ? 3 * stride : NEAR;
		fa = lo >= a + reach ? lo - reach : a;
		fb = hi + reach <= b ? hi + reach : b;
	}
}

/* One round: a knot in every interval of sp whose smoothed residual s[]
 * (over the used samples u[0..m)) goes beyond thr, where it fits the
 * interval best.  Returns how many were added. */
static size_t add_knots(const struct cm_bend_input *in, const size_t *u,
			size_t m, struct spline *sp, const long double *s,
			long double thr)
{
	const size_t M = CM_BEND_MIN_SAMPLES;
	size_t n0 = sp->k, added = 0;
	struct spline tmp;

	for (size_t i = 0; i + 1 < n0 && sp->k < MAX_KNOTS; i++) {
		size_t a = first_at(in, u, m, sp->t[i]);
		size_t b = first_at(in, u, m, sp->t[i + 1]);
		if (b >= m)
			b = m - 1;
		if (b < a || b - a < 2 * M)
			continue;
		size_t best = a;
		for (size_t j = a; j <= b; j++)
			if (fabsl(s[j]) > fabsl(s[best]))
				best = j;
		if (!(fabsl(s[best]) > thr))
			continue;
		sp->t[sp->k++] = best_knot(in, u, a, b, &tmp);
		added++;
	}
	if (added) {
		/* the values follow the knots by the next solve */
		qsort(sp->t, sp->k, sizeof(*sp->t), cmp_u64);
	}
	return added;
}

/* Chooses the outliers again against the corrected model, all samples
 * alike: those that stand out from the running median of their
 * neighbours' residuals by more than lim, as drop_spikes did before the
 * knots.  A stretch the knots follow badly is model error, which the
 * error bound must see, not outliers; and the samples the line's fit
 * rejected only because the clock bent come back.  Keeps the old choice
 * when an interval would be left with fewer than 2 samples.  Returns 1
 * when used[] changed. */
static int rechoose(const struct cm_bend_input *in, const struct spline *sp,
		    long double lim, long double *e, long double *s,
		    unsigned char *next)
{
	size_t j = 0;

	for (size_t i = 0; i < in->n; i++)
		e[i] = (long double)in->r[i] - spline_at(sp, in->x[i], &j);
	smooth(e, in->n, s);
	size_t *count = vp_xcalloc(sp->k, sizeof(*count));
	j = 0;
	for (size_t i = 0; i < in->n; i++) {
		next[i] = fabsl(e[i] - s[i]) <= lim;
		j = interval_of(sp, in->x[i], j);
		count[j] += next[i];
	}
	int ok = 1;
	for (size_t i = 0; i + 1 < sp->k; i++)
		ok &= count[i] >= 2;
	free(count);
	if (!ok || memcmp(next, in->used, in->n) == 0)
		return 0;
	memcpy(in->used, next, in->n);
	return 1;
}

/* floor((num + den/2) / den) for den > 0: num / den to the nearest. */
static i128 div_nearest(i128 num, i128 den)
{
	i128 n = num + den / 2;
	i128 q = n / den;
	if (n % den != 0 && n < 0)
		q--;
	return q;
}

/* Each knot's rate: the difference of its correction and the next one's
 * over their distance, in as many bits as keep |rate_q| below 2^44 (so
 * any counter's product stays within 128 bits) up to CM_KNOT_MAX_RSHIFT
 * (so the difference shifted fits too: |dc| < 2^42).  The relative error
 * is below 2^-43, a small fraction of a ns over a piece. */
static void set_rates(struct cm_knot *k, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		i128 dc = (i128)k[i + 1].c - k[i].c;
		i128 span = (i128)(k[i + 1].x - k[i].x) << CM_Q_BITS;
		i128 mag = dc < 0 ? -dc : dc;
		unsigned sh = CM_KNOT_MAX_RSHIFT;
		while (sh > 1 && mag * ((i128)1 << sh) / span >= ((i128)1 << 44))
			sh--;
		k[i].rshift = sh;
		k[i].rate_q = (int64_t)div_nearest(dc * ((i128)1 << sh), span);
	}
	k[n - 1].rshift = k[n - 2].rshift;
	k[n - 1].rate_q = k[n - 2].rate_q;
}

/* Unmarks used samples u[0..m) that stand out from the running median
 * of their neighbours by more than lim (outlier_k times the read noise, at least
 * min_outlier_ns): a preempted read, which would pull the knots as much
 * as a bend does.  The running median follows a bend, so no bend is
 * taken for outliers.  Returns the used samples left, u[] updated. */
static size_t drop_spikes(const struct cm_bend_input *in, size_t *u,
			  size_t m, long double lim, long double *e,
			  long double *s)
{
	size_t k = 0;

	for (size_t q = 0; q < m; q++)
		e[q] = (long double)in->r[u[q]];
	smooth(e, m, s);
	for (size_t q = 0; q < m; q++) {
		if (fabsl(e[q] - s[q]) > lim)
			in->used[u[q]] = 0;
		else
			u[k++] = u[q];
	}
	return k;
}

size_t cm_bend_fit(const struct cm_bend_input *in, struct cm_knot **knots)
{
	const size_t M = CM_BEND_MIN_SAMPLES;
	size_t m = 0, out = 0;

	*knots = NULL;
	if (!(in->o->min_bend_ns > 0) || in->n < 2 * M)
		return 0;
	size_t *u = vp_xcalloc(in->n, sizeof(*u));
	for (size_t i = 0; i < in->n; i++)
		if (in->used[i] && (m == 0 || in->x[i] > in->x[u[m - 1]]))
			u[m++] = i;
	struct spline *sp = vp_xcalloc(1, sizeof(*sp));
	long double *e = vp_xcalloc(in->n, sizeof(*e));
	long double *s = vp_xcalloc(in->n, sizeof(*s));
	unsigned char *keep = vp_xcalloc(in->n, 1);
	memcpy(keep, in->used, in->n);
	if (m < 2 * M)
		goto done;

	long double noise = read_noise(in, u, m);
	long double thr = 4 * noise;
	if (thr < (long double)in->o->min_bend_ns)
		thr = (long double)in->o->min_bend_ns;
	long double lim = (long double)in->o->outlier_k * noise;
	if (lim < (long double)in->o->min_outlier_ns)
		lim = (long double)in->o->min_outlier_ns;
	m = drop_spikes(in, u, m, lim, e, s);
	if (m < 2 * M)
		goto done;
	sp->k = 2;
	sp->t[0] = in->x[u[0]];
	sp->t[1] = in->x[u[m - 1]];
	for (unsigned round = 0;; round++) {
		if (spline_solve(sp, in, 1) < 0)
			goto done;
		if (round == MAX_ROUNDS)
			break;
		size_t j = 0;
		for (size_t q = 0; q < m; q++)
			e[q] = (long double)in->r[u[q]] -
			       spline_at(sp, in->x[u[q]], &j);
		smooth(e, m, s);
		if (add_knots(in, u, m, sp, s, thr) == 0)
			break;
	}
	if (sp->k == 2)
		goto done; /* no bend */

	unsigned char *next = vp_xcalloc(in->n, 1);
	for (unsigned round = 0; round < in->o->max_rounds; round++) {
		if (!rechoose(in, sp, lim, e, s, next))
			break;
		if (spline_solve(sp, in, 1) < 0) {
			free(next);
			goto done;
		}
	}
	free(next);
	*knots = vp_xcalloc(sp->k, sizeof(**knots));
	for (size_t i = 0; i < sp->k; i++)
		(*knots)[i] = (struct cm_knot){.x = sp->t[i],
					       .c = (int64_t)llroundl(sp->c[i])};
	set_rates(*knots, sp->k);
	out = sp->k;
done:
	if (!out)
		memcpy(in->used, keep, in->n); /* as it came */
	free(keep);
	free(s);
	free(e);
	free(sp);
	free(u);
	return out;
}

size_t cm_bend_piece_for(const struct cm_knot *k, size_t n, cm_i128 xq)
{
	size_t lo = 0, hi = n - 1;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (((i128)k[mid].x << CM_Q_BITS) <= xq)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

cm_i128 cm_bend_at(const struct cm_knot *k, size_t n, cm_i128 xq)
{
	return cm_bend_piece(&k[cm_bend_piece_for(k, n, xq)], xq);
}
