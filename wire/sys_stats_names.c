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
 * gives the value. */
static const struct {
	const char *proc;
	const char *counter;
} meminfo_names[] = {
	[MEMINFO_UNSPECIFIED] = { NULL, "mem.unspecified" },
	[MEMINFO_MEM_TOTAL] = { "MemTotal", "mem.total" },
	[MEMINFO_MEM_FREE] = { "MemFree", "mem.free" },
	[MEMINFO_MEM_AVAILABLE] = { "MemAvailable", "mem.available" },
	[MEMINFO_BUFFERS] = { "Buffers", "mem.buffers" },
	[MEMINFO_CACHED] = { "Cached", "mem.cached" },
	[MEMINFO_SWAP_CACHED] = { "SwapCached", "mem.swap_cached" },
	[MEMINFO_ACTIVE] = { "Active", "mem.active" },
	[MEMINFO_INACTIVE] = { "Inactive", "mem.inactive" },
	[MEMINFO_ACTIVE_ANON] = { "Active(anon)", "mem.active_anon" },
	[MEMINFO_INACTIVE_ANON] = { "Inactive(anon)", "mem.inactive_anon" },
	[MEMINFO_ACTIVE_FILE] = { "Active(file)", "mem.active_file" },
	[MEMINFO_INACTIVE_FILE] = { "Inactive(file)", "mem.inactive_file" },
	[MEMINFO_UNEVICTABLE] = { "Unevictable", "mem.unevictable" },
	[MEMINFO_MLOCKED] = { "Mlocked", "mem.mlocked" },
	[MEMINFO_SWAP_TOTAL] = { "SwapTotal", "mem.swap_total" },
	[MEMINFO_SWAP_FREE] = { "SwapFree", "mem.swap_free" },
	[MEMINFO_DIRTY] = { "Dirty", "mem.dirty" },
	[MEMINFO_WRITEBACK] = { "Writeback", "mem.writeback" },
	[MEMINFO_ANON_PAGES] = { "AnonPages", "mem.anon_pages" },
	[MEMINFO_MAPPED] = { "Mapped", "mem.mapped" },
	[MEMINFO_SHMEM] = { "Shmem", "mem.shmem" },
	[MEMINFO_SLAB] = { "Slab", "mem.slab" },
	[MEMINFO_SLAB_RECLAIMABLE] = { "SReclaimable", "mem.slab_reclaimable" },
	[MEMINFO_SLAB_UNRECLAIMABLE] = { "SUnreclaim",
					 "mem.slab_unreclaimable" },
	[MEMINFO_KERNEL_STACK] = { "KernelStack", "mem.kernel_stack" },
	[MEMINFO_PAGE_TABLES] = { "PageTables", "mem.page_tables" },
	[MEMINFO_COMMIT_LIMIT] = { "CommitLimit", "mem.commit_limit" },
	[MEMINFO_COMMITED_AS] = { "Committed_AS", "mem.committed_as" },
	[MEMINFO_VMALLOC_TOTAL] = { "VmallocTotal", "mem.vmalloc_total" },
	[MEMINFO_VMALLOC_USED] = { "VmallocUsed", "mem.vmalloc_used" },
	[MEMINFO_VMALLOC_CHUNK] = { "VmallocChunk", "mem.vmalloc_chunk" },
	[MEMINFO_CMA_TOTAL] = { "CmaTotal", "mem.cma_total" },
	[MEMINFO_CMA_FREE] = { "CmaFree", "mem.cma_free" },
	[MEMINFO_GPU] = { NULL, "mem.gpu" },
	[MEMINFO_ZRAM] = { NULL, "mem.zram" },
	[MEMINFO_MISC] = { NULL, "mem.misc" },
	[MEMINFO_ION_HEAP] = { NULL, "mem.ion_heap" },
	[MEMINFO_ION_HEAP_POOL] = { NULL, "mem.ion_heap_pool" },
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
		return "unspecified";
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
