/*
 * ftrace_events.c - builds ftrace_encode's translation table from the
 * event formats libtraceevent parsed out of tracefs, and parses the
 * per-cpu ring-buffer stats files.
 *
 * Events Perfetto has a typed message for (those the ftrace event table,
 * wire/ftrace_event_table.h, marks for the probes) are encoded typed; their
 * fields are found by name in the running kernel's format, so a field the
 * kernel lacks is just left out.  Every other selected event becomes a
 * GenericFtraceEvent carrying all its fields.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "ftrace_event_table.h"
#include "ftrace_events.h"
#include "perfetto_fields.h"

/* The event vtraced_probes encodes typed (Perfetto has a message for it
 * and the ftrace event table marks it for the probes), or NULL. */
static const struct ft_event_desc *typed_find(const char *sys, const char *name)
{
	const struct ft_event_desc *d = ft_event_by_name(sys, name);
	return d && (d->uses & FT_USE_PROBES) ? d : NULL;
}

/* Describes a kernel field; false if it cannot be represented (a
 * non-character array, an odd integer size, a bad offset). */
static bool field_from_format(struct ft_field *f,
			      const struct tep_format_field *k)
{
	const char *type = k->type ? k->type : "";
	bool is_char = strstr(type, "char") != NULL;
	unsigned long fl = k->flags;

	memset(f, 0, sizeof *f);
	if (k->offset < 0 || k->size < 0 || k->offset > 0xffff ||
	    k->size > 0xffff)
		return false;
	f->offset = (uint32_t)k->offset;
	f->size = (uint32_t)k->size;
	if (fl & TEP_FIELD_IS_DYNAMIC) {
		if (!is_char && !(fl & TEP_FIELD_IS_STRING))
			return false;
		if (k->size != 4)
			return false;
		f->vtype = FT_V_STR;
		f->loc = (fl & TEP_FIELD_IS_RELATIVE) ? FT_LOC_DYNAMIC_REL
						      : FT_LOC_DYNAMIC;
		return true;
	}
	if ((fl & TEP_FIELD_IS_ARRAY) || (fl & TEP_FIELD_IS_STRING)) {
		if (!is_char && !(fl & TEP_FIELD_IS_STRING))
			return false;
		f->vtype = FT_V_STR;
		f->loc = k->size == 0 ? FT_LOC_TAIL : FT_LOC_FIXED;
		return true;
	}
	if (!(k->size == 1 || k->size == 2 || k->size == 4 || k->size == 8))
		return false;
	f->vtype = (fl & TEP_FIELD_IS_SIGNED) ? FT_V_INT : FT_V_UINT;
	f->loc = FT_LOC_FIXED;
	return true;
}

static struct tep_format_field *find_field(struct tep_event *e,
					   const char *name)
{
	struct tep_format_field *k;
	for (k = e->format.fields; k; k = k->next)
		if (k->name && !strcmp(k->name, name))
			return k;
	return NULL;
}

static size_t count_fields(struct tep_event *e)
{
	size_t n = 0;
	for (struct tep_format_field *k = e->format.fields; k; k = k->next)
		n++;
	return n;
}

/* The typed fields of e that the kernel has, in the kind Perfetto wants. */
static bool fill_typed(struct ft_event *ev, struct tep_event *e,
		       const struct ft_event_desc *t)
{
	ev->fields = calloc(t->nfields ? t->nfields : 1, sizeof *ev->fields);
	if (!ev->fields)
		return false;
	for (size_t i = 0; i < t->nfields; i++) {
		const struct ft_event_field *tf = &t->fields[i];
		struct tep_format_field *k = find_field(e, tf->name);
		if (!k && tf->kname)
			k = find_field(e, tf->kname);
		struct ft_field *f = &ev->fields[ev->nfields];
		if (!k || !field_from_format(f, k))
			continue;
		if ((f->vtype == FT_V_STR) != (tf->type == FT_FIELD_STR))
			continue; /* not the kind the proto declares */
		f->proto = tf->num;
		ev->nfields++;
	}
	return true;
}

static bool fill_generic(struct ft_event *ev, struct tep_event *e)
{
	size_t n = count_fields(e);
	ev->fields = calloc(n ? n : 1, sizeof *ev->fields);
	if (!ev->fields)
		return false;
	for (struct tep_format_field *k = e->format.fields; k; k = k->next) {
		struct ft_field *f = &ev->fields[ev->nfields];
		if (!k->name || !field_from_format(f, k))
			continue;
		f->name = strdup(k->name);
		if (!f->name)
			return false;
		ev->nfields++;
	}
	return true;
}

