/*
 * system_info_probe.c - the linux.system_info data source: what the
 * machine is, written once when the instance starts.
 *
 * Two packets, each stamped with CLOCK_BOOTTIME:
 *   TracePacket.system_info (45)  utsname (sysname, version, release,
 *       machine), hz (USER_HZ), page_size, num_cpus (configured cpus),
 *       timezone_off_mins and system_ram_bytes.  (The tracing service
 *       writes one too unless builtin_data_sources.disable_system_info;
 *       this one describes the machine the probes run on.)
 *   TracePacket.cpu_info (67)  as Perfetto's linux.system_info: one Cpu
 *       per "processor" block of /proc/cpuinfo with its name (the block's
 *       "model name", else the file's "Processor" line, else "unknown"),
 *       the ARM identifier when the block has "CPU implementer"... lines,
 *       the cpu's scaling_available_frequencies and cpu_capacity when
 *       sysfs has them.
 * SystemInfoConfig.irq_names (Perfetto's InterruptInfo) is not written by
 * this version.
 *
 * Nothing polls, so no thread: the packets are written from on_start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "probes.h"
#include "procfs_parse.h"
#include "vperfetto/vperfetto.h"
#include "vp_log.h"

#define CPUINFO_MAX (4u << 20)
#define SYSFS_MAX 4096

static void write_system_info(struct vp_ds_instance *inst, struct pb_buf *b)
{
	struct utsname u;
	long hz = sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	long pages = sysconf(_SC_PHYS_PAGES);
	time_t now = time(NULL);
	struct tm tm;

	pb_buf_reset(b);
	pb_put_varint(b, TP_TIMESTAMP, vp_now_ns());
	size_t si = pb_begin_nested(b, TP_SYSTEM_INFO);
	if (uname(&u) == 0) {
		size_t us = pb_begin_nested(b, SI_UTSNAME);
		pb_put_string(b, UTS_SYSNAME, u.sysname);
		pb_put_string(b, UTS_VERSION, u.version);
		pb_put_string(b, UTS_RELEASE, u.release);
		pb_put_string(b, UTS_MACHINE, u.machine);
		pb_end_nested(b, us);
	} else {
		vp_log_warn("linux.system_info: uname: %m");
	}
	if (hz > 0)
		pb_put_varint(b, SI_HZ, (uint64_t)hz);
	if (page > 0)
		pb_put_varint(b, SI_PAGE_SIZE, (uint64_t)page);
	if (localtime_r(&now, &tm))
		pb_put_varint(b, SI_TIMEZONE_OFF_MINS,
			      (uint64_t)(int64_t)(tm.tm_gmtoff / 60));
	if (ncpus > 0)
		pb_put_varint(b, SI_NUM_CPUS, (uint64_t)ncpus);
	if (pages > 0 && page > 0)
		pb_put_varint(b, SI_SYSTEM_RAM_BYTES,
			      (uint64_t)pages * (uint64_t)page);
	pb_end_nested(b, si);
	vp_ds_write_packet(inst, b->data, b->len);
}

struct cpu_ctx {
	struct pb_buf *pkt;
	struct procfs_buf sysfs;
};

static void put_freq(void *ctx, uint32_t khz)
{
	pb_put_raw_varint(ctx, khz);
}

/* One CpuInfo.Cpu from a /proc/cpuinfo block and the cpu's sysfs. */
static void write_cpu(void *ctx, const struct procfs_cpu *cpu)
{
	struct cpu_ctx *c = ctx;
	struct pb_buf *b = c->pkt;
	char path[128];
	uint64_t cap;

	size_t bm = pb_begin_nested(b, CI_CPUS);
	pb_put_bytes(b, CPU_PROCESSOR, cpu->name, cpu->name_len);
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/cpufreq/"
		 "scaling_available_frequencies", cpu->index);
	if (procfs_read_file(path, &c->sysfs, SYSFS_MAX) == 0) {
		size_t fm = pb_begin_nested(b, CPU_FREQUENCIES);
		procfs_parse_u32_list(c->sysfs.data, c->sysfs.len, put_freq, b);
		pb_end_nested(b, fm);
	}
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/"
		 "cpu_capacity", cpu->index);
	if (procfs_read_file(path, &c->sysfs, SYSFS_MAX) == 0 &&
	    procfs_parse_u64(c->sysfs.data, c->sysfs.len, &cap) &&
	    cap <= UINT32_MAX)
		pb_put_varint(b, CPU_CAPACITY, cap);
	if (cpu->has_arm_id) {
		size_t am = pb_begin_nested(b, CPU_ARM_IDENTIFIER);
		pb_put_varint(b, ARM_IMPLEMENTER, cpu->arm_implementer);
		pb_put_varint(b, ARM_ARCHITECTURE, cpu->arm_architecture);
		pb_put_varint(b, ARM_VARIANT, cpu->arm_variant);
		pb_put_varint(b, ARM_PART, cpu->arm_part);
		pb_put_varint(b, ARM_REVISION, cpu->arm_revision);
		pb_end_nested(b, am);
	}
	pb_end_nested(b, bm);
}

static void write_cpu_info(struct vp_ds_instance *inst, struct pb_buf *b)
{
	struct procfs_buf text = { 0 };
	struct cpu_ctx c = { .pkt = b };

	if (procfs_read_file("/proc/cpuinfo", &text, CPUINFO_MAX) != 0) {
		vp_log_warn("linux.system_info: /proc/cpuinfo: %m");
		return;
	}
	pb_buf_reset(b);
	pb_put_varint(b, TP_TIMESTAMP, vp_now_ns());
	size_t ci = pb_begin_nested(b, TP_CPU_INFO);
	procfs_parse_cpuinfo(text.data, text.len, write_cpu, &c);
	pb_end_nested(b, ci);
	vp_ds_write_packet(inst, b->data, b->len);
	procfs_buf_free(&c.sysfs);
	procfs_buf_free(&text);
}

static void si_on_start(void *ctx, struct vp_ds_instance *inst,
			const uint8_t *config, size_t len)
{
	struct pb_buf b;

	(void)ctx;
	(void)config;
	(void)len;
	pb_buf_init(&b);
	write_system_info(inst, &b);
	write_cpu_info(inst, &b);
	pb_buf_free(&b);
	vp_log_info("linux.system_info written\n");
}

static void si_on_stop(void *ctx, struct vp_ds_instance *inst)
{
	(void)ctx;
	(void)inst;
}

int system_info_probe_register(const struct probes_options *opt)
{
	static const char *const name = "linux.system_info";

	(void)opt;
	struct vp_data_source_desc d = {
		.name = name,
		.on_start = si_on_start,
		.on_stop = si_on_stop,
	};
	if (!vp_data_source_register(&d)) {
		vp_log_warn("cannot register %s\n", name);
		return -1;
	}
	return 0;
}
