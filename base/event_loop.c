/*
 * event_loop.c - the epoll loop of vtraced and of the SDK's producer thread
 * (see event_loop.h).
 *
 * Watches live in a table indexed by fd.  Each watch carries a generation
 * number that also travels in the epoll_event, so an event already fetched
 * for a watch that a callback removed (or replaced) in the same batch is
 * recognised as stale and skipped.  Timers are a binary min-heap on their
 * deadline; epoll_wait's timeout is the time to the earliest one.  Posted
 * tasks are a FIFO run between callbacks; tasks posted from other threads
 * go through a mutex-protected FIFO and an eventfd that wakes epoll_wait.
 */
#include "event_loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "vp_alloc.h"

#define LOOP_MAX_EVENTS 64

struct watch {
	vp_fd_cb cb;
	void *ctx;
	uint32_t events;
	uint32_t gen; /* 0: free slot */
};

struct timer {
	uint64_t deadline_ms;
	uint64_t id;
	uint32_t period_ms;
	vp_task_cb cb;
	void *ctx;
};

struct task {
	vp_task_cb cb;
	void *ctx;
};

/* A growable FIFO of tasks (a plain array with a read index). */
struct task_queue {
	struct task *items;
	size_t head, len, cap;
};

struct vp_loop {
	int epfd;
	int wakefd;
	struct watch *watches; /* indexed by fd */
	size_t n_watches;
	uint32_t next_gen;

	struct timer *heap;
	size_t n_timers, cap_timers;
	uint64_t next_timer_id;

	struct task_queue posted;
	pthread_mutex_t remote_mu;
	struct task_queue remote; /* guarded by remote_mu */

	atomic_bool quit;
	bool soft; /* out of memory fails the call (vp_loop_set_soft) */
};

/* Grows one of the loop's arrays: 0, or -1 on a soft loop (the SDK's),
 * where the caller reports the failure; a tool's loop stops the
 * program (base/vp_alloc.h). */
static int loop_grow(const struct vp_loop *loop, void **p, size_t *cap,
		     size_t need, size_t size)
{
	if (vp_grow(p, cap, need, size) == 0)
		return 0;
	if (!loop->soft)
		vp_oom(need * size);
	return -1;
}
#define LOOP_GROW(loop, arr, cap, need) \
	loop_grow((loop), (void **)&(arr), &(cap), (need), sizeof(*(arr)))

uint64_t vp_loop_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- task queues --------------------------------------------------------- */

/* 0, or -1 (a soft loop out of memory: the task is not queued). */
static int tq_push(const struct vp_loop *loop, struct task_queue *q,
		   vp_task_cb cb, void *ctx)
{
	if (q->head > 0 && q->head == q->len) {
		q->head = q->len = 0;
	}
	if (q->len == q->cap) {
		if (q->head > 0) { /* reuse the consumed front */
			memmove(q->items, q->items + q->head,
				(q->len - q->head) * sizeof(*q->items));
			q->len -= q->head;
			q->head = 0;
		} else if (LOOP_GROW(loop, q->items, q->cap, q->len + 1) < 0) {
			return -1;
		}
	}
	q->items[q->len].cb = cb;
	q->items[q->len].ctx = ctx;
	q->len++;
	return 0;
}

static bool tq_pop(struct task_queue *q, struct task *out)
{
	if (q->head == q->len)
		return false;
	*out = q->items[q->head++];
	if (q->head == q->len)
		q->head = q->len = 0;
	return true;
}

static bool tq_empty(const struct task_queue *q) { return q->head == q->len; }

/* ---- timer heap ---------------------------------------------------------- */

static bool timer_before(const struct timer *a, const struct timer *b)
{
	if (a->deadline_ms != b->deadline_ms)
		return a->deadline_ms < b->deadline_ms;
	return a->id < b->id; /* equal deadlines fire in creation order */
}

static void heap_swap(struct timer *h, size_t i, size_t j)
{
	struct timer t = h[i];
	h[i] = h[j];
	h[j] = t;
}

static void heap_up(struct timer *h, size_t i)
{
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!timer_before(&h[i], &h[parent]))
			break;
		heap_swap(h, i, parent);
		i = parent;
	}
}

static void heap_down(struct timer *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && timer_before(&h[l], &h[m]))
			m = l;
		if (r < n && timer_before(&h[r], &h[m]))
			m = r;
		if (m == i)
			return;
		heap_swap(h, i, m);
		i = m;
	}
}

static int heap_push(struct vp_loop *loop, const struct timer *t)
{
	if (LOOP_GROW(loop, loop->heap, loop->cap_timers,
		      loop->n_timers + 1) < 0)
		return -1;
	loop->heap[loop->n_timers] = *t;
	heap_up(loop->heap, loop->n_timers);
	loop->n_timers++;
	return 0;
}

static void heap_remove_at(struct vp_loop *loop, size_t i)
{
	size_t last = --loop->n_timers;
	if (i == last)
		return;
	loop->heap[i] = loop->heap[last];
	heap_down(loop->heap, loop->n_timers, i);
	heap_up(loop->heap, i);
}