struct ft_event *ft_event_from_tep(struct tep_event *e, bool disable_generic,
				   bool compact_sched)
{
	const char *sys = e->system ? e->system : "";
	const char *name = e->name ? e->name : "";
	const struct ft_event_desc *t = typed_find(sys, name);

	if (!t && disable_generic)
		return NULL;
	if (e->id < 0)
		return NULL;
	struct ft_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return NULL;
	ev->id = (uint32_t)e->id;
	ev->name = strdup(name);
	bool ok = ev->name != NULL;
	if (ok && t) {
		ev->proto_id = t->id;
		ev->compact = compact_sched ? t->compact : FT_COMPACT_NONE;
		ok = fill_typed(ev, e, t);
	} else if (ok) {
		ev->proto_id = FE_GENERIC;
		ok = fill_generic(ev, e);
	}
	if (!ok) {
		ft_event_free(ev);
		return NULL;
	}
	return ev;
}

bool ft_pattern_matches(const char *pattern, const char *sys,
			const char *name)
{
	const char *slash = strchr(pattern, '/');
	if (!slash)
		return !strcmp(pattern, name);
	size_t slen = (size_t)(slash - pattern);
	if (strlen(sys) != slen || strncmp(pattern, sys, slen) != 0)
		return false;
	return !strcmp(slash + 1, "*") || !strcmp(slash + 1, name);
}

unsigned ft_table_build(struct ft_table *t, struct tep_handle *tep,
			char *const *patterns, unsigned n, bool disable_generic,
			bool compact_sched)
{
	struct tep_event **all = tep_list_events(tep, TEP_EVENT_SORT_ID);
	unsigned added = 0;

	if (!all)
		return 0;
	for (size_t i = 0; all[i]; i++) {
		struct tep_event *e = all[i];
		bool sel = false;
		for (unsigned j = 0; j < n && !sel; j++)
			sel = ft_pattern_matches(patterns[j],
						 e->system ? e->system : "",
						 e->name ? e->name : "");
		if (!sel)
			continue;
		struct ft_event *ev = ft_event_from_tep(e, disable_generic,
							compact_sched);
		if (!ev)
			continue;
		if (ft_table_add(t, ev) != 0) {
			ft_event_free(ev);
			continue;
		}
		added++;
	}
	return added;
}

/* ---- per_cpu/cpuN/stats ----------------------------------------------- */

int ft_parse_cpu_stats(const char *text, struct ft_cpu_stats *s)
{
	int known = 0;

	memset(s, 0, sizeof *s);
	while (text && *text) {
		const char *nl = strchr(text, '\n');
		size_t len = nl ? (size_t)(nl - text) : strlen(text);
		char line[128];
		if (len < sizeof line) {
			memcpy(line, text, len);
			line[len] = 0;
			char *colon = strchr(line, ':');
			if (colon) {
				*colon = 0;
				const char *v = colon + 1;
				char *endp;
				unsigned long long u = strtoull(v, &endp, 10);
				bool num_ok = endp != v;
				if (!strcmp(line, "entries") && num_ok) {
					s->entries = u;
					known++;
				} else if (!strcmp(line, "overrun") && num_ok) {
					s->overrun = u;
					known++;
				} else if (!strcmp(line, "commit overrun") &&
					   num_ok) {
					s->commit_overrun = u;
					known++;
				} else if (!strcmp(line, "bytes") && num_ok) {
					s->bytes = u;
					known++;
				} else if (!strcmp(line, "dropped events") &&
					   num_ok) {
					s->dropped_events = u;
					known++;
				} else if (!strcmp(line, "read events") &&
					   num_ok) {
					s->read_events = u;
					known++;
				} else if (!strcmp(line, "oldest event ts")) {
					double d = strtod(v, &endp);
					if (endp != v) {
						s->oldest_event_ts = d;
						s->has_oldest = true;
						known++;
					}
				} else if (!strcmp(line, "now ts")) {
					double d = strtod(v, &endp);
					if (endp != v) {
						s->now_ts = d;
						s->has_now = true;
						known++;
					}
				}
			}
		}
		text = nl ? nl + 1 : text + len;
	}
	return known;
}
