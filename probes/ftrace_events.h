/*
 * ftrace_events.h - the translation table of ftrace_encode.h built from
 * the kernel's event formats as libtraceevent parsed them, and the parser
 * of per_cpu/cpuN/stats.
 */
#ifndef VP_FTRACE_EVENTS_H
#define VP_FTRACE_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "ftrace_encode.h"

struct tep_handle;
struct tep_event;

/* The translation of one parsed kernel event: typed if Perfetto has a
 * message for it (sched_switch, print, kvm_entry, ...), else generic, or
 * NULL if generic events are disabled (or on allocation failure).
 * compact_sched routes sched_switch / sched_waking to CompactSched. */
struct ft_event *ft_event_from_tep(struct tep_event *e, bool disable_generic,
				   bool compact_sched);

/* Does "group/name", "group/ *" or a bare "name" select sys/name? */
bool ft_pattern_matches(const char *pattern, const char *sys,
			const char *name);

/* Adds to t a translation for every event of tep that one of the n
 * patterns selects.  Returns the number added. */
unsigned ft_table_build(struct ft_table *t, struct tep_handle *tep,
			char *const *patterns, unsigned n, bool disable_generic,
			bool compact_sched);

/* One cpu's ring-buffer counters (per_cpu/cpuN/stats). */
struct ft_cpu_stats {
	uint64_t entries, overrun, commit_overrun, bytes, dropped_events,
		read_events;
	double oldest_event_ts, now_ts;
	bool has_oldest, has_now;
};

/* Parses the text of a stats file ("entries: 12\n..."); unknown lines are
 * ignored.  Returns the number of keys understood. */
int ft_parse_cpu_stats(const char *text, struct ft_cpu_stats *s);

#endif
