/*
 * procfs_poll.c - the polling thread of a probe instance (procfs_poll.h).
 *
 * The stop flag and the condition variable live in the poller; the thread
 * waits on the condition with a CLOCK_MONOTONIC deadline.  If a join times
 * out the poller is handed to the thread, which frees it when it ends.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "procfs_poll.h"

struct procfs_poller {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop;     /* under mu */
	bool done;     /* under mu: fn returned */
	bool orphaned; /* under mu: the joiner gave up; the thread frees */
	procfs_poll_fn fn;
	void *arg;
	char name[32];
};

uint64_t procfs_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void poller_free(struct procfs_poller *p)
{
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

static void *poll_main(void *arg)
{
	struct procfs_poller *p = arg;

	p->fn(p->arg, p);
	pthread_mutex_lock(&p->mu);
	p->done = true;
	bool orphaned = p->orphaned;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (orphaned)
		poller_free(p);
	return NULL;
}

struct procfs_poller *procfs_poll_start(const char *name, procfs_poll_fn fn,
					void *arg)
{
	struct procfs_poller *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;
	int rc;

	if (!p) {
		fprintf(stderr, "vtraced_probes: %s: out of memory\n", name);
		return NULL;
	}
	p->fn = fn;
	p->arg = arg;
	snprintf(p->name, sizeof(p->name), "%s", name);
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&p->thread, NULL, poll_main, p);
	if (rc != 0) {
		fprintf(stderr, "vtraced_probes: %s: cannot start a thread: %s\n",
			name, strerror(rc));
		poller_free(p);
		return NULL;
	}
	/* Thread names are at most 15 characters. */
	char tname[16];
	snprintf(tname, sizeof(tname), "%s", name);
	pthread_setname_np(p->thread, tname);
	return p;
}

bool procfs_poll_stopping(struct procfs_poller *p)
{
	pthread_mutex_lock(&p->mu);
	bool s = p->stop;
	pthread_mutex_unlock(&p->mu);
	return s;
}

static struct timespec ts_of(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000ull),
		.tv_nsec = (long)(ns % 1000000000ull),
	};
	return ts;
}

bool procfs_poll_sleep_until(struct procfs_poller *p, uint64_t deadline_ns)
{
	struct timespec ts = ts_of(deadline_ns);

	pthread_mutex_lock(&p->mu);
	while (!p->stop && procfs_mono_ns() < deadline_ns) {
		int rc = pthread_cond_timedwait(&p->cond, &p->mu, &ts);
		if (rc == ETIMEDOUT)
			break;
	}
	bool go_on = !p->stop;
	pthread_mutex_unlock(&p->mu);
	return go_on;
}

int procfs_poll_stop(struct procfs_poller *p, unsigned timeout_ms)
{
	uint64_t deadline = procfs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct timespec ts = ts_of(deadline);

	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	while (!p->done) {
		if (pthread_cond_timedwait(&p->cond, &p->mu, &ts) == ETIMEDOUT)
			break;
	}
	if (!p->done) {
		p->orphaned = true;
		pthread_mutex_unlock(&p->mu);
		fprintf(stderr, "vtraced_probes: %s: the polling thread did not "
			"stop within %u ms; detached\n", p->name, timeout_ms);
		pthread_detach(p->thread);
		return -1;
	}
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	poller_free(p);
	return 0;
}