/* ---- lifetime ------------------------------------------------------------ */

int vp_loop_new(struct vp_loop **out, struct vp_error *err)
{
	struct vp_loop *loop = calloc(1, sizeof(*loop));
	if (!loop)
		return vp_errorf(err, "event loop: out of memory");
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		int e = errno;
		free(loop);
		return vp_errorf(err, "event loop: epoll_create1: %s",
				 strerror(e));
	}
	loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (loop->wakefd < 0) {
		int e = errno;
		close(loop->epfd);
		free(loop);
		return vp_errorf(err, "event loop: eventfd: %s", strerror(e));
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) < 0) {
		int e = errno;
		close(loop->wakefd);
		close(loop->epfd);
		free(loop);
		return vp_errorf(err, "event loop: epoll_ctl(eventfd): %s",
				 strerror(e));
	}
	pthread_mutex_init(&loop->remote_mu, NULL);
	loop->next_gen = 1;
	loop->next_timer_id = 1;
	atomic_init(&loop->quit, false);
	*out = loop;
	return 0;
}

void vp_loop_set_soft(struct vp_loop *loop)
{
	loop->soft = true;
}

void vp_loop_free(struct vp_loop *loop)
{
	if (!loop)
		return;
	close(loop->epfd);
	close(loop->wakefd);
	pthread_mutex_destroy(&loop->remote_mu);
	free(loop->watches);
	free(loop->heap);
	free(loop->posted.items);
	free(loop->remote.items);
	free(loop);
}

/* ---- watches ------------------------------------------------------------- */

static struct watch *watch_of(struct vp_loop *loop, int fd)
{
	if (fd < 0 || (size_t)fd >= loop->n_watches)
		return NULL;
	struct watch *w = &loop->watches[fd];
	return w->gen ? w : NULL;
}

static uint64_t watch_key(int fd, uint32_t gen)
{
	return (uint64_t)gen << 32 | (uint32_t)fd;
}

static uint32_t ep_events(uint32_t events)
{
	return (events & (VP_EV_IN | VP_EV_OUT)) | EPOLLERR | EPOLLHUP;
}

int vp_loop_watch(struct vp_loop *loop, int fd, uint32_t events, vp_fd_cb cb,
		  void *ctx, struct vp_error *err)
{
	if (fd < 0)
		return vp_errorf(err, "event loop: cannot watch fd %d", fd);
	if (watch_of(loop, fd))
		return vp_errorf(err, "event loop: fd %d is already watched", fd);
	if ((size_t)fd >= loop->n_watches) {
		size_t n = loop->n_watches;
		if (LOOP_GROW(loop, loop->watches, loop->n_watches,
			      (size_t)fd + 1) < 0)
			return vp_errorf(err, "event loop: out of memory");
		memset(loop->watches + n, 0,
		       (loop->n_watches - n) * sizeof(*loop->watches));
	}
	uint32_t gen = loop->next_gen++;
	if (loop->next_gen == 0)
		loop->next_gen = 1;
	struct epoll_event ev = {.events = ep_events(events),
				 .data.u64 = watch_key(fd, gen)};
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return vp_errorf(err, "event loop: epoll_ctl(ADD, fd %d): %s",
				 fd, strerror(errno));
	struct watch *w = &loop->watches[fd];
	w->cb = cb;
	w->ctx = ctx;
	w->events = events;
	w->gen = gen;
	return 0;
}

int vp_loop_watch_modify(struct vp_loop *loop, int fd, uint32_t events)
{
	struct watch *w = watch_of(loop, fd);
	if (!w)
		return -1;
	if (w->events == events)
		return 0;
	struct epoll_event ev = {.events = ep_events(events),
				 .data.u64 = watch_key(fd, w->gen)};
	if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -1;
	w->events = events;
	return 0;
}

void vp_loop_unwatch(struct vp_loop *loop, int fd)
{
	struct watch *w = watch_of(loop, fd);
	if (!w)
		return;
	/* May fail if the caller already closed fd: the kernel dropped it. */
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
	memset(w, 0, sizeof(*w));
}

/* ---- timers -------------------------------------------------------------- */

uint64_t vp_loop_timer(struct vp_loop *loop, uint32_t delay_ms,
		       uint32_t period_ms, vp_task_cb cb, void *ctx)
{
	struct timer t = {
		.deadline_ms = vp_loop_now_ms() + delay_ms,
		.id = loop->next_timer_id,
		.period_ms = period_ms,
		.cb = cb,
		.ctx = ctx,
	};
	if (heap_push(loop, &t) < 0)
		return 0;
	loop->next_timer_id++;
	return t.id;
}

void vp_loop_cancel(struct vp_loop *loop, uint64_t timer_id)
{
	for (size_t i = 0; i < loop->n_timers; i++) {
		if (loop->heap[i].id == timer_id) {
			heap_remove_at(loop, i);
			return;
		}
	}
}

