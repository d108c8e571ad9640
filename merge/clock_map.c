/*
 * clock_map.c - guest clock -> host clock through the two counter fits and
 * the KVM counter relation (see clock_map.h).
 *
 * All counter arithmetic is 128-bit integer.  The relation's forward
 * direction R(h) = (h * ratio) >> frac_bits is exactly what KVM computes;
 * the inverse is an exact rounded division, except in cm_map_ts, which
 * multiplies by a 60-bit reciprocal prepared once by cm_map_init.
 * cm_map_ts takes shortcuts for the common case (the hot path below) that
 * give the same bits as its steps one by one.
 */
#include "clock_bend.h"
#include "clock_map.h"
#include "vp_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

/* Largest fraction width kept; larger ones are rounded down to it. */
#define MAX_FRAC 56
/* Scaling ratios outside [2^-RATIO_LOG2_MAX, 2^RATIO_LOG2_MAX] are taken
 * as 1.0. */
#define RATIO_LOG2_MAX 20

static uint64_t clamp_u64(i128 v)
{
	if (v < 0)
		return 0;
	if (v > (i128)UINT64_MAX)
		return UINT64_MAX;
	return (uint64_t)v;
}

static int64_t clamp_i64(i128 v)
{
	if (v < INT64_MIN)
		return INT64_MIN;
	if (v > INT64_MAX)
		return INT64_MAX;
	return (int64_t)v;
}

static int cmp_i128(const void *a, const void *b)
{
	i128 p = *(const i128 *)a, q = *(const i128 *)b;
	return p < q ? -1 : p > q ? 1 : 0;
}

/* The ratio in the form all functions here use: frac <= MAX_FRAC, value in
 * range, 1.0 for 0 or nonsense (see clock_map.h). */
static void norm_ratio(uint64_t ratio, unsigned frac, uint64_t *r_out,
		       unsigned *f_out)
{
	uint64_t r = ratio;
	unsigned f = frac;

	if (f > MAX_FRAC) {
		unsigned d = f - MAX_FRAC;
		r = d >= 64 ? 0 : (r >> d) + ((r >> (d - 1)) & 1);
		f = MAX_FRAC;
	}
	if (r == 0 || ((u128)r << RATIO_LOG2_MAX) < ((u128)1 << f) ||
	    (u128)r > ((u128)1 << (f + RATIO_LOG2_MAX))) {
		r = 1;
		f = 0;
	}
	*r_out = r;
	*f_out = f;
}

/* R(h) = (h * ratio) >> frac, below 2^(64 + RATIO_LOG2_MAX). */
static i128 apply_ratio(uint64_t h, uint64_t r, unsigned f)
{
	return (i128)(((u128)h * r) >> f);
}

/* An interval end point for the sweep in deepest(). */
struct sweep_ev {
	i128 v;
	int start; /* 1: lo, 0: hi */
};

static int cmp_ev(const void *a, const void *b)
{
	const struct sweep_ev *p = a, *q = b;
	if (p->v != q->v)
		return p->v < q->v ? -1 : 1;
	return q->start - p->start; /* closed intervals: starts first */
}

/* The range of offsets inside the most of the closed intervals
 * [lo[i], hi[i]], i < k; among equally deep ranges the one nearest `near`.
 * Stores it in [*a, *b] and returns its depth. */
static size_t deepest(const i128 *lo, const i128 *hi, size_t k, i128 near,
		      i128 *a, i128 *b)
{
	struct sweep_ev *ev = calloc(2 * k, sizeof(*ev));
	size_t depth = 0, best = 0;
	i128 best_dist = -1;

	if (!ev) {
		fputs("vperfetto: out of memory in clock_map\n", stderr);
		abort();
	}
	for (size_t i = 0; i < k; i++) {
		ev[2 * i] = (struct sweep_ev){lo[i], 1};
		ev[2 * i + 1] = (struct sweep_ev){hi[i], 0};
	}
	qsort(ev, 2 * k, sizeof(*ev), cmp_ev);
	for (size_t i = 0; i < 2 * k; i++) {
		depth = ev[i].start ? depth + 1 : depth - 1;
		if (depth > best)
			best = depth;
	}
	/* Each time the depth reaches the maximum, the next event ends that
	 * range (another start would make it deeper still). */
	depth = 0;
	for (size_t i = 0; i + 1 < 2 * k; i++) {
		depth = ev[i].start ? depth + 1 : depth - 1;
		if (!ev[i].start || depth != best)
			continue;
		i128 x = ev[i].v, y = ev[i + 1].v;
		i128 dist = near < x ? x - near : near > y ? near - y : 0;
		if (best_dist < 0 || dist < best_dist) {
			best_dist = dist;
			*a = x;
			*b = y;
		}
	}
	free(ev);
	return best;
}

