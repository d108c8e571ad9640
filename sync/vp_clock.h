/*
 * vp_clock.h - clock reads for clock sync: the CPU counter that host and
 * guest share, and "sandwich" samples of a system clock against it.
 *
 * The counter is rdtsc on x86-64 and CNTVCT_EL0 (after an isb, so the read
 * is not speculated ahead of earlier instructions) on arm64; in traces it is
 * clock id 64 (VP_CLOCK_ID_CPU_COUNTER).  A sample reads (counter, clock...,
 * counter) and keeps the narrowest of a few tries: the counter value
 * reported is the midpoint, the width (in counter ticks) its uncertainty.
 */
#ifndef VP_CLOCK_H
#define VP_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The clock id the host writes its counter under (clock-sync.md). */
#define VP_CLOCK_ID_CPU_COUNTER 64u
/* Perfetto's builtin clock ids.  sync/ stands alone (no wire/), so they
 * are copied here; host/clock_config.c checks them against protos/. */
#define VP_BUILTIN_CLOCK_REALTIME 1u
#define VP_BUILTIN_CLOCK_MONOTONIC 3u
#define VP_BUILTIN_CLOCK_MONOTONIC_RAW 5u
#define VP_BUILTIN_CLOCK_BOOTTIME 6u

/* The most clocks one sample reads between its two counter reads. */
#define VP_CLOCK_SAMPLE_MAX 3
/* Default number of sandwiches a sample takes the narrowest of. */
#define VP_CLOCK_SAMPLE_TRIES 5

#if defined(__x86_64__) || defined(__i386__)
#define VP_HAVE_CPU_COUNTER 1
static inline uint64_t vp_cpu_counter(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
#elif defined(__aarch64__)
#define VP_HAVE_CPU_COUNTER 1
static inline uint64_t vp_cpu_counter(void)
{
	uint64_t v;
	__asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}
#else
#define VP_HAVE_CPU_COUNTER 0
/* No shared counter on this architecture: the sync producers refuse to
 * start (vp_cpu_counter_name() returns NULL). */
static inline uint64_t vp_cpu_counter(void) { return 0; }
#endif

/* "tsc", "cntvct", or NULL where there is no counter. */
const char *vp_cpu_counter_name(void);

/* One reading of `n` clocks between two counter reads. */
struct vp_clock_sample {
	uint64_t counter;                    /* midpoint of the two reads */
	uint64_t width;                      /* counter ticks between them */
	uint64_t clock_ns[VP_CLOCK_SAMPLE_MAX];
};

/* Takes `tries` sandwiches (counter, clocks[0..n), counter) and stores
 * the narrowest in *out.  Returns 0, or -1 (errno set) if a clock cannot
 * be read or n is out of range. */
int vp_clock_sample(const clockid_t *clocks, size_t n, unsigned tries,
		    struct vp_clock_sample *out);

/* A clock's current value in ns (0 on error). */
uint64_t vp_clock_now_ns(clockid_t clk);

#endif
