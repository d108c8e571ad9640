/*
 * procfs_poll.h - the polling thread of a probe instance, and the data
 * source glue shared by the probes that poll.
 *
 * A data source that polls /proc starts one of these per started
 * instance (never polling on the SDK's producer thread).  The thread runs
 * fn(arg, poller) once; fn loops, sleeping with procfs_poll_sleep_until()
 * which returns false as soon as a stop is requested.  procfs_poll_stop()
 * asks the thread to stop and joins it, waiting at most a bounded time.
 *
 * struct procfs_source does the rest of such a data source: it registers
 * it, and keeps the started instances with their pollers so that on_stop
 * finds, stops and frees the right one.
 */
#ifndef VP_PROCFS_POLL_H
#define VP_PROCFS_POLL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct procfs_poller;

typedef void (*procfs_poll_fn)(void *arg, struct procfs_poller *p);

/* Starts the thread.  Returns NULL with a message on stderr on error. */
struct procfs_poller *procfs_poll_start(const char *name, procfs_poll_fn fn,
					void *arg);
/* True once a stop was requested (for long scans to give up early). */
bool procfs_poll_stopping(struct procfs_poller *p);
/* Sleeps until CLOCK_MONOTONIC reaches deadline_ns or a stop is
 * requested; returns false in the latter case. */
bool procfs_poll_sleep_until(struct procfs_poller *p, uint64_t deadline_ns);
/* Requests the stop and joins the thread (at most timeout_ms).  Returns 0
 * once joined, -1 if the thread did not finish in time: it is then
 * detached, and `arg` must stay valid (the caller leaks it). */
int procfs_poll_stop(struct procfs_poller *p, unsigned timeout_ms);

/* CLOCK_MONOTONIC in ns. */
uint64_t procfs_mono_ns(void);

/* ---- a data source of polled instances -------------------------------- */

struct vp_ds_instance;
struct procfs_running;

/*
 * What a polling data source provides.  The module fills in the fields
 * above "private" (mu with PROCFS_SOURCE_INIT) and calls
 * procfs_source_register().  When an instance starts, create() makes its
 * state on the producer thread, a poller named thread_name runs
 * poll(state, poller), and describe(state) logs what it does (at info level).
 * When it stops, the poller is stopped (at most 5 s) and destroy(state)
 * frees the state; a poller that does not stop keeps its state (leaked).
 */
struct procfs_source {
	const char *name;        /* the data source, "linux.sys_stats" */
	const char *thread_name; /* at most 15 characters */
	/* Returns the state of a started instance (which keeps inst to write
	 * to), or NULL if there is nothing to poll or on error (having said
	 * why on stderr where the user needs to know). */
	void *(*create)(const struct procfs_source *src,
			struct vp_ds_instance *inst, const uint8_t *config,
			size_t len);
	procfs_poll_fn poll;
	void (*destroy)(void *state);
	void (*describe)(void *state); /* optional */

	/* Private: the started instances, under mu. */
	pthread_mutex_t mu;
	struct procfs_running *running;
};

#define PROCFS_SOURCE_INIT .mu = PTHREAD_MUTEX_INITIALIZER

/* Registers the data source with the SDK; src must stay valid for the
 * life of the process.  Returns 0, or -1 with a message on stderr. */
int procfs_source_register(struct procfs_source *src);

#endif
