/*
 * clock_model.c - robust piecewise-linear clock fits (see clock_model.h).
 *
 * Floating point is used only while fitting: long double sums over deltas
 * from the segment's first sample, centred on the weighted mean before any
 * product is taken, so no absolute 2^60-sized value ever enters a float and
 * the 64-bit mantissa of long double keeps the deltas exact.  The result is
 * converted to the fixed-point form of clock_model.h, and everything after
 * that - evaluation, inversion and the reported residuals - is __int128.
 */
#include "clock_model.h"
#include "clock_bend.h"
#include "median.h"
#include "vp_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef __int128 i128;

/* Slopes a clock may have against a counter, ns/cycle. */
#define SLOPE_MIN 0x1p-40L
#define SLOPE_MAX 0x1p40L

/* A line fitted to a segment, relative to the segment's first sample
 * (x0, y0): y - y0 = my + slope * ((x - x0) - mx). */
struct line {
	long double mx, my, slope;
};

/* ---- small helpers ----------------------------------------------------- */


static uint64_t clamp_u64(i128 v)
{
	if (v < 0)
		return 0;
	if (v > (i128)UINT64_MAX)
		return UINT64_MAX;
	return (uint64_t)v;
}

static int cmp_sample(const void *a, const void *b)
{
	const struct cm_sample *p = a, *q = b;
	if (p->x != q->x)
		return p->x < q->x ? -1 : 1;
	if (p->y != q->y)
		return p->y < q->y ? -1 : 1;
	return 0;
}

/* x and y of a sample relative to a reference sample, as long double.  The
 * x deltas are non-negative (samples are sorted) and below 2^64, which long
 * double holds exactly on x86-64 and arm64. */
static long double dx_of(const struct cm_sample *s, uint64_t x0)
{
	return (long double)(s->x - x0);
}

static long double dy_of(const struct cm_sample *s, uint64_t y0)
{
	return (long double)((i128)s->y - (i128)y0);
}

/* ---- the fixed-point segment -------------------------------------------- */

/* The largest shift <= 62 (but > CM_Q_BITS) with v * 2^shift < 2^61. */
static unsigned pick_shift(long double v)
{
	unsigned sh = 62;
	while (sh > CM_Q_BITS + 1 && ldexpl(v, (int)sh) >= 0x1p61L)
		sh--;
	return sh;
}

/* The line of segment g at counter x, not clamped. */
static i128 line_eval(const struct cm_segment *g, uint64_t x)
{
	i128 dx = (i128)x - (i128)g->x_ref;
	i128 p = dx * g->slope_q + g->yfrac_q + ((i128)1 << (g->shift - 1));
	return (i128)g->y_ref + (p >> g->shift);
}

static uint64_t seg_eval(const struct cm_segment *g, uint64_t x)
{
	i128 y = line_eval(g, x);

	if (g->nknot)
		y += cm_bend_at(g->knot, g->nknot, (i128)x << CM_Q_BITS);
	return clamp_u64(y);
}

/* The line's counter at clock y (any i128 within +-2^65), with frac_bits
 * fractional bits, rounded to nearest. */
static i128 line_invert(const struct cm_segment *g, i128 y, unsigned frac_bits)
{
	unsigned sh = g->ishift - frac_bits;
	i128 dy = y - (i128)g->y_ref;
	i128 p = dy * g->inv_q + g->xoff_q + ((i128)1 << (sh - 1));
	return ((i128)g->x_ref << frac_bits) + (p >> sh);
}

/* Counter at clock y with frac_bits (0 or CM_Q_BITS) fractional bits,
 * rounded to nearest: the line's, then twice the line's at y less the
 * correction where the previous answer lies (once when the second
 * correction is the first again: the same input, the same answer;
 * clock_map.c's invert_fast stops there too). */
static i128 seg_invert(const struct cm_segment *g, uint64_t y, unsigned frac_bits)
{
	i128 x = line_invert(g, y, frac_bits), prev = 0;

	for (int i = 0; g->nknot && i < 2; i++) {
		/* a product: x may be below 0, where a shift is undefined */
		i128 xq = x * ((i128)1 << (CM_Q_BITS - frac_bits));
		i128 b = cm_bend_at(g->knot, g->nknot, xq);
		if (i && b == prev)
			break;
		prev = b;
		x = line_invert(g, (i128)y - b, frac_bits);
	}
	return x;
}

