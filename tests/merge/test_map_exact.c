/*
 * test_map_exact.c - cm_map_ts gives the same bits as the step-by-step
 * fixed-point map it was made faster from.
 *
 * The merge's output must not change by one byte when the map gets
 * faster, so the reference below is the map as it was first written
 * (guest fit inversion, counter relation, host fit evaluation, each in
 * 128-bit arithmetic, with the same segment hints), kept here verbatim.
 * Every test maps millions of guest times through both, over random fits
 * (several segments, slopes from 24 MHz to 4 GHz counters, clocks near 0
 * and near 2^64, segment offsets, scaling ratios) and random inputs
 * (monotonic streams with small steps as a trace has them, jumps, values
 * at and around every segment's ends, 0 and UINT64_MAX), and compares the
 * results, the overflow flags and the hints after each call.  Fits whose
 * clock bends (clock_bend.h) add the correction the model defines to the
 * reference's lines, by cm_bend_at's search.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock_bend.h"
#include "clock_map.h"
#include "clock_model.h"

__extension__ typedef __int128 i128;

/* ---- the reference: the map before any shortcut ---------------------------- */

static uint64_t ref_clamp_u64(i128 v)
{
	if (v < 0)
		return 0;
	if (v > (i128)UINT64_MAX)
		return UINT64_MAX;
	return (uint64_t)v;
}

static int ref_seg_has_x(const struct cm_fit *f, size_t i, uint64_t x)
{
	return (i == 0 || f->seg[i].x_first <= x) &&
	       (i + 1 == f->nseg || x < f->seg[i + 1].x_first);
}

static size_t ref_seg_for_x(const struct cm_fit *f, uint64_t x, size_t *hint)
{
	size_t h = hint && *hint < f->nseg ? *hint : 0;

	if (ref_seg_has_x(f, h, x))
		return h;
	if (h + 1 < f->nseg && ref_seg_has_x(f, h + 1, x)) {
		h++;
	} else {
		size_t lo = 0, hi = f->nseg;
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

static size_t ref_seg_for_y(const struct cm_fit *f, uint64_t y, size_t *hint)
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

static i128 ref_line_invert(const struct cm_segment *g, i128 y)
{
	unsigned sh = g->ishift - CM_Q_BITS;
	i128 dy = y - (i128)g->y_ref;
	i128 p = dy * g->inv_q + g->xoff_q + ((i128)1 << (sh - 1));
	return ((i128)g->x_ref << CM_Q_BITS) + (p >> sh);
}

/* The line inverted, then twice at y less the bends' correction where
 * the previous answer lies (clock_model.h). */
static i128 ref_seg_invert(const struct cm_segment *g, uint64_t y)
{
	i128 x = ref_line_invert(g, y);

	for (int i = 0; g->nknot && i < 2; i++)
		x = ref_line_invert(g, (i128)y - cm_bend_at(g->knot, g->nknot,
							    x));
	return x;
}

static uint64_t ref_eval_q16_seg(const struct cm_fit *f, size_t seg,
				 cm_q16 xq, bool *ovf)
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
	return ref_clamp_u64(y);
}

static uint64_t ref_eval_q16_ovf(const struct cm_fit *f, cm_q16 xq,
				 size_t *hint, bool *ovf)
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
	return ref_eval_q16_seg(f, ref_seg_for_x(f, x, hint), xq, ovf);
}

static cm_q16 ref_invert_q16_ovf(const struct cm_fit *f, uint64_t y,
				 size_t *hint, bool *ovf)
{
	const i128 qmax = (i128)UINT64_MAX << CM_Q_BITS;

	if (!f || !f->nseg)
		return (i128)y << CM_Q_BITS;
	i128 xq = ref_seg_invert(&f->seg[ref_seg_for_y(f, y, hint)], y);
	if (xq < 0 || xq > qmax) {
		*ovf = true;
		return xq < 0 ? 0 : qmax;
	}
	return xq;
}

static cm_q16 ref_guest_to_host_q(const struct cm_map *m, cm_q16 gq,
				  int64_t offset)
{
	i128 dq = gq - (i128)offset * ((i128)1 << CM_Q_BITS);

	if (m->identity)
		return dq;
	i128 di = dq >> CM_Q_BITS;
	i128 df = dq & (((i128)1 << CM_Q_BITS) - 1);
	i128 k = (i128)m->g2h_q;
	return ((di * k) >> (m->g2h_shift - CM_Q_BITS)) +
	       ((df * k) >> m->g2h_shift);
}

