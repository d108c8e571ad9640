/*
 * fuzz_procfs.c - libFuzzer target for the /proc and /sys text parsers of
 * vtraced_probes (probes/procfs_parse.h): every parser reads the
 * same arbitrary bytes, and what they report is checked to lie inside the
 * input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "procfs_parse.h"

static const uint8_t *g_data;
static size_t g_size;

static void in_input(const char *p, size_t n)
{
	if (n && ((const uint8_t *)p < g_data ||
		  (const uint8_t *)p + n > g_data + g_size))
		abort();
}

static void kv(void *ctx, uint32_t key, uint64_t value)
{
	(void)value;
	if (key > *(uint32_t *)ctx)
		abort();
}

static void cpu(void *ctx, uint32_t c, const uint64_t t[PROCFS_CPU_TIMES])
{
	(void)ctx;
	(void)c;
	(void)t;
}

static void irq_total(void *ctx, bool soft, uint64_t total)
{
	(void)ctx;
	(void)soft;
	(void)total;
}

static void irq(void *ctx, bool soft, uint32_t n, uint64_t count)
{
	(void)ctx;
	(void)soft;
	(void)n;
	(void)count;
}

static void forks(void *ctx, uint64_t f)
{
	(void)ctx;
	(void)f;
}

static void cpuinfo(void *ctx, const struct procfs_cpu *c)
{
	(void)ctx;
	if (strcmp(c->name, "unknown") != 0 || c->name_len != 7)
		in_input(c->name, c->name_len);
}

static void u32v(void *ctx, uint32_t v)
{
	(void)ctx;
	(void)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct procfs_status st;
	uint32_t mi_max = SYS_STATS_MEMINFO_MAX_KEY;
	uint32_t vm_max = SYS_STATS_VMSTAT_MAX_KEY;
	struct procfs_stat_sink sink = { NULL, cpu, irq_total, irq, forks };
	size_t pos = 0, n;
	const char *a;
	uint64_t u;
	int64_t i;

	g_data = data;
	g_size = size;
	procfs_parse_status(buf, size, &st);
	if (strlen(st.name) >= PROCFS_NAME_MAX)
		abort();
	while (procfs_cmdline_next(buf, size, &pos, &a, &n))
		in_input(a, n);
	procfs_parse_meminfo(buf, size, kv, &mi_max);
	procfs_parse_vmstat(buf, size, kv, &vm_max);
	procfs_parse_stat(buf, size, &sink);
	procfs_parse_cpuinfo(buf, size, cpuinfo, NULL);
	procfs_parse_u64(buf, size, &u);
	procfs_parse_i64(buf, size, &i);
	procfs_parse_u32_list(buf, size, u32v, NULL);
	return 0;
}