/* The fitted clock at the segment's ends and the residuals of its used
 * samples, with the bends' correction when it has one. */
static void segment_stats(struct cm_segment *g, const struct cm_sample *s,
			  size_t n, const unsigned char *used)
{
	g->y_first = seg_eval(g, g->x_first);
	g->y_last = seg_eval(g, g->x_last);

	double sum2 = 0, rmax = 0;
	g->n_used = g->n_rejected = 0;
	for (size_t i = 0; i < n; i++) {
		if (!used[i]) {
			g->n_rejected++;
			continue;
		}
		double r = (double)((i128)s[i].y - (i128)seg_eval(g, s[i].x));
		sum2 += r * r;
		if (fabs(r) > rmax)
			rmax = fabs(r);
		g->n_used++;
	}
	g->resid_rms_ns = g->n_used ? sqrt(sum2 / (double)g->n_used) : 0;
	g->resid_max_ns = rmax;
}

/* Turns a fitted line over s[0..n) into the fixed-point segment g and
 * computes its residual statistics over the used samples. */
static void make_segment(struct cm_segment *g, const struct cm_sample *s,
			 size_t n, const unsigned char *used,
			 const struct line *ln)
{
	uint64_t x0 = s[0].x, y0 = s[0].y;
	long double mx = ln->mx < 0 ? 0 : ln->mx;
	uint64_t off = (uint64_t)roundl(mx);

	/* Reference point: a whole counter value near the weighted mean, where
	 * the fit is best determined; its clock value split into a whole part
	 * y_ref and a fraction that lives in the fixed-point sums. */
	g->x_ref = x0 + off;
	long double yr = ln->my + ln->slope * ((long double)off - ln->mx);
	long double fl = floorl(yr);
	long double frac = yr - fl;
	i128 yref = (i128)y0 + (i128)fl;
	if (yref < 0 || yref > (i128)UINT64_MAX) {
		/* only for clocks at the very ends of the 64-bit range */
		yref = yref < 0 ? 0 : (i128)UINT64_MAX;
		frac = 0;
	}
	g->y_ref = (uint64_t)yref;

	long double inv = 1.0L / ln->slope;
	g->shift = pick_shift(ln->slope);
	g->slope_q = (int64_t)llroundl(ldexpl(ln->slope, (int)g->shift));
	g->yfrac_q = (int64_t)llroundl(ldexpl(frac, (int)g->shift));
	g->ishift = pick_shift(inv);
	g->inv_q = (int64_t)llroundl(ldexpl(inv, (int)g->ishift));
	g->xoff_q = (int64_t)llroundl(-ldexpl(frac * inv, (int)g->ishift));
	g->slope = (double)ln->slope;

	g->x_first = s[0].x;
	g->x_last = s[n - 1].x;
	segment_stats(g, s, n, used);
}

/* ---- fitting ------------------------------------------------------------ */

/* Weight of each sample: 1/width^2, unknown widths (0) replaced by the
 * median known width, or all equal when no width is known. */
static void compute_weights(const struct cm_sample *s, size_t n, double *w)
{
	long double *known = vp_xcalloc(n, sizeof(*known));
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (s[i].width)
			known[k++] = (long double)s[i].width;
	double def = k ? (double)median_ld(known, k) : 1.0;
	for (size_t i = 0; i < n; i++) {
		double width = s[i].width ? (double)s[i].width : def;
		w[i] = 1.0 / (width * width);
	}
	free(known);
}

/* Robust global slope: the median of the slopes between neighbours with
 * different x.  Steps and outliers each spoil only one or two of them.
 * Returns -1 when all x are equal. */
static int robust_slope(const struct cm_sample *s, size_t n, long double *slope)
{
	long double *v = vp_xcalloc(n, sizeof(*v));
	size_t k = 0;

	for (size_t i = 1; i < n; i++) {
		if (s[i].x == s[i - 1].x)
			continue;
		v[k++] = dy_of(&s[i], s[i - 1].y) / dx_of(&s[i], s[i - 1].x);
	}
	if (k)
		*slope = median_ld(v, k);
	free(v);
	return k ? 0 : -1;
}

/* Weighted least squares over the used samples of s[0..n), relative to
 * s[0].  When the used x values do not spread, or the slope is unusable,
 * the line gets fallback_slope through the weighted mean.  Returns -1 when
 * no sample is used. */
