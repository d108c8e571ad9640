/*
 * triggers.c - TraceConfig.trigger_config, the part that does not move a
 * session: the checks a config with triggers must pass (traced's, in its
 * order, then what vtraced does not implement), the matching of one
 * activation (a producer's ActivateTriggers names one trigger) against a
 * session's triggers, the service's history of activations for
 * max_per_24_h, and the triggers a session received, which go into its
 * trace as TracePacket.trigger.  session.c starts and stops sessions on
 * what this matches.
 *
 * Memory stays bounded whatever producers send: a session keeps its first
 * SVC_MAX_TRIGGERS_PER_SESSION triggers, and the history its last
 * SVC_MAX_TRIGGER_HISTORY activations.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "packets.h"
#include "session_read.h"
#include "svc_state.h"
#include "triggers.h"
#include "vp_alloc.h"

#define MODE VP_TRIGGER_MODE

/* max_per_24_h counts the activations of the last 24 hours (BOOTTIME, so
 * time asleep counts, as traced's). */
#define DAY_NS (24ull * 3600 * 1000000000ull)

int vp_trigger_mode(const Perfetto__Protos__TraceConfig *cfg)
{
	const Perfetto__Protos__TraceConfig__TriggerConfig *tc =
		cfg->trigger_config;
	if (!tc)
		return MODE(UNSPECIFIED);
	if (tc->has_use_clone_snapshot_if_available &&
	    tc->use_clone_snapshot_if_available)
		return MODE(CLONE_SNAPSHOT);
	return tc->has_trigger_mode ? (int)tc->trigger_mode : MODE(UNSPECIFIED);
}

/* ---- the checks ---------------------------------------------------------- */

static int check_names(const Perfetto__Protos__TraceConfig__TriggerConfig *tc,
		       struct vp_error *err)
{
	for (size_t i = 0; i < tc->n_triggers; i++) {
		const vp_cfg_trigger *t = tc->triggers[i];
		const char *name = t->name ? t->name : "";
		for (size_t k = 0; k < i; k++) {
			const char *o = tc->triggers[k]->name;
			if (strcmp(o ? o : "", name) == 0)
				return vp_errorf(err, "trigger_config: duplicate "
						 "trigger name \"%.64s\"", name);
		}
		/* traced would abort on a pattern its regex engine rejects,
		 * when the trigger comes; refuse it up front instead. */
		if (t->producer_name_regex && t->producer_name_regex[0] &&
		    !vp_svc_regex_valid(t->producer_name_regex))
			return vp_errorf(err, "trigger_config: triggers[%zu] "
					 "(\"%.64s\"): producer_name_regex "
					 "\"%.64s\" is not a valid POSIX "
					 "extended regex", i, name,
					 t->producer_name_regex);
	}
	return 0;
}

int vp_triggers_check_config(const Perfetto__Protos__TraceConfig *cfg,
			     struct vp_error *err)
{
	const Perfetto__Protos__TraceConfig__TriggerConfig *tc =
		cfg->trigger_config;
	if (!tc)
		return 0;
	int mode = vp_trigger_mode(cfg);
	uint32_t timeout = tc->has_trigger_timeout_ms ? tc->trigger_timeout_ms
						      : 0;
	bool to_file = cfg->has_write_into_file && cfg->write_into_file;
	/* traced's refusals, in its order and with its reasons. */
	if (mode != MODE(UNSPECIFIED) &&
	    (timeout == 0 || timeout > SVC_MAX_DURATION_MS))
		return vp_errorf(err, "trigger_config needs a trigger_timeout_ms "
				 "of 1 to %llu ms (7 days), got %u",
				 SVC_MAX_DURATION_MS, timeout);
	if (mode != MODE(UNSPECIFIED) && mode != MODE(START_TRACING) &&
	    mode != MODE(STOP_TRACING) && mode != MODE(CLONE_SNAPSHOT))
		return vp_errorf(err, "trigger_config: invalid trigger_mode %d",
				 mode);
	if (tc->has_use_clone_snapshot_if_available &&
	    tc->use_clone_snapshot_if_available &&
	    !(tc->has_trigger_mode &&
	      tc->trigger_mode == MODE(STOP_TRACING)))
		return vp_errorf(err, "trigger_config: trigger_mode must be "
				 "STOP_TRACING when "
				 "use_clone_snapshot_if_available is set");
	if (mode != MODE(UNSPECIFIED) && cfg->has_duration_ms &&
	    cfg->duration_ms != 0)
		return vp_errorf(err, "duration_ms must not be set with "
				 "trigger_config (trigger_timeout_ms and "
				 "stop_delay_ms bound the session)");
	if ((mode == MODE(STOP_TRACING) || mode == MODE(CLONE_SNAPSHOT)) &&
	    to_file)
		return vp_errorf(err, "trigger_config: STOP_TRACING or "
				 "CLONE_SNAPSHOT with write_into_file is not "
				 "supported (nor by traced)");
	if (check_names(tc, err) < 0)
		return -1;
	/* What vtraced does not implement: a CLONE_SNAPSHOT session's trigger
	 * must tell its consumer to clone it (an ObservableEvents kind the
	 * service does not send), so it would never give a trace. */
	if (mode == MODE(CLONE_SNAPSHOT))
		return vp_errorf(err, "trigger_config: CLONE_SNAPSHOT (or "
				 "use_clone_snapshot_if_available) is not "
				 "supported by vtraced; use STOP_TRACING");
	return 0;
}

