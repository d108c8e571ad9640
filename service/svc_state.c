/*
 * svc_state.c - the helpers every file of vtraced uses (see svc_state.h):
 * pointer arrays, logging, clocks, regexes, the id allocators (sequences,
 * machines), buffers by id, the statistics and the end of a shutdown.
 */
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "svc_state.h"
#include "vp_alloc.h"
#include "vp_log.h"

/* ---- small helpers ----------------------------------------------------- */

void vp_ptrvec_push(struct vp_ptrvec *pv, void *p)
{
	VP_XGROW(pv->v, pv->cap, pv->n + 1);
	pv->v[pv->n++] = p;
}

bool vp_ptrvec_remove(struct vp_ptrvec *pv, const void *p)
{
	for (size_t i = 0; i < pv->n; i++) {
		if (pv->v[i] != p)
			continue;
		memmove(&pv->v[i], &pv->v[i + 1],
			(pv->n - i - 1) * sizeof(pv->v[0]));
		pv->n--;
		return true;
	}
	return false;
}

void vp_ptrvec_free(struct vp_ptrvec *pv)
{
	free(pv->v);
	pv->v = NULL;
	pv->n = pv->cap = 0;
}

char *vp_svc_strndup(const char *s, size_t max)
{
	return vp_xstrndup(s ? s : "", max);
}

/* Compiles pattern anchored at both ends (traced's regexes match whole
 * names); false if it does not compile. */
static bool regex_compile(const char *pattern, regex_t *re)
{
	size_t n = strlen(pattern);
	char *anchored = vp_xmalloc(n + 5);
	snprintf(anchored, n + 5, "^(%s)$", pattern);
	bool ok = regcomp(re, anchored, REG_EXTENDED | REG_NOSUB) == 0;
	free(anchored);
	return ok;
}

bool vp_svc_regex_full_match(const char *pattern, const char *name)
{
	regex_t re;
	if (!regex_compile(pattern, &re))
		return false;
	bool ok = regexec(&re, name, 0, NULL, 0) == 0;
	regfree(&re);
	return ok;
}

bool vp_svc_regex_valid(const char *pattern)
{
	regex_t re;
	if (!regex_compile(pattern, &re))
		return false;
	regfree(&re);
	return true;
}

uint64_t vp_svc_clock_ns(int clk)
{
	struct timespec ts;
	if (clock_gettime(clk, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vp_svc_log(struct vp_service *s, bool error, const char *fmt, ...)
{
	enum vp_log_level level = error ? VP_LOG_ERROR : VP_LOG_INFO;

	/* the level is the process's: vtraced's -v, VPERFETTO_LOG */
	if (!vp_log_enabled(level))
		return;
	/* A daemon's log is read later: each line says when. */
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	if (s && ts.tv_sec != s->log_second) {
		if (s->log_suppressed)
			vp_log(VP_LOG_ERROR, "%s.%03ld %llu log lines left out "
			       "(more than %u a second)", when,
			       ts.tv_nsec / 1000000,
			       (unsigned long long)s->log_suppressed,
			       SVC_LOG_LINES_PER_SEC);
		s->log_second = ts.tv_sec;
		s->log_lines = 0;
		s->log_suppressed = 0;
	}
	if (s && s->log_lines++ >= SVC_LOG_LINES_PER_SEC) {
		s->log_suppressed++;
		return;
	}

	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vp_log(level, "%s.%03ld %s", when, ts.tv_nsec / 1000000, msg);
}

/* ---- ids --------------------------------------------------------------- */

uint32_t vp_svc_new_sequence_id(struct vp_service *s)
{
	uint32_t id = s->next_sequence_id++;
	if (s->next_sequence_id == 0)
		s->next_sequence_id = SVC_SERVICE_SEQ_ID + 1;
	return id;
}

/* A remote machine's id: the same key always maps to the same id. */
uint32_t vp_svc_machine_id(struct vp_service *s, const char *key)
{
	for (size_t i = 0; i < s->n_machines; i++)
		if (strcmp(s->machines[i].key, key) == 0)
			return s->machines[i].id;
	VP_XGROW(s->machines, s->cap_machines, s->n_machines + 1);
	struct vp_machine *m = &s->machines[s->n_machines++];
	snprintf(m->key, sizeof(m->key), "%s", key);
	m->id = s->next_machine_id++;
	return m->id;
}

struct vp_svc_buffer *vp_buffer_by_id(struct vp_service *s, uint16_t id)
{
	if (id == 0 || id >= SVC_MAX_BUFFER_IDS)
		return NULL;
	return s->buffers[id];
}

/* ---- statistics --------------------------------------------------------- */

void vp_service_get_stats(const struct vp_service *s,
			  struct vp_service_stats *out)
{
	*out = s->stats;
	out->producers_connected = (uint32_t)s->producers.n;
	out->consumers_connected = (uint32_t)s->consumers.n;
	out->tracing_sessions = (uint32_t)s->sessions.n;
	uint32_t nb = 0, nds = 0;
	for (size_t i = 0; i < SVC_MAX_BUFFER_IDS; i++)
		nb += s->buffers[i] != NULL;
	for (size_t i = 0; i < s->producers.n; i++) {
		const struct vp_producer *p = s->producers.v[i];
		nds += (uint32_t)p->n_ds;
	}
	out->total_buffers = nb;
	out->data_sources_registered = nds;
	const struct vp_ipc_host *hosts[] = {s->producer_host,
					     s->consumer_host};
	for (size_t i = 0; i < 2; i++) {
		const struct vp_ipc_host_stats *hs = vp_ipc_host_stats(hosts[i]);
		out->conns_refused += hs->refused_conns;
		out->conns_idle_closed += hs->idle_closed;
	}
}

/* ---- shutdown ----------------------------------------------------------- */

void vp_svc_finish_shutdown(struct vp_service *s)
{
	if (!s->shutting_down || !s->shutdown_done)
		return;
	void (*done)(void *) = s->shutdown_done;
	s->shutdown_done = NULL;
	if (s->t_shutdown) {
		vp_loop_cancel(s->loop, s->t_shutdown);
		s->t_shutdown = 0;
	}
	done(s->shutdown_ctx);
}
