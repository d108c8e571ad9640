/*
 * procfs_parse.h - bounded parsers of the /proc and /sys text the probes
 * read: /proc/PID/status, /proc/PID/cmdline, /proc/meminfo, /proc/vmstat,
 * /proc/stat, /proc/cpuinfo and one-number sysfs files.
 *
 * Every parser takes a buffer and its length, never relies on a NUL
 * terminator and never writes into the buffer.  A line it cannot make
 * sense of is skipped; numbers that overflow 64 bits are rejected (the
 * line is skipped).  They are separate from the data sources so that the
 * unit tests and the libFuzzer target (tests/probes/sysprobes) drive them
 * with fixed or arbitrary bytes.
 */
#ifndef VP_PROCFS_PARSE_H
#define VP_PROCFS_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sys_stats_names.h"

/* ---- /proc/PID/status ------------------------------------------------- */

/* Memory fields of /proc/PID/status, in ProcessStats.Process order. */
enum procfs_mem {
	PROCFS_VM_SIZE,   /* VmSize  -> vm_size_kb (2) */
	PROCFS_VM_RSS,    /* VmRSS   -> vm_rss_kb (3) */
	PROCFS_RSS_ANON,  /* RssAnon -> rss_anon_kb (4) */
	PROCFS_RSS_FILE,  /* RssFile -> rss_file_kb (5) */
	PROCFS_RSS_SHMEM, /* RssShmem -> rss_shmem_kb (6) */
	PROCFS_VM_SWAP,   /* VmSwap  -> vm_swap_kb (7) */
	PROCFS_VM_LOCKED, /* VmLck   -> vm_locked_kb (8) */
	PROCFS_VM_HWM,    /* VmHWM   -> vm_hwm_kb (9) */
	PROCFS_MEM_COUNT,
};

#define PROCFS_NAME_MAX 64

struct procfs_status {
	char name[PROCFS_NAME_MAX]; /* "Name:", NUL-terminated, truncated */
	bool has_name;
	int32_t tgid, ppid;
	bool has_tgid, has_ppid;
	uint32_t uid; /* the real uid, first of "Uid:" */
	bool has_uid;
	uint64_t mem_kb[PROCFS_MEM_COUNT];
	uint32_t mem_present; /* bit i: mem_kb[i] was found */
};

/* Parses the text of /proc/PID/status.  Always fills *st (fields not found
 * stay unset); returns the number of fields recognised. */
int procfs_parse_status(const char *buf, size_t len, struct procfs_status *st);

/* ---- /proc/PID/cmdline ------------------------------------------------ */

/* Iterates the NUL-separated arguments of a cmdline: each call returns the
 * next argument at *arg / *arg_len and advances *pos; false at the end.
 * The terminating NUL of the last argument does not make an empty extra
 * argument; a cmdline without NULs (rewritten by the process) is one
 * argument. */
bool procfs_cmdline_next(const char *buf, size_t len, size_t *pos,
			 const char **arg, size_t *arg_len);

/* ---- /proc/meminfo and /proc/vmstat ----------------------------------- */

/* Called once per recognised line with the MeminfoCounters or
 * VmstatCounters key (at most SYS_STATS_MEMINFO_MAX_KEY /
 * SYS_STATS_VMSTAT_MAX_KEY; the names are in sys_stats_names.h) and the
 * value as written (kB for meminfo). */
typedef void (*procfs_kv_fn)(void *ctx, uint32_t key, uint64_t value);

/* Return the number of lines reported. */
int procfs_parse_meminfo(const char *buf, size_t len, procfs_kv_fn fn,
			 void *ctx);
int procfs_parse_vmstat(const char *buf, size_t len, procfs_kv_fn fn,
			void *ctx);

/* ---- /proc/stat ------------------------------------------------------- */

/* Columns of a "cpuN" line: user nice system idle iowait irq softirq
 * steal (in USER_HZ ticks), as SysStats.CpuTimes fields 2..9. */
#define PROCFS_CPU_TIMES 8

struct procfs_stat_sink {
	void *ctx;
	/* A "cpuN" line (the all-cpu "cpu" line is not reported); columns
	 * missing from the line are 0. */
	void (*cpu)(void *ctx, uint32_t cpu, const uint64_t ticks[PROCFS_CPU_TIMES]);
	/* "intr" (soft false) or "softirq" (soft true): the total, then
	 * each per-number count as irq(ctx, soft, number, count). */
	void (*irq_total)(void *ctx, bool soft, uint64_t total);
	void (*irq)(void *ctx, bool soft, uint32_t number, uint64_t count);
	/* "processes": forks since boot. */
	void (*forks)(void *ctx, uint64_t forks);
};

/* Any callback may be NULL.  Returns the number of lines reported. */
int procfs_parse_stat(const char *buf, size_t len,
		      const struct procfs_stat_sink *sink);

/* ---- /proc/cpuinfo ---------------------------------------------------- */

struct procfs_cpu {
	uint32_t index;  /* the "processor" number */
	const char *name; /* processor name (points into buf or a constant) */
	size_t name_len;
	bool has_arm_id; /* any CPU implementer/architecture/... line */
	uint32_t arm_implementer, arm_architecture, arm_variant, arm_part,
		arm_revision;
};

/* Calls fn for each "processor : N" block.  The name is the block's
 * "model name" (x86 and others), else the file's "Processor" line (32-bit
 * ARM, as Perfetto), else "unknown".  Returns the number of cpus. */
int procfs_parse_cpuinfo(const char *buf, size_t len,
			 void (*fn)(void *ctx, const struct procfs_cpu *cpu),
			 void *ctx);

/* ---- single values ---------------------------------------------------- */

/* A file holding one decimal number (sysfs, /proc/PID/oom_score_adj),
 * surrounding white space allowed.  False if there is anything else. */
bool procfs_parse_u64(const char *buf, size_t len, uint64_t *out);
bool procfs_parse_i64(const char *buf, size_t len, int64_t *out);

/* Space-separated unsigned numbers (scaling_available_frequencies): calls
 * fn per number that fits 32 bits; returns how many. */
int procfs_parse_u32_list(const char *buf, size_t len,
			  void (*fn)(void *ctx, uint32_t v), void *ctx);

/* ---- reading files ---------------------------------------------------- */

/* A growable read buffer, reused across reads. */
struct procfs_buf {
	char *data;
	size_t len, cap;
};

void procfs_buf_free(struct procfs_buf *b);
/* Reads the whole file (at most max bytes) into b.  Returns 0, or -1 with
 * errno set (ENOENT/ESRCH for a process that went away). */
int procfs_read_file(const char *path, struct procfs_buf *b, size_t max);

#endif