static uint64_t ref_map_ts_ovf(struct cm_map *m, uint64_t guest_ns, bool *ovf)
{
	cm_q16 gq = ref_invert_q16_ovf(m->guest, guest_ns, &m->hint_g, ovf);
	int64_t off = m->seg_offset && m->hint_g < m->n_seg_offset
			      ? m->seg_offset[m->hint_g]
			      : m->cross->offset;
	return ref_eval_q16_ovf(m->host, ref_guest_to_host_q(m, gq, off),
				&m->hint_h, ovf);
}

/* ---- random fits and inputs --------------------------------------------------- */

struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n ? rng_next(r) % n : 0;
}

/* A fit of nseg segments from samples: a counter of hz near x0 against a
 * clock near y0, each segment's clock stepped by up to +-step_ns (steps
 * back included) and its rate off by a few hundred ppm; with `bend`, the
 * rate changes by up to +-50 ppm three times in each segment, so that
 * the fit has bends. */
static void random_fit(struct rng *r, struct cm_fit *f, size_t nseg,
		       uint64_t x0, uint64_t y0, double ns_per_cycle,
		       uint64_t step_ns, bool bend)
{
	size_t per = 20 + rng_below(r, 40), n = per * nseg;
	struct cm_sample *s = calloc(n, sizeof(*s));
	uint64_t dx = 1000000000 / ns_per_cycle / 10 + 1; /* ~100 ms */
	double y = (double)y0;
	uint64_t x = x0;

	assert_non_null(s);
	for (size_t k = 0; k < nseg; k++) {
		double rate = ns_per_cycle *
			      (1.0 + ((double)rng_below(r, 1000) - 500) * 1e-6);
		if (k)
			y += (double)rng_below(r, 2 * step_ns) - (double)step_ns;
		for (size_t i = 0; i < per; i++) {
			if (bend && i % (per / 4) == per / 8)
				rate *= 1.0 + ((double)rng_below(r, 100) - 50) * 1e-6;
			uint64_t d = dx + rng_below(r, dx / 8 + 1);
			x += d;
			y += (double)d * rate;
			s[k * per + i].x = x;
			/* A step back may take y below 0: clamp, as a
			 * double out of range has no uint64_t value. */
			s[k * per + i].y = (uint64_t)(y > 0 ? y : 0) +
					   rng_below(r, 200);
		}
	}
	struct cm_fit_opts o;
	cm_fit_opts_default(&o);
	o.min_jump_ns = step_ns / 4 + 1000000;
	/* Lines only unless asked: near 2^64 the clock above, summed in
	 * doubles, does wander by microseconds. */
	if (!bend)
		o.min_bend_ns = 0;
	assert_int_equal(cm_fit_build(f, s, n, &o), 0);
	free(s);
}

/* A guest time to map: mostly the next one of a monotonic stream (small
 * steps, as compact_sched deltas are), sometimes a jump, a value at or
 * near a segment's end, or an extreme. */
static uint64_t next_input(struct rng *r, const struct cm_fit *g,
			   uint64_t prev)
{
	uint64_t k = rng_below(r, 1000);

	if (k < 900)
		return prev + rng_below(r, 1 + (k < 450 ? 2000 : 200000000));
	if (!g->nseg)
		return rng_next(r);
	const struct cm_segment *s = &g->seg[rng_below(r, g->nseg)];
	uint64_t lo = s->y_first - (s->y_first > 4000000000ull ? 4000000000ull : 0);
	uint64_t hi = s->y_last + 4000000000ull;
	switch (k % 8) {
	case 0:
		return s->y_first - 3 + rng_below(r, 7);
	case 1:
		return s->y_last - 3 + rng_below(r, 7);
	case 2:
		return rng_below(r, 3) ? rng_below(r, 1000) : UINT64_MAX - rng_below(r, 1000);
	case 3:
		return rng_next(r);
	default:
		return lo + rng_below(r, hi > lo ? hi - lo : 1);
	}
}