/* ---- the history (max_per_24_h) ----------------------------------------- */

/* FNV-1a: the history keeps a name's hash, not the name. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Forgets activations older than a day, and counts those of hash. */
static uint64_t history_count(struct vp_service *s, uint64_t now,
			      uint64_t hash)
{
	while (s->n_trigger_history) {
		const struct vp_trigger_seen *h =
			&s->trigger_history[s->trigger_history_head];
		if (now < DAY_NS || h->boot_ns >= now - DAY_NS)
			break;
		s->trigger_history_head =
			(s->trigger_history_head + 1) % SVC_MAX_TRIGGER_HISTORY;
		s->n_trigger_history--;
	}
	uint64_t n = 0;
	for (size_t i = 0; i < s->n_trigger_history; i++) {
		size_t k = (s->trigger_history_head + i) %
			   SVC_MAX_TRIGGER_HISTORY;
		n += s->trigger_history[k].name_hash == hash;
	}
	return n;
}

/* Full, the oldest goes: a name fired more than SVC_MAX_TRIGGER_HISTORY
 * times a day may pass a max_per_24_h that large. */
static void history_add(struct vp_service *s, uint64_t now, uint64_t hash)
{
	if (s->n_trigger_history == SVC_MAX_TRIGGER_HISTORY) {
		s->trigger_history_head =
			(s->trigger_history_head + 1) % SVC_MAX_TRIGGER_HISTORY;
		s->n_trigger_history--;
	}
	size_t k = (s->trigger_history_head + s->n_trigger_history) %
		   SVC_MAX_TRIGGER_HISTORY;
	s->trigger_history[k].boot_ns = now;
	s->trigger_history[k].name_hash = hash;
	s->n_trigger_history++;
}

/* ---- matching ----------------------------------------------------------- */

/* A number in [0, 1), for skip_probability. */
static double rand_unit(void)
{
	static uint64_t state;
	uint64_t r;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		/* No entropy yet (an early boot): xorshift from the clock. */
		if (!state)
			state = vp_svc_clock_ns(CLOCK_MONOTONIC) | 1;
		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		r = state;
	}
	return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

void vp_trigger_activation_init(struct vp_trigger_activation *a,
				struct vp_service *s,
				const struct vp_producer *p,
				const char *name)
{
	memset(a, 0, sizeof(*a));
	a->svc = s;
	a->name = name;
	a->producer = p;
	a->boot_ns = vp_svc_clock_ns(CLOCK_BOOTTIME);
	a->name_hash = name_hash(name);
}

static const vp_cfg_trigger *
find_trigger(const Perfetto__Protos__TraceConfig__TriggerConfig *tc,
	     const char *name)
{
	for (size_t i = 0; tc && i < tc->n_triggers; i++) {
		const vp_cfg_trigger *t = tc->triggers[i];
		if (strcmp(t->name ? t->name : "", name) == 0)
			return t;
	}
	return NULL;
}

