/*
 * probes.h - the data sources of vtraced_probes, each in a file of its own.
 *
 * Each module registers its data source(s) with the SDK's generic
 * data-source API (vperfetto/vperfetto.h) under Perfetto's name, so a
 * Perfetto config works unchanged:
 *   linux.ftrace         ftrace_probe.c
 *   linux.process_stats  process_probe.c
 *   linux.sys_stats      sys_stats_probe.c
 *   linux.system_info    system_info_probe.c
 * A register function returns 0, or -1 with a message on stderr.  The
 * callbacks run on the SDK's producer thread; a module that polls runs its
 * own thread per started instance and stops it in on_stop.
 */
#ifndef VP_PROBES_H
#define VP_PROBES_H

#include <stdbool.h>

struct probes_options {
	/* linux.ftrace: the tracefs mount to use (NULL: find or mount it). */
	const char *tracefs_dir;
};

int ftrace_probe_register(const struct probes_options *opt);
int process_probe_register(const struct probes_options *opt);
int sys_stats_probe_register(const struct probes_options *opt);
int system_info_probe_register(const struct probes_options *opt);

#endif