/* Maps y through both and compares everything; returns the overflow. */
static bool compare_one(struct cm_map *m, struct cm_map *ref, uint64_t y)
{
	bool o1 = false, o2 = false;
	uint64_t a = cm_map_ts_ovf(m, y, &o1);
	uint64_t b = ref_map_ts_ovf(ref, y, &o2);

	if (a != b || o1 != o2 || m->hint_g != ref->hint_g ||
	    m->hint_h != ref->hint_h) {
		fprintf(stderr, "input %llu: %llu/%d (hints %zu %zu), "
			"reference %llu/%d (hints %zu %zu)\n",
			(unsigned long long)y, (unsigned long long)a, o1,
			m->hint_g, m->hint_h, (unsigned long long)b, o2,
			ref->hint_g, ref->hint_h);
		fail();
	}
	return o2;
}

/* cm_map_ts_many over n ascending inputs from y0, `step` apart (within
 * [lo, hi]), against the reference time by time: the batch's shortcut
 * (its first and last input decide for those between) must not cross an
 * edge.  On copies of the maps, whose hints the batch moves. */
static void compare_batch(const struct cm_map *m, const struct cm_map *ref,
			  uint64_t y0, uint64_t step, uint64_t lo, uint64_t hi)
{
	struct cm_map mm = *m, rr = *ref;
	uint64_t in[64], got[64], want[64];
	size_t n = 0, ref_ovf = 0;

	for (uint64_t y = y0; n < 64 && y >= lo && y <= hi; y += step) {
		bool o = false;
		in[n] = y;
		want[n++] = ref_map_ts_ovf(&rr, y, &o);
		ref_ovf += o;
		if (y > UINT64_MAX - step)
			break;
	}
	if (!n)
		return;
	size_t n_ovf = cm_map_ts_many(&mm, in, got, n);
	assert_memory_equal(got, want, n * sizeof(*got));
	assert_int_equal(n_ovf, ref_ovf);
}

/* The host counter (with CM_Q_BITS fraction) guest time y gives in guest
 * segment k, before any clamping: non-decreasing in y. */
static i128 host_q_at(const struct cm_map *m, size_t k, uint64_t y)
{
	int64_t off = m->seg_offset ? m->seg_offset[k] : m->cross->offset;
	return ref_guest_to_host_q(m, ref_seg_invert(&m->guest->seg[k], y),
			     off);
}

/* Every place where a step of the map changes its course - the guest
 * or the host counter leaving 0 .. UINT64_MAX, the host counter crossing
 * a host segment's start or passing 2^63 fractional counter units from
 * its reference - has a first guest time of each guest segment at which
 * it happens (found by bisection); the times around it are mapped as a
 * stream would bring them, from below, then from above. */
static void compare_edges(struct cm_map *m, struct cm_map *ref)
{
	const struct cm_fit *gf = m->guest, *hf = m->host;
	const i128 q = (i128)1 << CM_Q_BITS;
	const i128 qmax = (i128)UINT64_MAX * q;
	i128 edge[2 + 4 * 8]; /* host counter values; [0], [1]: guest's */
	size_t n = 0;

	edge[n++] = 0;
	edge[n++] = qmax + 1;
	edge[n++] = 0;
	edge[n++] = qmax + 1;
	for (size_t h = 0; h < hf->nseg && h < 8; h++) {
		i128 xh = (i128)hf->seg[h].x_ref * q;
		if (h)
			edge[n++] = (i128)hf->seg[h].x_first * q;
		edge[n++] = xh + INT64_MIN;
		edge[n++] = xh + INT64_MAX + 1;
	}
	for (size_t k = 0; k < gf->nseg; k++) {
		const struct cm_segment *g = &gf->seg[k];
		uint64_t lo0 = gf->nseg > 1 ? g->y_first : 0;
		uint64_t hi0 = gf->nseg > 1 ? g->y_last : UINT64_MAX;
		for (size_t e = 0; e < n; e++) {
			uint64_t lo = lo0, hi = hi0;
			while (lo < hi) {
				uint64_t mid = lo + (hi - lo) / 2;
				i128 v = e < 2 ? ref_seg_invert(g, mid)
					       : host_q_at(m, k, mid);
				if (v >= edge[e])
					hi = mid;
				else
					lo = mid + 1;
			}
			uint64_t a = lo > lo0 + 3 ? lo - 3 : lo0;
			uint64_t b = hi0 - lo > 3 ? lo + 3 : hi0;
			compare_one(m, ref, lo > lo0 + 100 ? lo - 100 : lo0);
			for (uint64_t y = a; y >= a && y <= b; y++)
				compare_one(m, ref, y);
			/* in ascending batches across it, close and wide */
			uint64_t c0 = lo > lo0 + 32 ? lo - 32 : lo0;
			uint64_t w0 = lo > lo0 + 32 * 1000 ? lo - 32 * 1000 : lo0;
			compare_batch(m, ref, c0, 1, lo0, hi0);
			compare_batch(m, ref, w0, 1000, lo0, hi0);
			compare_batch(m, ref, lo, 1, lo0, hi0);
			/* and from above, as a time that went back */
			compare_one(m, ref, hi0 - lo > 100 ? lo + 100 : hi0);
			for (uint64_t y = b; y <= b && y >= a; y--)
				compare_one(m, ref, y);
		}
	}
}

