/*
 * sdk_data_source.h - data sources and their instances (sdk_data_source.c):
 * the registry and the setup / start / stop / clear life cycle every
 * instance goes through, driven by the service (sdk_system.c) or by the
 * in-process backend.  The generic data source API itself is public
 * (vperfetto.h).
 */
#ifndef VP_SDK_DATA_SOURCE_H
#define VP_SDK_DATA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "sdk_state.h"

/* A new, never reused, instance generation. */
uint64_t vp_next_gen(void);

/* An instance starts / stops (any backend; vp_sdk.mu NOT held). */
struct vp_ds_instance *vp_instance_setup(struct vp_data_source *ds,
					 uint64_t id, const uint8_t *cfg,
					 size_t len);
void vp_instance_start(struct vp_ds_instance *inst);
void vp_instance_stop(struct vp_ds_instance *inst);
void vp_instance_clear_incremental_state(struct vp_ds_instance *inst);
struct vp_data_source *vp_data_source_find(const char *name);
struct vp_ds_instance *vp_instance_find(uint64_t id);
void vp_stop_all_instances(void);
void vp_flush_all_writers(void);
void vp_data_sources_free(void);

#endif
