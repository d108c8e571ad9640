/*
 * sys_stats_names.c - the MeminfoCounters and VmstatCounters name tables
 * (see sys_stats_names.h), indexed by enum value, and the lookups from a
 * /proc key back to the value.
 */
#include <stdbool.h>
#include <string.h>

#include "sys_stats_names.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* MeminfoCounters by value: the /proc/meminfo key (Perfetto's mapping;
 * the Android-only values past CmaFree have none) and the counter name
 * Perfetto's trace processor gives the value. */
static const struct {
	const char *proc;
	const char *counter;
} meminfo_names[] = {
	{ NULL, "mem.unspecified" },
	{ "MemTotal", "mem.total" },
	{ "MemFree", "mem.free" },
	{ "MemAvailable", "mem.available" },
	{ "Buffers", "mem.buffers" },
	{ "Cached", "mem.cached" },
	{ "SwapCached", "mem.swap_cached" },
	{ "Active", "mem.active" },
	{ "Inactive", "mem.inactive" },
	{ "Active(anon)", "mem.active_anon" },
	{ "Inactive(anon)", "mem.inactive_anon" },
	{ "Active(file)", "mem.active_file" },
	{ "Inactive(file)", "mem.inactive_file" },
	{ "Unevictable", "mem.unevictable" },
	{ "Mlocked", "mem.mlocked" },
	{ "SwapTotal", "mem.swap_total" },
	{ "SwapFree", "mem.swap_free" },
	{ "Dirty", "mem.dirty" },
	{ "Writeback", "mem.writeback" },
	{ "AnonPages", "mem.anon_pages" },
	{ "Mapped", "mem.mapped" },
	{ "Shmem", "mem.shmem" },
	{ "Slab", "mem.slab" },
	{ "SReclaimable", "mem.slab_reclaimable" },
	{ "SUnreclaim", "mem.slab_unreclaimable" },
	{ "KernelStack", "mem.kernel_stack" },
	{ "PageTables", "mem.page_tables" },
	{ "CommitLimit", "mem.commit_limit" },
	{ "Committed_AS", "mem.committed_as" },
	{ "VmallocTotal", "mem.vmalloc_total" },
	{ "VmallocUsed", "mem.vmalloc_used" },
	{ "VmallocChunk", "mem.vmalloc_chunk" },
	{ "CmaTotal", "mem.cma_total" },
	{ "CmaFree", "mem.cma_free" },
	{ NULL, "mem.gpu" },
	{ NULL, "mem.zram" },
	{ NULL, "mem.misc" },
	{ NULL, "mem.ion_heap" },
	{ NULL, "mem.ion_heap_pool" },
};

_Static_assert(NELEM(meminfo_names) == SYS_STATS_MEMINFO_MAX_KEY + 1,
	       "meminfo_names follows MeminfoCounters");

/* VmstatCounters by value: the enum names in lower case, which are the
 * /proc/vmstat keys and the counter names. */