/* ---- the counter relation ----------------------------------------------- */

uint64_t cm_cross_host_to_guest(const struct cm_cross *c, uint64_t host_cycles)
{
	uint64_t r;
	unsigned f;

	norm_ratio(c->ratio, c->frac_bits, &r, &f);
	return clamp_u64(apply_ratio(host_cycles, r, f) + c->offset);
}

const char *cm_source_name(enum cm_offset_source s)
{
	switch (s) {
	case CM_SRC_CMDLINE:
		return "command line";
	case CM_SRC_KVM_TSC:
		return "kvm_tsc";
	case CM_SRC_EXCHANGES:
		return "sync exchanges";
	case CM_SRC_DEFAULT:
		return "default";
	case CM_SRC_CARRIED:
		return "carried across a step";
	}
	return "?";
}

uint64_t cm_cross_guest_to_host(const struct cm_cross *c, uint64_t guest_cycles)
{
	uint64_t r;
	unsigned f;
	i128 d = (i128)guest_cycles - c->offset;

	norm_ratio(c->ratio, c->frac_bits, &r, &f);
	if (r == (uint64_t)1 << f)
		return clamp_u64(d);
	if (d <= 0)
		return 0;
	/* round(d * 2^f / r): d < 2^65 and f <= 56, so no overflow */
	u128 num = (u128)d << f;
	u128 h = (num + r / 2) / r;
	return h > UINT64_MAX ? UINT64_MAX : (uint64_t)h;
}

int cm_cross_from_exchanges(struct cm_cross *c, const struct cm_exchange *ex,
			    size_t n, uint64_t ratio, unsigned frac_bits,
			    size_t *n_contradicting)
{
	uint64_t r;
	unsigned f;
	size_t k = 0, bad = 0;

	if (n_contradicting)
		*n_contradicting = 0;
	if (!ex || n == 0)
		return -1;
	norm_ratio(ratio, frac_bits, &r, &f);

	/* Each exchange's interval of offsets. */
	i128 *lo = vp_xcalloc(n, sizeof(*lo));
	i128 *hi = vp_xcalloc(n, sizeof(*hi));
	for (size_t i = 0; i < n; i++) {
		if (ex[i].guest_recv < ex[i].guest_send) {
			bad++;
			continue;
		}
		i128 rh = apply_ratio(ex[i].host, r, f);
		lo[k] = (i128)ex[i].guest_send - rh;
		hi[k] = (i128)ex[i].guest_recv - rh;
		k++;
	}
	if (k == 0) {
		free(lo);
		free(hi);
		if (n_contradicting)
			*n_contradicting = bad;
		return -1;
	}

	/* Intersection. */
	i128 L = lo[0], H = hi[0];
	for (size_t i = 1; i < k; i++) {
		if (lo[i] > L)
			L = lo[i];
		if (hi[i] < H)
			H = hi[i];
	}
	i128 off;
	size_t contra = bad;
	if (L <= H) {
		off = L + (H - L) / 2;
	} else {
		/* Contradiction: convex hull, median of the midpoints. */
		i128 *mid = vp_xcalloc(k, sizeof(*mid));
		L = lo[0];
		H = hi[0];
		for (size_t i = 0; i < k; i++) {
			mid[i] = lo[i] + (hi[i] - lo[i]) / 2;
			if (lo[i] < L)
				L = lo[i];
			if (hi[i] > H)
				H = hi[i];
		}
		qsort(mid, k, sizeof(*mid), cmp_i128);
		off = k % 2 ? mid[k / 2]
			    : mid[k / 2 - 1] + (mid[k / 2] - mid[k / 2 - 1]) / 2;
		/* When most exchanges still agree on a common range (a few
		 * bad ones), the offset is the middle of that range instead. */
		i128 a = off, b = off;
		if (2 * deepest(lo, hi, k, off, &a, &b) > k)
			off = a + (b - a) / 2;
		for (size_t i = 0; i < k; i++)
			if (off < lo[i] || off > hi[i])
				contra++;
		free(mid);
	}
	free(lo);
	free(hi);

	c->ratio = ratio;
	c->frac_bits = frac_bits;
	c->offset = clamp_i64(off);
	c->offset_lo = clamp_i64(L);
	c->offset_hi = clamp_i64(H);
	c->source = CM_SRC_EXCHANGES;
	if (n_contradicting)
		*n_contradicting = contra;
	return 0;
}

