/*
 * sdk_init.c - the SDK's entry points (vp_init, vp_flush, vp_shutdown),
 * its one global state, and the per-thread state with the destructor that
 * releases a thread's writers when it exits.
 *
 * The global state is what a tracing SDK must share between the traced
 * threads and the producer thread: the registered categories and data
 * sources, their instances, the shared memory and the commit queue.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sdk_internal.h"
#include "vp_log.h"

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

static pthread_key_t g_thread_key;
static pthread_once_t g_thread_key_once = PTHREAD_ONCE_INIT;
static bool g_atexit_done;

pid_t vp_gettid(void)
{
	static VP_TLS pid_t tid;
	if (!tid)
		tid = (pid_t)syscall(SYS_gettid);
	return tid;
}

/* -------------------------------------------------------- thread exit */

/* Releases one writer of an exiting thread: its last chunk goes on. */
static void release_thread_writer(struct vp_writer *w)
{
	pthread_mutex_lock(&vp_g.mu);
	if (!w->retired) {
		struct vp_ds_instance *inst = w->inst;
		for (struct vp_writer **pp = &inst->writers; *pp;
		     pp = &(*pp)->inst_next)
			if (*pp == w) {
				*pp = w->inst_next;
				break;
			}
		int mode = atomic_load(&vp_g.mode);
		vp_writer_ctl_lock(w);
		if (w->chunk)
			vp_writer_release_chunk(w);
		w->retired = true;
		vp_writer_ctl_unlock(w);
		vp_writer_id_free(w->writer_id);
		if (mode != VP_MODE_INPROC && mode != VP_MODE_NONE)
			vp_system_writer_removed(w->writer_id);
	}
	pthread_mutex_unlock(&vp_g.mu);
	vp_writer_free(w);
}

static void thread_state_release(struct vp_thread_state *t)
{
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++) {
		if (t->te[i])
			release_thread_writer(t->te[i]);
		t->te[i] = NULL;
	}
	while (t->ds_writers) {
		struct vp_writer *w = t->ds_writers;
		t->ds_writers = w->thread_next;
		release_thread_writer(w);
	}
}

static void thread_exit(void *arg)
{
	thread_state_release(arg);
}

static void make_thread_key(void)
{
	pthread_key_create(&g_thread_key, thread_exit);
}

void vp_thread_attach(void)
{
	if (vp_tls.attached)
		return;
	pthread_once(&g_thread_key_once, make_thread_key);
	pthread_setspecific(g_thread_key, &vp_tls);
	vp_tls.attached = true;
}

/* Frees the calling thread's writers that have been retired. */
static void free_own_retired_writers(void)
{
	struct vp_thread_state *t = &vp_tls;
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++) {
		struct vp_writer *w = t->te[i];
		if (w && w->retired) {
			vp_writer_free(w);
			t->te[i] = NULL;
		}
	}
	for (struct vp_writer **pp = &t->ds_writers; *pp;) {
		struct vp_writer *w = *pp;
		if (w->retired) {
			*pp = w->thread_next;
			vp_writer_free(w);
		} else {
			pp = &w->thread_next;
		}
	}
}

/* ------------------------------------------------------------- process */

static void read_process_name(void)
{
	FILE *f = fopen("/proc/self/comm", "re");
	vp_g.process_name[0] = 0;
	if (f) {
		if (fgets(vp_g.process_name, sizeof(vp_g.process_name), f))
			vp_g.process_name[strcspn(vp_g.process_name, "\n")] = 0;
		fclose(f);
	}
	if (!vp_g.process_name[0])
		snprintf(vp_g.process_name, sizeof(vp_g.process_name), "%s",
			 program_invocation_short_name);
}

static void at_exit(void)
{
	vp_shutdown();
}

int vp_init(const struct vp_init_args *args)
{
	if (!args || (args->backend != VP_BACKEND_SYSTEM &&
		      args->backend != VP_BACKEND_IN_PROCESS)) {
		vp_log_error("vp_init: backend must be "
				"VP_BACKEND_SYSTEM or VP_BACKEND_IN_PROCESS");
		return -1;
	}
	pthread_mutex_lock(&vp_g.mu);
	if (vp_g.initialized) {
		pthread_mutex_unlock(&vp_g.mu);
		vp_log_error("vp_init: already initialized");
		return -1;
	}
	vp_writer_fences_init();
	vp_g.pid = getpid();
	read_process_name();
	vp_g.process_uuid =
		vp_mix64(((uint64_t)(uint32_t)vp_g.pid << 16) ^
			 0x7670657266657474ull);
	free(vp_g.producer_name);
	/* NULL (out of memory) names the producer "vperfetto". */
	vp_g.producer_name = strdup(args->producer_name ? args->producer_name
							: vp_g.process_name);
	vp_g.backend = args->backend;
	vp_g.clear_period_ms = args->clear_period_ms;
	vp_te_init_slots();
	vp_g.initialized = true;
	pthread_mutex_unlock(&vp_g.mu);

	int rc = args->backend == VP_BACKEND_IN_PROCESS ? vp_inproc_start(args)
							: vp_system_start(args);
	if (rc < 0) {
		pthread_mutex_lock(&vp_g.mu);
		vp_g.initialized = false;
		pthread_mutex_unlock(&vp_g.mu);
		return -1;
	}
	if (!g_atexit_done) {
		g_atexit_done = true;
		atexit(at_exit);
	}
	return 0;
}

void vp_flush(void)
{
	if (!vp_g.initialized)
		return;
	if (vp_g.backend == VP_BACKEND_IN_PROCESS) {
		vp_flush_all_writers();
		vp_inproc_write_file();
	} else {
		vp_system_flush();
	}
}

void vp_shutdown(void)
{
	pthread_mutex_lock(&vp_g.mu);
	bool was = vp_g.initialized;
	pthread_mutex_unlock(&vp_g.mu);
	if (!was)
		return;
	if (vp_g.backend == VP_BACKEND_IN_PROCESS)
		vp_inproc_stop();
	else
		vp_system_stop();
	pthread_mutex_lock(&vp_g.mu);
	atomic_store(&vp_g.mode, VP_MODE_NONE);
	vp_data_sources_free();
	vp_g.initialized = false;
	free(vp_g.producer_name);
	vp_g.producer_name = NULL;
	pthread_mutex_unlock(&vp_g.mu);
	free_own_retired_writers();
}

bool vp_is_connected(void)
{
	return atomic_load(&vp_g.connected);
}
