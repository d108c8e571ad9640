/*
 * sdk_init.c - the SDK's entry points (vp_init, vp_flush, vp_shutdown):
 * they start and stop the backend the application chose.  The state they
 * set up is sdk_state.c's; sdk_state.h says how the files stand on each
 * other.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sdk_data_source.h"
#include "sdk_in_process.h"
#include "sdk_state.h"
#include "sdk_system.h"
#include "sdk_track_event.h"
#include "sdk_writer.h"
#include "vp_log.h"

static bool g_atexit_done;

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
	vp_thread_free_retired_writers();
}

bool vp_is_connected(void)
{
	return atomic_load(&vp_g.connected);
}