static int wls(const struct cm_sample *s, size_t n, const double *w,
	       const unsigned char *used, long double fallback_slope,
	       struct line *ln)
{
	uint64_t x0 = s[0].x, y0 = s[0].y;
	long double sw = 0, sx = 0, sy = 0;

	for (size_t i = 0; i < n; i++) {
		if (!used[i])
			continue;
		sw += w[i];
		sx += w[i] * dx_of(&s[i], x0);
		sy += w[i] * dy_of(&s[i], y0);
	}
	if (!(sw > 0))
		return -1;
	ln->mx = sx / sw;
	ln->my = sy / sw;

	/* Second pass on centred deltas: no cancellation in the sums. */
	long double sxx = 0, sxy = 0;
	for (size_t i = 0; i < n; i++) {
		if (!used[i])
			continue;
		long double ddx = dx_of(&s[i], x0) - ln->mx;
		long double ddy = dy_of(&s[i], y0) - ln->my;
		sxx += w[i] * ddx * ddx;
		sxy += w[i] * ddx * ddy;
	}
	ln->slope = sxx > 0 ? sxy / sxx : fallback_slope;
	if (!(ln->slope >= SLOPE_MIN && ln->slope <= SLOPE_MAX))
		ln->slope = fallback_slope;
	return 0;
}

static long double resid(const struct line *ln, const struct cm_sample *s,
			 uint64_t x0, uint64_t y0)
{
	return (dy_of(s, y0) - ln->my) - ln->slope * (dx_of(s, x0) - ln->mx);
}

/* Fits one segment s[0..n): weighted least squares, then up to max_rounds
 * rounds of rejecting samples beyond median + k*MAD and refitting (a
 * rejected sample may come back when the refit agrees with it).  used[]
 * holds the initial choice and receives the final one; at least
 * min(2, n) samples stay used. */
static void fit_segment(const struct cm_sample *s, size_t n, const double *w,
			unsigned char *used, long double fallback_slope,
			const struct cm_fit_opts *o, struct line *ln)
{
	long double *r = vp_xcalloc(n, sizeof(*r));
	long double *tmp = vp_xcalloc(n, sizeof(*tmp));
	unsigned char *next = vp_xcalloc(n, 1);
	size_t need = n < 2 ? n : 2;
	size_t nused = 0;

	for (size_t i = 0; i < n; i++)
		nused += used[i] != 0;
	if (nused < need)
		memset(used, 1, n);
	wls(s, n, w, used, fallback_slope, ln);

	for (unsigned round = 0; round < o->max_rounds; round++) {
		for (size_t i = 0; i < n; i++)
			tmp[i] = r[i] = resid(ln, &s[i], s[0].x, s[0].y);
		long double med = median_ld(tmp, n);
		for (size_t i = 0; i < n; i++)
			tmp[i] = fabsl(r[i] - med);
		long double thr = (long double)o->outlier_k * MAD_TO_SIGMA *
				  median_ld(tmp, n);
		if (thr < (long double)o->min_outlier_ns)
			thr = (long double)o->min_outlier_ns;

		size_t keep = 0;
		for (size_t i = 0; i < n; i++) {
			next[i] = fabsl(r[i] - med) <= thr;
			keep += next[i];
		}
		if (keep < need || memcmp(next, used, n) == 0)
			break;
		memcpy(used, next, n);
		wls(s, n, w, used, fallback_slope, ln);
	}
	free(next);
	free(tmp);
	free(r);
}

/* Gives segment g the bends' correction when its samples s[0..n) curve
 * away from its line (clock_bend.c), and then its statistics again. */
static void fit_bends(struct cm_segment *g, const struct cm_sample *s,
		      size_t n, const double *w, unsigned char *used,
		      const struct cm_fit_opts *o)
{
	if (!(o->min_bend_ns > 0) || n < 2 * CM_BEND_MIN_SAMPLES)
		return;
	uint64_t *x = vp_xcalloc(n, sizeof(*x));
	int64_t *r = vp_xcalloc(n, sizeof(*r));
	for (size_t i = 0; i < n; i++) {
		i128 d = (i128)s[i].y - line_eval(g, s[i].x);
		if (d < INT64_MIN / 2 || d > INT64_MAX / 2)
			goto out; /* no clock bends so far */
		x[i] = s[i].x;
		r[i] = (int64_t)d;
	}
	struct cm_bend_input in = {x, r, w, used, n, o};
	g->nknot = cm_bend_fit(&in, &g->knot);
	if (g->nknot)
		segment_stats(g, s, n, used);
out:
	free(r);
	free(x);
}