size_t cm_cross_check_exchanges(const struct cm_cross *c,
				const struct cm_exchange *ex, size_t n)
{
	uint64_t r;
	unsigned f;
	size_t bad = 0;

	norm_ratio(c->ratio, c->frac_bits, &r, &f);
	for (size_t i = 0; i < n; i++) {
		i128 g = apply_ratio(ex[i].host, r, f) + c->offset;
		if (g < (i128)ex[i].guest_send || g > (i128)ex[i].guest_recv)
			bad++;
	}
	return bad;
}

/* ---- the whole map ------------------------------------------------------ */

void cm_map_init(struct cm_map *m, const struct cm_fit *guest,
		 const struct cm_cross *cross, const struct cm_fit *host)
{
	memset(m, 0, sizeof(*m));
	m->guest = guest;
	m->cross = cross;
	m->host = host;
	norm_ratio(cross->ratio, cross->frac_bits, &m->ratio, &m->frac_bits);
	m->identity = m->ratio == (uint64_t)1 << m->frac_bits;
	if (m->identity)
		return;

	/* g2h_q / 2^g2h_shift = 2^frac / ratio with g2h_q < 2^60 and as many
	 * bits as fit: 60 when the ratio allows, never fewer than ~36. */
	unsigned f = m->frac_bits;
	unsigned sh = 127 - f < 100 ? 127 - f : 100;
	while (sh > CM_Q_BITS + 1 &&
	       ((u128)1 << (f + sh)) / m->ratio >= ((u128)1 << 60))
		sh--;
	m->g2h_shift = sh;
	m->g2h_q = (uint64_t)((((u128)1 << (f + sh)) + m->ratio / 2) / m->ratio);
}

/* Host counter from guest counter, both with CM_Q_BITS fractional bits.
 * The product is split into whole and fractional cycles so it cannot
 * overflow; each part is floored, so the result is monotonic in gq and
 * within 2^-15 cycles of exact (plus the reciprocal's 2^-60 relative). */
static cm_q16 guest_to_host_q(const struct cm_map *m, cm_q16 gq,
			      int64_t offset)
{
	i128 dq = gq - (i128)offset * ((i128)1 << CM_Q_BITS);

	if (m->identity)
		return dq;
	i128 di = dq >> CM_Q_BITS;
	i128 df = dq & (((i128)1 << CM_Q_BITS) - 1);
	i128 k = (i128)m->g2h_q;
	/* the same product, one 64 x 64 multiply when di allows */
	i128 dik = di >= INT64_MIN && di <= INT64_MAX
			   ? (i128)(int64_t)di * (int64_t)m->g2h_q
			   : di * k;
	i128 dfk = (i128)(int64_t)df * (int64_t)m->g2h_q;
	return (dik >> (m->g2h_shift - CM_Q_BITS)) + (dfk >> m->g2h_shift);
}

uint64_t cm_map_ts(struct cm_map *m, uint64_t guest_ns)
{
	bool ovf = false;
	return cm_map_ts_ovf(m, guest_ns, &ovf);
}

void cm_map_set_segment_offsets(struct cm_map *m, const int64_t *offset,
				size_t n)
{
	m->seg_offset = offset;
	m->n_seg_offset = n;
	m->span.built = m->span.ok = false;
}

/* ---- the hot path of cm_map_ts ---------------------------------------------
 *
 * A merge maps tens of millions of timestamps, nearly all in the segments
 * the previous one used.  The two functions below do what
 * cm_fit_invert_q16_ovf and cm_fit_eval_q16_ovf do in that case, with the
 * same formulas, but multiply 64 by 64 bits where the general code
 * multiplies 128 by 128 (the operands' values are the same, so are the
 * products) and without a call per step.  Whenever the case is not the
 * simple one (another segment, a value to clamp, a difference beyond
 * 64 bits) they answer false before they change anything, and the general
 * code does the step: the results are the same bits either way
 * (tests/merge/test_map_exact.c compares them).  A segment with bends
 * (clock_bend.c) adds its correction at the piece it used last.  Faster
 * still, the span (span_prepare) composes the three steps for one pair of
 * segments without bends. */

