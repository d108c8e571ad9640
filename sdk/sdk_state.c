/*
 * sdk_state.c - the SDK's one global state, the per-thread state, and the
 * small helpers every file uses (thread ids, the clock, a hash).
 *
 * The global state is what a tracing SDK must share between the traced
 * threads and the producer thread: the registered categories and data
 * sources, their instances, the shared memory and the commit queue.
 */
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sdk_state.h"

struct vp_sdk vp_g = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.commit_mu = PTHREAD_MUTEX_INITIALIZER,
	.tb_mu = PTHREAD_MUTEX_INITIALIZER,
	.track_event_ds = {
		.desc = {.name = "track_event",
			 .handles_incremental_state_clear = true},
		.is_track_event = true,
	},
	.writer_id_next = 1,
	.layout = VP_PAGE_DIV_1,
};

VP_TLS struct vp_thread_state vp_tls;

pid_t vp_gettid(void)
{
	static VP_TLS pid_t tid;
	if (!tid)
		tid = (pid_t)syscall(SYS_gettid);
	return tid;
}

uint64_t vp_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t vp_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}
