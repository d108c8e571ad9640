/*
 * sdk_data_source.c - data sources and their instances: registration, the
 * setup / start / stop / clear life cycle driven by the service (or by the
 * in-process backend), and the generic data source API of vperfetto.h.
 *
 * Instances are kept in a pool per data source and reused, never freed
 * while the SDK runs, so a pointer handed to a callback stays a valid
 * object; a new generation number at each setup tells stale per-thread
 * writers apart.  Track event instances are the VP_TE_MAX_INSTANCES fixed
 * slots of vp_sdk.te_slots.
 *
 * Stop: the data source's on_stop runs first (it may still write final
 * packets), then the instance stops taking packets (category bits cleared,
 * state STOPPING), its writers are retired with their last chunks handed
 * on (see sdk_writer.h for why that is safe against racing threads),
 * and the slot is free again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk_data_source.h"
#include "sdk_state.h"
#include "sdk_track_event.h"
#include "sdk_writer.h"
#include "vp_log.h"

static _Atomic uint64_t g_gen_counter;

uint64_t vp_next_gen(void)
{
	return atomic_fetch_add(&g_gen_counter, 1) + 1;
}

/* The target_buffer of a serialized DataSourceConfig. */
static uint32_t ds_config_target_buffer(const uint8_t *cfg, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint32_t tb = 0;

	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f))
		if (f.num == DSC_TARGET_BUFFER && f.wt == PB_WT_VARINT)
			tb = (uint32_t)f.val;
	return tb;
}

/* Its buffer_exhausted_policy (VP_EXHAUSTED_DROP when unset or unknown). */
static uint32_t ds_config_exhausted_policy(const uint8_t *cfg, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint32_t policy = VP_EXHAUSTED_DROP;

	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f)) {
		if (f.num != DSC_BUFFER_EXHAUSTED_POLICY ||
		    f.wt != PB_WT_VARINT)
			continue;
		if (f.val == VP_EXHAUSTED_STALL_THEN_ABORT ||
		    f.val == VP_EXHAUSTED_STALL_THEN_DROP)
			policy = (uint32_t)f.val;
		else
			policy = VP_EXHAUSTED_DROP; /* DROP, UNSPECIFIED */
	}
	return policy;
}

/* ------------------------------------------------------------- registry */

struct vp_data_source *vp_data_source_find(const char *name)
{
	if (strcmp(name, "track_event") == 0)
		return &vp_g.track_event_ds;
	for (struct vp_data_source *ds = vp_g.sources; ds; ds = ds->next)
		if (strcmp(ds->desc.name, name) == 0)
			return ds;
	return NULL;
}

struct vp_data_source *vp_data_source_register(
	const struct vp_data_source_desc *desc)
{
	if (!desc || !desc->name || !desc->name[0]) {
		vp_log_error("vp_data_source_register: no name");
		return NULL;
	}
	pthread_mutex_lock(&vp_g.mu);
	if (!vp_g.initialized) {
		pthread_mutex_unlock(&vp_g.mu);
		vp_log_error("vp_data_source_register(\"%s\"): call "
			     "vp_init() first",
			desc->name);
		return NULL;
	}
	if (vp_data_source_find(desc->name)) {
		pthread_mutex_unlock(&vp_g.mu);
		vp_log_error("vp_data_source_register(\"%s\"): already "
			     "registered",
			desc->name);
		return NULL;
	}
	struct vp_data_source *ds = calloc(1, sizeof(*ds));
	char *name = strdup(desc->name);
	if (!ds || !name) {
		pthread_mutex_unlock(&vp_g.mu);
		free(ds);
		free(name);
		vp_log_error("out of memory");
		return NULL;
	}
	ds->desc = *desc;
	ds->desc.name = name;
	ds->next = vp_g.sources;
	vp_g.sources = ds;
	enum vp_backend backend = vp_g.backend;
	pthread_mutex_unlock(&vp_g.mu);

	if (backend == VP_BACKEND_IN_PROCESS) {
		/* No service: the instance starts now, with a config that
		 * names it and targets the one buffer. */
		struct pb_buf cfg;
		pb_buf_init_soft(&cfg);
		pb_put_string(&cfg, DSC_NAME, ds->desc.name);
		pb_put_varint(&cfg, DSC_TARGET_BUFFER, 0);
		struct vp_ds_instance *inst = NULL;
		if (pb_buf_failed(&cfg))
			vp_log_error("data source \"%s\": out of memory for "
				     "its config", ds->desc.name);
		else
			inst = vp_instance_setup(ds, vp_next_gen(), cfg.data,
						 cfg.len);
		pb_buf_free(&cfg);
		if (inst)
			vp_instance_start(inst);
	} else {
		vp_backend_data_source_added(ds);
	}
	return ds;
}