static bool fits_i64(i128 v)
{
	return v >= INT64_MIN && v <= INT64_MAX;
}

/* cm_bend_at(g->knot, g->nknot, xq), looking first at the piece *hint
 * names, and remembering the one used: the same piece, the same value. */
static i128 bend_hinted(const struct cm_segment *g, i128 xq, size_t *hint)
{
	const struct cm_knot *k = g->knot;
	size_t j = *hint, n = g->nknot;

	if (j + 1 >= n || (j > 0 && xq < ((i128)k[j].x << CM_Q_BITS)) ||
	    (j + 2 < n && xq >= ((i128)k[j + 1].x << CM_Q_BITS))) {
		j = cm_bend_piece_for(k, n, xq);
		*hint = j;
	}
	return cm_bend_piece(&k[j], xq);
}

/* The line of g inverted at dy = y - y_ref, as in line_invert of
 * clock_model.c with CM_Q_BITS fractional bits. */
static i128 line_invert_fast(const struct cm_segment *g, int64_t dy)
{
	unsigned sh = g->ishift - CM_Q_BITS;
	i128 p = (i128)dy * g->inv_q + g->xoff_q + ((i128)1 << (sh - 1));
	return ((i128)g->x_ref << CM_Q_BITS) + (p >> sh);
}

/* cm_fit_invert_q16_ovf(m->guest, y, &m->hint_g, ...) when the hinted
 * segment's fitted range holds y, or the fit has only that segment
 * (seg_for_y then keeps the hint), and the result needs no clamping.
 * With bends, seg_invert's two steps. */
static bool invert_fast(struct cm_map *m, uint64_t y, cm_q16 *out)
{
	const struct cm_fit *f = m->guest;

	if (!f || m->hint_g >= f->nseg)
		return false;
	const struct cm_segment *g = &f->seg[m->hint_g];
	if (f->nseg > 1 && (y < g->y_first || y > g->y_last))
		return false;
	i128 dy = (i128)y - (i128)g->y_ref;
	if (!fits_i64(dy))
		return false;
	i128 xq = line_invert_fast(g, (int64_t)dy), prev = 0;
	for (int i = 0; g->nknot && i < 2; i++) {
		i128 b = bend_hinted(g, xq, &m->hint_gk);
		if (i && b == prev)
			break; /* as seg_invert: the same answer again */
		prev = b;
		i128 d = dy - b;
		if (!fits_i64(d))
			return false;
		xq = line_invert_fast(g, (int64_t)d);
	}
	if (xq < 0 || xq > ((i128)UINT64_MAX << CM_Q_BITS))
		return false;
	*out = xq;
	return true;
}

/* cm_fit_eval_q16_ovf(m->host, xq, &m->hint_h, ovf) when xq needs no
 * clamping and the hinted segment is the one used for its whole counter
 * (seg_for_x then keeps the hint). */
static bool eval_fast(struct cm_map *m, cm_q16 xq, uint64_t *out,
		      bool *ovf)
{
	const struct cm_fit *f = m->host;
	size_t h = m->hint_h;

	if (!f || h >= f->nseg || xq < 0 ||
	    xq > ((i128)UINT64_MAX << CM_Q_BITS))
		return false;
	uint64_t x = (uint64_t)(xq >> CM_Q_BITS);
	const struct cm_segment *g = &f->seg[h];
	if ((h > 0 && x < g->x_first) ||
	    (h + 1 < f->nseg && x >= f->seg[h + 1].x_first))
		return false;
	i128 dq = xq - ((i128)g->x_ref << CM_Q_BITS);
	i128 di = dq >> CM_Q_BITS;
	if (!fits_i64(di))
		return false;
	int64_t df = (int64_t)(dq & (((i128)1 << CM_Q_BITS) - 1));
	i128 p = (i128)(int64_t)di * g->slope_q +
		 (((i128)df * g->slope_q) >> CM_Q_BITS) + g->yfrac_q +
		 ((i128)1 << (g->shift - 1));
	i128 y = (i128)g->y_ref + (p >> g->shift);
	if (g->nknot)
		y += bend_hinted(g, xq, &m->hint_hk);
	if (y < 0 || y > (i128)UINT64_MAX) {
		*ovf = true;
		y = y < 0 ? 0 : (i128)UINT64_MAX;
	}
	*out = (uint64_t)y;
	return true;
}

/* cm_map_ts_ovf step by step.  Out of line: the span's path then saves
 * no registers for it. */
