/*
 * merge.c - runs the passes of a merge and gathers what the report shows
 * (see merge.h for the order of the passes).
 */
#include "merge.h"
#include "vp_alloc.h"
#include "out_file.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "compressed.h"
#include "merge_limits.h"
#include "partition.h"
#include "pb_wire.h"
#include "perfetto_fields.h"
#include "progress.h"
#include "scan_pass.h"
#include "sync_scan.h"
#include "trace_io.h"

/* ---- small helpers ---------------------------------------------------------- */

static void warn(struct merge_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void warn(struct merge_result *res, const char *fmt, ...)
{
	if (res->n_warnings == MERGE_MAX_WARNINGS) {
		res->n_warnings_dropped++;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->warnings[res->n_warnings++], sizeof(res->warnings[0]),
		  fmt, ap);
	va_end(ap);
}

/* Sets the error message and returns the merge status to fail with. */
static int failf(struct vp_error *err, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int failf(struct vp_error *err, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return status;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* p50/p99/max of v (sorted in place). */
static struct bound_stats distribution(double *v, size_t n)
{
	struct bound_stats s = {0, 0, 0};
	if (!n)
		return s;
	qsort(v, n, sizeof(*v), cmp_double);
	s.p50 = v[(n - 1) / 2];
	s.p99 = v[(size_t)((double)(n - 1) * 0.99)];
	s.max = v[n - 1];
	return s;
}

/* ---- packets, compressed or not -------------------------------------------------- */


static int sink_writer(void *ctx, const struct iovec *iov, int n,
		       struct vp_error *err)
{
	return trace_writer_rawv(ctx, iov, n, err);
}

static uint64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Pass 3: the host clock model (onto a guest's axis, the host's other
 * clock too, for the host's own packets on it), from its scan. */
struct host_fit_ctx {
	const struct merge_opts *o;
	struct merge_result *res;
};

static void fit_host(void *ctx, const struct sync_data *hd)
{
	const struct merge_opts *o = ((struct host_fit_ctx *)ctx)->o;
	struct merge_result *res = ((struct host_fit_ctx *)ctx)->res;

	res->clock = o->clock ? o->clock
		     : hd->boot.n >= 2 ? (uint32_t)BUILTIN_CLOCK_BOOTTIME
		     : hd->mono.n >= 2 ? (uint32_t)BUILTIN_CLOCK_MONOTONIC
				       : (uint32_t)BUILTIN_CLOCK_BOOTTIME;
	bool mono = res->clock == BUILTIN_CLOCK_MONOTONIC;
	const struct sample_vec *hs = mono ? &hd->mono : &hd->boot;
	const struct sample_vec *hso = mono ? &hd->boot : &hd->mono;
	struct cm_fit_opts fo;
	cm_fit_opts_default(&fo);
	res->host_samples = hs->n;
	if (hs->n >= 2 && cm_fit_build(&res->host_fit, hs->v, hs->n, &fo) == 0)
		res->have_host_fit = true;
	if (o->onto_guest && hso->n >= 2 &&
	    cm_fit_build(&res->host_fit_other, hso->v, hso->n, &fo) == 0)
		res->have_host_fit_other = true;
}

/* ---- the clock model per guest ------------------------------------------------------ */

/* How a guest's timestamps are mapped: one cm_map per guest clock.  The
 * maps keep segment hints that every call writes, so each thread has its
 * own copy on its own cache lines. */
struct __attribute__((aligned(128))) guest_map {
	struct cm_map boot, mono;
	bool have_boot, have_mono;
	/* --guest-offset-ns: guest BOOTTIME + offset_ns is the host's time;
	 * guest MONOTONIC goes to guest BOOTTIME through the guest's own
	 * fits when it has both (else it moves by the offset as it is) */
	bool manual;
	int64_t offset_ns;
	const struct cm_fit *own_boot, *own_mono;
	/* (REALTIME, BOOTTIME) of the guest's clock snapshots, by REALTIME:
	 * a REALTIME value goes to BOOTTIME through the last one before it */
	const struct cm_sample *rt;
	size_t n_rt;
	/* --no-machine-id: the host's (REALTIME, output clock) snapshots,
	 * by the output clock (BOOTTIME or MONOTONIC), through which a
	 * guest's android_log entry goes to the host's REALTIME
	 * (map_guest_log); none: entries kept as they are */
	const struct cm_sample *out_rt;
	size_t n_out_rt;
	/* The host's (MONOTONIC, BOOTTIME) snapshots by MONOTONIC.  With
	 * --clock monotonic, through them a guest's ftrace times and the
	 * BOOTTIME entries of its snapshots go to the host's BOOTTIME
	 * (map_guest_boot); none: ftrace times go onto the host's
	 * MONOTONIC, and those entries are kept as they are.  With
	 * --no-machine-id onto BOOTTIME, its legacy microseconds and the
	 * MONOTONIC of its snapshots go to the host's MONOTONIC
	 * (host_boot_to_mono); none: onto the host's BOOTTIME. */
	const struct cm_sample *out_mb;
	size_t n_out_mb;
	uint64_t overflow; /* values clamped: far outside the model */
};

/* in + off, clamped to [0, INT64_MAX] (counted as an overflow): a trace
 * processor takes timestamps as int64, and one past INT64_MAX would
 * become negative there. */
static uint64_t add_offset(uint64_t in, int64_t off, bool *ovf)
{
	if (off < 0 && in < (uint64_t)0 - (uint64_t)off) {
		*ovf = true;
		return 0;
	}
	uint64_t out = in + (uint64_t)off;
	if ((off > 0 && in > UINT64_MAX - (uint64_t)off) ||
	    (out > INT64_MAX && in <= INT64_MAX)) {
		*ovf = true;
		return INT64_MAX;
	}
	return out;
}

/* A value of one clock of a trace's (REALTIME, BOOTTIME) snapshots rt[],
 * sorted by that clock, to the other, as a trace processor converts it:
 * through the last snapshot at or before it, else the first.  to_boot:
 * REALTIME (x) to BOOTTIME (y); else BOOTTIME to REALTIME, the value that
 * converts back to it as long as the clocks keep their step. */
static bool through_snapshots(const struct cm_sample *rt, size_t n_rt,
			      bool to_boot, uint64_t in, uint64_t *out)
{
	size_t lo = 0, hi = n_rt;

	if (!n_rt)
		return false;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if ((to_boot ? rt[mid].x : rt[mid].y) <= in)
			lo = mid;
		else
			hi = mid;
	}
	__int128 v = to_boot ? (__int128)in - rt[lo].x + rt[lo].y
			     : (__int128)in - rt[lo].y + rt[lo].x;
	if (v < 0 || v > (__int128)UINT64_MAX)
		return false;
	*out = (uint64_t)v;
	return true;
}

static bool realtime_to_boot(const struct cm_sample *rt, size_t n_rt,
			     uint64_t in, uint64_t *boot)
{
	return through_snapshots(rt, n_rt, true, in, boot);
}

static int cmp_sample_x(const void *a, const void *b)
{
	const struct cm_sample *p = a, *q = b;
	return p->x < q->x ? -1 : p->x > q->x;
}

static int cmp_sample_y(const void *a, const void *b)
{
	const struct cm_sample *p = a, *q = b;
	return p->y < q->y ? -1 : p->y > q->y;
}

static bool map_guest(void *ctx, uint32_t clock, uint64_t in, uint64_t *out)
{
	struct guest_map *m = ctx;
	bool ovf = false;
	/* REALTIME (android logs, wall-clock events) through BOOTTIME, so
	 * that it lands on the host's axis like the rest. */
	if (clock == BUILTIN_CLOCK_REALTIME) {
		if (!realtime_to_boot(m->rt, m->n_rt, in, &in))
			return false;
		clock = BUILTIN_CLOCK_BOOTTIME;
	}
	if (m->manual) {
		if (clock != BUILTIN_CLOCK_BOOTTIME &&
		    clock != BUILTIN_CLOCK_MONOTONIC)
			return false;
		if (clock == BUILTIN_CLOCK_MONOTONIC && m->own_boot &&
		    m->own_mono)
			in = cm_fit_eval(m->own_boot,
					 cm_fit_invert(m->own_mono, in, NULL),
					 NULL);
		*out = add_offset(in, m->offset_ns, &ovf);
	} else if (clock == BUILTIN_CLOCK_BOOTTIME && m->have_boot)
		*out = cm_map_ts_ovf(&m->boot, in, &ovf);
	else if (clock == BUILTIN_CLOCK_MONOTONIC && m->have_mono)
		*out = cm_map_ts_ovf(&m->mono, in, &ovf);
	else
		return false;
	m->overflow += ovf;
	return true;
}

/* rewrite_cfg.log_map, --no-machine-id: a guest's REALTIME value onto the
 * host's axis (BOOTTIME or MONOTONIC), then to the host's REALTIME there. */
static bool map_guest_log(void *ctx, uint32_t clock, uint64_t in,
			  uint64_t *out)
{
	struct guest_map *m = ctx;
	uint64_t boot;

	return map_guest(ctx, clock, in, &boot) &&
	       through_snapshots(m->out_rt, m->n_out_rt, false, boot, out);
}

/* rewrite_cfg.boot_map, --clock monotonic: a guest's BOOTTIME onto the
 * host's MONOTONIC, then to the host's BOOTTIME there. */
static bool map_guest_boot(void *ctx, uint32_t clock, uint64_t in,
			   uint64_t *out)
{
	struct guest_map *m = ctx;
	uint64_t mono;

	return map_guest(ctx, clock, in, &mono) &&
	       through_snapshots(m->out_mb, m->n_out_mb, true, mono, out);
}

/* rewrite_cfg.axis_to_mono, --no-machine-id onto BOOTTIME: a host
 * BOOTTIME to the host's MONOTONIC, through its last snapshot of both at
 * or before it (out_mb, in the host's order: by MONOTONIC is by BOOTTIME,
 * since BOOTTIME only gains on MONOTONIC). */
static bool host_boot_to_mono(void *ctx, uint64_t boot, uint64_t *mono)
{
	struct guest_map *m = ctx;

	return through_snapshots(m->out_mb, m->n_out_mb, false, boot, mono);
}

/* map_guest for n times of one clock: the fitted map's loop when the
 * clock has one, else map_guest time by time. */
static void map_guest_many(void *ctx, uint32_t clock, const uint64_t *in,
			   uint64_t *out, bool *ok, size_t n)
{
	struct guest_map *m = ctx;
	struct cm_map *cm = NULL;

	if (!m->manual && clock == BUILTIN_CLOCK_BOOTTIME && m->have_boot)
		cm = &m->boot;
	else if (!m->manual && clock == BUILTIN_CLOCK_MONOTONIC &&
		 m->have_mono)
		cm = &m->mono;
	if (!cm) {
		for (size_t i = 0; i < n; i++)
			ok[i] = map_guest(ctx, clock, in[i], &out[i]);
		return;
	}
	m->overflow += cm_map_ts_many(cm, in, out, n);
	memset(ok, 1, n * sizeof(*ok));
}

/* --onto guest: host time -> the chosen guest's time, through the chosen
 * guest's fits and counter relation backwards (cm_map_inv_ts).  The host
 * clock of the axis (res->clock) goes through from_target, the host's
 * other one (BOOTTIME or MONOTONIC) through from_other; both land on the
 * chosen guest's clock of the axis' kind.  Per thread, like guest_map. */
struct __attribute__((aligned(128))) onto_map {
	struct cm_map from_target, from_other;
	bool have_target, have_other;
	uint32_t target;
	/* the host's (REALTIME, BOOTTIME) snapshots, by REALTIME */
	const struct cm_sample *rt;
	size_t n_rt;
	/* onto the chosen guest's MONOTONIC: its (MONOTONIC, BOOTTIME)
	 * snapshots by MONOTONIC (map_onto_boot) */
	const struct cm_sample *mb;
	size_t n_mb;
	uint64_t overflow;
};

static bool map_onto(void *ctx, uint32_t clock, uint64_t in, uint64_t *out)
{
	struct onto_map *m = ctx;
	bool ovf = false;
	struct cm_map *cm = NULL;

	if (clock == BUILTIN_CLOCK_REALTIME) {
		if (!realtime_to_boot(m->rt, m->n_rt, in, &in))
			return false;
		clock = BUILTIN_CLOCK_BOOTTIME;
	}
	if (clock == m->target && m->have_target)
		cm = &m->from_target;
	else if (clock != m->target && m->have_other &&
		 (clock == BUILTIN_CLOCK_BOOTTIME ||
		  clock == BUILTIN_CLOCK_MONOTONIC))
		cm = &m->from_other;
	if (!cm)
		return false;
	*out = cm_map_inv_ts_ovf(cm, in, &ovf);
	m->overflow += ovf;
	return true;
}

/* rewrite_cfg.boot_map, --onto guest with --clock monotonic: a host
 * BOOTTIME onto the chosen guest's MONOTONIC, then to that guest's
 * BOOTTIME through its own snapshots. */
static bool map_onto_boot(void *ctx, uint32_t clock, uint64_t in,
			  uint64_t *out)
{
	struct onto_map *m = ctx;
	uint64_t mono;

	return map_onto(ctx, clock, in, &mono) &&
	       through_snapshots(m->mb, m->n_mb, true, mono, out);
}

/* --onto guest, another guest than the chosen one: onto the host's axis
 * as by default, then onto the chosen guest's. */
struct __attribute__((aligned(128))) via_map {
	struct guest_map to_host;
	struct onto_map onto;
};

static bool map_via(void *ctx, uint32_t clock, uint64_t in, uint64_t *out)
{
	struct via_map *m = ctx;
	uint64_t host;

	if (!map_guest(&m->to_host, clock, in, &host))
		return false;
	return map_onto(&m->onto, m->onto.target, host, out);
}

/* map_onto_boot for another guest: its BOOTTIME onto the chosen guest's
 * MONOTONIC through the host's, then to the chosen guest's BOOTTIME. */
static bool map_via_boot(void *ctx, uint32_t clock, uint64_t in,
			 uint64_t *out)
{
	struct via_map *m = ctx;
	uint64_t mono;

	return map_via(ctx, clock, in, &mono) &&
	       through_snapshots(m->onto.mb, m->onto.n_mb, true, mono, out);
}

/* Says what the scan of a trace did not keep of its sync data, to stay
 * within its memory bound (sync_scan.h). */
static void warn_thinned(struct merge_result *res, const char *side,
			 const char *path, const struct sync_data *d)
{
	size_t thinned = sync_data_thinned(d);

	if (thinned)
		warn(res, "%s %s: %zu sync samples and exchanges of more than "
		     "%zu of a kind were left out, an even spread of them kept, "
		     "to bound the merge's memory", side, path, thinned,
		     sync_data_max_samples(d));
	if (d->n_kvm_dropped)
		warn(res, "%s %s: %zu kvm_tsc changes beyond the first %zu were "
		     "ignored", side, path, d->n_kvm_dropped,
		     sync_data_max_kvm(d));
}

/* Picks the counter relation for guest gi: command line, kvm_tsc in the host
 * trace, the guest's sync exchanges, or ratio 1 offset 0. */
/* A value of the counter offset and the host time its first record was
 * written. */
struct offset_change {
	int64_t offset;
	uint64_t ts;
};

/* How far host time t lies outside [lo, hi): 0 inside. */
static uint64_t outside(uint64_t t, uint64_t lo, uint64_t hi)
{
	return t < lo ? lo - t : t >= hi ? t - hi + 1 : 0;
}

/* The offset in force during segment k of guest fit f: the value whose
 * span of host time holds the segment's middle when placed on the host's
 * axis with that very value (a wrong value puts it off by the size of
 * the change, seconds for a real migration).  The first value's span
 * reaches back to the start of time, so a change that moved the counter
 * back can leave two values that both hold it: then the one that puts
 * the middle nearer the host's own samples wins (the wrong one puts it
 * the size of the change away from them). */
static int64_t segment_offset(const struct cm_fit *f, size_t k,
			      const struct offset_change *ch, size_t n,
			      const struct cm_cross *c,
			      const struct cm_fit *host)
{
	const struct cm_segment *s = &f->seg[k];
	uint64_t xm = s->x_first + (s->x_last - s->x_first) / 2;
	uint64_t h_lo = host->seg[0].y_first;
	uint64_t h_hi = host->seg[host->nseg - 1].y_last;
	uint64_t best_d = UINT64_MAX, best_far = UINT64_MAX;
	size_t best = n - 1;

	for (size_t j = 0; j < n; j++) {
		struct cm_cross t = *c;
		t.offset = ch[j].offset;
		uint64_t ht = cm_fit_eval(host, cm_cross_guest_to_host(&t, xm),
					  NULL);
		uint64_t d = outside(ht, j ? ch[j].ts : 0,
				     j + 1 < n ? ch[j + 1].ts : UINT64_MAX);
		uint64_t far = outside(ht, h_lo,
				       h_hi < UINT64_MAX ? h_hi + 1 : h_hi);
		if (d < best_d || (d == best_d && far < best_far)) {
			best_d = d;
			best_far = far;
			best = j;
		}
	}
	return ch[best].offset;
}

static int cmp_kvm_ts(const void *a, const void *b)
{
	const struct kvm_tsc_record *p = *(const struct kvm_tsc_record *const *)a;
	const struct kvm_tsc_record *q = *(const struct kvm_tsc_record *const *)b;
	return p->ts < q->ts ? -1 : p->ts > q->ts;
}

/* kvm_tsc recorded several values of the offset of this VM: each segment
 * of each guest fit gets the one in force then. */
static void piecewise_offsets(const struct sync_data *host, int64_t pid,
			      struct merge_guest *g, struct merge_result *res)
{
	size_t n = 0, nch = 0;
	const struct kvm_tsc_record **recs =
		vp_xcalloc(host->n_kvm, sizeof(*recs));
	for (size_t i = 0; i < host->n_kvm; i++)
		if (host->kvm[i].vm_pid == pid)
			recs[n++] = &host->kvm[i];
	qsort(recs, n, sizeof(*recs), cmp_kvm_ts);
	struct offset_change *ch = vp_xcalloc(n ? n : 1, sizeof(*ch));
	for (size_t i = 0; i < n; i++) {
		if (nch && ch[nch - 1].offset == recs[i]->tsc_offset)
			continue;
		ch[nch++] = (struct offset_change){recs[i]->tsc_offset,
						   recs[i]->ts};
	}
	g->n_offset_values = nch;
	g->seg_offset_source = CM_SRC_KVM_TSC;
	for (int which = 0; which < 2 && res->have_host_fit && nch > 1;
	     which++) {
		const struct cm_fit *f = which ? &g->fit_mono : &g->fit_boot;
		int64_t **out = which ? &g->seg_offset_mono
				      : &g->seg_offset_boot;
		if (!(which ? g->have_mono : g->have_boot) || !f->nseg)
			continue;
		*out = vp_xcalloc(f->nseg, sizeof(**out));
		for (size_t k = 0; k < f->nseg; k++)
			(*out)[k] = segment_offset(f, k, ch, nch, &g->cross,
						   &res->host_fit);
	}
	free(ch);
	free(recs);
}

/* The exchanges that fall inside segment s's sampled counter span. */
static size_t segment_exchanges(const struct cm_segment *s,
				const struct sync_data *gd,
				struct cm_exchange *out)
{
	size_t n = 0;

	for (size_t i = 0; i < gd->n_ex; i++)
		if (gd->ex[i].guest_send >= s->x_first &&
		    gd->ex[i].guest_recv <= s->x_last)
			out[n++] = gd->ex[i];
	return n;
}

/* Exchanges contradicting the offsets: the segment's own where the
 * offset is piecewise (exchanges outside every span are not judged). */
static size_t count_violations(const struct merge_guest *g,
			       const struct sync_data *gd)
{
	const int64_t *so = g->seg_offset_boot ? g->seg_offset_boot
					       : g->seg_offset_mono;
	const struct cm_fit *f = g->seg_offset_boot ? &g->fit_boot
						    : &g->fit_mono;
	if (!so)
		return cm_cross_check_exchanges(&g->cross, gd->ex, gd->n_ex);
	struct cm_exchange *sub = vp_xcalloc(gd->n_ex ? gd->n_ex : 1,
					     sizeof(*sub));
	size_t bad = 0;
	for (size_t k = 0; k < f->nseg; k++) {
		struct cm_cross t = g->cross;
		t.offset = t.offset_lo = t.offset_hi = so[k];
		size_t n = segment_exchanges(&f->seg[k], gd, sub);
		bad += cm_cross_check_exchanges(&t, sub, n);
	}
	free(sub);
	return bad;
}

/* ---- offsets across a step of the guest's counter ---------------------------- */

/* The segments of fit f in time order (by their first clock value: the
 * counter may have been set back, the clock runs on). */
static size_t *time_order(const struct cm_fit *f)
{
	size_t *o = vp_xcalloc(f->nseg, sizeof(*o));

	for (size_t i = 0; i < f->nseg; i++) {
		size_t j = i;
		while (j && f->seg[o[j - 1]].y_first > f->seg[i].y_first) {
			o[j] = o[j - 1];
			j--;
		}
		o[j] = i;
	}
	return o;
}

/* How far the counter jumps from segment a to segment b at clock y, in
 * whole cycles (b's line less a's). */
static int64_t counter_jump(const struct cm_fit *f, size_t a, size_t b,
			    uint64_t y)
{
	cm_q16 d = cm_fit_invert_q16_seg(f, b, y) -
		   cm_fit_invert_q16_seg(f, a, y);
	d += (cm_q16)1 << (CM_Q_BITS - 1);
	d >>= CM_Q_BITS;
	return d > INT64_MAX ? INT64_MAX : d < INT64_MIN ? INT64_MIN : (int64_t)d;
}

/* One step carried: segment b gets the offset of its neighbour in time
 * a, moved by the counter's jump between them, read off both lines at
 * the middle of the gap between their samples.  The guest's clock runs
 * on across the step (kvmclock keeps it so when KVM's TSC offset
 * changes), so the offset moves by exactly what the counter jumped.
 * Returns the uncertainty of that, cycles: the jump's spread over the
 * gap (the lines' rates differ a little) and both lines' residuals. */
static int64_t carry_step(const struct cm_fit *f, int64_t *so, size_t a,
			  size_t b, int64_t *jump)
{
	const struct cm_segment *sa = &f->seg[a], *sb = &f->seg[b];
	bool a_first = sa->y_first <= sb->y_first;
	uint64_t lo = a_first ? sa->y_last : sb->y_last;
	uint64_t hi = a_first ? sb->y_first : sa->y_first;

	if (lo > hi) { /* overlapping clock spans: judge at their middle */
		uint64_t t = lo;
		lo = hi;
		hi = t;
	}
	*jump = counter_jump(f, a, b, lo + (hi - lo) / 2);
	__int128 v = (__int128)so[a] + *jump;
	so[b] = v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;

	int64_t j_lo = counter_jump(f, a, b, lo), j_hi = counter_jump(f, a, b, hi);
	double spread = fabs((double)j_hi - (double)j_lo) / 2;
	double slope = (sa->slope + sb->slope) / 2;
	double resid = slope > 0 ? (sa->resid_max_ns + sb->resid_max_ns) / slope
				 : 0;
	return (int64_t)ceil(spread + resid);
}

/* Gives each segment of f without an offset of its own (!pinned) the
 * offset of its nearest pinned neighbour in time, carried across the
 * steps between them (carry_step); carried[] marks them.  With say,
 * warns once per carried segment.  Returns the largest uncertainty of a
 * carried offset (summed along a chain of carries), cycles. */
static int64_t carry_offsets(const struct cm_fit *f, int64_t *so,
			     const bool *pinned, bool *carried,
			     const struct merge_guest *g, bool say,
			     struct merge_result *res)
{
	size_t *o = time_order(f);
	bool *known = vp_xcalloc(f->nseg, sizeof(*known));
	/* a carry from a carried segment adds to that one's uncertainty */
	int64_t *unc = vp_xcalloc(f->nseg, sizeof(*unc));
	int64_t worst = 0;

	for (size_t i = 0; i < f->nseg; i++)
		known[i] = pinned[i];
	/* forward from each pinned segment, then back for those before the
	 * first one */
	for (int dir = 0; dir < 2; dir++) {
		for (size_t j = 1; j < f->nseg; j++) {
			size_t a = dir ? o[f->nseg - j] : o[j - 1];
			size_t b = dir ? o[f->nseg - j - 1] : o[j];
			if (known[b] || !known[a])
				continue;
			int64_t jump;
			int64_t u = carry_step(f, so, a, b, &jump);
			unc[b] = unc[a] > INT64_MAX - u ? INT64_MAX : unc[a] + u;
			known[b] = carried[b] = true;
			worst = unc[b] > worst ? unc[b] : worst;
			if (!say)
				continue;
			const struct cm_segment *s = &f->seg[b];
			uint64_t at = dir ? s->y_last : f->seg[a].y_last;
			warn(res, "guest %s: its counter steps by %+lld cycles "
			     "after clock %llu ns, with no exchange or kvm_tsc "
			     "%s it: offset carried across (the clock taken to "
			     "run on); had the guest paused there, times %s it "
			     "are off by %.3f ms", g->path, (long long)jump,
			     (unsigned long long)at, dir ? "before" : "after",
			     dir ? "before" : "after",
			     fabs((double)jump) * s->slope / 1e6);
		}
	}
	free(unc);
	free(known);
	free(o);
	return worst;
}

/* The segment of f whose counter span is nearest x. */
static size_t segment_near(const struct cm_fit *f, uint64_t x)
{
	size_t best = 0;
	uint64_t best_d = UINT64_MAX;

	for (size_t k = 0; k < f->nseg; k++) {
		const struct cm_segment *s = &f->seg[k];
		uint64_t d = x < s->x_first ? s->x_first - x
			     : x > s->x_last ? x - s->x_last : 0;
		if (d < best_d) {
			best_d = d;
			best = k;
		}
	}
	return best;
}

/* The offsets of the segments of a guest's fits when the guest's counter
 * stepped (a migration, a TSC write, with no kvm_tsc record of it): a
 * segment with sync exchanges inside its sampled span is pinned by them
 * (their own offset where the exchanges contradict one offset, else the
 * one fitted to all), and every other segment gets its neighbour's
 * carried across the step (carry_offsets).  With no exchange at all
 * (base_src CM_SRC_DEFAULT), the first segment in time holds the base
 * offset.  Nothing changes when every segment is pinned by exchanges
 * that agree on one offset. */
static void segment_offsets(const struct sync_data *gd, struct merge_guest *g,
			    bool contradicting, struct merge_result *res)
{
	struct cm_exchange *sub = vp_xcalloc(gd->n_ex ? gd->n_ex : 1,
					     sizeof(*sub));

	for (int which = 0; which < 2; which++) {
		const struct cm_fit *f = which ? &g->fit_mono : &g->fit_boot;
		if (!(which ? g->have_mono : g->have_boot) || f->nseg < 2)
			continue;
		int64_t *so = vp_xcalloc(f->nseg, sizeof(*so));
		bool *pinned = vp_xcalloc(f->nseg, sizeof(*pinned));
		bool *carried = vp_xcalloc(f->nseg, sizeof(*carried));
		size_t own = 0;
		int64_t below = 0, above = 0; /* the widest interval's halves */
		for (size_t k = 0; k < f->nseg; k++) {
			struct cm_cross t = g->cross;
			size_t n = segment_exchanges(&f->seg[k], gd, sub);
			so[k] = g->cross.offset;
			if (!n || cm_cross_from_exchanges(&t, sub, n, t.ratio,
							  t.frac_bits,
							  NULL) != 0)
				continue;
			pinned[k] = true;
			own++;
			if (!contradicting)
				continue;
			so[k] = t.offset;
			if (t.offset - t.offset_lo > below)
				below = t.offset - t.offset_lo;
			if (t.offset_hi - t.offset > above)
				above = t.offset_hi - t.offset;
		}
		if (!own) {
			/* no segment holds a whole exchange: the one nearest
			 * them holds the offset fitted to them all, or with
			 * none, the first in time the default */
			size_t *o = time_order(f);
			pinned[gd->n_ex ? segment_near(f, gd->ex[0].guest_send)
					: o[0]] = true;
			free(o);
		}
		bool any_free = own < f->nseg;
		if (!any_free && (!contradicting || own < 2)) {
			free(so);
			free(pinned);
			free(carried);
			continue;
		}
		if (contradicting && own >= 2) {
			/* The error bound takes the segments' own
			 * uncertainty, not the span of the values across the
			 * change. */
			g->cross.offset_lo = g->cross.offset - below;
			g->cross.offset_hi = g->cross.offset + above;
		}
		/* MONOTONIC steps where BOOTTIME does: warned for once */
		int64_t u = carry_offsets(f, so, pinned, carried, g,
					  !which || !g->have_boot, res);
		if (u) {
			g->cross.offset_lo = g->cross.offset_lo > INT64_MIN + u
						     ? g->cross.offset_lo - u
						     : INT64_MIN;
			g->cross.offset_hi = g->cross.offset_hi < INT64_MAX - u
						     ? g->cross.offset_hi + u
						     : INT64_MAX;
		}
		*(which ? &g->seg_offset_mono : &g->seg_offset_boot) = so;
		*(which ? &g->seg_carried_mono : &g->seg_carried_boot) = carried;
		free(pinned);
		g->seg_offset_source = g->cross.source;
		size_t distinct = 1;
		for (size_t k = 1; k < f->nseg; k++)
			distinct += so[k] != so[k - 1];
		if (distinct > g->n_offset_values)
			g->n_offset_values = distinct;
	}
	free(sub);
}

static void choose_cross(const struct merge_opts *o, size_t gi,
			 const struct sync_data *host, const struct sync_data *gd,
			 struct merge_guest *g, struct merge_result *res)
{
	struct cm_cross *c = &g->cross;
	uint64_t ratio = 1;
	unsigned frac = 0;
	bool have_scaling = false;

	if (o->n_tsc_scaling) {
		size_t i = o->n_tsc_scaling == 1 ? 0 : gi;
		ratio = o->tsc_ratio[i];
		frac = o->tsc_frac_bits[i];
		have_scaling = true;
	}
	memset(c, 0, sizeof(*c));
	c->ratio = ratio;
	c->frac_bits = frac;
	g->kvm_vm_pid = -1;

	if (o->n_tsc_offset) {
		c->offset = c->offset_lo = c->offset_hi = o->tsc_offset[gi];
		c->source = CM_SRC_CMDLINE;
		size_t nseg = g->have_boot ? g->fit_boot.nseg
					   : g->have_mono ? g->fit_mono.nseg : 0;
		if (nseg > 1)
			warn(res, "guest %s: its clock fit has %zu segments (a "
			     "step in its counter or clock); --guest-tsc-offset "
			     "applies to all of them", g->path, nseg);
		return;
	}

	/* kvm_tsc: the records of this guest's VM. */
	int64_t pid = -1;
	if (o->n_vm_pid) {
		pid = o->vm_pid[gi];
	} else if (host->n_kvm) {
		bool one_vm = true;
		for (size_t i = 1; i < host->n_kvm; i++)
			if (host->kvm[i].vm_pid != host->kvm[0].vm_pid)
				one_vm = false;
		if (one_vm && o->n_guests == 1)
			pid = host->kvm[0].vm_pid;
		else if (!gd->n_ex)
			warn(res, "guest %s: the host trace has kvm_tsc records of "
			     "several VMs; say which with --guest-vm-pid",
			     g->path);
	}
	const struct kvm_tsc_record *k = NULL;
	bool changed = false;
	for (size_t i = 0; pid >= 0 && i < host->n_kvm; i++) {
		if (host->kvm[i].vm_pid != pid)
			continue;
		if (k && (k->tsc_offset != host->kvm[i].tsc_offset ||
			  k->ratio != host->kvm[i].ratio))
			changed = true;
		k = &host->kvm[i];
	}
	if (k) {
		c->offset = c->offset_lo = c->offset_hi = k->tsc_offset;
		if (k->ratio && !have_scaling) {
			c->ratio = k->ratio;
			c->frac_bits = (unsigned)k->frac_bits;
		}
		c->source = CM_SRC_KVM_TSC;
		g->kvm_vm_pid = pid;
		if (changed) {
			piecewise_offsets(host, pid, g, res);
			if (!g->seg_offset_boot && !g->seg_offset_mono)
				warn(res, "guest %s: KVM tsc-offset of VM %lld "
				     "changed during the trace, but the guest's "
				     "sync samples show no step to place it at; "
				     "using the last value", g->path,
				     (long long)pid);
		}
		return;
	}
	if (pid >= 0 && o->n_vm_pid)
		warn(res, "guest %s: no kvm_tsc record for VM pid %lld in the "
		     "host trace", g->path, (long long)pid);

	size_t contradicting = 0;
	if (gd->n_ex &&
	    cm_cross_from_exchanges(c, gd->ex, gd->n_ex, c->ratio, c->frac_bits,
				    &contradicting) == 0) {
		c->source = CM_SRC_EXCHANGES;
		segment_offsets(gd, g, contradicting != 0, res);
		if (contradicting && (g->seg_offset_boot || g->seg_offset_mono))
			contradicting = count_violations(g, gd);
		if (contradicting)
			warn(res, "guest %s: %zu of %zu sync exchanges contradict "
			     "each other (drift or a bad ratio?)", g->path,
			     contradicting, gd->n_ex);
		return;
	}
	c->ratio = ratio;
	c->frac_bits = frac;
	c->offset = c->offset_lo = c->offset_hi = 0;
	c->source = CM_SRC_DEFAULT;
	warn(res, "guest %s: no counter offset from the command line, kvm_tsc "
	     "or sync exchanges; assuming guest counter = host counter",
	     g->path);
	segment_offsets(gd, g, false, res);
}

/* The host counter of guest counter gx in guest fit segment i, with the
 * offset in force there. */
static uint64_t seg_to_host(const struct merge_guest *g, const int64_t *so,
			    size_t i, uint64_t gx)
{
	struct cm_cross c = g->cross;

	if (so)
		c.offset = so[i];
	return cm_cross_guest_to_host(&c, gx);
}

/* A guest's sync samples may start or end a little outside the host's
 * (the sessions start one after the other): the map extrapolates there,
 * and its error bound says how well.  Farther apart than this, and than
 * both spans together, they are not of one recording. */
#define MEET_SLACK_NS 10e9

/* Whether the guest's sync samples, carried to the host's counter, meet
 * the host's: a guest recorded beside another host trace (or given a
 * wrong counter offset) does not, and no map of its time can be right.
 * *lo..*hi is the guest's span in host cycles. */
static bool guest_meets_host(const struct merge_guest *g,
			     const struct merge_result *res, uint64_t *lo,
			     uint64_t *hi)
{
	const struct cm_fit *gf = g->have_boot ? &g->fit_boot : &g->fit_mono;
	const int64_t *so = g->have_boot ? g->seg_offset_boot
					 : g->seg_offset_mono;
	const struct cm_fit *hf = &res->host_fit;

	if (!gf->nseg || !hf->nseg)
		return true;
	uint64_t h0 = hf->seg[0].x_first, h1 = hf->seg[hf->nseg - 1].x_last;
	double gap = INFINITY, span = 0;
	*lo = UINT64_MAX;
	*hi = 0;
	for (size_t i = 0; i < gf->nseg; i++) {
		uint64_t a = seg_to_host(g, so, i, gf->seg[i].x_first);
		uint64_t b = seg_to_host(g, so, i, gf->seg[i].x_last);
		if (a > b) {
			uint64_t t = a;
			a = b;
			b = t;
		}
		double d = b < h0 ? (double)(h0 - b) : a > h1 ? (double)(a - h1) : 0;
		gap = d < gap ? d : gap;
		span += (double)(b - a);
		*lo = a < *lo ? a : *lo;
		*hi = b > *hi ? b : *hi;
	}
	span += (double)(h1 - h0);
	double ns_per_cycle = hf->seg[0].slope;
	return gap <= span || gap * ns_per_cycle <= MEET_SLACK_NS;
}

/* Where the offset is per segment: each segment's error bound, the
 * largest at its first and last sync sample and halfway between (the
 * bound of a line grows towards its ends). */
static void segment_bounds(struct merge_guest *g, const struct cm_map *m)
{
	const struct cm_fit *f = g->have_boot ? &g->fit_boot : &g->fit_mono;

	if (!(g->have_boot ? g->seg_offset_boot : g->seg_offset_mono))
		return;
	g->seg_bound_ns = vp_xcalloc(f->nseg, sizeof(*g->seg_bound_ns));
	for (size_t k = 0; k < f->nseg; k++) {
		const struct cm_segment *s = &f->seg[k];
		uint64_t at[3] = {s->y_first, s->y_first + (s->y_last - s->y_first) / 2,
				  s->y_last};
		for (int i = 0; i < 3; i++) {
			double e = cm_map_error_ns(m, at[i]);
			if (e > g->seg_bound_ns[k])
				g->seg_bound_ns[k] = e;
		}
	}
}

/* Error bounds, frequency agreement and exchange checks of a fitted guest. */
static void fit_quality(struct merge_guest *g, const struct sync_data *gd,
			struct guest_map *gm, struct merge_result *res)
{
	struct cm_map *m = g->have_boot ? &gm->boot : &gm->mono;
	const struct sample_vec *sv = g->have_boot ? &gd->boot : &gd->mono;

	/* Error bound at each sync sample (at the ends of the trace it is
	 * computed after the rewrite, which sees the first and last packet). */
	double *v = vp_xmalloc((sv->n + 1) * sizeof(double));
	for (size_t i = 0; i < sv->n; i++)
		v[i] = cm_map_error_ns(m, sv->v[i].y);
	g->bound_ns = distribution(v, sv->n);
	free(v);
	segment_bounds(g, m);

	g->freq_mismatch = cm_map_freq_mismatch(m);
	/* Signed rate of the guest clock against the host clock: guest ns per
	 * guest cycle, times guest cycles per host cycle, over host ns per
	 * host cycle. */
	const struct cm_fit *gf = g->have_boot ? &g->fit_boot : &g->fit_mono;
	double rho = ldexp((double)g->cross.ratio, -(int)g->cross.frac_bits);
	g->drift_ppm = (gf->seg[0].slope * rho / res->host_fit.seg[0].slope - 1) * 1e6;
	if (g->freq_mismatch > 1e-4)
		warn(res, "guest %s: host and guest cycles-per-ns disagree by "
		     "%.1f ppm after the ratio (wrong --guest-tsc-scaling?)",
		     g->path, g->freq_mismatch * 1e6);

	/* Exchanges: round trips in ns, and intervals that miss the model. */
	g->n_exchanges = gd->n_ex;
	if (gd->n_ex && res->have_host_fit) {
		double *w = vp_xmalloc(gd->n_ex * sizeof(double));
		double ns_per_cycle = res->host_fit.seg[0].slope;
		for (size_t i = 0; i < gd->n_ex; i++)
			w[i] = (double)(gd->ex[i].guest_recv - gd->ex[i].guest_send) *
			       ns_per_cycle;
		g->exchange_width_ns = distribution(w, gd->n_ex);
		free(w);
		g->n_causality_violations = count_violations(g, gd);
		if (g->n_causality_violations)
			warn(res, "guest %s: %zu of %zu sync exchanges contradict "
			     "the chosen counter offset", g->path,
			     g->n_causality_violations, gd->n_ex);
	}
}

/* Builds the fits and cross map of one guest.  Returns a merge_status. */
/* One of a guest's clock fits, on a thread of its own. */
struct fit_job {
	const struct sample_vec *v;
	const struct cm_fit_opts *fo;
	struct cm_fit *fit;
	bool ok;
};

static void *fit_job_run(void *arg)
{
	struct fit_job *j = arg;

	j->ok = j->v->n >= 2 &&
		cm_fit_build(j->fit, j->v->v, j->v->n, j->fo) == 0;
	return NULL;
}

/* The guest's BOOTTIME and MONOTONIC fits (a few ms each for thousands
 * of samples), at once when two threads may be used. */
static void fit_guest_clocks(const struct sync_data *gd, struct merge_guest *g,
			     const struct cm_fit_opts *fo, bool two)
{
	struct fit_job boot = {&gd->boot, fo, &g->fit_boot, false};
	struct fit_job mono = {&gd->mono, fo, &g->fit_mono, false};
	pthread_t tid;
	bool apart = two && gd->boot.n >= 2 && gd->mono.n >= 2 &&
		     pthread_create(&tid, NULL, fit_job_run, &mono) == 0;

	fit_job_run(&boot);
	if (apart)
		pthread_join(tid, NULL);
	else
		fit_job_run(&mono);
	g->have_boot = boot.ok;
	g->have_mono = mono.ok;
}

static int model_guest(const struct merge_opts *o, size_t gi,
		       const struct sync_data *hd, const struct sync_data *gd,
		       struct merge_result *res, struct guest_map *gm,
		       struct vp_error *err)
{
	struct merge_guest *g = &res->guests[gi];
	struct cm_fit_opts fo;

	cm_fit_opts_default(&fo);
	g->n_samples_boot = gd->boot.n;
	g->n_samples_mono = gd->mono.n;
	g->n_snapshot_samples = gd->n_snapshot_samples;
	g->n_event_samples = gd->n_event_samples;
	memset(gm, 0, sizeof(*gm));
	warn_thinned(res, "guest", g->path, gd);

	if (gi < o->n_offset_ns) {
		/* Given by hand: no model, whatever sync data there is. */
		g->manual = true;
		g->manual_offset_ns = o->offset_ns[gi];
		gm->manual = true;
		gm->offset_ns = o->offset_ns[gi];
	}
	fit_guest_clocks(gd, g, &fo, o->threads > 1);
	if (g->manual) {
		/* The guest's own fits, if any, only relate its MONOTONIC to
		 * its BOOTTIME; the host side is the offset given. */
		if (g->have_boot && g->have_mono) {
			gm->own_boot = &g->fit_boot;
			gm->own_mono = &g->fit_mono;
		}
		warn(res, "guest %s: host time = guest BOOTTIME %+lld ns, as "
		     "given (--guest-offset-ns); %s", g->path,
		     (long long)g->manual_offset_ns,
		     gm->own_boot ? "its MONOTONIC follows its BOOTTIME through "
				    "its own sync samples"
				  : "its MONOTONIC moves by the same offset");
		return MERGE_OK;
	}

	if (!res->have_host_fit || (!g->have_boot && !g->have_mono)) {
		/* the trace that lacks them, named: the host's or this guest's */
		char why[160];
		if (!res->have_host_fit)
			snprintf(why, sizeof(why), "%s: the host trace has no "
				 "usable clock-sync snapshots (%s with clock "
				 "64, two at least)", o->host,
				 o->clock ? builtin_clock_name(res->clock)
					  : "BOOTTIME or MONOTONIC");
		else
			snprintf(why, sizeof(why), "%s: the guest trace has no "
				 "usable cros/guest_clock_sync samples",
				 g->path);
		if (!o->allow_unsynced)
			return failf(err, MERGE_NO_SYNC, "%s", why);
		warn(res, "guest %s: not synced (%s); its timestamps pass through "
		     "unchanged (--allow-unsynced)", g->path, why);
		g->synced = false;
		return MERGE_OK;
	}
	g->synced = true;
	choose_cross(o, gi, hd, gd, g, res);
	uint64_t glo, ghi;
	if (!guest_meets_host(g, res, &glo, &ghi)) {
		const struct cm_fit *hf = &res->host_fit;
		warn(res, "guest %s: its sync samples fall at host counter "
		     "%llu..%llu (counter offset from the %s) and the host "
		     "trace's at %llu..%llu: they are far apart; was it "
		     "recorded beside this host trace?", g->path,
		     (unsigned long long)glo, (unsigned long long)ghi,
		     cm_source_name(g->cross.source),
		     (unsigned long long)hf->seg[0].x_first,
		     (unsigned long long)hf->seg[hf->nseg - 1].x_last);
	}
	if (g->have_boot) {
		cm_map_init(&gm->boot, &g->fit_boot, &g->cross, &res->host_fit);
		if (g->seg_offset_boot)
			cm_map_set_segment_offsets(&gm->boot, g->seg_offset_boot,
						   g->fit_boot.nseg);
		gm->have_boot = true;
	}
	if (g->have_mono) {
		cm_map_init(&gm->mono, &g->fit_mono, &g->cross, &res->host_fit);
		if (g->seg_offset_mono)
			cm_map_set_segment_offsets(&gm->mono, g->seg_offset_mono,
						   g->fit_mono.nseg);
		gm->have_mono = true;
	}
	fit_quality(g, gd, gm, res);
	return MERGE_OK;
}

/* ---- pass 3: rewrite a guest ---------------------------------------------------------- */

/* zlib level of re-compressed compressed_packets: the fastest, so that a
 * compressed trace is merged at about the speed of an uncompressed one
 * and the output stays about as large as the input. */
#define RECOMPRESS_LEVEL 1

/* One thread's share of a rewrite.  Aligned to cache lines of its own:
 * the threads write theirs on every packet, and sharing a line would
 * make them take turns at it. */
struct __attribute__((aligned(128))) rewrite_ctx {
	const char *path;
	struct rewriter *rw;
	const struct rewrite_cfg *cfg;
	struct pb_buf scratch; /* inflated compressed_packets */
	struct pb_buf inner;   /* their rewritten packets, a chunk of them */
	struct deflate_stream deflate; /* ... compressed again */
	struct pb_buf *zout;   /* into the output packet */
	uint64_t off;          /* of the compressed packet */
	struct inflate_budget budget;
	struct pb_buf *out;    /* where framed packets go */
	const struct partition_job *job; /* the rewrite's */
	struct zsplit *split;  /* a large compressed packet under way */
};

struct zsplit;
static void split_used(struct rewrite_ctx *c);

/* Rewrites a packet into c->out as a framed Trace.packet. */
static int rewrite_fn(void *ctx, const uint8_t *pkt, size_t len, uint64_t off,
		      struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;
	size_t start = c->out->len;
	/* the rewritten packet is about as long as the input */
	struct pb_sized mark = pb_begin_sized(c->out, TRACE_PACKET_FIELD, len);
	int rc = rewrite_packet(c->rw, pkt, len, off, c->out, err);

	if (rc != 0) {
		c->out->len = start; /* -1, or 1: compressed_packets */
		return rc;
	}
	/* Remapped timestamps can be longer varints than the guest's (a
	 * host up for a week is past 2^49 ns): a packet near the limit may
	 * grow past what a reader of the output accepts. */
	if (trace_output_fits(c->path, off,
			      c->out->len - (mark.mark + mark.hole), err) < 0) {
		c->out->len = start;
		return -1;
	}
	pb_end_sized(c->out, mark);
	return 0;
}

/* compressed_flush_fn: the packets rewritten so far, deflated. */
static int deflate_inner(void *ctx, struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;
	int rc = deflate_stream_put(&c->deflate, c->inner.data, c->inner.len,
				    false, c->zout, c->path, c->off, err);

	pb_buf_reset(&c->inner);
	return rc;
}

/* partition_job.fn for a packet inside compressed_packets written aside
 * (rewrite_large): rewritten as any inside; the offsets in messages are
 * the compressed packet's. */
static int inner_record(void *ctx, const uint8_t *raw, size_t raw_len,
			uint32_t field, uint8_t wt, const uint8_t *data,
			size_t len, uint64_t off, struct pb_buf *out,
			struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;

	(void)raw;
	(void)raw_len;
	(void)field;
	(void)wt;
	(void)off;
	c->out = out;
	int rc = rewrite_fn(c, data, len, c->off, err);
	if (rc > 0)
		return vp_errorf(err, "%s: byte offset %llu: compressed_packets "
				 "inside compressed_packets", c->path,
				 (unsigned long long)c->off);
	return rc;
}

/* partition_job.sink for it: deflated into the compressed packet's
 * output with the packets before it. */
static int deflate_sink(void *ctx, const struct iovec *iov, int n,
			struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;

	split_used(c);
	for (int i = 0; i < n; i++)
		if (deflate_stream_put(&c->deflate, iov[i].iov_base,
				       iov[i].iov_len, false, c->zout, c->path,
				       c->off, err) < 0)
			return -1;
	return 0;
}

/* compressed_spill.large: a packet inside compressed_packets too large to
 * hold, written aside, rewritten as a large packet of a trace is: only
 * what the rewrite reads of it in memory. */
static int rewrite_large(void *ctx, int fd, uint64_t off, struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;
	struct partition_job job = *c->job;
	struct pb_buf *saved = c->out;

	job.fn = inner_record;
	job.large = NULL; /* one inside is no compressed packet */
	job.sink = deflate_sink;
	job.sink_ctx = c;
	job.progress = NULL;
	int rc = partition_run_record(&job, c, fd, err);
	c->out = saved;
	return rc < 0 ? compressed_aside_error(c->path, off, err) : 0;
}

static const struct compressed_spill rewrite_spill = {rewrite_large};

/* The packets inside all of pkt's compressed_packets, rewritten and
 * deflated again as they come into one compressed_packets field of
 * c->out (guess: about how long it will be). */
static int put_recompressed(struct rewrite_ctx *c, const uint8_t *pkt,
			    size_t len, uint64_t off, size_t guess,
			    struct vp_error *err)
{
	struct pb_buf *out = c->out;
	struct pb_sized m = pb_begin_sized(out, TP_COMPRESSED_PACKETS, guess);

	pb_buf_reset(&c->inner);
	if (deflate_stream_begin(&c->deflate, RECOMPRESS_LEVEL, c->path,
				 err) < 0)
		return -1;
	c->zout = out;
	c->off = off;
	c->out = &c->inner;
	int rc = compressed_each_packet(c->path, pkt, len, off, &c->scratch,
					&c->budget, rewrite_fn, deflate_inner,
					c->job ? &rewrite_spill : NULL, c,
					err);
	c->out = out;
	if (rc == 0)
		rc = deflate_stream_put(&c->deflate, NULL, 0, true, out,
					c->path, off, err);
	deflate_stream_end(&c->deflate);
	if (rc < 0)
		return -1;
	pb_end_sized(out, m);
	return 0;
}

/* A field of a compressed packet other than its compressed_packets, into
 * out: as it is, its sequence id moved, its machine_id left for the end
 * (where the caller sets it). */
static void put_outer_field(const struct rewrite_ctx *c, struct pb_buf *out,
			    const struct pb_field *f)
{
	if (f->num == TP_TRUSTED_PACKET_SEQUENCE_ID && f->wt == PB_WT_VARINT &&
	    f->val && c->cfg->seq_offset)
		pb_put_varint(out, f->num, (uint32_t)f->val + c->cfg->seq_offset);
	else if (!(f->num == TP_MACHINE_ID && c->cfg->machine_id))
		pb_put_raw(out, f->start, (size_t)(f->end - f->start));
}

/* A packet with compressed_packets: the packets inside are rewritten and
 * compressed again, so the output is about as large as the input.  The
 * outer packet keeps its other fields (its sequence id moved, machine_id
 * set, like any packet's). */
static int rewrite_compressed(struct rewrite_ctx *c, const uint8_t *pkt,
			      size_t len, uint64_t off, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	size_t start = c->out->len;
	size_t mark = pb_begin_nested(c->out, TRACE_PACKET_FIELD);
	bool done = false;

	pb_reader_init(&r, pkt, len);
	while (pb_next(&r, &f)) {
		if (f.num == TP_COMPRESSED_PACKETS && f.wt == PB_WT_LEN) {
			if (!done && put_recompressed(c, pkt, len, off, f.len,
						      err) < 0) {
				c->out->len = start;
				return -1;
			}
			done = true;
		} else {
			put_outer_field(c, c->out, &f);
		}
	}
	if (c->cfg->machine_id)
		pb_put_varint(c->out, TP_MACHINE_ID, c->cfg->machine_id);
	pb_end_nested(c->out, mark);
	merge_shrink_buf(&c->scratch);
	merge_shrink_buf(&c->inner);
	return 0;
}

/* ---- a compressed packet larger than a window ---------------------------- */

/* Its rewritten packets, deflated, come out in packets of about this many
 * bytes each (every one with the packet's other fields), so that neither
 * it nor its output is ever held whole.  (Fuzz builds make it small.) */
#ifndef COMPRESSED_SPLIT_BYTES
#define COMPRESSED_SPLIT_BYTES (1u << 20)
#endif

/* The output of one such packet. */
struct zsplit {
	const struct partition_job *job;
	struct pb_buf before, after; /* its other fields, rewritten */
	struct pb_buf zout;  /* the output packet being filled, deflated */
	struct pb_buf pkt;   /* the output packet */
	uint64_t off;
	size_t n_out;        /* output packets so far */
	bool any;            /* packets deflated into zout */
	int *io_error;
};

static void split_used(struct rewrite_ctx *c)
{
	if (c->split)
		c->split->any = true;
}

/* Ends the deflate stream of the output packet being filled and hands
 * the packet to the sink. */
static int split_emit(struct rewrite_ctx *c, struct vp_error *err)
{
	struct zsplit *z = c->split;

	if (deflate_stream_put(&c->deflate, NULL, 0, true, &z->zout, c->path,
			       z->off, err) < 0)
		return -1;
	deflate_stream_end(&c->deflate);
	pb_buf_reset(&z->pkt);
	size_t mark = pb_begin_nested(&z->pkt, TRACE_PACKET_FIELD);
	pb_put_raw(&z->pkt, z->before.data, z->before.len);
	pb_put_bytes(&z->pkt, TP_COMPRESSED_PACKETS, z->zout.data, z->zout.len);
	pb_put_raw(&z->pkt, z->after.data, z->after.len);
	if (c->cfg->machine_id)
		pb_put_varint(&z->pkt, TP_MACHINE_ID, c->cfg->machine_id);
	pb_end_nested(&z->pkt, mark);
	struct iovec v = {z->pkt.data, z->pkt.len};
	if (z->job->sink && z->job->sink(z->job->sink_ctx, &v, 1, err) < 0) {
		*z->io_error = 1;
		return -1;
	}
	z->n_out++;
	z->any = false;
	pb_buf_reset(&z->zout);
	return 0;
}

/* compressed_flush_fn of a split packet: the packets so far deflated;
 * an output packet that is full enough goes out, and another begins. */
static int split_flush(void *ctx, struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;

	if (c->inner.len)
		split_used(c);
	if (deflate_inner(c, err) < 0)
		return -1;
	if (c->split->zout.len < COMPRESSED_SPLIT_BYTES)
		return 0;
	if (split_emit(c, err) < 0)
		return -1;
	return deflate_stream_begin(&c->deflate, RECOMPRESS_LEVEL, c->path,
				    err);
}

/* The fields a compressed packet taken from the file may have beside
 * its compressed_packets: those a service writes on one.  Any other
 * (which each output packet would repeat) sends it the way of others. */
static bool outer_field_ok(uint32_t num)
{
	switch (num) {
	case TP_TRUSTED_UID:
	case TP_TRUSTED_PID:
	case TP_TRUSTED_PACKET_SEQUENCE_ID:
	case TP_MACHINE_ID:
		return true;
	default:
		return false;
	}
}

/* Reads the other fields of the packet rec into z: true, with the
 * payload of its one compressed_packets at *at (*len bytes); false when
 * it has none, more than one, or anything else (*rc: 1, or -1 on a read
 * error). */
static bool split_fields(struct rewrite_ctx *c, struct trace_reader *rd,
			 const struct trace_record *rec, struct zsplit *z,
			 uint64_t *at, uint64_t *len, int *rc,
			 struct vp_error *err)
{
	uint64_t pos = rec->data_offset, end = rec->offset + rec->raw_len;
	bool have = false;

	*rc = 1;
	if (rec->field != TRACE_PACKET_FIELD || rec->wt != PB_WT_LEN ||
	    trace_reader_size(rd) < end)
		return false;
	while (pos < end) {
		struct trace_field_head h;
		int got = trace_reader_field_head(rd, pos, end,
						  2 * PB_MAX_VARINT_LEN, &h,
						  err);
		if (got <= 0) {
			*rc = got < 0 ? -1 : 1;
			return false;
		}
		if (h.num == TP_COMPRESSED_PACKETS && h.wt == PB_WT_LEN &&
		    !have) {
			have = true;
			*at = pos + h.hdr;
			*len = h.size - h.hdr;
			pos += h.size;
			continue;
		}
		if (!outer_field_ok(h.num) || h.size > 32)
			return false;
		size_t n;
		const uint8_t *p = trace_reader_peek(rd, pos, (size_t)h.size,
						     &n, err);
		struct pb_reader r;
		struct pb_field f;
		if (!p) {
			*rc = -1;
			return false;
		}
		pb_reader_init(&r, p, n);
		if (n < h.size || !pb_next(&r, &f))
			return false;
		put_outer_field(c, have ? &z->after : &z->before, &f);
		pos += h.size;
	}
	return have;
}

/* partition_job.large: a compressed packet larger than a window,
 * inflated from the file as it is read and deflated again into packets
 * of COMPRESSED_SPLIT_BYTES (readers take the packets inside the same
 * however they are grouped). */
static int rewrite_large_compressed(const struct partition_job *job,
				    void *ctx, struct trace_reader *rd,
				    const struct trace_record *rec,
				    int *io_error, struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;
	struct zsplit z = {.job = job, .off = rec->data_offset,
			   .io_error = io_error};
	struct pb_buf *saved = c->out;
	uint64_t at = 0, len = 0;
	int rc;

	pb_buf_init(&z.before);
	pb_buf_init(&z.after);
	pb_buf_init(&z.zout);
	pb_buf_init(&z.pkt);
	if (split_fields(c, rd, rec, &z, &at, &len, &rc, err) &&
	    (rc = deflate_stream_begin(&c->deflate, RECOMPRESS_LEVEL, c->path,
				       err)) == 0) {
		c->split = &z;
		c->zout = &z.zout;
		c->off = rec->data_offset;
		c->out = &c->inner;
		pb_buf_reset(&c->inner);
		rc = compressed_each_packet_at(c->path, rd, at, len,
					       rec->data_offset, &c->scratch,
					       &c->budget, rewrite_fn,
					       split_flush, &rewrite_spill, c,
					       err);
		/* the last output packet, unless it would hold nothing */
		if (rc == 0 && (z.any || z.n_out == 0))
			rc = split_emit(c, err);
		deflate_stream_end(&c->deflate);
		c->split = NULL;
		c->out = saved;
		merge_shrink_buf(&c->scratch);
		merge_shrink_buf(&c->inner);
	}
	pb_buf_free(&z.before);
	pb_buf_free(&z.after);
	pb_buf_free(&z.zout);
	pb_buf_free(&z.pkt);
	return rc < 0 ? -1 : rc;
}

/* partition_job.piece: a run of an ftrace bundle's events. */
static int rewrite_piece_fn(void *ctx, uint32_t num, const uint8_t *msg,
			    size_t msg_len, const uint8_t *p, size_t len,
			    uint64_t off, bool count, struct pb_buf *out,
			    struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;
	return rewrite_piece(c->rw, num, msg, msg_len, p, len, off, count,
			     out, err);
}

static int rewrite_record(void *ctx, const uint8_t *raw, size_t raw_len,
			  uint32_t field, uint8_t wt, const uint8_t *data,
			  size_t len, uint64_t off, struct pb_buf *out,
			  struct vp_error *err)
{
	struct rewrite_ctx *c = ctx;

	if (field != TRACE_PACKET_FIELD || wt != PB_WT_LEN) {
		pb_put_raw(out, raw, raw_len); /* not a packet: kept as is */
		return 0;
	}
	c->out = out;
	int rc = rewrite_fn(c, data, len, off, err);
	if (rc > 0)
		rc = rewrite_compressed(c, data, len, off, err);
	return rc;
}

/* Rewrites a guest trace into w on `threads` threads, its sequences
 * shared out by the load its scan measured (d).  cfg[t] configures
 * thread t's rewriter (its map context must be its own: maps keep segment
 * hints). */
static int rewrite_file(const char *path, unsigned threads,
			const struct rewrite_cfg *cfg,
			const struct sync_data *d, uint64_t max_inflate,
			struct trace_writer *w, struct progress *pg,
			volatile sig_atomic_t *cancel, struct rewrite_stats *st,
			struct vp_error *err)
{
	struct rewrite_ctx *c = vp_xaligned_alloc(128, threads * sizeof(*c));
	uint8_t owner[SYNC_SEQ_LOAD_IDS];
	struct partition_job job = {
		.path = path,
		.threads = threads,
		.fn = rewrite_record,
		.stateless = rewrite_packet_stateless,
		.passes = cfg[0].remap_ids ? rewrite_field_passes
					   : rewrite_field_passes_ids_kept,
		.passes_in = rewrite_field_passes_in,
		.piece_of = rewrite_piece_of,
		.piece = rewrite_piece_fn,
		.large = rewrite_large_compressed,
		.seq_owner = owner,
		.n_seq_owner = SYNC_SEQ_LOAD_IDS,
		.sink = sink_writer,
		.sink_ctx = w,
		.progress = pg->on ? progress_cb : NULL, /* a call per record */
		.progress_ctx = pg,
		.cancel = cancel,
	};
	int io_error;

	partition_plan(d->seq_load, SYNC_SEQ_LOAD_IDS, threads, owner);
	memset(c, 0, threads * sizeof(*c));
	for (unsigned t = 0; t < threads; t++) {
		c[t].path = path;
		c[t].rw = rewriter_new(&cfg[t]);
		c[t].cfg = &cfg[t];
		c[t].budget.max = max_inflate;
		c[t].job = &job;
		pb_buf_init(&c[t].scratch);
		pb_buf_init(&c[t].inner);
		job.ctx[t] = &c[t];
	}
	int rc = partition_run(&job, err, &io_error);
	*st = *rewriter_stats(c[0].rw);
	for (unsigned t = 0; t < threads; t++) {
		if (t)
			rewrite_stats_add(st, rewriter_stats(c[t].rw));
		rewriter_free(c[t].rw);
		pb_buf_free(&c[t].scratch);
		pb_buf_free(&c[t].inner);
	}
	free(c);
	if (rc < 0)
		return io_error ? MERGE_IO_ERROR : MERGE_BAD_INPUT;
	return MERGE_OK;
}

/* ---- the whole run ------------------------------------------------------------------------ */

/* -o must not name an input (not even through another path or a link). */
static int check_output(const struct merge_opts *o, struct vp_error *err)
{
	const char *inputs[MERGE_MAX_GUESTS + 1] = {o->host};
	for (size_t i = 0; i < o->n_guests; i++)
		inputs[i + 1] = o->guests[i];
	return vp_out_check_inputs("-o", o->out, inputs, o->n_guests + 1, err);
}

unsigned merge_cpus(void)
{
	cpu_set_t set;
	long n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n < 1)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n < PARTITION_MAX_THREADS ? (unsigned)n : PARTITION_MAX_THREADS;
}

void merge_result_free(struct merge_result *res)
{
	if (res->have_host_fit)
		cm_fit_free(&res->host_fit);
	if (res->have_host_fit_other)
		cm_fit_free(&res->host_fit_other);
	for (size_t i = 0; i < res->n_guests; i++) {
		if (res->guests[i].have_boot)
			cm_fit_free(&res->guests[i].fit_boot);
		if (res->guests[i].have_mono)
			cm_fit_free(&res->guests[i].fit_mono);
		free(res->guests[i].seg_offset_boot);
		free(res->guests[i].seg_offset_mono);
		free(res->guests[i].seg_carried_boot);
		free(res->guests[i].seg_carried_mono);
		free(res->guests[i].seg_bound_ns);
	}
	memset(res, 0, sizeof(*res));
}

/* ---- --concat --------------------------------------------------------------------- */

/* Copies every record of path into w as it is. */
static int concat_file(const char *path, struct trace_writer *w,
		       struct progress *pg, volatile sig_atomic_t *cancel,
		       uint64_t *packets, struct vp_error *err)
{
	struct trace_reader *rd;
	struct trace_record rec;
	uint64_t last = 0;
	int rc;

	if (merge_reader_open(&rd, path, -1, err) < 0)
		return MERGE_BAD_INPUT;
	/* A record larger than the reader's buffer goes over in pieces, so
	 * a packet of 64 MiB costs no buffer of its size. */
	while ((rc = trace_reader_next_head(rd, &rec, TRACE_READ_BUF,
					    err)) > 0) {
		struct trace_copy_out co = {w, false};
		if (cancel && *cancel) {
			trace_reader_close(rd);
			return failf(err, MERGE_IO_ERROR, "interrupted");
		}
		if (rec.raw ? trace_writer_raw(w, rec.raw, rec.raw_len, err)
			    : trace_reader_pass(rd, rec.offset, rec.raw_len,
						trace_copy_piece, &co, err)) {
			trace_reader_close(rd);
			return rec.raw || co.failed ? MERGE_IO_ERROR
						    : MERGE_BAD_INPUT;
		}
		*packets += rec.field == TRACE_PACKET_FIELD;
		uint64_t pos = trace_reader_pos(rd);
		progress_add(pg, pos - last);
		last = pos;
	}
	trace_reader_close(rd);
	return rc < 0 ? MERGE_BAD_INPUT : MERGE_OK;
}

/* What every run starts with: the arguments checked, res cleared and
 * named, the progress total (guests counted guest_passes times: each pass
 * reads them once).  A merge_status. */
static int run_begin(const struct merge_opts *o, struct merge_result *res,
		     struct progress *pg, unsigned guest_passes,
		     struct vp_error *err)
{
	memset(res, 0, sizeof(*res));
	*pg = (struct progress){.on = o->progress, .shown = -1,
				.mu = PTHREAD_MUTEX_INITIALIZER};
	if (!o->n_guests || o->n_guests > MERGE_MAX_GUESTS)
		return failf(err, MERGE_USAGE, "between 1 and %d guest traces, "
			     "please", MERGE_MAX_GUESTS);
	if (check_output(o, err) < 0)
		return MERGE_USAGE;
	res->n_guests = o->n_guests;
	pg->total = file_size(o->host);
	for (size_t i = 0; i < o->n_guests; i++) {
		res->guests[i].path = o->guests[i];
		pg->total += guest_passes * file_size(o->guests[i]);
	}
	return MERGE_OK;
}

int merge_concat(const struct merge_opts *o, struct merge_result *res,
		 struct vp_error *err)
{
	struct trace_writer *w = NULL;
	struct progress pg;
	double t0 = now_s();
	int status = run_begin(o, res, &pg, 1, err);

	if (status != MERGE_OK)
		return status;
	if (trace_writer_open(&w, o->out, err) < 0)
		return MERGE_IO_ERROR;
	status = concat_file(o->host, w, &pg, o->cancel, &res->host_packets,
			     err);
	res->host_bytes = trace_writer_bytes(w);
	for (size_t i = 0; i < o->n_guests && status == MERGE_OK; i++) {
		uint64_t before = trace_writer_bytes(w), n = 0;
		status = concat_file(o->guests[i], w, &pg, o->cancel, &n, err);
		res->guests[i].rw.packets = n;
		res->guests[i].bytes_out = trace_writer_bytes(w) - before;
	}
	res->bytes_out = trace_writer_bytes(w);
	if (status != MERGE_OK) {
		trace_writer_abort(w);
	} else if (o->out_pending) {
		if (trace_writer_finish(w, o->out_pending, err) < 0)
			status = MERGE_IO_ERROR;
	} else if (trace_writer_commit(w, err) < 0) {
		status = MERGE_IO_ERROR;
	}
	res->seconds = now_s() - t0;
	if (pg.on && pg.shown >= 0 && pg.shown < 100)
		fputc('\n', stderr);
	return status;
}

/* ---- the guests' passes --------------------------------------------------------- */

/* The threads to rewrite a trace on, of at most `threads`: one when it
 * has compressed_packets (the packets inside may belong to any
 * sequence).  Small packets are shared out too: the first thread finds
 * a packet's owner by skimming its fields (partition.c), which costs a
 * few per cent of rewriting it; on two cores, two threads took 0.70 to
 * 0.78 of one thread's time on guests of 27 to 57 bytes a packet
 * (tests/bench/merge_bench.py's traces and a mix of both, paired runs).
 * And at most REWRITE_MAX_THREADS: the first thread reads, frames and
 * hands out every packet, at about two thirds of what handling one costs
 * on small packets (partition.c), so a few others keep up with it, and
 * every window wakes every thread, so more would only wait (pass 1 still
 * scans that many inputs at once). */
#define REWRITE_MAX_THREADS 8

static unsigned rewrite_threads(const struct sync_data *d, unsigned threads)
{
	if (threads < 2 || d->n_compressed)
		return 1;
	return threads < REWRITE_MAX_THREADS ? threads : REWRITE_MAX_THREADS;
}

/* What pass 4 decides for a guest before its rewrite. */
struct guest_plan {
	unsigned threads;    /* rewrite threads */
	uint32_t cpu_offset; /* --no-machine-id: where its cpus start */
};

/* Builds guest i's model and places it among the others: its sequence ids
 * after *seq_base and its cpus after *cpu_base (both moved on past it),
 * its machine.  A merge_status. */
static int prepare_guest(const struct merge_opts *o, size_t i,
			 const struct sync_data *hd, struct sync_data *gd,
			 struct merge_result *res, struct guest_map *gm,
			 uint64_t *seq_base, uint64_t *cpu_base,
			 struct guest_plan *plan, struct vp_error *err)
{
	struct merge_guest *g = &res->guests[i];
	int status = model_guest(o, i, hd, gd, res, gm, err);

	if (status != MERGE_OK)
		return status;
	struct sample_vec *rtv = &gd->realtime;
	if (rtv->n) /* qsort takes no NULL, even for 0 elements */
		qsort(rtv->v, rtv->n, sizeof(*rtv->v), cmp_sample_x);
	gm->rt = rtv->v;
	gm->n_rt = rtv->n;
	if (*seq_base + gd->max_seq_id > UINT32_MAX)
		return failf(err, MERGE_BAD_INPUT, "%s: too many sequence ids "
			     "to move clear of the host's", g->path);
	g->seq_offset = (uint32_t)*seq_base;
	*seq_base += gd->max_seq_id;
	uint64_t gcpus = gd->have_cpu ? (uint64_t)gd->max_cpu + 1 : 0;
	if (o->no_machine_id && gcpus && *cpu_base + gcpus > 1024)
		warn(res, "guest %s: its cpus moved after the host's go "
		     "past 1023, which Perfetto's trace processor does "
		     "not take", g->path);
	plan->cpu_offset = o->no_machine_id ? (uint32_t)*cpu_base : 0;
	*cpu_base += gcpus;
	/* Machines 1, 2, ... unless the host trace already has
	 * machines of its own: then the guests come after them. */
	g->machine_id = o->no_machine_id ? 0 : hd->max_machine_id + 1 +
						(uint32_t)i;
	return MERGE_OK;
}

/* Rewrites guest i into w: onto the host's axis (om NULL), or with --onto
 * guest onto the chosen guest's, through om (the chosen guest itself
 * keeps its times: only its sequences, machine and ids move).  Each
 * thread maps through its own copy of the maps (they keep hints). */
static int rewrite_guest(const struct merge_opts *o, size_t i,
			 const struct sync_data *gd, struct merge_result *res,
			 const struct guest_map *gm, const struct onto_map *om,
			 const struct guest_plan *plan, uint64_t max_inflate,
			 struct trace_writer *w, struct progress *pg,
			 struct vp_error *err)
{
	struct merge_guest *g = &res->guests[i];
	unsigned nt = plan->threads;
	bool axis = om && o->onto_guest == i + 1;
	struct guest_map *gmt = NULL;
	struct via_map *vmt = NULL;
	struct rewrite_cfg *cfg = vp_xcalloc(nt, sizeof(*cfg));
	uint64_t floor = 0; /* --no-machine-id: the guests' before */

	for (size_t j = 0; j < i; j++)
		if (res->guests[j].rw.snapshot_last > floor)
			floor = res->guests[j].rw.snapshot_last;
	if (!om)
		gmt = vp_xaligned_alloc(128, nt * sizeof(*gmt));
	else if (!axis)
		vmt = vp_xaligned_alloc(128, nt * sizeof(*vmt));
	for (unsigned t = 0; t < nt; t++) {
		rw_map_fn fn = NULL;
		rw_map_many_fn many = NULL;
		void *ctx = NULL;
		rw_map_fn log = NULL, boot = NULL;
		bool (*to_mono)(void *, uint64_t, uint64_t *) = NULL;
		if (gmt) {
			gmt[t] = *gm;
			fn = map_guest;
			many = map_guest_many;
			ctx = &gmt[t];
			if (gm->n_out_rt)
				log = map_guest_log;
			if (gm->n_out_mb &&
			    res->clock == BUILTIN_CLOCK_MONOTONIC)
				boot = map_guest_boot;
			else if (gm->n_out_mb && o->no_machine_id)
				to_mono = host_boot_to_mono;
		} else if (vmt) {
			vmt[t].to_host = *gm;
			vmt[t].onto = *om;
			fn = map_via;
			ctx = &vmt[t];
			if (om->n_mb)
				boot = map_via_boot;
		}
		cfg[t] = (struct rewrite_cfg){
			.path = g->path,
			.map = fn,
			.map_ctx = ctx,
			.map_many = many,
			.log_map = log,
			.boot_map = boot,
			.axis_to_mono = to_mono,
			.target_clock = res->clock,
			.trace_clock = gd->trace_clock,
			.seq_offset = g->seq_offset,
			.machine_id = g->machine_id,
			.remap_ids = o->no_machine_id,
			.own_clocks_only = o->no_machine_id,
			.snapshot_floor = floor,
			.pid_offset = (uint32_t)(i + 1) << 22,
			.cpu_offset = plan->cpu_offset,
			.uuid_key = 0x9e3779b97f4a7c15ull * (2 * i + 3),
		};
		if (gmt) {
			cfg[t].map_counts[0] = &gmt[t].overflow;
		} else if (vmt) {
			cfg[t].map_counts[0] = &vmt[t].to_host.overflow;
			cfg[t].map_counts[1] = &vmt[t].onto.overflow;
		}
	}
	uint64_t before = trace_writer_bytes(w);
	int status = rewrite_file(g->path, nt, cfg, gd, max_inflate, w, pg,
				  o->cancel, &g->rw, err);
	for (unsigned t = 0; t < nt; t++)
		g->rw.overflow += gmt ? gmt[t].overflow
			       : vmt ? vmt[t].to_host.overflow +
					       vmt[t].onto.overflow
				     : 0;
	free(gmt);
	free(vmt);
	free(cfg);
	if (status != MERGE_OK)
		return status;
	g->bytes_in = file_size(g->path);
	g->bytes_out = trace_writer_bytes(w) - before;
	g->threads = nt;
	return MERGE_OK;
}

/* The first packet of a guest's machine: empty, with a time of the output
 * axis (ts).  Perfetto's trace processor has a clock tracker per machine,
 * and a ClockSnapshot with BOOTTIME that a machine's tracker parses before
 * it converted any timestamp makes that machine's BOOTTIME the trace's
 * clock (ProtoTraceReader::ParseClockSnapshot calls
 * ClockTracker::SetGlobalClock, which refuses only once that tracker has
 * converted).  A guest's first timestamped packets are its snapshots, so
 * each guest took the trace clock from the host or the guest before it,
 * and a machine's packets written after a later guest's (--vm-tracks)
 * found no path to it (clock_sync_failure_no_path).  This packet is that
 * machine's first conversion: its BOOTTIME is tied to the host's (the
 * zero-offset edge of ClockTracker::BridgeToTraceTime; the guest's times
 * are on the host's axis already) and the trace clock stays the host's
 * whatever the order of the machines' packets.  It makes no row. */
static int write_machine_anchor(struct trace_writer *w, uint32_t machine,
				uint32_t clock, uint64_t ts,
				struct vp_error *err)
{
	struct pb_buf b;
	int rc;

	pb_buf_init(&b);
	pb_put_varint(&b, TP_TIMESTAMP, ts);
	pb_put_varint(&b, TP_TIMESTAMP_CLOCK_ID, clock);
	pb_put_varint(&b, TP_MACHINE_ID, machine);
	rc = trace_writer_packet(w, b.data, b.len, err);
	pb_buf_free(&b);
	return rc < 0 ? MERGE_IO_ERROR : MERGE_OK;
}

/* A time of clock near the start of the trace whose samples d holds. */
static uint64_t axis_start(const struct sync_data *d, uint32_t clock)
{
	const struct sample_vec *v =
		clock == BUILTIN_CLOCK_MONOTONIC ? &d->mono : &d->boot;
	return v->n ? v->v[0].y : 0;
}

/* The error bound at a rewritten guest's ends, and what to warn about. */
static void check_guest(struct merge_guest *g, const struct guest_map *gm,
			struct merge_result *res)
{
	if (g->synced && gm->have_boot &&
	    g->rw.first_boot_ts <= g->rw.last_boot_ts) {
		double a = cm_map_error_ns(&gm->boot, g->rw.first_boot_ts);
		double b = cm_map_error_ns(&gm->boot, g->rw.last_boot_ts);
		g->bound_edges_ns = a > b ? a : b;
	}
	if (g->synced && (g->bound_ns.max > 1e6 || g->bound_edges_ns > 1e6))
		warn(res, "guest %s: the error bound exceeds 1 ms (%.3f ms); "
		     "do host and guest traces cover the same time, and is "
		     "the counter offset right?", g->path,
		     (g->bound_ns.max > g->bound_edges_ns ? g->bound_ns.max
							   : g->bound_edges_ns) / 1e6);
	if (g->rw.backwards)
		warn(res, "guest %s: mapped timestamps go backwards %llu "
		     "times on a sequence (a segment boundary?)", g->path,
		     (unsigned long long)g->rw.backwards);
	if (g->rw.overflow)
		warn(res, "guest %s: %llu mapped timestamps fell outside "
		     "the range of their field (far outside the clock "
		     "model) and were clamped", g->path,
		     (unsigned long long)g->rw.overflow);
	if (g->synced && g->rw.ts_unmapped)
		warn(res, "guest %s: %llu timestamps on clocks the model "
		     "does not cover were left as they were", g->path,
		     (unsigned long long)g->rw.ts_unmapped);
	if (g->synced && res->clock != BUILTIN_CLOCK_BOOTTIME &&
	    !gm->n_out_mb && g->rw.ts_ftrace)
		warn(res, "guest %s: ftrace timestamps are on BOOTTIME but "
		     "were mapped onto host %s", g->path,
		     builtin_clock_name(res->clock));
}

/* ---- --onto guest ------------------------------------------------------------------ */

/* Checks that the chosen guest can be the axis and prepares the map onto
 * it: its fit of the axis' clock, its counter relation (with the offset
 * of each segment when it changed) and the host's fits.  hd's REALTIME
 * samples are sorted for map_onto.  A merge_status. */
static int setup_onto(const struct merge_opts *o, struct merge_result *res,
		      struct sync_data *hd, struct sync_data *gd,
		      struct onto_map *om, struct vp_error *err)
{
	const struct merge_guest *g = &res->guests[o->onto_guest - 1];
	bool boot = res->clock == BUILTIN_CLOCK_BOOTTIME;
	const struct cm_fit *gf = boot ? &g->fit_boot : &g->fit_mono;
	const int64_t *so = boot ? g->seg_offset_boot : g->seg_offset_mono;

	if (!g->synced)
		return failf(err, MERGE_NO_SYNC, "%s: --onto guest:%zu: this "
			     "guest has no clock model to map the host onto",
			     g->path, o->onto_guest);
	if (boot ? !g->have_boot : !g->have_mono)
		return failf(err, MERGE_NO_SYNC, "%s: --onto guest:%zu: no %s "
			     "sync samples in this guest to map the host's %s "
			     "onto", g->path, o->onto_guest,
			     builtin_clock_name(res->clock),
			     builtin_clock_name(res->clock));
	memset(om, 0, sizeof(*om));
	om->target = res->clock;
	cm_map_init(&om->from_target, gf, &g->cross, &res->host_fit);
	if (so)
		cm_map_set_segment_offsets(&om->from_target, so, gf->nseg);
	om->have_target = true;
	if (res->have_host_fit_other) {
		cm_map_init(&om->from_other, gf, &g->cross,
			    &res->host_fit_other);
		if (so)
			cm_map_set_segment_offsets(&om->from_other, so,
						   gf->nseg);
		om->have_other = true;
	}
	struct sample_vec *rtv = &hd->realtime;
	if (rtv->n)
		qsort(rtv->v, rtv->n, sizeof(*rtv->v), cmp_sample_x);
	om->rt = rtv->v;
	om->n_rt = rtv->n;
	/* onto MONOTONIC, a trace processor still reads BOOTTIME as its
	 * trace clock: the host's BOOTTIME goes to the guest's (boot_map) */
	if (!boot && gd->mono_boot.n) {
		qsort(gd->mono_boot.v, gd->mono_boot.n,
		      sizeof(*gd->mono_boot.v), cmp_sample_x);
		om->mb = gd->mono_boot.v;
		om->n_mb = gd->mono_boot.n;
	}
	return MERGE_OK;
}

/* The larger bound of a map at the first and last BOOTTIME packet. */
typedef double (*bound_fn)(const void *ctx, uint64_t ts);

static double edges_bound(const struct rewrite_stats *rw, bound_fn fn,
			  const void *ctx)
{
	if (rw->first_boot_ts > rw->last_boot_ts)
		return 0;
	double a = fn(ctx, rw->first_boot_ts), b = fn(ctx, rw->last_boot_ts);
	return a > b ? a : b;
}

/* The bound of a host BOOTTIME time mapped onto the chosen guest. */
static double host_boot_bound(const void *ctx, uint64_t ts)
{
	const struct onto_map *om = ctx;
	if (om->target == BUILTIN_CLOCK_BOOTTIME)
		return cm_map_inv_error_ns(&om->from_target, ts);
	return om->have_other ? cm_map_inv_error_ns(&om->from_other, ts) : 0;
}

/* The host's packets, rewritten onto the chosen guest's axis: the
 * sequences, machine and ids stay as they are.  A merge_status. */
static int rewrite_host(const struct merge_opts *o, const struct sync_data *hd,
			struct merge_result *res, const struct onto_map *om,
			unsigned threads, uint64_t max_inflate,
			struct trace_writer *w, struct progress *pg,
			struct vp_error *err)
{
	unsigned nt = rewrite_threads(hd, threads);
	struct onto_map *omt = vp_xaligned_alloc(128, nt * sizeof(*omt));
	struct rewrite_cfg *cfg = vp_xcalloc(nt, sizeof(*cfg));

	for (unsigned t = 0; t < nt; t++) {
		omt[t] = *om;
		cfg[t] = (struct rewrite_cfg){
			.path = o->host,
			.map = map_onto,
			.map_ctx = &omt[t],
			.boot_map = om->n_mb ? map_onto_boot : NULL,
			.target_clock = res->clock,
			.trace_clock = hd->trace_clock,
			.map_counts = {&omt[t].overflow, NULL},
		};
	}
	int status = rewrite_file(o->host, nt, cfg, hd, max_inflate, w, pg,
				  o->cancel, &res->host_rw, err);
	for (unsigned t = 0; t < nt; t++)
		res->host_rw.overflow += omt[t].overflow;
	free(omt);
	free(cfg);
	if (status != MERGE_OK)
		return status;
	res->host_bytes = trace_writer_bytes(w);
	res->host_bytes_in = file_size(o->host);

	/* The bound at the host's sync samples and at its ends. */
	const struct sample_vec *hs = res->clock == BUILTIN_CLOCK_MONOTONIC
					      ? &hd->mono : &hd->boot;
	double *v = vp_xcalloc(hs->n + 1, sizeof(double));
	for (size_t i = 0; i < hs->n; i++)
		v[i] = cm_map_inv_error_ns(&om->from_target, hs->v[i].y);
	res->host_bound_ns = distribution(v, hs->n);
	free(v);
	res->host_bound_edges_ns = edges_bound(&res->host_rw, host_boot_bound,
					       om);

	const struct rewrite_stats *rw = &res->host_rw;
	double worst = res->host_bound_ns.max > res->host_bound_edges_ns
			       ? res->host_bound_ns.max : res->host_bound_edges_ns;
	if (worst > 1e6)
		warn(res, "host %s: the error bound onto guest %zu exceeds 1 ms "
		     "(%.3f ms)", o->host, o->onto_guest, worst / 1e6);
	if (rw->backwards)
		warn(res, "host %s: mapped timestamps go backwards %llu times "
		     "on a sequence (a segment boundary?)", o->host,
		     (unsigned long long)rw->backwards);
	if (rw->overflow)
		warn(res, "host %s: %llu mapped timestamps fell outside the "
		     "range of their field and were clamped", o->host,
		     (unsigned long long)rw->overflow);
	if (rw->ts_unmapped)
		warn(res, "host %s: %llu timestamps on clocks the model does "
		     "not cover were left as they were", o->host,
		     (unsigned long long)rw->ts_unmapped);
	return MERGE_OK;
}

/* A guest's map onto the chosen guest's axis: guest -> host -> chosen. */
struct via_bound {
	const struct guest_map *gm;
	struct onto_map *om;
	uint32_t clock; /* of the guest times given */
};

static double via_bound_at(const void *ctx, uint64_t ts)
{
	const struct via_bound *b = ctx;
	struct guest_map fwd = *b->gm;
	uint64_t host;
	double e = 0;

	if (!map_guest(&fwd, b->clock, ts, &host))
		return 0;
	if (!fwd.manual)
		e = cm_map_error_ns(b->clock == BUILTIN_CLOCK_BOOTTIME
					    ? &fwd.boot : &fwd.mono, ts);
	return e + cm_map_inv_error_ns(&b->om->from_target, host);
}

/* --onto guest: the error bound of another guest's map onto the chosen
 * guest's axis, at its sync samples and at its first and last packet:
 * its own bound onto the host's axis plus the chosen guest's back from
 * there (an offset given by hand counts as exact). */
static void onto_bounds(struct merge_guest *g, const struct sync_data *gd,
			const struct guest_map *gm, struct onto_map *om)
{
	if (!g->synced && !g->manual)
		return; /* passed through: no bound */
	bool boot = g->manual ? gm->own_boot || !gm->own_mono : g->have_boot;
	struct via_bound b = {gm, om, boot ? BUILTIN_CLOCK_BOOTTIME
					   : BUILTIN_CLOCK_MONOTONIC};
	const struct sample_vec *sv = boot ? &gd->boot : &gd->mono;
	double *v = vp_xcalloc(sv->n + 1, sizeof(double));
	for (size_t i = 0; i < sv->n; i++)
		v[i] = via_bound_at(&b, sv->v[i].y);
	g->onto_bound_ns = distribution(v, sv->n);
	free(v);
	b.clock = BUILTIN_CLOCK_BOOTTIME;
	g->onto_bound_edges_ns = edges_bound(&g->rw, via_bound_at, &b);
}

/* ---- the merge ------------------------------------------------------------------- */

int merge_run(const struct merge_opts *o, struct merge_result *res,
	      struct vp_error *err)
{
	struct sync_scanner *gsc[MERGE_MAX_GUESTS] = {NULL};
	struct sync_scanner *hsc = NULL;
	struct trace_writer *w = NULL;
	struct guest_map gm[MERGE_MAX_GUESTS];
	struct guest_plan plan[MERGE_MAX_GUESTS];
	struct onto_map om;
	struct progress pg;
	struct cm_sample *host_rt = NULL, *host_mb = NULL;
	size_t n_host_rt = 0, n_host_mb = 0;
	double t0 = now_s();
	int status = run_begin(o, res, &pg, 2, err);
	bool onto = o->onto_guest != 0;

	if (status != MERGE_OK)
		return status;
	if (onto && o->onto_guest > o->n_guests)
		return failf(err, MERGE_USAGE, "--onto guest:%zu: there %s only "
			     "%zu guest trace%s", o->onto_guest,
			     o->n_guests == 1 ? "is" : "are", o->n_guests,
			     o->n_guests == 1 ? "" : "s");
	if (onto && o->extra)
		return failf(err, MERGE_USAGE, "--onto guest does not take the "
			     "packets added after the guests (--vm-tracks): "
			     "they are on the host's axis");
	res->onto_guest = o->onto_guest;
	if (onto) /* the host is read twice: scanned, then rewritten */
		pg.total += file_size(o->host);

	/* Pass 1: each guest's sync data; pass 2: the host, copied as it is
	 * scanned (onto a guest's axis it is only scanned here, and
	 * rewritten once that guest's model is known).  The scans are
	 * independent, so with several threads they run at once, a file
	 * per thread: within one file, finding the sync data costs about
	 * what handing a packet to another thread would.  Failures are
	 * reported in the order the passes had one after the other: the
	 * guests', then the output's, then the host's. */
	unsigned threads = o->threads ? o->threads : 1;
	uint64_t max_inflate = o->max_inflate ? o->max_inflate
					      : MERGE_DEFAULT_MAX_INFLATE;
	if (threads > PARTITION_MAX_THREADS)
		threads = PARTITION_MAX_THREADS;
	struct scan_item items[MERGE_MAX_GUESTS + 1];
	struct host_fit_ctx hfit = {o, res};
	struct vp_error werr;
	size_t n_items = o->n_guests;
	int wstatus = MERGE_OK;
	memset(items, 0, sizeof(items));
	for (size_t i = 0; i < o->n_guests; i++)
		items[i].path = o->guests[i];
	/* The output is made durable as it is written, by a thread that
	 * mostly sleeps in the disk's syncs (out_file.c), whatever N: the
	 * commit's fsync then waits for the last few MiB only. */
	if (trace_writer_open(&w, o->out, &werr) < 0)
		wstatus = MERGE_IO_ERROR;
	else
		trace_writer_flush_behind(w);
	if (wstatus == MERGE_OK)
		items[n_items++] = (struct scan_item){
			.path = o->host, .copy_to = onto ? NULL : w,
			.done = fit_host, .done_ctx = &hfit};
	scan_inputs(items, n_items, threads, &pg, max_inflate, o->cancel);
	for (size_t i = 0; i < o->n_guests; i++) {
		gsc[i] = items[i].sc;
		res->guests[i].scan_split_at = items[i].split_at;
		res->guests[i].scan_parts = items[i].parts;
		plan[i].threads = items[i].status == MERGE_OK
			? rewrite_threads(sync_scanner_data(gsc[i]), threads)
			: threads;
		if (status == MERGE_OK && items[i].status != MERGE_OK) {
			status = items[i].status;
			*err = items[i].err;
		}
	}
	if (status == MERGE_OK && wstatus != MERGE_OK) {
		status = wstatus;
		*err = werr;
	}
	if (wstatus == MERGE_OK) {
		hsc = items[o->n_guests].sc;
		if (status == MERGE_OK &&
		    items[o->n_guests].status != MERGE_OK) {
			status = items[o->n_guests].status;
			*err = items[o->n_guests].err;
		}
	}
	if (status != MERGE_OK)
		goto out;

	const struct sync_data *hd = sync_scanner_data(hsc);
	/* --no-machine-id: the host's REALTIME snapshots by the clock of
	 * the output's axis, for the guests' android_log entries */
	const struct sample_vec *hrt =
		res->clock == BUILTIN_CLOCK_MONOTONIC ? &hd->realtime_mono
						      : &hd->realtime;
	if (o->no_machine_id && !onto && hrt->n) {
		n_host_rt = hrt->n;
		host_rt = vp_xreallocarray(NULL, n_host_rt, sizeof(*host_rt));
		memcpy(host_rt, hrt->v, n_host_rt * sizeof(*host_rt));
		qsort(host_rt, n_host_rt, sizeof(*host_rt), cmp_sample_y);
	}
	/* The host's (MONOTONIC, BOOTTIME) snapshots by MONOTONIC: onto its
	 * MONOTONIC, for the guests' ftrace times and the BOOTTIME of their
	 * snapshots; with --no-machine-id onto its BOOTTIME, for what a
	 * processor reads as the host's MONOTONIC */
	if (!onto && hd->mono_boot.n &&
	    (res->clock == BUILTIN_CLOCK_MONOTONIC || o->no_machine_id)) {
		n_host_mb = hd->mono_boot.n;
		host_mb = vp_xreallocarray(NULL, n_host_mb, sizeof(*host_mb));
		memcpy(host_mb, hd->mono_boot.v, n_host_mb * sizeof(*host_mb));
		qsort(host_mb, n_host_mb, sizeof(*host_mb), cmp_sample_x);
	}
	res->host_packets = hd->n_packets;
	res->host_bytes = trace_writer_bytes(w);
	res->max_host_seq = hd->max_seq_id;
	res->n_kvm_records = hd->n_kvm;
	res->host_incremental_64 = hd->n_incremental_64;
	warn_thinned(res, "host", o->host, hd);

	/* Pass 3, the host clock model, was made by the thread that
	 * scanned the host (fit_host). */

	/* Pass 4: each guest's model, then its packets; onto a guest's axis,
	 * every model first, then the host's packets, then the guests'. */
	uint64_t seq_base = hd->max_seq_id;
	/* --no-machine-id: each guest's cpus after the host's and the
	 * previous guests' (Perfetto's processor takes cpus up to 1023). */
	uint64_t cpu_base = hd->have_cpu ? (uint64_t)hd->max_cpu + 1 : 0;
	for (size_t i = 0; i < o->n_guests; i++) {
		status = prepare_guest(o, i, hd, sync_scanner_data(gsc[i]), res,
				       &gm[i], &seq_base, &cpu_base, &plan[i],
				       err);
		gm[i].out_rt = host_rt;
		gm[i].n_out_rt = n_host_rt;
		gm[i].out_mb = host_mb;
		gm[i].n_out_mb = n_host_mb;
		if (status == MERGE_OK && !onto && res->guests[i].machine_id)
			status = write_machine_anchor(
				w, res->guests[i].machine_id, res->clock,
				axis_start(hd, res->clock), err);
		if (status == MERGE_OK && !onto)
			status = rewrite_guest(o, i, sync_scanner_data(gsc[i]),
					       res, &gm[i], NULL, &plan[i],
					       max_inflate, w, &pg, err);
		if (status != MERGE_OK)
			goto out;
		if (!onto)
			check_guest(&res->guests[i], &gm[i], res);
	}
	if (onto) {
		status = setup_onto(o, res, sync_scanner_data(hsc),
				    sync_scanner_data(gsc[o->onto_guest - 1]),
				    &om, err);
		if (status == MERGE_OK)
			status = rewrite_host(o, hd, res, &om, threads,
					      max_inflate, w, &pg, err);
		if (status != MERGE_OK)
			goto out;
	}
	for (size_t i = 0; onto && i < o->n_guests; i++) {
		const struct sync_data *gd = sync_scanner_data(gsc[i]);
		if (res->guests[i].machine_id)
			status = write_machine_anchor(
				w, res->guests[i].machine_id, res->clock,
				axis_start(sync_scanner_data(
						   gsc[o->onto_guest - 1]),
					   res->clock),
				err);
		if (status == MERGE_OK)
			status = rewrite_guest(o, i, gd, res, &gm[i], &om,
					       &plan[i], max_inflate, w, &pg,
					       err);
		if (status != MERGE_OK)
			goto out;
		check_guest(&res->guests[i], &gm[i], res);
		if (i + 1 != o->onto_guest)
			onto_bounds(&res->guests[i], gd, &gm[i], &om);
	}

	if (o->extra) {
		status = o->extra(o->extra_ctx, o, res, (uint32_t)seq_base, w,
				  err);
		if (status != MERGE_OK)
			goto out;
	}
	res->bytes_out = trace_writer_bytes(w);
	if (o->out_pending) {
		struct trace_writer *fw = w;
		w = NULL;
		if (trace_writer_finish(fw, o->out_pending, err) < 0)
			status = MERGE_IO_ERROR;
		goto out;
	}
	if (trace_writer_commit(w, err) < 0) {
		w = NULL;
		status = MERGE_IO_ERROR;
		goto out;
	}
	w = NULL;
out:
	if (w)
		trace_writer_abort(w);
	for (size_t i = 0; i < o->n_guests; i++)
		sync_scanner_free(gsc[i]);
	sync_scanner_free(hsc);
	free(host_rt);
	free(host_mb);
	res->seconds = now_s() - t0;
	if (pg.on && pg.shown >= 0 && pg.shown < 100)
		fputc('\n', stderr);
	return status;
}
