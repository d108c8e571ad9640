/*
 * ftrace_tracefs.h - the tracefs side of linux.ftrace: finding (or
 * mounting) tracefs, the tracefs instance a data-source instance records
 * into, and putting everything back as it was found.
 *
 * Without FtraceConfig.instance_name each data-source instance gets a
 * private tracefs instance "vtraced_probes.<pid>.<n>" that is removed at
 * the end, so the top-level buffer and its settings are never touched.
 * With instance_name, that instance is created if missing (and removed at
 * the end) or taken over: its tracing_on, trace_clock, buffer_size_kb and
 * set_event are saved and written back at the end.  Private instances left
 * by a vtraced_probes that died are removed the next time one starts.
 */
#ifndef VP_FTRACE_TRACEFS_H
#define VP_FTRACE_TRACEFS_H

#include <stdbool.h>

#include "vp_error.h"

struct tracefs_instance;

struct ft_tracefs {
	char *dir;  /* the tracefs mount */
	char *name; /* the instance's name */
	bool created;
	struct tracefs_instance *ti;
	/* An existing instance's settings, restored by ft_tracefs_close. */
	bool saved;
	char *saved_clock;
	char *saved_set_event;
	long long saved_buffer_kb;
	long long saved_tracing_on;
};

/* The tracefs mount: opt_dir if given, else where libtracefs finds it,
 * mounting it at /sys/kernel/tracing if it is not mounted.  Returns a
 * malloc'ed path, or NULL with the reason in err. */
char *ft_tracefs_find(const char *opt_dir, struct vp_error *err);

/* Removes private instances whose vtraced_probes is gone. */
void ft_tracefs_cleanup_stale(const char *dir);

/* Creates or takes over the instance (instance_name, or a private one if
 * NULL), turns its tracing off, sets the "boot" trace clock and the
 * per-cpu buffer size (kb, 0: leave it), and clears its buffer.  On error
 * everything done is undone and err says why. */
int ft_tracefs_open(struct ft_tracefs *fs, const char *dir,
		    const char *instance_name, unsigned buffer_kb,
		    struct vp_error *err);

/* Enables sys/name (name NULL: every event of sys) in the instance. */
int ft_tracefs_enable(struct ft_tracefs *fs, const char *sys,
		      const char *name);

/* Has trace_marker writes to the top-level buffer copied into a private
 * instance (options/copy_trace_marker, Linux 6.17+), so ftrace/print sees
 * what programs write to /sys/kernel/tracing/trace_marker.  0, or -1 if
 * the kernel lacks the option or the instance is not ours. */
int ft_tracefs_copy_markers(struct ft_tracefs *fs);

/* Turns tracing in the instance on or off. */
int ft_tracefs_tracing(struct ft_tracefs *fs, bool on);

/* The text of per_cpu/cpu<cpu>/stats (malloc'ed), or NULL. */
char *ft_tracefs_cpu_stats(struct ft_tracefs *fs, int cpu);

/* Restores or removes the instance and frees fs's contents. */
void ft_tracefs_close(struct ft_tracefs *fs);

/* Is name acceptable as an instance or event path component? */
bool ft_tracefs_valid_name(const char *name, bool allow_star);

#endif