static __attribute__((noinline)) uint64_t map_steps(struct cm_map *m,
						     uint64_t guest_ns,
						     bool *ovf)
{
	cm_q16 gq;
	uint64_t out;

	if (!invert_fast(m, guest_ns, &gq))
		gq = cm_fit_invert_q16_ovf(m->guest, guest_ns, &m->hint_g, ovf);
	/* The segment the inversion used (hint_g) says which offset. */
	int64_t off = m->seg_offset && m->hint_g < m->n_seg_offset
			      ? m->seg_offset[m->hint_g]
			      : m->cross->offset;
	cm_q16 hq = guest_to_host_q(m, gq, off);
	if (!eval_fast(m, hq, &out, ovf))
		out = cm_fit_eval_q16_ovf(m->host, hq, &m->hint_h, ovf);
	return out;
}

static i128 max_i128(i128 a, i128 b)
{
	return a > b ? a : b;
}

static i128 min_i128(i128 a, i128 b)
{
	return a < b ? a : b;
}

/* Prepares m->span for the segments the hints name: the composition of
 *   q1 = (dy * inv_q + xoff) >> ishift              (guest inversion,
 *        xq = (x_ref << 16) + q1)
 *   hq = xq - (offset << 16)                        (ratio 1)
 *   y  = y_ref_h + ((dq * slope_q + yfrac) >> shift) (host evaluation,
 *        dq = hq - (x_ref_h << 16) = q1 + k)
 * The host step is cm_fit_eval_q16_seg's di * slope_q + ((df * slope_q)
 * >> 16) + c with di = dq >> 16, df = dq & 0xffff: di * slope_q is a
 * whole number, so that sum is (dq * slope_q) >> 16 + c, and two floored
 * shifts in a row are one, (dq * slope_q + (c << 16)) >> (shift + 16).
 * [qlo, qhi] keeps every step where the general code neither clamps nor
 * changes segment, and dq within 64 bits. */
static __attribute__((noinline)) void span_prepare(struct cm_map *m)
{
	struct cm_span *s = &m->span;
	const struct cm_fit *gf = m->guest, *hf = m->host;

	/* tried for these segments, even when it fails */
	s->built = true;
	s->g = m->hint_g;
	s->h = m->hint_h;
	s->ok = false;
	if (!m->identity || !gf || !hf || m->hint_g >= gf->nseg ||
	    m->hint_h >= hf->nseg)
		return;
	const struct cm_segment *g = &gf->seg[m->hint_g];
	const struct cm_segment *h = &hf->seg[m->hint_h];
	if (g->nknot || h->nknot) /* bends: the general code's */
		return;
	const i128 q = (i128)1 << CM_Q_BITS;
	const i128 qmax = (i128)UINT64_MAX * q;
	const i128 half63 = (i128)1 << 63;

	/* the inputs seg_for_y gives this segment without a search, and for
	 * which y - y_ref fits in 64 bits */
	i128 ylo = gf->nseg > 1 ? g->y_first : 0;
	i128 yhi = gf->nseg > 1 ? g->y_last : (i128)UINT64_MAX;
	ylo = max_i128(ylo, (i128)g->y_ref - half63);
	yhi = min_i128(yhi, (i128)g->y_ref + half63 - 1);
	if (ylo > yhi)
		return;

	int64_t off = m->seg_offset && m->hint_g < m->n_seg_offset
			      ? m->seg_offset[m->hint_g]
			      : m->cross->offset;
	i128 xg = (i128)g->x_ref * q, o = (i128)off * q;
	i128 xh = (i128)h->x_ref * q;
	/* xq in [0, qmax], hq in [0, qmax], hq's whole counter in segment
	 * h's range, dq in 64 bits */
	i128 lo = max_i128(-xg, o - xg), hi = min_i128(qmax - xg, qmax + o - xg);
	if (m->hint_h > 0)
		lo = max_i128(lo, (i128)h->x_first * q + o - xg);
	if (m->hint_h + 1 < hf->nseg)
		hi = min_i128(hi, (i128)hf->seg[m->hint_h + 1].x_first * q - 1 +
					  o - xg);
	i128 k = xg - o - xh;
	lo = max_i128(lo, (i128)INT64_MIN - k);
	hi = min_i128(hi, (i128)INT64_MAX - k);
	if (lo > hi)
		return;

	s->ylo = (uint64_t)ylo;
	s->yhi = (uint64_t)yhi;
	s->y_ref = g->y_ref;
	s->inv_q = g->inv_q;
	s->ishift = g->ishift - CM_Q_BITS;
	s->xoff = (i128)g->xoff_q + ((i128)1 << (s->ishift - 1));
	s->qlo = lo;
	s->qhi = hi;
	s->k = k;
	s->slope_q = h->slope_q;
	s->shift = h->shift + CM_Q_BITS;
	s->yfrac = ((i128)h->yfrac_q + ((i128)1 << (h->shift - 1))) * q;
	s->y_host = h->y_ref;
	s->ok = true;
}