/* Maps `count` inputs through a fresh map and the reference, comparing
 * everything; returns how many of them were clamped. */
static size_t compare_maps(struct rng *r, const struct cm_fit *gf,
			   const struct cm_cross *c, const struct cm_fit *hf,
			   const int64_t *seg_off, size_t count)
{
	struct cm_map m, ref;
	size_t clamped = 0;

	cm_map_init(&m, gf, c, hf);
	cm_map_init(&ref, gf, c, hf);
	if (seg_off) {
		/* offsets given to a map already in use take effect */
		uint64_t y = gf->seg[0].y_first;
		for (int i = 0; i < 100; i++)
			compare_one(&m, &ref, y += 1000);
		cm_map_set_segment_offsets(&m, seg_off, gf->nseg);
		cm_map_set_segment_offsets(&ref, seg_off, gf->nseg);
	}
	compare_edges(&m, &ref);
	uint64_t y = gf->nseg ? gf->seg[0].y_first - 1000000 : 0;
	uint64_t *in = calloc(count, sizeof(*in));
	uint64_t *want = calloc(count, sizeof(*want));
	uint64_t *got = calloc(count, sizeof(*got));
	assert_true(in && want && got);
	for (size_t i = 0; i < count; i++) {
		y = in[i] = next_input(r, gf, y);
		clamped += compare_one(&m, &ref, y);
	}

	/* cm_map_ts_many, in batches of any size, gives the same times and
	 * counts the same overflows */
	struct cm_map many;
	cm_map_init(&many, gf, c, hf);
	cm_map_init(&ref, gf, c, hf);
	if (seg_off) {
		cm_map_set_segment_offsets(&many, seg_off, gf->nseg);
		cm_map_set_segment_offsets(&ref, seg_off, gf->nseg);
	}
	size_t n_ovf = 0, ref_ovf = 0;
	for (size_t i = 0; i < count; i++) {
		bool o = false;
		want[i] = ref_map_ts_ovf(&ref, in[i], &o);
		ref_ovf += o;
	}
	for (size_t i = 0; i < count;) {
		size_t b = 1 + rng_below(r, 100);
		if (b > count - i)
			b = count - i;
		n_ovf += cm_map_ts_many(&many, in + i, got + i, b);
		i += b;
	}
	assert_memory_equal(got, want, count * sizeof(*got));
	assert_int_equal(n_ovf, ref_ovf);
	free(in);
	free(want);
	free(got);
	return clamped;
}

/* Counters of 24 MHz (arm64), 1, 3 and 4.2 GHz; clocks from 0 to near
 * 2^64; offsets either way.  And counters of 1, 10 and 15.3 kHz, so slow that
 * consecutive guest ns give consecutive fractional counter values: every
 * edge of compare_edges is then met exactly. */
static const double rates[] = {1e9 / 24e6, 1.0, 1.0 / 3, 1.0 / 4.2,
			       1e9 / 1e3, 1e9 / 1e4, 65536.0};
#define N_RATES (sizeof(rates) / sizeof(rates[0]))