const vp_cfg_trigger *vp_trigger_match(struct vp_trigger_activation *a,
				       const struct vp_session *sess)
{
	if (sess->cloned) /* a copy is read, never moved */
		return NULL;
	const vp_cfg_trigger *t =
		find_trigger(sess->cfg->trigger_config, a->name);
	if (!t)
		return NULL;
	const char *pname = a->producer->name ? a->producer->name : "";
	if (t->producer_name_regex && t->producer_name_regex[0] &&
	    !vp_svc_regex_full_match(t->producer_name_regex, pname))
		return NULL;
	/* As traced: the probability first, then the daily limit. */
	if (t->has_skip_probability && t->skip_probability > 0 &&
	    rand_unit() < t->skip_probability)
		return NULL;
	if (t->has_max_per_24_h && t->max_per_24_h > 0) {
		if (!a->counted) {
			a->in_window = history_count(a->svc, a->boot_ns,
						     a->name_hash);
			a->counted = true;
		}
		if (a->in_window >= t->max_per_24_h)
			return NULL;
	}
	a->matched = true;
	return t;
}

void vp_trigger_activation_done(struct vp_trigger_activation *a)
{
	/* One entry per activation however many sessions it matched, as
	 * traced counts them. */
	if (a->matched)
		history_add(a->svc, a->boot_ns, a->name_hash);
}

/* ---- what a session received ------------------------------------------ */

static void queue_packet(struct vp_session *sess,
			 const struct vp_trigger_rec *t)
{
	const Perfetto__Protos__TraceConfig__BuiltinDataSource *bi =
		sess->cfg->builtin_data_sources;
	/* traced writes the triggers beside the trace config, and neither
	 * when the config turns that off. */
	if (bi && bi->has_disable_trace_config && bi->disable_trace_config)
		return;
	struct pb_buf b;
	pb_buf_init(&b);
	vp_pkt_trigger(sess, t, &b);
	vp_session_push_packet(sess, &b);
	pb_buf_free(&b);
}

static void keep(struct vp_session *sess, const struct vp_trigger_rec *t)
{
	if (sess->n_triggers >= SVC_MAX_TRIGGERS_PER_SESSION)
		return;
	if (!sess->triggers)
		sess->triggers = vp_xcalloc(SVC_MAX_TRIGGERS_PER_SESSION,
					    sizeof(*sess->triggers));
	struct vp_trigger_rec *r = &sess->triggers[sess->n_triggers++];
	*r = *t;
	r->name = vp_svc_strndup(t->name, SVC_MAX_NAME);
	r->producer_name = vp_svc_strndup(t->producer_name, SVC_MAX_NAME);
	queue_packet(sess, r);
}

bool vp_trigger_record(struct vp_session *sess, const vp_cfg_trigger *t,
		       const struct vp_trigger_activation *a)
{
	const struct vp_producer *p = a->producer;
	struct vp_trigger_rec rec = {
		.boot_ns = a->boot_ns,
		.name = t->name,
		.producer_name = p->name,
		.producer_uid = (int32_t)p->uid,
		.stop_delay_ms = t->has_stop_delay_ms ? t->stop_delay_ms : 0,
	};
	bool first = sess->triggers_received == 0;
	sess->triggers_received++;
	if (sess->triggers_received == SVC_MAX_TRIGGERS_PER_SESSION + 1)
		vp_svc_log(sess->svc, false, "session %llu: %u triggers kept; "
			   "later ones are only counted",
			   (unsigned long long)sess->id,
			   SVC_MAX_TRIGGERS_PER_SESSION);
	keep(sess, &rec);
	return first;
}

void vp_triggers_copy(struct vp_session *dst, const struct vp_session *src)
{
	for (size_t i = 0; i < src->n_triggers; i++)
		keep(dst, &src->triggers[i]);
	dst->triggers_received = src->triggers_received;
}

void vp_triggers_free(struct vp_session *sess)
{
	for (size_t i = 0; i < sess->n_triggers; i++) {
		free(sess->triggers[i].name);
		free(sess->triggers[i].producer_name);
	}
	free(sess->triggers);
	sess->triggers = NULL;
	sess->n_triggers = 0;
}
