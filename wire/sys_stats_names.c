/*
 * sys_stats_names.c - the MeminfoCounters and VmstatCounters name tables
 * (see sys_stats_names.h), indexed by enum value, and the lookups from a
 * /proc key back to the value.  The values, and the VmstatCounters names,
 * come from protos/ through perfetto_fields.h.
 */
#include <stdbool.h>
#include <string.h>

#include "perfetto_fields.h"
#include "sys_stats_names.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* MeminfoCounters by value (the values named as protos/ names them): the
 * /proc/meminfo key (Perfetto's mapping; the Android-only values past
 * CmaFree have none) and the counter name Perfetto's trace processor
 * (v58) gives the value: the /proc key itself, and names of Perfetto's
 * own for the others. */
static const struct {
	const char *proc;
	const char *counter;
} meminfo_names[] = {
	[MEMINFO_UNSPECIFIED] = { NULL, "MemUnspecified" },
	[MEMINFO_MEM_TOTAL] = { "MemTotal", "MemTotal" },
	[MEMINFO_MEM_FREE] = { "MemFree", "MemFree" },
	[MEMINFO_MEM_AVAILABLE] = { "MemAvailable", "MemAvailable" },
	[MEMINFO_BUFFERS] = { "Buffers", "Buffers" },
	[MEMINFO_CACHED] = { "Cached", "Cached" },
	[MEMINFO_SWAP_CACHED] = { "SwapCached", "SwapCached" },
	[MEMINFO_ACTIVE] = { "Active", "Active" },
	[MEMINFO_INACTIVE] = { "Inactive", "Inactive" },
	[MEMINFO_ACTIVE_ANON] = { "Active(anon)", "Active(anon)" },
	[MEMINFO_INACTIVE_ANON] = { "Inactive(anon)", "Inactive(anon)" },
	[MEMINFO_ACTIVE_FILE] = { "Active(file)", "Active(file)" },
	[MEMINFO_INACTIVE_FILE] = { "Inactive(file)", "Inactive(file)" },
	[MEMINFO_UNEVICTABLE] = { "Unevictable", "Unevictable" },
	[MEMINFO_MLOCKED] = { "Mlocked", "Mlocked" },
	[MEMINFO_SWAP_TOTAL] = { "SwapTotal", "SwapTotal" },
	[MEMINFO_SWAP_FREE] = { "SwapFree", "SwapFree" },
	[MEMINFO_DIRTY] = { "Dirty", "Dirty" },
	[MEMINFO_WRITEBACK] = { "Writeback", "Writeback" },
	[MEMINFO_ANON_PAGES] = { "AnonPages", "AnonPages" },
	[MEMINFO_MAPPED] = { "Mapped", "Mapped" },
	[MEMINFO_SHMEM] = { "Shmem", "Shmem" },
	[MEMINFO_SLAB] = { "Slab", "Slab" },
	[MEMINFO_SLAB_RECLAIMABLE] = { "SReclaimable", "SReclaimable" },
	[MEMINFO_SLAB_UNRECLAIMABLE] = { "SUnreclaim", "SUnreclaim" },
	[MEMINFO_KERNEL_STACK] = { "KernelStack", "KernelStack" },
	[MEMINFO_PAGE_TABLES] = { "PageTables", "PageTables" },
	[MEMINFO_COMMIT_LIMIT] = { "CommitLimit", "CommitLimit" },
	[MEMINFO_COMMITED_AS] = { "Committed_AS", "Committed_AS" },
	[MEMINFO_VMALLOC_TOTAL] = { "VmallocTotal", "VmallocTotal" },
	[MEMINFO_VMALLOC_USED] = { "VmallocUsed", "VmallocUsed" },
	[MEMINFO_VMALLOC_CHUNK] = { "VmallocChunk", "VmallocChunk" },
	[MEMINFO_CMA_TOTAL] = { "CmaTotal", "CmaTotal" },
	[MEMINFO_CMA_FREE] = { "CmaFree", "CmaFree" },
	[MEMINFO_GPU] = { NULL, "Gpu" },
	[MEMINFO_ZRAM] = { NULL, "Zram" },
	[MEMINFO_MISC] = { NULL, "Misc" },
	[MEMINFO_ION_HEAP] = { NULL, "ION_heap" },
	[MEMINFO_ION_HEAP_POOL] = { NULL, "ION_heap_pool" },
};

_Static_assert(SYS_STATS_MEMINFO_MAX_KEY == MEMINFO_COUNTERS_MAX,
	       "sys_stats_names.h follows MeminfoCounters");
_Static_assert(NELEM(meminfo_names) == SYS_STATS_MEMINFO_MAX_KEY + 1,
	       "meminfo_names follows MeminfoCounters");

/* VmstatCounters by value: the enum's names in lower case, which are the
 * /proc/vmstat keys and the counter names, generated from protos/
 * (VMSTAT_COUNTERS in perfetto_fields.h). */
static const char *const vmstat_names[] = {
#define NAME(value, name) [value] = name,
	VMSTAT_COUNTERS(NAME)
#undef NAME
};

_Static_assert(SYS_STATS_VMSTAT_MAX_KEY == VMSTAT_COUNTERS_MAX,
	       "sys_stats_names.h follows VmstatCounters");
_Static_assert(NELEM(vmstat_names) == SYS_STATS_VMSTAT_MAX_KEY + 1,
	       "vmstat_names follows VmstatCounters");

const char *sys_stats_meminfo_proc_name(uint32_t key)
{
	return key < NELEM(meminfo_names) ? meminfo_names[key].proc : NULL;
}

const char *sys_stats_meminfo_counter_name(uint32_t key)
{
	return key < NELEM(meminfo_names) ? meminfo_names[key].counter : NULL;
}

const char *sys_stats_vmstat_proc_name(uint32_t key)
{
	return key < NELEM(vmstat_names) ? vmstat_names[key] : NULL;
}

const char *sys_stats_vmstat_counter_name(uint32_t key)
{
	if (key == 0)
		return "VmstatUnspecified";
	return sys_stats_vmstat_proc_name(key);
}

/* True if the NUL-terminated name is exactly the n bytes at s (which may
 * hold any bytes, NULs included); n > 0. */
static bool name_is(const char *name, const char *s, size_t n)
{
	return name && name[0] == s[0] && strnlen(name, n + 1) == n &&
	       memcmp(name, s, n) == 0;
}

uint32_t sys_stats_meminfo_key(const char *s, size_t n)
{
	if (n == 0)
		return 0;
	for (uint32_t i = 1; i < NELEM(meminfo_names); i++)
		if (name_is(meminfo_names[i].proc, s, n))
			return i;
	return 0;
}

uint32_t sys_stats_vmstat_key(const char *s, size_t n)
{
	if (n == 0)
		return 0;
	for (uint32_t i = 1; i < NELEM(vmstat_names); i++)
		if (name_is(vmstat_names[i], s, n))
			return i;
	return 0;
}
