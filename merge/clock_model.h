/*
 * clock_model.h - robust piecewise-linear fit of a clock (ns) against a cpu
 * counter (cycles), evaluated and inverted in exact integer math.
 *
 * One fit per clock per machine (clock-sync.md, "The model", step 1):
 *
 *   - the samples are sorted by counter value;
 *   - a robust global slope (median of neighbour slopes) turns every sample
 *     into an "intercept" y - slope * x; a jump of that intercept by more
 *     than min_jump_ns that persists for min_segment_samples samples starts
 *     a new segment (suspend/resume, a stepped clock), an isolated jump is
 *     an outlier;
 *   - each segment is a weighted least-squares line (weight 1/width^2)
 *     around a reference point, refitted a few times while samples whose
 *     residual lies beyond median + k * MAD are rejected;
 *   - where the clock's rate changed inside a segment (NTP retuning it:
 *     no step, a bend), a continuous piecewise-linear correction through
 *     knots is added to the line (clock_bend.c).
 *
 * Each segment is stored in fixed point so that evaluation never touches
 * floating point:
 *
 *   y = y_ref + (((x - x_ref) * slope_q + yfrac_q + 2^(shift-1)) >> shift)
 *   x = x_ref + (((y - y_ref) * inv_q   + xoff_q  + 2^(ishift-1)) >> ishift)
 *
 * in 128-bit arithmetic, plus the bends' correction when the segment has
 * knots (inverted by two fixed-point iterations: the correction's rate is
 * parts per million, so the second moves x by far less than a cycle).
 * slope_q = slope * 2^shift is kept in [2^60, 2^61)
 * whenever the shift allows it (shift <= 62), so any slope from 2^-2 to
 * 2^40 ns/cycle keeps 60 significant bits (relative precision < 1e-18) and
 * slower slopes (counters faster than 4 GHz) keep 62 + log2(slope) bits:
 * still better than 1e-15 down to 1e-3 ns/cycle.  inv_q and ishift are the
 * same for the inverse slope.  Differences (x - x_ref) up to +-2^64 cannot
 * overflow: |product| < 2^125.  Slopes outside [2^-40, 2^40] ns/cycle are
 * refused.
 */
#ifndef VP_CLOCK_MODEL_H
#define VP_CLOCK_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One sync sample.  width 0 means "unknown": such samples get the median
 * width of the samples that have one (equal weights when none has). */
struct cm_sample {
	uint64_t x;     /* counter, cycles */
	uint64_t y;     /* clock, ns */
	uint64_t width; /* read uncertainty, ns */
};

struct cm_fit_opts {
	double outlier_k;           /* reject |resid - median| > k*1.4826*MAD;
				     * default 3 */
	uint64_t min_jump_ns;       /* intercept jump that starts a new
				     * segment; default 1e6 */
	size_t min_segment_samples; /* samples a jump must persist for;
				     * default 2 */
	unsigned max_rounds;        /* reject-and-refit rounds; default 4 */
	double min_outlier_ns;      /* never reject a residual this close to
				     * the median (read noise when the MAD
				     * is a few ns); default 50 */
	double min_bend_ns;         /* a segment whose residuals curve away
				     * from its line by more than this (and
				     * 4x the read noise) gets knots of a
				     * piecewise-linear correction where it
				     * bends; default 200, 0 = never */
};

/* A knot of a segment's correction: c ns added to the line at counter x,
 * and the rate of the piece from there to the next knot (the last knot
 * repeats the rate before it) as rate_q / 2^rshift ns per counter cycle
 * with CM_Q_BITS fractional bits: at xq, c + ((xq - (x << CM_Q_BITS)) *
 * rate_q + 2^(rshift - 1)) >> rshift (clock_bend.c).  A multiply, where a
 * division by the knots' distance would cost ten. */
struct cm_knot {
	uint64_t x;
	int64_t c;
	int64_t rate_q;     /* |rate_q| < 2^44 */
	unsigned rshift;    /* 1..CM_KNOT_MAX_RSHIFT */
};
#define CM_KNOT_MAX_RSHIFT 84

