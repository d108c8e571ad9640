/*
 * event_loop.h - a single-threaded epoll loop with fd watches, timers and
 * deferred tasks.
 *
 * vtraced runs entirely on one loop; so does the producer thread of the SDK.
 * Callbacks run on the thread that calls vp_loop_run().  Only
 * vp_loop_post_threadsafe() and vp_loop_quit() may be called from other
 * threads (they write an eventfd).
 *
 * Removing a watch or cancelling a timer from inside any callback is safe,
 * including the one being run.
 */
#ifndef VP_EVENT_LOOP_H
#define VP_EVENT_LOOP_H

#include <stdint.h>

#include "vp_error.h"

/* Event bits for watches: the same values as EPOLLIN / EPOLLOUT / EPOLLERR /
 * EPOLLHUP, so they can be passed straight through. */
#define VP_EV_IN 0x001u
#define VP_EV_OUT 0x004u
#define VP_EV_ERR 0x008u
#define VP_EV_HUP 0x010u

struct vp_loop;

typedef void (*vp_fd_cb)(void *ctx, int fd, uint32_t events);
typedef void (*vp_task_cb)(void *ctx);

int vp_loop_new(struct vp_loop **out, struct vp_error *err);
/* Makes the loop's allocations fail with an error (-1, or a timer id of
 * 0) instead of stopping the program: for the SDK, inside other people's
 * programs.  A tool's loop aborts on out of memory (base/vp_alloc.h). */
void vp_loop_set_soft(struct vp_loop *loop);
/* Frees the loop; watches and timers still registered are dropped (their
 * fds are not closed). */
void vp_loop_free(struct vp_loop *loop);

/* Watches fd for `events` (VP_EV_IN and/or VP_EV_OUT; ERR/HUP always
 * reported).  One watch per fd. */
int vp_loop_watch(struct vp_loop *loop, int fd, uint32_t events, vp_fd_cb cb,
		  void *ctx, struct vp_error *err);
int vp_loop_watch_modify(struct vp_loop *loop, int fd, uint32_t events);
void vp_loop_unwatch(struct vp_loop *loop, int fd);

/* Runs cb after delay_ms, then every period_ms if that is non-zero.
 * Returns a timer id > 0, never reused (0: a soft loop out of memory). */
uint64_t vp_loop_timer(struct vp_loop *loop, uint32_t delay_ms,
		       uint32_t period_ms, vp_task_cb cb, void *ctx);
void vp_loop_cancel(struct vp_loop *loop, uint64_t timer_id);

/* Runs cb once on the loop thread, after the current callback returns.
 * 0, or -1 (a soft loop out of memory: cb will not run). */
int vp_loop_post(struct vp_loop *loop, vp_task_cb cb, void *ctx);
/* The same, callable from any thread. */
int vp_loop_post_threadsafe(struct vp_loop *loop, vp_task_cb cb, void *ctx);

/* Runs until vp_loop_quit().  Returns 0, or -1 if epoll itself fails. */
int vp_loop_run(struct vp_loop *loop);
/* Makes vp_loop_run() return after the current callback (any thread). */
void vp_loop_quit(struct vp_loop *loop);

/* Milliseconds on CLOCK_MONOTONIC, for deadlines. */
uint64_t vp_loop_now_ms(void);

#endif
