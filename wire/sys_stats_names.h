/*
 * sys_stats_names.h - the names behind Perfetto's MeminfoCounters and
 * VmstatCounters enums, shared by the sys_stats probe (which reads
 * /proc/meminfo and /proc/vmstat and needs key name -> enum value) and
 * the trace processor (which names its counters by enum value).
 *
 * MeminfoCounters values have two names: the /proc/meminfo key
 * ("SReclaimable") and the counter name Perfetto's trace processor gives
 * them: since Perfetto v50 or so, the same, "SReclaimable" (older versions
 * said "mem.slab_reclaimable"); Android-only values have no /proc key but
 * a counter name ("Gpu").  VmstatCounters values have one: the
 * /proc/vmstat key, which is also the counter name.
 */
#ifndef VP_SYS_STATS_NAMES_H
#define VP_SYS_STATS_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* Highest value each table knows (MeminfoCounters / VmstatCounters);
 * sys_stats_names.c checks them against protos/. */
#define SYS_STATS_MEMINFO_MAX_KEY 38
#define SYS_STATS_VMSTAT_MAX_KEY 188

/* The /proc/meminfo key of a MeminfoCounters value; NULL for 0, for the
 * Android-only values that have no /proc/meminfo line, and out of range. */
const char *sys_stats_meminfo_proc_name(uint32_t key);
/* The counter name of a MeminfoCounters value ("MemTotal"; 0 is
 * "MemUnspecified"); NULL out of range. */
const char *sys_stats_meminfo_counter_name(uint32_t key);
/* The /proc/vmstat key of a VmstatCounters value; NULL for 0 and out of
 * range. */
const char *sys_stats_vmstat_proc_name(uint32_t key);
/* The counter name of a VmstatCounters value (its /proc key; 0 is
 * "VmstatUnspecified"); NULL out of range. */
const char *sys_stats_vmstat_counter_name(uint32_t key);

/* The value whose /proc key is the n bytes at s (not NUL-terminated), or
 * 0 if none has that key. */
uint32_t sys_stats_meminfo_key(const char *s, size_t n);
uint32_t sys_stats_vmstat_key(const char *s, size_t n);

#endif