/* ---- segmentation ------------------------------------------------------- */

/* Does the jump at sample i persist: are c[i..i+m) all within J of c[i]
 * and all more than J away from the old level? */
static int jump_persists(const long double *c, size_t n, size_t i, size_t m,
			 long double level, long double J)
{
	if (i + m > n)
		return 0;
	for (size_t j = i; j < i + m; j++)
		if (fabsl(c[j] - c[i]) > J || fabsl(c[j] - level) <= J)
			return 0;
	return 1;
}

/* Walks the intercepts c[] (y - slope*x against the robust slope) and
 * starts a segment where they jump by more than J for at least m samples.
 * A jump that does not persist marks the sample an outlier.  The level
 * follows every accepted sample, so slow drift never looks like a jump.
 * Writes the first index of each segment to starts[]; returns the count. */
static size_t find_steps(const long double *c, size_t n, size_t m,
			 long double J, size_t *starts, unsigned char *outlier)
{
	size_t nseg = 1;
	long double level = c[0];

	starts[0] = 0;
	for (size_t i = 1; i < n; i++) {
		if (fabsl(c[i] - level) <= J) {
			level = c[i];
			continue;
		}
		if (!jump_persists(c, n, i, m, level, J)) {
			outlier[i] = 1;
			continue;
		}
		/* A step.  Samples just before it that were taken for outliers
		 * but sit on the new level belong to the new segment. */
		size_t b = i;
		while (b - 1 > starts[nseg - 1] && outlier[b - 1] &&
		       fabsl(c[b - 1] - c[i]) <= J) {
			outlier[b - 1] = 0;
			b--;
		}
		starts[nseg++] = b;
		level = c[i];
	}
	return nseg;
}

/* Folds segments with fewer than m non-outlier samples into their
 * neighbour (the previous one; the next one for a leading segment), their
 * samples marked outliers: e.g. an outlying first sample.  Returns the new
 * segment count (at least 1). */
static size_t drop_short(size_t *starts, size_t nseg, size_t n, size_t m,
			 unsigned char *outlier)
{
	size_t k = 0;

	for (size_t i = 0; i < nseg; i++) {
		size_t a = starts[i], b = i + 1 < nseg ? starts[i + 1] : n;
		size_t good = 0;
		for (size_t j = a; j < b; j++)
			good += !outlier[j];
		if (good >= m) {
			starts[k] = k ? a : 0;
			k++;
			continue;
		}
		for (size_t j = a; j < b; j++)
			outlier[j] = 1;
	}
	if (k == 0)
		starts[k++] = 0;
	return k;
}

/* ---- public ------------------------------------------------------------- */

void cm_fit_opts_default(struct cm_fit_opts *o)
{
	o->outlier_k = 3.0;
	o->min_jump_ns = 1000000;
	o->min_segment_samples = 2;
	o->max_rounds = 4;
	/* Two clock reads a sample pairs lie tens of ns apart, and which
	 * core took it or the kernel's slow frequency correction moves its
	 * residual by a few ns: a MAD of a ns or two then rejected good
	 * samples round after round.  A read that was preempted, the
	 * outlier this is for, is off by microseconds. */
	o->min_outlier_ns = 50.0;
	/* Well above read noise, well below the microsecond a trace
	 * reader cares about. */
	o->min_bend_ns = 200.0;
}

