/*
 * clock_map.h - the whole guest clock -> host clock mapping:
 *
 *   guest clock --Fg^-1--> guest cycles --(c - offset)/ratio--> host cycles
 *               --Fh--> host clock
 *
 * (and back again, cm_map_inv_ts).  Fg and Fh are clock_model.h fits; the middle step is the KVM counter
 * relation (clock-sync.md), guest = ((host * ratio) >> frac_bits) + offset,
 * from the command line, a kvm_tsc record or the guest's sync exchanges.
 *
 * The scaling ratio is used as given when frac_bits <= 56; larger frac_bits
 * are rounded down to 56 (an error below 2^-56 relative).  A ratio of 0
 * ("unknown") or one outside [2^-20, 2^20] is taken as 1.0.
 */
#ifndef VP_CLOCK_MAP_H
#define VP_CLOCK_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "clock_model.h"

enum cm_offset_source {
	CM_SRC_CMDLINE,
	CM_SRC_KVM_TSC,
	CM_SRC_EXCHANGES,
	CM_SRC_DEFAULT,
	CM_SRC_CARRIED, /* a segment's: its neighbour's across a step */
};

/* Where an offset came from, as the summary says it: "command line",
 * "kvm_tsc", "sync exchanges", "default" or "carried across a step". */
const char *cm_source_name(enum cm_offset_source s);

/* guest = ((host * ratio) >> frac_bits) + offset; ratio == 1 << frac_bits
 * means 1.0 (the fast path). */
struct cm_cross {
	uint64_t ratio;
	unsigned frac_bits;
	int64_t offset;
	enum cm_offset_source source;
	/* offsets consistent with the evidence, cycles; lo == hi when exact */
	int64_t offset_lo, offset_hi;
};

/* One guest <-> host exchange: the guest read its counter (send), the host
 * its counter (host), the guest its counter again (recv). */
struct cm_exchange {
	uint64_t guest_send, guest_recv, host;
	uint64_t seq;
};

/* Estimates the offset from n exchanges, given the ratio.  Each exchange
 * bounds the offset to [guest_send - R(host), guest_recv - R(host)] with
 * R(h) = (h * ratio) >> frac_bits.  The offset is the midpoint of the
 * intersection over all exchanges.  When the intersection is empty (drift,
 * a wrong ratio, a bad exchange) the interval is the convex hull and the
 * offset the median of the exchanges' midpoints - unless more than half of
 * the exchanges still share a common range, whose middle is then taken (a
 * few bad exchanges do not move the offset out of the good ones).
 * *n_contradicting (may be NULL) counts the exchanges whose interval misses
 * the offset; exchanges with guest_recv < guest_send count as contradicting
 * and are otherwise ignored.
 * Sets ratio, frac_bits, offset, offset_lo/hi and source (EXCHANGES).
 * Returns 0, or -1 when there is no usable exchange (c untouched). */
int cm_cross_from_exchanges(struct cm_cross *c, const struct cm_exchange *ex,
			    size_t n, uint64_t ratio, unsigned frac_bits,
			    size_t *n_contradicting);

/* Counts exchanges whose interval [guest_send, guest_recv] does not contain
 * R(host) + offset. */
size_t cm_cross_check_exchanges(const struct cm_cross *c,
				const struct cm_exchange *ex, size_t n);

/* Host counter from guest counter: the inverse of the relation, exact in
 * 128 bits, rounded to nearest, clamped to [0, UINT64_MAX].  Uses a
 * division; cm_map_ts does not. */
uint64_t cm_cross_guest_to_host(const struct cm_cross *c, uint64_t guest_cycles);
/* Guest counter from host counter: ((host * ratio) >> frac_bits) + offset,
 * clamped to [0, UINT64_MAX]. */
uint64_t cm_cross_host_to_guest(const struct cm_cross *c, uint64_t host_cycles);

/* The whole of cm_map_ts within the segments it last used (guest segment
 * g, host segment h), with a ratio of 1, prepared so that one timestamp
 * costs two multiplications and a few comparisons.  Valid for inputs in
 * [ylo, yhi] whose intermediate counter q1 lies in [qlo, qhi]: there it
 * gives the same bits as the steps one by one. */
