/*
 * vp_clock.c - sandwich samples of system clocks against the CPU counter.
 */
#include <errno.h>

#include "vp_clock.h"

const char *vp_cpu_counter_name(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return "tsc";
#elif defined(__aarch64__)
	return "cntvct";
#else
	return NULL;
#endif
}

uint64_t vp_clock_now_ns(clockid_t clk)
{
	struct timespec ts;
	if (clock_gettime(clk, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int vp_clock_sample(const clockid_t *clocks, size_t n, unsigned tries,
		    struct vp_clock_sample *out)
{
	struct timespec ts[VP_CLOCK_SAMPLE_MAX];
	bool have = false;

	if (n == 0 || n > VP_CLOCK_SAMPLE_MAX || !VP_HAVE_CPU_COUNTER) {
		errno = EINVAL;
		return -1;
	}
	if (tries == 0)
		tries = 1;
	for (unsigned t = 0; t < tries; t++) {
		uint64_t c0 = vp_cpu_counter();
		for (size_t i = 0; i < n; i++)
			if (clock_gettime(clocks[i], &ts[i]) != 0)
				return -1;
		uint64_t c1 = vp_cpu_counter();
		if (c1 < c0)
			continue; /* migrated to a cpu whose counter is behind */
		uint64_t w = c1 - c0;
		if (have && w >= out->width)
			continue;
		have = true;
		out->width = w;
		out->counter = c0 + w / 2;
		for (size_t i = 0; i < n; i++)
			out->clock_ns[i] = (uint64_t)ts[i].tv_sec * 1000000000ull +
					   (uint64_t)ts[i].tv_nsec;
	}
	if (!have) {
		errno = EAGAIN;
		return -1;
	}
	return 0;
}