void vp_data_sources_free(void)
{
	struct vp_data_source *ds = vp_g.sources;
	vp_g.sources = NULL;
	while (ds) {
		struct vp_data_source *next = ds->next;
		struct vp_ds_instance *inst = ds->instances;
		while (inst) {
			struct vp_ds_instance *in = inst->next;
			free(inst->config);
			free(inst);
			inst = in;
		}
		free((char *)ds->desc.name);
		free(ds);
		ds = next;
	}
}

/* ------------------------------------------------------------ instances */

struct vp_ds_instance *vp_instance_find(uint64_t id)
{
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++)
		if (atomic_load(&vp_g.te_slots[i].state) != VP_INST_FREE &&
		    vp_g.te_slots[i].id == id)
			return &vp_g.te_slots[i];
	for (struct vp_data_source *ds = vp_g.sources; ds; ds = ds->next)
		for (struct vp_ds_instance *in = ds->instances; in;
		     in = in->next)
			if (atomic_load(&in->state) != VP_INST_FREE &&
			    in->id == id)
				return in;
	return NULL;
}

static struct vp_ds_instance *instance_alloc(struct vp_data_source *ds)
{
	if (ds->is_track_event) {
		int slot = vp_te_slot_alloc();
		return slot < 0 ? NULL : &vp_g.te_slots[slot];
	}
	for (struct vp_ds_instance *in = ds->instances; in; in = in->next)
		if (atomic_load(&in->state) == VP_INST_FREE)
			return in;
	struct vp_ds_instance *in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->ds = ds;
	in->slot = -1;
	in->next = ds->instances;
	ds->instances = in;
	return in;
}

struct vp_ds_instance *vp_instance_setup(struct vp_data_source *ds,
					 uint64_t id, const uint8_t *cfg,
					 size_t len)
{
	pthread_mutex_lock(&vp_g.mu);
	struct vp_ds_instance *inst = instance_alloc(ds);
	if (!inst) {
		pthread_mutex_unlock(&vp_g.mu);
		vp_log_error("data source \"%s\": no free instance for "
			     "id %llu",
			ds->desc.name, (unsigned long long)id);
		return NULL;
	}
	/* The instance stays free (for the next setup) if its config cannot
	 * be kept: no instance rather than one with a config it was not
	 * given. */
	uint8_t *copy = malloc(len ? len : 1);
	struct vp_te_config *te =
		copy && ds->is_track_event ? vp_te_config_from_ds_config(cfg, len)
					   : NULL;
	if (!copy || (ds->is_track_event && !te)) {
		pthread_mutex_unlock(&vp_g.mu);
		free(copy);
		vp_log_error("data source \"%s\": out of memory for "
			     "instance %llu",
			     ds->desc.name, (unsigned long long)id);
		return NULL;
	}
	if (len)
		memcpy(copy, cfg, len);
	inst->id = id;
	inst->config = copy;
	inst->config_len = len;
	inst->target_buffer = ds_config_target_buffer(cfg, len);
	inst->exhausted_policy = ds_config_exhausted_policy(cfg, len);
	inst->clear_period_ns = (uint64_t)vp_g.clear_period_ms * 1000000ull;
	inst->writers = NULL;
	inst->te = te;
	atomic_store(&inst->gen, vp_next_gen());
	atomic_store(&inst->state, VP_INST_SETUP);
	pthread_mutex_unlock(&vp_g.mu);

	if (ds->desc.on_setup)
		ds->desc.on_setup(ds->desc.ctx, inst, inst->config,
				  inst->config_len);
	return inst;
}

