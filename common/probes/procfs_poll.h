/*
 * procfs_poll.h - the polling thread of a probe instance.
 *
 * A data source that polls /proc starts one of these per started
 * instance (never polling on the SDK's producer thread).  The thread runs
 * fn(arg, poller) once; fn loops, sleeping with procfs_poll_sleep_until()
 * which returns false as soon as a stop is requested.  procfs_poll_stop()
 * asks the thread to stop and joins it, waiting at most a bounded time.
 */
#ifndef VP_PROCFS_POLL_H
#define VP_PROCFS_POLL_H

#include <stdbool.h>
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

#endif