/* Runs the timers due at `now`.  A periodic timer is re-armed before its
 * callback runs, so the callback may cancel it; a one-shot timer is out of
 * the heap before its callback runs, so cancelling it is a no-op. */
static void run_timers(struct vp_loop *loop, uint64_t now)
{
	/* Bound the work so a 0 ms periodic timer cannot starve fds. */
	size_t budget = loop->n_timers;
	while (budget-- > 0 && loop->n_timers > 0 &&
	       loop->heap[0].deadline_ms <= now &&
	       !atomic_load_explicit(&loop->quit, memory_order_relaxed)) {
		struct timer t = loop->heap[0];
		if (t.period_ms) {
			uint64_t next = t.deadline_ms + t.period_ms;
			loop->heap[0].deadline_ms = next > now ? next
							      : now + t.period_ms;
			heap_down(loop->heap, loop->n_timers, 0);
		} else {
			heap_remove_at(loop, 0);
		}
		t.cb(t.ctx);
	}
}

/* ---- tasks --------------------------------------------------------------- */

int vp_loop_post(struct vp_loop *loop, vp_task_cb cb, void *ctx)
{
	return tq_push(loop, &loop->posted, cb, ctx);
}

static void wake(struct vp_loop *loop)
{
	uint64_t one = 1;
	ssize_t n;
	do {
		n = write(loop->wakefd, &one, sizeof(one));
	} while (n < 0 && errno == EINTR);
	/* EAGAIN: the counter is saturated, the loop is awake anyway. */
}

int vp_loop_post_threadsafe(struct vp_loop *loop, vp_task_cb cb, void *ctx)
{
	pthread_mutex_lock(&loop->remote_mu);
	int rc = tq_push(loop, &loop->remote, cb, ctx);
	pthread_mutex_unlock(&loop->remote_mu);
	if (rc == 0)
		wake(loop);
	return rc;
}

void vp_loop_quit(struct vp_loop *loop)
{
	atomic_store(&loop->quit, true);
	wake(loop);
}

/* Moves tasks posted from other threads to the local FIFO. */
static void drain_remote(struct vp_loop *loop)
{
	uint64_t cnt;
	while (read(loop->wakefd, &cnt, sizeof(cnt)) < 0 && errno == EINTR) {
	}
	pthread_mutex_lock(&loop->remote_mu);
	while (!tq_empty(&loop->remote)) {
		struct task *t = &loop->remote.items[loop->remote.head];
		if (tq_push(loop, &loop->posted, t->cb, t->ctx) < 0) {
			/* Out of memory on a soft loop: the rest stays queued
			 * in order and moves at the next wake-up (not one of
			 * our own: that would spin while memory is short). */
			break;
		}
		struct task done;
		tq_pop(&loop->remote, &done);
	}
	pthread_mutex_unlock(&loop->remote_mu);
}

/* Runs the tasks posted so far; tasks they post run on the next pass. */
static void run_posted(struct vp_loop *loop)
{
	size_t n = loop->posted.len - loop->posted.head;
	struct task t;
	while (n-- > 0 && tq_pop(&loop->posted, &t)) {
		t.cb(t.ctx);
		if (atomic_load_explicit(&loop->quit, memory_order_relaxed))
			return;
	}
}

/* ---- the loop ------------------------------------------------------------ */

static int wait_timeout(const struct vp_loop *loop)
{
	if (!tq_empty(&loop->posted))
		return 0;
	if (loop->n_timers == 0)
		return -1;
	uint64_t now = vp_loop_now_ms();
	uint64_t due = loop->heap[0].deadline_ms;
	if (due <= now)
		return 0;
	uint64_t d = due - now;
	return d > 60000 ? 60000 : (int)d;
}

static void dispatch(struct vp_loop *loop, const struct epoll_event *ev)
{
	if (ev->data.u64 == UINT64_MAX) {
		drain_remote(loop);
		return;
	}
	int fd = (int)(uint32_t)ev->data.u64;
	uint32_t gen = (uint32_t)(ev->data.u64 >> 32);
	struct watch *w = watch_of(loop, fd);
	if (!w || w->gen != gen)
		return; /* removed or replaced by an earlier callback */
	uint32_t bits = ev->events & (VP_EV_IN | VP_EV_OUT | VP_EV_ERR |
				      VP_EV_HUP);
	w->cb(w->ctx, fd, bits);
}

int vp_loop_run(struct vp_loop *loop)
{
	struct epoll_event evs[LOOP_MAX_EVENTS];

	while (!atomic_load(&loop->quit)) {
		int n = epoll_wait(loop->epfd, evs, LOOP_MAX_EVENTS,
				   wait_timeout(loop));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (int i = 0; i < n && !atomic_load(&loop->quit); i++) {
			dispatch(loop, &evs[i]);
			run_posted(loop);
		}
		if (atomic_load(&loop->quit))
			break;
		run_timers(loop, vp_loop_now_ms());
		run_posted(loop);
	}
	atomic_store(&loop->quit, false); /* the loop may be run again */
	return 0;
}