void vp_instance_start(struct vp_ds_instance *inst)
{
	struct vp_data_source *ds = inst->ds;

	pthread_mutex_lock(&vp_g.mu);
	if (atomic_load(&inst->state) != VP_INST_SETUP) {
		pthread_mutex_unlock(&vp_g.mu);
		return;
	}
	atomic_store(&inst->state, VP_INST_STARTED);
	if (ds->is_track_event)
		vp_te_apply_slot(inst->slot, true);
	pthread_mutex_unlock(&vp_g.mu);

	if (ds->desc.on_start)
		ds->desc.on_start(ds->desc.ctx, inst, inst->config,
				  inst->config_len);
}

void vp_instance_stop(struct vp_ds_instance *inst)
{
	struct vp_data_source *ds = inst->ds;
	uint32_t state = atomic_load(&inst->state);

	if (state == VP_INST_FREE || state == VP_INST_STOPPING)
		return;
	if (state == VP_INST_STARTED && ds->desc.on_stop)
		ds->desc.on_stop(ds->desc.ctx, inst);

	pthread_mutex_lock(&vp_g.mu);
	atomic_store(&inst->state, VP_INST_STOPPING);
	if (ds->is_track_event)
		vp_te_apply_slot(inst->slot, false);
	vp_instance_retire_writers(inst);
	vp_te_config_free(inst->te);
	inst->te = NULL;
	free(inst->config);
	inst->config = NULL;
	inst->config_len = 0;
	atomic_store(&inst->state, VP_INST_FREE);
	pthread_mutex_unlock(&vp_g.mu);
}

void vp_instance_clear_incremental_state(struct vp_ds_instance *inst)
{
	struct vp_data_source *ds = inst->ds;

	atomic_fetch_add(&inst->clear_gen, 1);
	if (ds->desc.on_clear_incremental_state &&
	    atomic_load(&inst->state) == VP_INST_STARTED)
		ds->desc.on_clear_incremental_state(ds->desc.ctx, inst);
}

/* Every instance in use, track_event first. */
static size_t collect_instances(struct vp_ds_instance **out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&vp_g.mu);
	for (int i = 0; i < VP_TE_MAX_INSTANCES && n < max; i++)
		if (atomic_load(&vp_g.te_slots[i].state) != VP_INST_FREE)
			out[n++] = &vp_g.te_slots[i];
	for (struct vp_data_source *ds = vp_g.sources; ds; ds = ds->next)
		for (struct vp_ds_instance *in = ds->instances; in && n < max;
		     in = in->next)
			if (atomic_load(&in->state) != VP_INST_FREE)
				out[n++] = in;
	pthread_mutex_unlock(&vp_g.mu);
	return n;
}

void vp_stop_all_instances(void)
{
	struct vp_ds_instance *insts[256];
	size_t n;

	/* Generic data sources first: they may still trace into
	 * track_event while they stop. */
	do {
		n = collect_instances(insts, 256);
		for (size_t i = n; i-- > 0;)
			vp_instance_stop(insts[i]);
	} while (n == 256);
}

