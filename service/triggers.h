/*
 * triggers.h - TraceConfig.trigger_config (triggers.c): the checks a
 * config with triggers must pass, which of a session's triggers a
 * producer's activation matches, the service's 24-hour history of
 * activations (max_per_24_h), and the triggers a session received (kept
 * for its trace).  What a trigger does to a session (start it, stop it)
 * is session.c's.
 */
#ifndef VP_SVC_TRIGGERS_H
#define VP_SVC_TRIGGERS_H

#include <stdbool.h>
#include <stdint.h>

#include "svc_state.h"
#include "vp_error.h"

typedef Perfetto__Protos__TraceConfig__TriggerConfig__Trigger vp_cfg_trigger;

/* A TriggerMode value: VP_TRIGGER_MODE(STOP_TRACING). */
#define VP_TRIGGER_MODE(x) \
	PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__##x

/* The session's trigger mode, as traced reads it: trigger_mode, or
 * CLONE_SNAPSHOT when use_clone_snapshot_if_available is set; UNSPECIFIED
 * without trigger_config. */
int vp_trigger_mode(const Perfetto__Protos__TraceConfig *cfg);

/* 0 if cfg's trigger_config is one vtraced runs, else -1 and why (the
 * refusals traced makes, with its reasons, and what vtraced does not
 * implement). */
int vp_triggers_check_config(const Perfetto__Protos__TraceConfig *cfg,
			     struct vp_error *err);

/* One activation of a trigger name by a producer, matched against the
 * sessions one by one. */
struct vp_trigger_activation {
	struct vp_service *svc;
	const char *name;
	const struct vp_producer *producer;
	uint64_t boot_ns;
	uint64_t name_hash;
	bool counted;            /* in_window is known */
	uint64_t in_window;      /* matches of this name in the last 24 h */
	bool matched;            /* it matched a session */
};

void vp_trigger_activation_init(struct vp_trigger_activation *a,
				struct vp_service *s,
				const struct vp_producer *p,
				const char *name);
/* The trigger of sess this activation fires: one of the same name whose
 * producer_name_regex (if any) matches the producer, not skipped by its
 * skip_probability, and under its max_per_24_h; NULL if none.  A match
 * marks the activation matched. */
const vp_cfg_trigger *vp_trigger_match(struct vp_trigger_activation *a,
				       const struct vp_session *sess);
/* After every session: a matched activation goes into the history. */
void vp_trigger_activation_done(struct vp_trigger_activation *a);

/* Records that sess received trigger t (its packet queued for the trace,
 * unless the config turns the trace_config packet off, as traced).
 * Returns true if it is the session's first. */
bool vp_trigger_record(struct vp_session *sess, const vp_cfg_trigger *t,
		       const struct vp_trigger_activation *a);
/* A CloneSession copy gets the triggers its source received. */
void vp_triggers_copy(struct vp_session *dst, const struct vp_session *src);
void vp_triggers_free(struct vp_session *sess);

#endif
