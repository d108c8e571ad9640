/*
 * procfs_poll.c - the polling thread of a probe instance, and the data
 * source glue of the probes that poll (procfs_poll.h).
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
#include "vperfetto/vperfetto.h"
#include "vp_log.h"

/* How long on_stop waits for a polling thread. */
#define STOP_TIMEOUT_MS 5000

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
		vp_log_warn("%s: out of memory\n", name);
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
		vp_log_warn("%s: cannot start a thread: %s\n",
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
		vp_log_warn("%s: the polling thread did not "
			"stop within %u ms; detached\n", p->name, timeout_ms);
		pthread_detach(p->thread);
		return -1;
	}
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	poller_free(p);
	return 0;
}

/* ---- a data source of polled instances -------------------------------- */

/* A started instance: the SDK's handle, the module's state and the thread
 * polling with it. */
struct procfs_running {
	struct vp_ds_instance *inst;
	void *state;
	struct procfs_poller *poller;
	struct procfs_running *next;
};

static void source_on_start(void *ctx, struct vp_ds_instance *inst,
			    const uint8_t *config, size_t len)
{
	struct procfs_source *src = ctx;
	void *state = src->create(src, inst, config, len);

	if (!state)
		return;
	struct procfs_running *r = calloc(1, sizeof(*r));
	if (!r) {
		vp_log_warn("%s: out of memory\n",
			src->name);
		src->destroy(state);
		return;
	}
	r->inst = inst;
	r->state = state;
	r->poller = procfs_poll_start(src->thread_name, src->poll, state);
	if (!r->poller) {
		src->destroy(state);
		free(r);
		return;
	}
	pthread_mutex_lock(&src->mu);
	r->next = src->running;
	src->running = r;
	pthread_mutex_unlock(&src->mu);
	if (vp_log_enabled(VP_LOG_INFO) && src->describe)
		src->describe(state);
}

/* Unlinks and returns the running instance of inst, or NULL. */
static struct procfs_running *source_take(struct procfs_source *src,
					  struct vp_ds_instance *inst)
{
	struct procfs_running *r = NULL, **pp;

	pthread_mutex_lock(&src->mu);
	for (pp = &src->running; *pp; pp = &(*pp)->next) {
		if ((*pp)->inst == inst) {
			r = *pp;
			*pp = r->next;
			break;
		}
	}
	pthread_mutex_unlock(&src->mu);
	return r;
}

static void source_on_stop(void *ctx, struct vp_ds_instance *inst)
{
	struct procfs_source *src = ctx;
	struct procfs_running *r = source_take(src, inst);

	if (!r)
		return;
	/* If the thread did not stop it still uses the state: leave it. */
	if (procfs_poll_stop(r->poller, STOP_TIMEOUT_MS) == 0)
		src->destroy(r->state);
	free(r);
}

int procfs_source_register(struct procfs_source *src)
{
	struct vp_data_source_desc d = {
		.name = src->name,
		.ctx = src,
		.on_start = source_on_start,
		.on_stop = source_on_stop,
		/* on_flush: the SDK commits every writer of the instance. */
	};
	if (!vp_data_source_register(&d)) {
		vp_log_warn("cannot register %s\n",
			src->name);
		return -1;
	}
	return 0;
}