/* cm_map_ts_ovf through m->span; false (nothing changed) when y is not
 * one of the inputs it covers. */
static inline bool span_map(const struct cm_span *s, uint64_t y,
			    uint64_t *out, bool *ovf)
{
	if (!s->ok || y < s->ylo || y > s->yhi)
		return false;
	int64_t dy = (int64_t)(y - s->y_ref);
	i128 q1 = ((i128)dy * s->inv_q + s->xoff) >> s->ishift;
	if (q1 < s->qlo || q1 > s->qhi)
		return false;
	int64_t dq = (int64_t)(q1 + s->k);
	i128 r = (i128)s->y_host + (((i128)dq * s->slope_q + s->yfrac) >> s->shift);
	if (r < 0 || r > (i128)UINT64_MAX) {
		*ovf = true;
		r = r < 0 ? 0 : (i128)UINT64_MAX;
	}
	*out = (uint64_t)r;
	return true;
}

/* cm_map_ts_ovf when the span does not cover guest_ns. */
static uint64_t map_outside_span(struct cm_map *m, uint64_t guest_ns,
				 bool *ovf)
{
	uint64_t out = map_steps(m, guest_ns, ovf);

	if (!m->span.built || m->span.g != m->hint_g || m->span.h != m->hint_h)
		span_prepare(m);
	return out;
}

uint64_t cm_map_ts_ovf(struct cm_map *m, uint64_t guest_ns, bool *ovf)
{
	uint64_t out;

	if (span_map(&m->span, guest_ns, &out, ovf))
		return out;
	return map_outside_span(m, guest_ns, ovf);
}

/* The low 64 bits of x >> sh (arithmetic), 0 < sh < 128, with `big`
 * saying sh >= 64: then one shift of the high half, else a double shift,
 * and no test of the count per call. */
static inline __attribute__((always_inline)) uint64_t low_shr(i128 x,
							      unsigned sh,
							      bool big)
{
	uint64_t lo = (uint64_t)x, hi = (uint64_t)(x >> 64);

	if (big)
		return (uint64_t)((int64_t)hi >> (sh - 64));
	return lo >> sh | hi << (64 - sh);
}

/* span_map without its checks for in[0..n), known to pass them.  Only
 * low 64 bits are needed: dq and r fit 64 bits, so they are the low 64
 * bits of their sums. */
static inline __attribute__((always_inline)) void
span_map_unchecked(const struct cm_span *s, const uint64_t *in,
		   uint64_t *out, size_t n, bool ibig, bool big)
{
	for (size_t i = 0; i < n; i++) {
		int64_t dy = (int64_t)(in[i] - s->y_ref);
		uint64_t q1 = low_shr((i128)dy * s->inv_q + s->xoff, s->ishift,
				      ibig);
		int64_t dq = (int64_t)(q1 + (uint64_t)s->k);
		out[i] = s->y_host + low_shr((i128)dq * s->slope_q + s->yfrac,
					     s->shift, big);
	}
}

/* span_map for in[0..n), which are in ascending order: true when all of
 * them passed its checks.  With inv_q and slope_q not negative, each
 * check holds for an interval of inputs (y's range; q1 grows with y, r
 * with q1), so the first and the last passing says all between pass: they
 * are mapped with no check and no branch. */
static bool span_map_sorted(const struct cm_span *s, const uint64_t *in,
			    uint64_t *out, size_t n)
{
	bool ovf = false;

	if (n < 3 || s->inv_q < 0 || s->slope_q < 0 || s->ishift == 0 ||
	    s->ishift >= 128 || s->shift == 0 || s->shift >= 128 ||
	    !span_map(s, in[0], &out[0], &ovf) ||
	    !span_map(s, in[n - 1], &out[n - 1], &ovf) || ovf)
		return false;
	/* one loop per kind of shift, each without a branch on it */
	bool ibig = s->ishift >= 64, big = s->shift >= 64;
	if (ibig && big)
		span_map_unchecked(s, in + 1, out + 1, n - 2, true, true);
	else if (ibig)
		span_map_unchecked(s, in + 1, out + 1, n - 2, true, false);
	else if (big)
		span_map_unchecked(s, in + 1, out + 1, n - 2, false, true);
	else
		span_map_unchecked(s, in + 1, out + 1, n - 2, false, false);
	return true;
}

