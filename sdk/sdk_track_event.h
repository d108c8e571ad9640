/*
 * sdk_track_event.h - the "track_event" data source (sdk_track_event.c):
 * its TrackEventConfig, its instance slots and the registered categories,
 * for the data source life cycle (sdk_data_source.c), the backends and
 * vp_init.  The emit path itself is the public API (vperfetto.h).
 */
#ifndef VP_SDK_TRACK_EVENT_H
#define VP_SDK_TRACK_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk_state.h"
#include "sdk_writer.h"

/* The enabled and disabled categories (names or globs) of a session. */
struct vp_te_config {
	char **enabled;
	size_t n_enabled, cap_enabled;
	char **disabled;
	size_t n_disabled, cap_disabled;
};

void vp_te_init_slots(void);
/* Parses a TrackEventConfig / an in-process category list. */
struct vp_te_config *vp_te_config_from_ds_config(const uint8_t *cfg,
						  size_t len);
struct vp_te_config *vp_te_config_from_list(const char *list);
void vp_te_config_free(struct vp_te_config *c);
/* Sets / clears the slot's bit in every category (vp_sdk.mu held). */
void vp_te_apply_slot(int slot, bool on);
/* The registered categories (a list through ->next). */
struct vp_category *vp_te_categories(void);
int vp_te_slot_alloc(void);

#endif