static const char *const vmstat_names[] = {
	NULL,
	"nr_free_pages", "nr_alloc_batch", "nr_inactive_anon",
	"nr_active_anon", "nr_inactive_file", "nr_active_file",
	"nr_unevictable", "nr_mlock", "nr_anon_pages", "nr_mapped",
	"nr_file_pages", "nr_dirty", "nr_writeback", "nr_slab_reclaimable",
	"nr_slab_unreclaimable", "nr_page_table_pages", "nr_kernel_stack",
	"nr_overhead", "nr_unstable", "nr_bounce", "nr_vmscan_write",
	"nr_vmscan_immediate_reclaim", "nr_writeback_temp", "nr_isolated_anon",
	"nr_isolated_file", "nr_shmem", "nr_dirtied", "nr_written",
	"nr_pages_scanned", "workingset_refault", "workingset_activate",
	"workingset_nodereclaim", "nr_anon_transparent_hugepages",
	"nr_free_cma", "nr_swapcache", "nr_dirty_threshold",
	"nr_dirty_background_threshold", "pgpgin", "pgpgout", "pgpgoutclean",
	"pswpin", "pswpout", "pgalloc_dma", "pgalloc_normal",
	"pgalloc_movable", "pgfree", "pgactivate", "pgdeactivate", "pgfault",
	"pgmajfault", "pgrefill_dma", "pgrefill_normal", "pgrefill_movable",
	"pgsteal_kswapd_dma", "pgsteal_kswapd_normal",
	"pgsteal_kswapd_movable", "pgsteal_direct_dma",
	"pgsteal_direct_normal", "pgsteal_direct_movable", "pgscan_kswapd_dma",
	"pgscan_kswapd_normal", "pgscan_kswapd_movable", "pgscan_direct_dma",
	"pgscan_direct_normal", "pgscan_direct_movable",
	"pgscan_direct_throttle", "pginodesteal", "slabs_scanned",
	"kswapd_inodesteal", "kswapd_low_wmark_hit_quickly",
	"kswapd_high_wmark_hit_quickly", "pageoutrun", "allocstall",
	"pgrotated", "drop_pagecache", "drop_slab", "pgmigrate_success",
	"pgmigrate_fail", "compact_migrate_scanned", "compact_free_scanned",
	"compact_isolated", "compact_stall", "compact_fail", "compact_success",
	"compact_daemon_wake", "unevictable_pgs_culled",
	"unevictable_pgs_scanned", "unevictable_pgs_rescued",
	"unevictable_pgs_mlocked", "unevictable_pgs_munlocked",
	"unevictable_pgs_cleared", "unevictable_pgs_stranded", "nr_zspages",
	"nr_ion_heap", "nr_gpu_heap", "allocstall_dma", "allocstall_movable",
	"allocstall_normal", "compact_daemon_free_scanned",
	"compact_daemon_migrate_scanned", "nr_fastrpc",
	"nr_indirectly_reclaimable", "nr_ion_heap_pool",
	"nr_kernel_misc_reclaimable", "nr_shadow_call_stack_bytes",
	"nr_shmem_hugepages", "nr_shmem_pmdmapped", "nr_unreclaimable_pages",
	"nr_zone_active_anon", "nr_zone_active_file", "nr_zone_inactive_anon",
	"nr_zone_inactive_file", "nr_zone_unevictable",
	"nr_zone_write_pending", "oom_kill", "pglazyfree", "pglazyfreed",
	"pgrefill", "pgscan_direct", "pgscan_kswapd", "pgskip_dma",
	"pgskip_movable", "pgskip_normal", "pgsteal_direct", "pgsteal_kswapd",
	"swap_ra", "swap_ra_hit", "workingset_restore", "allocstall_device",
	"allocstall_dma32", "balloon_deflate", "balloon_inflate",
	"balloon_migrate", "cma_alloc_fail", "cma_alloc_success",
	"nr_file_hugepages", "nr_file_pmdmapped", "nr_foll_pin_acquired",
	"nr_foll_pin_released", "nr_sec_page_table_pages",
	"nr_shadow_call_stack", "nr_swapcached", "nr_throttled_written",
	"pgalloc_device", "pgalloc_dma32", "pgdemote_direct",
	"pgdemote_kswapd", "pgreuse", "pgscan_anon", "pgscan_file",
	"pgskip_device", "pgskip_dma32", "pgsteal_anon", "pgsteal_file",
	"thp_collapse_alloc", "thp_collapse_alloc_failed",
	"thp_deferred_split_page", "thp_fault_alloc", "thp_fault_fallback",
	"thp_fault_fallback_charge", "thp_file_alloc", "thp_file_fallback",
	"thp_file_fallback_charge", "thp_file_mapped", "thp_migration_fail",
	"thp_migration_split", "thp_migration_success",
	"thp_scan_exceed_none_pte", "thp_scan_exceed_share_pte",
	"thp_scan_exceed_swap_pte", "thp_split_page", "thp_split_page_failed",
	"thp_split_pmd", "thp_swpout", "thp_swpout_fallback",
	"thp_zero_page_alloc", "thp_zero_page_alloc_failed", "vma_lock_abort",
	"vma_lock_miss", "vma_lock_retry", "vma_lock_success",
	"workingset_activate_anon", "workingset_activate_file",
	"workingset_nodes", "workingset_refault_anon",
	"workingset_refault_file", "workingset_restore_anon",
	"workingset_restore_file",
};

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