int cm_fit_build(struct cm_fit *out, const struct cm_sample *in, size_t n,
		 const struct cm_fit_opts *opts)
{
	struct cm_fit_opts o;
	long double gslope;

	memset(out, 0, sizeof(*out));
	if (!in || n < 2)
		return -1;
	if (opts)
		o = *opts;
	else
		cm_fit_opts_default(&o);

	struct cm_sample *s = vp_xcalloc(n, sizeof(*s));
	memcpy(s, in, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_sample);
	if (robust_slope(s, n, &gslope) < 0 ||
	    !(gslope >= SLOPE_MIN && gslope <= SLOPE_MAX)) {
		free(s);
		return -1;
	}

	double *w = vp_xcalloc(n, sizeof(*w));
	long double *c = vp_xcalloc(n, sizeof(*c));
	unsigned char *outlier = vp_xcalloc(n, 1);
	size_t *starts = vp_xcalloc(n, sizeof(*starts));
	size_t m = o.min_segment_samples ? o.min_segment_samples : 1;

	compute_weights(s, n, w);
	for (size_t i = 0; i < n; i++)
		c[i] = dy_of(&s[i], s[0].y) - gslope * dx_of(&s[i], s[0].x);
	size_t nseg = find_steps(c, n, m, (long double)o.min_jump_ns, starts,
				 outlier);
	nseg = drop_short(starts, nseg, n, m, outlier);

	out->seg = vp_xcalloc(nseg, sizeof(*out->seg));
	out->nseg = nseg;
	out->slope_global = (double)gslope;
	for (size_t k = 0; k < nseg; k++) {
		size_t a = starts[k], b = k + 1 < nseg ? starts[k + 1] : n;
		unsigned char *used = outlier + a;
		struct line ln;

		/* outlier[] becomes used[] in place */
		for (size_t i = 0; i < b - a; i++)
			used[i] = !used[i];
		fit_segment(s + a, b - a, w + a, used, gslope, &o, &ln);
		make_segment(&out->seg[k], s + a, b - a, used, &ln);
		fit_bends(&out->seg[k], s + a, b - a, w + a, used, &o);
		out->n_used += out->seg[k].n_used;
		out->n_rejected += out->seg[k].n_rejected;
		if (out->seg[k].resid_max_ns > out->resid_max_ns)
			out->resid_max_ns = out->seg[k].resid_max_ns;
	}
	free(starts);
	free(outlier);
	free(c);
	free(w);
	free(s);
	return 0;
}

void cm_fit_free(struct cm_fit *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nseg; i++)
		free(f->seg[i].knot);
	free(f->seg);
	memset(f, 0, sizeof(*f));
}

/* Is x in the range segment i is used for? */
static int seg_has_x(const struct cm_fit *f, size_t i, uint64_t x)
{
	return (i == 0 || f->seg[i].x_first <= x) &&
	       (i + 1 == f->nseg || x < f->seg[i + 1].x_first);
}

/* Index of the segment used for x: the last one with x_first <= x, or the
 * first.  Tries the hint and its successor before a binary search. */
static size_t seg_for_x(const struct cm_fit *f, uint64_t x, size_t *hint)
{
	size_t h = hint && *hint < f->nseg ? *hint : 0;

	if (seg_has_x(f, h, x))
		return h;
	if (h + 1 < f->nseg && seg_has_x(f, h + 1, x)) {
		h++;
	} else {
		size_t lo = 0, hi = f->nseg; /* seg[lo].x_first <= x or lo==0 */
		while (hi - lo > 1) {
			size_t mid = lo + (hi - lo) / 2;
			if (f->seg[mid].x_first <= x)
				lo = mid;
			else
				hi = mid;
		}
		h = lo;
	}
	if (hint)
		*hint = h;
	return h;
}

/* Index of the segment used to invert y: the first whose fitted y range
 * holds y (the hinted one and its successor first), else the nearest. */
static size_t seg_for_y(const struct cm_fit *f, uint64_t y, size_t *hint)
{
	size_t h = hint && *hint < f->nseg ? *hint : 0;
	const struct cm_segment *g = f->seg;

	if (g[h].y_first <= y && y <= g[h].y_last)
		return h;
	if (h + 1 < f->nseg && g[h + 1].y_first <= y && y <= g[h + 1].y_last) {
		h++;
	} else {
		uint64_t best = UINT64_MAX;
		h = 0;
		for (size_t i = 0; i < f->nseg; i++) {
			uint64_t d;
			if (y < g[i].y_first)
				d = g[i].y_first - y;
			else if (y > g[i].y_last)
				d = y - g[i].y_last;
			else
				d = 0;
			if (d < best) {
				best = d;
				h = i;
			}
			if (d == 0)
				break;
		}
	}
	if (hint)
		*hint = h;
	return h;
}

const struct cm_segment *cm_fit_segment_at(const struct cm_fit *f, uint64_t x,
					   size_t *hint)
{
	if (!f || !f->nseg)
		return NULL;
	return &f->seg[seg_for_x(f, x, hint)];
}