struct cm_span {
	bool built, ok; /* tried for segments g and h; usable */
	size_t g, h;
	uint64_t ylo, yhi, y_ref;
	int64_t inv_q, slope_q;
	unsigned ishift, shift;
	cm_q16 xoff, qlo, qhi, k, yfrac;
	uint64_t y_host;
};

struct cm_map {
	const struct cm_fit *guest;
	const struct cm_cross *cross;
	const struct cm_fit *host;
	size_t hint_g, hint_h;
	/* the piece of the hinted segments' bends used last (clock_bend.h) */
	size_t hint_gk, hint_hk;
	/* set by cm_map_init from *cross: the normalised ratio, and its
	 * reciprocal g2h_q / 2^g2h_shift for the division-free hot path */
	uint64_t ratio;
	unsigned frac_bits;
	int identity;
	uint64_t g2h_q;
	unsigned g2h_shift;
	/* When the counter offset changed during the trace (a migration, a
	 * TSC write): the offset in force in each segment of the guest fit;
	 * NULL: cross->offset throughout */
	const int64_t *seg_offset;
	size_t n_seg_offset;
	/* cm_map_ts's shortcut through one pair of segments (clock_map.c) */
	struct cm_span span;
};

/* The fits and cross map must outlive m and not change after this call. */
void cm_map_init(struct cm_map *m, const struct cm_fit *guest,
		 const struct cm_cross *cross, const struct cm_fit *host);

/* Gives each segment of the guest fit its own counter offset (n of them,
 * as many as the fit has segments; the array must outlive m). */
void cm_map_set_segment_offsets(struct cm_map *m, const int64_t *offset,
				size_t n);

/* Guest clock ns -> host clock ns.  O(1) for monotonic input (segment hints),
 * no division.  Non-decreasing for non-decreasing input within a segment of
 * each fit.  The guest counter is carried with CM_Q_BITS fractional bits
 * between the steps, so only the final result is rounded. */
uint64_t cm_map_ts(struct cm_map *m, uint64_t guest_ns);
/* The same, setting *ovf (never clearing it) when the result, or a step
 * on the way, fell outside 0 .. UINT64_MAX and was clamped. */
uint64_t cm_map_ts_ovf(struct cm_map *m, uint64_t guest_ns, bool *ovf);
/* cm_map_ts_ovf for in[0..n), in order, into out[]; returns how many of
 * them it would have set *ovf for. */
size_t cm_map_ts_many(struct cm_map *m, const uint64_t *in, uint64_t *out,
		      size_t n);

/* Error bound of cm_map_ts(guest_ns), ns: both fits' cm_fit_error_ns
 * (residuals + extrapolation) plus the cross map's uncertainty, the larger
 * distance from offset to offset_lo / offset_hi, converted to host ns with
 * the ratio and the host slope. */
double cm_map_error_ns(const struct cm_map *m, uint64_t guest_ns);

/* Host clock ns -> guest clock ns, the other way through the same fits
 * and relation (vperfetto_merge --onto guest):
 *
 *   host clock --Fh^-1--> host cycles --R(h) + offset--> guest cycles
 *              --Fg--> guest clock
 *
 * With segment offsets (cm_map_set_segment_offsets), each segment of the
 * guest fit is tried with its own offset and the one whose sampled guest
 * counter span holds the result is used (else the nearest): after a
 * counter set back, two segments hold the same counter values, and only
 * the offset says which one a host time belongs to.  O(1) for monotonic
 * input, as cm_map_ts.  Use a cm_map in one direction only: both keep
 * their segment hints in it. */
uint64_t cm_map_inv_ts(struct cm_map *m, uint64_t host_ns);
uint64_t cm_map_inv_ts_ovf(struct cm_map *m, uint64_t host_ns, bool *ovf);

/* Error bound of cm_map_inv_ts(host_ns), ns: the same parts as
 * cm_map_error_ns, the cross map's uncertainty converted to guest ns with
 * the guest segment's slope. */
double cm_map_inv_error_ns(const struct cm_map *m, uint64_t host_ns);

/* |relative difference| between host cycles per ns and guest cycles per ns
 * after the ratio, from the longest segment of each fit (warn above 1e-4).
 * 0 when either fit is empty. */
double cm_map_freq_mismatch(const struct cm_map *m);

#endif /* VP_CLOCK_MAP_H */