static void run_cases(uint64_t seed, bool scaled, bool seg_offsets,
		      bool bend, size_t cases, size_t per_case)
{
	struct rng r = {seed};
	size_t clamped = 0, total = 0, knots = 0;

	for (size_t t = 0; t < cases; t++) {
		double rate = rates[rng_below(&r, N_RATES)];
		/* a quarter of the counters just below 2^64, where the
		 * counter's upper clamps are met */
		bool top = !scaled && rng_below(&r, 4) == 0;
		uint64_t hx0 = top ? UINT64_MAX - (1ull << 38) -
					     rng_below(&r, 1ull << 30)
			       : rng_below(&r, 2) ? rng_below(&r, 1ull << 40)
						  : rng_below(&r, 1ull << 62);
		uint64_t hy0 = rng_below(&r, 4) == 0
				       ? UINT64_MAX - (1ull << 40)
				       : rng_below(&r, 1ull << 62);
		uint64_t gy0 = rng_below(&r, 4) == 0 ? rng_below(&r, 1000000)
						     : rng_below(&r, 1ull << 62);
		struct cm_cross c = {.ratio = 1, .frac_bits = 0};
		if (scaled) {
			c.frac_bits = 48;
			c.ratio = (1ull << 47) + rng_below(&r, 1ull << 49);
		}
		/* the guest counter: host * ratio + offset */
		/* offsets up to 2^48 cycles either way: far enough for
		 * the host counter to pass 2^47 cycles (2^63 fractional
		 * units) from the host fit's reference */
		unsigned ob = top ? 30 : rng_below(&r, 2) ? 45 : 49;
		int64_t off = (int64_t)rng_below(&r, 1ull << ob) -
			      (int64_t)(1ull << (ob - 1));
		c.offset = off;
		uint64_t gx0 = cm_cross_host_to_guest(&c, hx0);
		/* and sometimes a guest fit 2^47 cycles away from where the
		 * offset puts it (a wrong offset; the map must still give
		 * the same bits): the host counter then meets 2^63
		 * fractional units below the host fit's reference */
		if (!top && gx0 > (1ull << 49) && rng_below(&r, 8) == 0)
			gx0 -= (1ull << 47) + rng_below(&r, 1ull << 40);
		struct cm_fit hf, gf;
		random_fit(&r, &hf, 1 + rng_below(&r, 3), hx0, hy0, rate,
			   5000000000ull, bend);
		random_fit(&r, &gf, 1 + rng_below(&r, 4), gx0, gy0,
			   rate / ((double)c.ratio / (double)(1ull << c.frac_bits)),
			   3000000000ull, bend);
		int64_t so[8];
		for (size_t k = 0; k < gf.nseg && k < 8; k++)
			so[k] = off + (int64_t)rng_below(&r, 20000000) - 10000000;
		for (size_t k = 0; k < gf.nseg; k++)
			knots += gf.seg[k].nknot;
		for (size_t k = 0; k < hf.nseg; k++)
			knots += hf.seg[k].nknot;
		clamped += compare_maps(&r, &gf, &c, &hf,
					seg_offsets && gf.nseg <= 8 ? so : NULL,
					per_case);
		total += per_case;
		cm_fit_free(&hf);
		cm_fit_free(&gf);
	}
	printf("# %zu inputs over %zu fit pairs (%zu knots), %zu clamped: "
	       "all equal\n", total, cases, knots, clamped);
	if (bend)
		assert_true(knots >= cases); /* the bends were there */
}

static void test_ratio_one(void **state)
{
	(void)state;
	run_cases(1, false, false, false, 300, 20000);
}

static void test_segment_offsets(void **state)
{
	(void)state;
	run_cases(2, false, true, false, 300, 20000);
}

static void test_scaled(void **state)
{
	(void)state;
	run_cases(3, true, false, false, 200, 20000);
	run_cases(4, true, true, false, 100, 20000);
}

/* Clocks that bend: the correction's pieces, remembered from one time to
 * the next, give what the search over all knots gives. */
static void test_bends(void **state)
{
	(void)state;
	run_cases(6, false, true, true, 100, 10000);
	run_cases(7, true, false, true, 60, 10000);
}

/* Empty fits (no samples on a side) pass values through both ways. */
static void test_empty_fits(void **state)
{
	(void)state;
	struct rng r = {5};
	struct cm_fit empty = {0}, f;
	struct cm_cross c = {.ratio = 1, .offset = -123456789};

	random_fit(&r, &f, 2, 1ull << 50, 1ull << 40, 1.0 / 3, 1000000000,
		   false);
	compare_maps(&r, &f, &c, &empty, NULL, 100000);
	compare_maps(&r, &empty, &c, &f, NULL, 100000);
	cm_fit_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ratio_one),
		cmocka_unit_test(test_segment_offsets),
		cmocka_unit_test(test_scaled),
		cmocka_unit_test(test_bends),
		cmocka_unit_test(test_empty_fits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