uint64_t cm_fit_eval(const struct cm_fit *f, uint64_t x, size_t *hint)
{
	if (!f || !f->nseg)
		return x;
	return seg_eval(&f->seg[seg_for_x(f, x, hint)], x);
}

uint64_t cm_fit_eval_q16_ovf(const struct cm_fit *f, cm_q16 xq, size_t *hint,
			     bool *ovf)
{
	const i128 qmax = (i128)UINT64_MAX << CM_Q_BITS;

	if (xq < 0) {
		xq = 0;
		*ovf = true;
	}
	if (xq > qmax) {
		xq = qmax;
		*ovf = true;
	}
	if (!f || !f->nseg)
		return (uint64_t)(xq >> CM_Q_BITS);
	uint64_t x = (uint64_t)(xq >> CM_Q_BITS);
	return cm_fit_eval_q16_seg(f, seg_for_x(f, x, hint), xq, ovf);
}

uint64_t cm_fit_eval_q16_seg(const struct cm_fit *f, size_t seg, cm_q16 xq,
			     bool *ovf)
{
	const i128 qmax = (i128)UINT64_MAX << CM_Q_BITS;

	if (xq < 0) {
		xq = 0;
		*ovf = true;
	}
	if (xq > qmax) {
		xq = qmax;
		*ovf = true;
	}
	if (!f || !f->nseg)
		return (uint64_t)(xq >> CM_Q_BITS);
	const struct cm_segment *g = &f->seg[seg < f->nseg ? seg : f->nseg - 1];
	i128 dq = xq - ((i128)g->x_ref << CM_Q_BITS);
	i128 di = dq >> CM_Q_BITS;
	i128 df = dq & (((i128)1 << CM_Q_BITS) - 1);
	i128 p = di * g->slope_q + ((df * g->slope_q) >> CM_Q_BITS) +
		 g->yfrac_q + ((i128)1 << (g->shift - 1));
	i128 y = (i128)g->y_ref + (p >> g->shift);
	if (g->nknot)
		y += cm_bend_at(g->knot, g->nknot, xq);
	if (y < 0 || y > (i128)UINT64_MAX)
		*ovf = true;
	return clamp_u64(y);
}

uint64_t cm_fit_eval_q16(const struct cm_fit *f, cm_q16 xq, size_t *hint)
{
	bool ovf = false;
	return cm_fit_eval_q16_ovf(f, xq, hint, &ovf);
}

uint64_t cm_fit_invert(const struct cm_fit *f, uint64_t y, size_t *hint)
{
	if (!f || !f->nseg)
		return y;
	return clamp_u64(seg_invert(&f->seg[seg_for_y(f, y, hint)], y, 0));
}

cm_q16 cm_fit_invert_q16_ovf(const struct cm_fit *f, uint64_t y, size_t *hint,
			     bool *ovf)
{
	const i128 qmax = (i128)UINT64_MAX << CM_Q_BITS;

	if (!f || !f->nseg)
		return (i128)y << CM_Q_BITS;
	i128 xq = seg_invert(&f->seg[seg_for_y(f, y, hint)], y, CM_Q_BITS);
	if (xq < 0 || xq > qmax) {
		*ovf = true;
		return xq < 0 ? 0 : qmax;
	}
	return xq;
}

cm_q16 cm_fit_invert_q16_seg(const struct cm_fit *f, size_t seg, uint64_t y)
{
	if (!f || !f->nseg)
		return (i128)y << CM_Q_BITS;
	return seg_invert(&f->seg[seg < f->nseg ? seg : f->nseg - 1], y,
			  CM_Q_BITS);
}

cm_q16 cm_fit_invert_q16(const struct cm_fit *f, uint64_t y, size_t *hint)
{
	bool ovf = false;
	return cm_fit_invert_q16_ovf(f, y, hint, &ovf);
}

double cm_fit_error_ns(const struct cm_fit *f, uint64_t x)
{
	const struct cm_segment *g = cm_fit_segment_at(f, x, NULL);
	double dist = 0;

	if (!g)
		return 0;
	if (x < g->x_first)
		dist = (double)(g->x_first - x) * g->slope;
	else if (x > g->x_last)
		dist = (double)(x - g->x_last) * g->slope;
	return g->resid_max_ns + dist * CM_EXTRAP_RATE;
}