size_t cm_map_ts_many(struct cm_map *m, const uint64_t *in, uint64_t *out,
		      size_t n)
{
	size_t n_ovf = 0;
	/* a copy: stores to out[] might alias m->span, whose fields would
	 * then be loaded again for every time */
	struct cm_span s = m->span;
	uint64_t descents = 0; /* counted without a branch */

	for (size_t i = 1; i < n; i++)
		descents += in[i] < in[i - 1];
	if (!descents && span_map_sorted(&s, in, out, n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		bool ovf = false;
		if (!span_map(&s, in[i], &out[i], &ovf)) {
			out[i] = map_outside_span(m, in[i], &ovf);
			s = m->span;
		}
		n_ovf += ovf;
	}
	return n_ovf;
}


/* How far counter x lies outside segment g's sampled span (0: inside). */
static uint64_t seg_distance(const struct cm_segment *g, uint64_t x)
{
	return x < g->x_first ? g->x_first - x
	       : x > g->x_last ? x - g->x_last : 0;
}

/* cm_fit_error_ns at x in a given segment. */
static double seg_error_ns(const struct cm_segment *g, uint64_t x)
{
	return g->resid_max_ns +
	       (double)seg_distance(g, x) * g->slope * CM_EXTRAP_RATE;
}

double cm_map_error_ns(const struct cm_map *m, uint64_t guest_ns)
{
	const struct cm_cross *c = m->cross;
	size_t seg = 0;
	uint64_t gx = cm_fit_invert(m->guest, guest_ns, &seg);
	struct cm_cross own = *c; /* with the segment's own offset, if any */
	if (m->seg_offset && seg < m->n_seg_offset)
		own.offset = m->seg_offset[seg];
	uint64_t hx = cm_cross_guest_to_host(&own, gx);
	/* the segment the inversion used: a counter just below its first
	 * sample would otherwise be judged by the segment before, from
	 * across a change of the counter offset */
	const struct cm_segment *gs = m->guest->nseg ? &m->guest->seg[seg]
						     : NULL;
	double e = (gs ? seg_error_ns(gs, gx) : 0) +
		   cm_fit_error_ns(m->host, hx);

	/* The offset may be anywhere in [offset_lo, offset_hi]. */
	i128 below = (i128)c->offset - c->offset_lo;
	i128 above = (i128)c->offset_hi - c->offset;
	if (below < 0)
		below = -below;
	if (above < 0)
		above = -above;
	double dev = (double)(below > above ? below : above);
	const struct cm_segment *hs = cm_fit_segment_at(m->host, hx, NULL);
	double ratio = ldexp((double)m->ratio, -(int)m->frac_bits);
	return e + dev / ratio * (hs ? hs->slope : 1.0);
}

/* The segment covering the widest span of counter values. */
static const struct cm_segment *longest_segment(const struct cm_fit *f)
{
	const struct cm_segment *best = NULL;

	for (size_t i = 0; f && i < f->nseg; i++)
		if (!best || f->seg[i].x_last - f->seg[i].x_first >
				     best->x_last - best->x_first)
			best = &f->seg[i];
	return best;
}

double cm_map_freq_mismatch(const struct cm_map *m)
{
	const struct cm_segment *g = longest_segment(m->guest);
	const struct cm_segment *h = longest_segment(m->host);

	if (!g || !h || !(g->slope > 0))
		return 0;
	/* guest cycles = ratio * host cycles, so with both clocks running at
	 * the same rate, ns per host cycle == ns per guest cycle * ratio. */
	double ratio = ldexp((double)m->ratio, -(int)m->frac_bits);
	return fabs(h->slope / (g->slope * ratio) - 1.0);
}

/* ---- the inverse: host clock -> guest clock -------------------------------- */

/* Guest counter from host counter, both with CM_Q_BITS fractional bits:
 * R(hq) + offset.  The ratio is split into its whole part and its
 * fraction, and hq into whole and fractional cycles, so that no product
 * passes 2^127 (hq < 2^80, the fraction < 2^56); each piece is floored. */
static cm_q16 host_to_guest_q(const struct cm_map *m, cm_q16 hq,
			      int64_t offset)
{
	i128 off_q = (i128)offset * ((i128)1 << CM_Q_BITS);

	if (m->identity || hq < 0)
		return (m->identity ? hq : 0) + off_q;
	unsigned f = m->frac_bits;
	u128 mask_f = ((u128)1 << f) - 1;
	u128 whole_r = (u128)m->ratio >> f, frac_r = (u128)m->ratio & mask_f;
	u128 h = (u128)hq;
	u128 whole_h = h >> CM_Q_BITS;
	u128 frac_h = h & (((u128)1 << CM_Q_BITS) - 1);
	u128 t = whole_h * frac_r;
	u128 part = ((t >> f) << CM_Q_BITS) +
		    (((t & mask_f) << CM_Q_BITS) >> f) + ((frac_h * frac_r) >> f);
	return (i128)(h * whole_r + part) + off_q;
}

/* The guest counter at host counter hq, and the segment of the guest fit
 * to evaluate it in.  With one offset that is the segment holding the
 * counter.  With an offset per segment (a migration, a TSC write), the
 * counter ranges of the segments may overlap (the counter set back), so
 * each segment is tried with its own offset: the one whose sampled span
 * holds the result, else the one it comes nearest (a host time between
 * two segments: the guest was paused for the change). */
static cm_q16 inv_counter(const struct cm_map *m, cm_q16 hq, size_t *seg)
{
	const struct cm_fit *g = m->guest;

	if (!m->seg_offset || m->n_seg_offset != g->nseg || !g->nseg) {
		cm_q16 gq = host_to_guest_q(m, hq, m->cross->offset);
		uint64_t x = gq < 0 ? 0 : (uint64_t)(gq >> CM_Q_BITS);
		if (g->nseg)
			*seg = (size_t)(cm_fit_segment_at(g, x, seg) - g->seg);
		return gq;
	}
	size_t first = *seg < g->nseg ? *seg : 0;
	size_t best = first;
	uint64_t best_d = UINT64_MAX;
	cm_q16 best_q = 0;
	for (size_t i = 0; i < g->nseg; i++) {
		size_t k = (first + i) % g->nseg; /* the last one used first */
		cm_q16 gq = host_to_guest_q(m, hq, m->seg_offset[k]);
		uint64_t x = gq < 0 ? 0 : (uint64_t)(gq >> CM_Q_BITS);
		uint64_t d = seg_distance(&g->seg[k], x);
		if (d < best_d) {
			best_d = d;
			best = k;
			best_q = gq;
		}
		if (d == 0)
			break;
	}
	*seg = best;
	return best_q;
}

uint64_t cm_map_inv_ts_ovf(struct cm_map *m, uint64_t host_ns, bool *ovf)
{
	cm_q16 hq = cm_fit_invert_q16_ovf(m->host, host_ns, &m->hint_h, ovf);
	cm_q16 gq = inv_counter(m, hq, &m->hint_g);
	return cm_fit_eval_q16_seg(m->guest, m->hint_g, gq, ovf);
}

uint64_t cm_map_inv_ts(struct cm_map *m, uint64_t host_ns)
{
	bool ovf = false;
	return cm_map_inv_ts_ovf(m, host_ns, &ovf);
}

double cm_map_inv_error_ns(const struct cm_map *m, uint64_t host_ns)
{
	const struct cm_cross *c = m->cross;
	size_t seg = 0;
	uint64_t hx = cm_fit_invert(m->host, host_ns, NULL);
	cm_q16 gq = inv_counter(m, (cm_q16)hx << CM_Q_BITS, &seg);
	uint64_t gx = gq < 0 ? 0 : (uint64_t)(gq >> CM_Q_BITS);
	const struct cm_segment *gs = m->guest->nseg ? &m->guest->seg[seg]
						     : NULL;
	double e = cm_fit_error_ns(m->host, hx) + (gs ? seg_error_ns(gs, gx) : 0);

	/* The offset may be anywhere in [offset_lo, offset_hi]: that many
	 * guest cycles, at the guest segment's ns per cycle. */
	i128 below = (i128)c->offset - c->offset_lo;
	i128 above = (i128)c->offset_hi - c->offset;
	if (below < 0)
		below = -below;
	if (above < 0)
		above = -above;
	double dev = (double)(below > above ? below : above);
	return e + dev * (gs ? gs->slope : 1.0);
}