void vp_flush_all_writers(void)
{
	struct vp_ds_instance *insts[256];
	size_t n = collect_instances(insts, 256);

	for (size_t i = 0; i < n; i++) {
		struct vp_data_source *ds = insts[i]->ds;
		if (ds->desc.on_flush &&
		    atomic_load(&insts[i]->state) == VP_INST_STARTED)
			ds->desc.on_flush(ds->desc.ctx, insts[i]);
	}
	pthread_mutex_lock(&vp_g.mu);
	for (size_t i = 0; i < n; i++)
		vp_instance_flush_writers(insts[i]);
	pthread_mutex_unlock(&vp_g.mu);
}

/* ----------------------------------------------------- generic writers */

/* The calling thread's writer for inst, or NULL if inst is not started. */
static struct vp_writer *ds_writer(struct vp_ds_instance *inst)
{
	struct vp_thread_state *t = vp_thread_state();
	uint64_t gen = atomic_load(&inst->gen);
	struct vp_writer **pp = &t->ds_writers;

	while (*pp) {
		struct vp_writer *w = *pp;
		if (w->inst == inst && w->inst_gen == gen)
			return w;
		vp_writer_lock(w);
		bool retired = w->retired;
		vp_writer_unlock(w);
		if (retired) {
			*pp = w->thread_next;
			vp_writer_free(w);
		} else {
			pp = &w->thread_next;
		}
	}
	if (atomic_load(&inst->state) != VP_INST_STARTED)
		return NULL;
	vp_thread_attach();
	struct vp_writer *w = vp_writer_create(inst);
	if (w) {
		w->thread_next = t->ds_writers;
		t->ds_writers = w;
	}
	return w;
}

int vp_ds_write_packet(struct vp_ds_instance *inst, const void *packet,
		       size_t len)
{
	if (!inst || (!packet && len))
		return -1;
	struct vp_writer *w = ds_writer(inst);
	if (!w)
		return -1;
	uint64_t now = vp_now_ns();
	int rc = -1;
	vp_writer_lock(w);
	if (!w->retired && vp_writer_ensure_chunk(w, now) &&
	    vp_writer_write_packet(w, packet, len, now))
		rc = 0;
	else if (!w->retired)
		w->lost_state = true;
	vp_writer_unlock(w);
	return rc;
}

void vp_ds_flush(struct vp_ds_instance *inst)
{
	if (!inst)
		return;
	struct vp_writer *w = ds_writer(inst);
	if (!w)
		return;
	vp_writer_flush(w);
	if (atomic_load(&vp_g.mode) != VP_MODE_INPROC) {
		pthread_mutex_lock(&vp_g.commit_mu);
		vp_backend_commit_wakeup(vp_g.commit_len, true);
		pthread_mutex_unlock(&vp_g.commit_mu);
	}
}

uint64_t vp_ds_instance_id(const struct vp_ds_instance *inst)
{
	return inst ? inst->id : 0;
}

bool vp_ds_first_packet_on_sequence(struct vp_ds_instance *inst)
{
	if (!inst)
		return false;
	struct vp_writer *w = ds_writer(inst);
	if (!w)
		return false;
	vp_writer_lock(w);
	uint32_t cg = atomic_load(&inst->clear_gen);
	bool first = w->ds_first_pending || w->clear_gen_seen != cg ||
		     w->lost_state;
	w->ds_first_pending = false;
	w->clear_gen_seen = cg;
	w->lost_state = false;
	vp_writer_unlock(w);
	return first;
}

void vp_data_source_trace(struct vp_data_source *ds, vp_ds_trace_fn fn,
			  void *ctx)
{
	struct vp_ds_instance *insts[64];
	size_t n = 0;

	if (!ds || !fn)
		return;
	pthread_mutex_lock(&vp_g.mu);
	for (struct vp_ds_instance *in = ds->instances; in && n < 64;
	     in = in->next)
		if (atomic_load(&in->state) == VP_INST_STARTED)
			insts[n++] = in;
	pthread_mutex_unlock(&vp_g.mu);
	for (size_t i = 0; i < n; i++)
		fn(insts[i], ctx);
}