struct cm_segment {
	uint64_t x_first, x_last; /* sampled span in x (all samples) */
	uint64_t y_first, y_last; /* fitted y at those */
	/* the model, see the top of this file */
	uint64_t x_ref, y_ref;
	int64_t slope_q, yfrac_q;
	unsigned shift;
	int64_t inv_q, xoff_q;
	unsigned ishift;
	size_t n_used, n_rejected;
	/* the bends: none (nknot 0) or a correction through nknot >= 2
	 * knots, added to the line above in evaluation and inversion */
	struct cm_knot *knot;
	size_t nknot;
	double slope;             /* ns per cycle, for reports */
	double resid_rms_ns, resid_max_ns; /* of the used samples */
};

struct cm_fit {
	struct cm_segment *seg;   /* sorted by x_first */
	size_t nseg;
	size_t n_used, n_rejected;
	double resid_max_ns;
	double slope_global;      /* robust slope estimate used to segment */
};

/* A counter value with CM_Q_BITS fractional bits (clock_map composes the
 * guest and host fits through it, so slow counters such as arm64's 24 MHz
 * one lose nothing to rounding to whole cycles). */
#define CM_Q_BITS 16
__extension__ typedef __int128 cm_q16;

void cm_fit_opts_default(struct cm_fit_opts *o);

/* Fits s[0..n).  Returns 0, or -1 when there are fewer than 2 samples, fewer
 * than 2 distinct x values, or the clock does not advance with the counter
 * (robust slope outside [2^-40, 2^40] ns/cycle).  Does not keep pointers into
 * s.  On failure *out is left empty (safe to cm_fit_free). */
int cm_fit_build(struct cm_fit *out, const struct cm_sample *s, size_t n,
		 const struct cm_fit_opts *o);
void cm_fit_free(struct cm_fit *f);

/* Clock from counter.  x before the first segment or after the last one is
 * extrapolated from the nearest segment; x between two segments uses the
 * earlier one up to the next one's x_first.  hint (may be NULL) caches the
 * segment index: monotonic streams are O(1).  An empty fit returns x. */
uint64_t cm_fit_eval(const struct cm_fit *f, uint64_t x, size_t *hint);

/* Counter from clock, rounded to the nearest cycle.  The segment whose fitted
 * y range contains y is used, else the nearest one.  An empty fit returns y. */
uint64_t cm_fit_invert(const struct cm_fit *f, uint64_t y, size_t *hint);

/* The same two with fractional counters (CM_Q_BITS bits), for clock_map. */
cm_q16 cm_fit_invert_q16(const struct cm_fit *f, uint64_t y, size_t *hint);
uint64_t cm_fit_eval_q16(const struct cm_fit *f, cm_q16 xq, size_t *hint);
/* The same, setting *ovf (never clearing it) when a value had to be
 * clamped: the input or the result outside 0 .. UINT64_MAX. */
cm_q16 cm_fit_invert_q16_ovf(const struct cm_fit *f, uint64_t y, size_t *hint,
			     bool *ovf);
uint64_t cm_fit_eval_q16_ovf(const struct cm_fit *f, cm_q16 xq, size_t *hint,
			     bool *ovf);

/* cm_fit_eval_q16_ovf in segment seg (clamped to the last one) whatever x
 * is: for a caller that knows which segment applies when the segments'
 * counter ranges overlap (the counter was set back: a migration). */
uint64_t cm_fit_eval_q16_seg(const struct cm_fit *f, size_t seg, cm_q16 xq,
			     bool *ovf);

/* The counter at clock y on segment seg's line (clamped to the last
 * segment) whatever y is, unclamped, with CM_Q_BITS fractional bits: two
 * segments read at one instant say how far the counter jumped between
 * them.  An empty fit returns y. */
cm_q16 cm_fit_invert_q16_seg(const struct cm_fit *f, size_t seg, uint64_t y);

/* The segment cm_fit_eval uses for x, or NULL for an empty fit. */
const struct cm_segment *cm_fit_segment_at(const struct cm_fit *f, uint64_t x,
					   size_t *hint);

/* Error bound at x, ns: the segment's max |residual| over its used samples,
 * plus, when x lies outside the segment's sampled span, CM_EXTRAP_RATE times
 * the distance in ns.  The rate is a slope-uncertainty allowance: outside
 * the samples nothing pins the clock's rate, and NTP may slew it by up to
 * 500 ppm; 100 ppm covers the usual correction without making every bound
 * useless. */
#define CM_EXTRAP_RATE 1e-4
double cm_fit_error_ns(const struct cm_fit *f, uint64_t x);

#endif /* VP_CLOCK_MODEL_H */
