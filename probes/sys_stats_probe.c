/*
 * sys_stats_probe.c - the linux.sys_stats data source: system-wide
 * counters from /proc and /sys, as Perfetto's traced_probes writes them.
 *
 * SysStatsConfig (DataSourceConfig field 104).  Each poller runs at its
 * own period (at least 10 ms, Perfetto's minimum):
 *   meminfo_period_ms  /proc/meminfo lines named by meminfo_counters
 *   vmstat_period_ms   /proc/vmstat lines named by vmstat_counters
 *   stat_period_ms     /proc/stat: per-cpu times in ns, irq and softirq
 *                      counts, forks, as selected by stat_counters
 *   cpufreq_period_ms  scaling_cur_freq of each cpu in kHz (nothing when
 *                      no cpu has cpufreq, as in most VMs)
 * An empty counter list means every counter, as in Perfetto.  The pollers
 * due at one moment share one SysStats packet (TracePacket.sys_stats),
 * stamped with CLOCK_BOOTTIME and a collection_end_timestamp.  The other
 * SysStatsConfig pollers (devfreq, buddyinfo, diskstat, psi, thermal,
 * cpuidle, gpufreq) are not read by this version; a config asking for them
 * gets a warning.
 *
 * One thread per started instance polls; on_stop joins it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "probes.h"
#include "procfs_parse.h"
#include "procfs_poll.h"
#include "vperfetto/vperfetto.h"
#include "vp_log.h"

enum { P_MEMINFO, P_VMSTAT, P_STAT, P_CPUFREQ, NPOLLERS };

#define MIN_PERIOD_MS 10
#define PROC_FILE_MAX (4u << 20)

struct ss_config {
	uint32_t period_ms[NPOLLERS];
	/* Bit k set: key k enabled. */
	uint8_t meminfo_on[(SYS_STATS_MEMINFO_MAX_KEY + 8) / 8];
	uint8_t vmstat_on[(SYS_STATS_VMSTAT_MAX_KEY + 8) / 8];
	uint32_t stat_on; /* bit STAT_*: enabled */
};

struct ss_inst {
	struct vp_ds_instance *inst;
	struct ss_config cfg;
	/* Used by the polling thread only. */
	uint64_t ns_per_tick;
	long ncpus;
	struct procfs_buf buf;
	struct pb_buf pkt;
};

static const char *const poller_names[NPOLLERS] = {
	"meminfo", "vmstat", "stat", "cpufreq",
};

/* ---- config ----------------------------------------------------------- */

static void bit_set(uint8_t *bits, size_t nbits, uint64_t k)
{
	if (k < nbits)
		bits[k / 8] |= (uint8_t)(1u << (k % 8));
}

static bool bit_get(const uint8_t *bits, size_t nbits, uint64_t k)
{
	return k < nbits && (bits[k / 8] >> (k % 8) & 1);
}

/* Calls fn for each value of a repeated enum, packed or not. */
static bool each_enum(const struct pb_field *g, void (*fn)(void *, uint64_t),
		      void *ctx)
{
	if (g->wt == PB_WT_VARINT) {
		fn(ctx, g->val);
		return true;
	}
	if (g->wt != PB_WT_LEN)
		return true;
	struct pb_packed_iter it;
	uint64_t v;
	pb_packed_init(&it, g->data, g->len);
	while (pb_packed_next(&it, &v))
		fn(ctx, v);
	return !it.bad;
}

struct enum_sink {
	uint8_t *bits;
	size_t nbits;
	bool any;
};

static void enum_add(void *ctx, uint64_t v)
{
	struct enum_sink *e = ctx;
	bit_set(e->bits, e->nbits, v);
	e->any = true;
}

static void stat_add(void *ctx, uint64_t v)
{
	uint32_t *on = ctx;
	if (v < 32)
		*on |= 1u << v;
}

static int parse_ss_fields(const uint8_t *data, size_t len,
			   struct ss_config *out)
{
	struct enum_sink mi = { out->meminfo_on, SYS_STATS_MEMINFO_MAX_KEY + 1,
				false };
	struct enum_sink vm = { out->vmstat_on, SYS_STATS_VMSTAT_MAX_KEY + 1,
				false };
	struct pb_reader r;
	struct pb_field g;
	bool ok = true;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &g)) {
		uint32_t v = (uint32_t)g.val;
		bool vi = g.wt == PB_WT_VARINT;
		switch (g.num) {
		case SSC_MEMINFO_PERIOD_MS:
			if (vi)
				out->period_ms[P_MEMINFO] = v;
			break;
		case SSC_VMSTAT_PERIOD_MS:
			if (vi)
				out->period_ms[P_VMSTAT] = v;
			break;
		case SSC_STAT_PERIOD_MS:
			if (vi)
				out->period_ms[P_STAT] = v;
			break;
		case SSC_CPUFREQ_PERIOD_MS:
			if (vi)
				out->period_ms[P_CPUFREQ] = v;
			break;
		case SSC_MEMINFO_COUNTERS:
			ok &= each_enum(&g, enum_add, &mi);
			break;
		case SSC_VMSTAT_COUNTERS:
			ok &= each_enum(&g, enum_add, &vm);
			break;
		case SSC_STAT_COUNTERS:
			ok &= each_enum(&g, stat_add, &out->stat_on);
			break;
		default:
			if (vi && g.val && g.num >= SSC_DEVFREQ_PERIOD_MS &&
			    g.num <= SSC_GPUFREQ_PERIOD_MS)
				vp_log_info("linux.sys_stats:"
					" SysStatsConfig field %u (a poller this "
					"version does not read) ignored\n", g.num);
			break;
		}
	}
	if (r.err != PB_OK || !ok)
		return -1;
	/* Empty lists: everything. */
	if (!mi.any)
		memset(out->meminfo_on, 0xff, sizeof(out->meminfo_on));
	if (!vm.any)
		memset(out->vmstat_on, 0xff, sizeof(out->vmstat_on));
	if (!out->stat_on)
		out->stat_on = ~0u;
	return 0;
}

static int parse_ss_config(const uint8_t *cfg, size_t len,
			   struct ss_config *out)
{
	struct pb_reader r;
	struct pb_field f;
	bool found = false;

	memset(out, 0, sizeof(*out));
	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f)) {
		if (f.num != DSC_SYS_STATS_CONFIG || f.wt != PB_WT_LEN)
			continue;
		if (parse_ss_fields(f.data, f.len, out) != 0) {
			vp_log_warn("linux.sys_stats: "
				"malformed SysStatsConfig (DataSourceConfig "
				"byte %zu)\n", (size_t)(f.data - cfg));
			return -1;
		}
		found = true;
	}
	if (r.err != PB_OK) {
		vp_log_warn("linux.sys_stats: malformed "
			"DataSourceConfig at byte %zu: %s\n", r.err_off,
			pb_err_str(r.err));
		return -1;
	}
	if (!found)
		parse_ss_fields(NULL, 0, out); /* the defaults */
	for (unsigned i = 0; i < NPOLLERS; i++)
		if (out->period_ms[i] && out->period_ms[i] < MIN_PERIOD_MS)
			out->period_ms[i] = MIN_PERIOD_MS;
	return 0;
}

/* ---- pollers ---------------------------------------------------------- */

struct kv_ctx {
	struct ss_inst *s;
	uint32_t field;
	const uint8_t *on;
	size_t nbits;
};

static void put_kv(void *ctx, uint32_t key, uint64_t value)
{
	struct kv_ctx *k = ctx;
	if (!bit_get(k->on, k->nbits, key))
		return;
	size_t bm = pb_begin_nested(&k->s->pkt, k->field);
	pb_put_varint(&k->s->pkt, KV_KEY, key);
	pb_put_varint(&k->s->pkt, KV_VALUE, value);
	pb_end_nested(&k->s->pkt, bm);
}

static bool read_into(struct ss_inst *s, const char *path)
{
	return procfs_read_file(path, &s->buf, PROC_FILE_MAX) == 0;
}

static void read_meminfo(struct ss_inst *s)
{
	struct kv_ctx k = { s, SS_MEMINFO, s->cfg.meminfo_on,
			    SYS_STATS_MEMINFO_MAX_KEY + 1 };
	if (read_into(s, "/proc/meminfo"))
		procfs_parse_meminfo(s->buf.data, s->buf.len, put_kv, &k);
}

static void read_vmstat(struct ss_inst *s)
{
	struct kv_ctx k = { s, SS_VMSTAT, s->cfg.vmstat_on,
			    SYS_STATS_VMSTAT_MAX_KEY + 1 };
	if (read_into(s, "/proc/vmstat"))
		procfs_parse_vmstat(s->buf.data, s->buf.len, put_kv, &k);
}

/* CpuTimes' user_ns .. steal_ns are fields in a row, in /proc/stat's
 * order, as procfs_parse reads the ticks. */
_Static_assert(CT_STEAL_NS - CT_USER_NS + 1 == PROCFS_CPU_TIMES,
	       "CpuTimes follows /proc/stat");

static void stat_cpu(void *ctx, uint32_t cpu,
		     const uint64_t ticks[PROCFS_CPU_TIMES])
{
	struct ss_inst *s = ctx;
	if (!(s->cfg.stat_on >> STAT_CPU_TIMES & 1))
		return;
	size_t bm = pb_begin_nested(&s->pkt, SS_CPU_STAT);
	pb_put_varint(&s->pkt, CT_CPU_ID, cpu);
	for (unsigned i = 0; i < PROCFS_CPU_TIMES; i++)
		pb_put_varint(&s->pkt, CT_USER_NS + i,
			      ticks[i] * s->ns_per_tick);
	pb_end_nested(&s->pkt, bm);
}

static bool stat_irq_on(const struct ss_inst *s, bool soft)
{
	unsigned bit = soft ? STAT_SOFTIRQ_COUNTS : STAT_IRQ_COUNTS;
	return s->cfg.stat_on >> bit & 1;
}

static void stat_irq_total(void *ctx, bool soft, uint64_t total)
{
	struct ss_inst *s = ctx;
	if (stat_irq_on(s, soft))
		pb_put_varint(&s->pkt, soft ? SS_NUM_SOFTIRQ_TOTAL
					    : SS_NUM_IRQ_TOTAL, total);
}

static void stat_irq(void *ctx, bool soft, uint32_t number, uint64_t count)
{
	struct ss_inst *s = ctx;
	/* Hard irqs: only those that fired (hundreds never do). */
	if (!stat_irq_on(s, soft) || (!soft && count == 0))
		return;
	size_t bm = pb_begin_nested(&s->pkt, soft ? SS_NUM_SOFTIRQ : SS_NUM_IRQ);
	pb_put_varint(&s->pkt, IC_IRQ, number);
	pb_put_varint(&s->pkt, IC_COUNT, count);
	pb_end_nested(&s->pkt, bm);
}

static void stat_forks(void *ctx, uint64_t forks)
{
	struct ss_inst *s = ctx;
	if (s->cfg.stat_on >> STAT_FORK_COUNT & 1)
		pb_put_varint(&s->pkt, SS_NUM_FORKS, forks);
}

static void read_stat(struct ss_inst *s)
{
	struct procfs_stat_sink sink = {
		.ctx = s,
		.cpu = stat_cpu,
		.irq_total = stat_irq_total,
		.irq = stat_irq,
		.forks = stat_forks,
	};
	if (read_into(s, "/proc/stat"))
		procfs_parse_stat(s->buf.data, s->buf.len, &sink);
}

/* cpufreq_khz: one value per cpu, 0 for a cpu without cpufreq; nothing
 * at all when no cpu has it. */
static void read_cpufreq(struct ss_inst *s)
{
	uint64_t *khz = calloc((size_t)s->ncpus, sizeof(*khz));
	bool any = false;

	if (!khz)
		return;
	for (long c = 0; c < s->ncpus; c++) {
		char path[96];
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%ld/cpufreq/scaling_cur_freq",
			 c);
		if (procfs_read_file(path, &s->buf, 64) == 0 &&
		    procfs_parse_u64(s->buf.data, s->buf.len, &khz[c]) &&
		    khz[c] <= UINT32_MAX)
			any = true;
		else
			khz[c] = 0;
	}
	if (any) {
		size_t bm = pb_begin_nested(&s->pkt, SS_CPUFREQ_KHZ);
		for (long c = 0; c < s->ncpus; c++)
			pb_put_raw_varint(&s->pkt, khz[c]);
		pb_end_nested(&s->pkt, bm);
	}
	free(khz);
}

static void (*const readers[NPOLLERS])(struct ss_inst *) = {
	read_meminfo, read_vmstat, read_stat, read_cpufreq,
};

/* One SysStats packet with the pollers in `due`. */
static void write_sys_stats(struct ss_inst *s, uint32_t due)
{
	pb_buf_reset(&s->pkt);
	pb_put_varint(&s->pkt, TP_TIMESTAMP, vp_now_ns());
	size_t bm = pb_begin_nested(&s->pkt, TP_SYS_STATS);
	for (unsigned i = 0; i < NPOLLERS; i++)
		if (due >> i & 1)
			readers[i](s);
	pb_put_varint(&s->pkt, SS_COLLECTION_END_TIMESTAMP, vp_now_ns());
	pb_end_nested(&s->pkt, bm);
	vp_ds_write_packet(s->inst, s->pkt.data, s->pkt.len);
	vp_ds_flush(s->inst);
}

static void ss_thread(void *arg, struct procfs_poller *p)
{
	struct ss_inst *s = arg;
	uint64_t next[NPOLLERS];
	uint64_t now = procfs_mono_ns();

	for (unsigned i = 0; i < NPOLLERS; i++)
		next[i] = now; /* every poller once at start */
	for (;;) {
		uint32_t due = 0;
		uint64_t wake = UINT64_MAX;
		now = procfs_mono_ns();
		for (unsigned i = 0; i < NPOLLERS; i++) {
			uint64_t period = (uint64_t)s->cfg.period_ms[i] * 1000000ull;
			if (!period)
				continue;
			if (next[i] <= now) {
				due |= 1u << i;
				next[i] += period;
				if (next[i] <= now) /* fell behind: skip */
					next[i] = now + period;
			}
			if (next[i] < wake)
				wake = next[i];
		}
		if (due)
			write_sys_stats(s, due);
		if (wake == UINT64_MAX || !procfs_poll_sleep_until(p, wake))
			return;
	}
}

/* ---- callbacks -------------------------------------------------------- */

static void ss_inst_free(void *state)
{
	struct ss_inst *s = state;

	procfs_buf_free(&s->buf);
	pb_buf_free(&s->pkt);
	free(s);
}

static void *ss_create(const struct procfs_source *src,
		       struct vp_ds_instance *inst, const uint8_t *config,
		       size_t len)
{
	struct ss_config cfg;
	bool any = false;

	(void)src; /* one kind of source; the callback type takes it */
	if (parse_ss_config(config, len, &cfg) != 0)
		return NULL;
	for (unsigned i = 0; i < NPOLLERS; i++)
		any |= cfg.period_ms[i] != 0;
	if (!any)
		return NULL; /* no poller configured, as in Perfetto */
	struct ss_inst *s = calloc(1, sizeof(*s));
	if (!s) {
		vp_log_warn("linux.sys_stats: out of "
			"memory\n");
		return NULL;
	}
	s->inst = inst;
	s->cfg = cfg;
	long hz = sysconf(_SC_CLK_TCK);
	s->ns_per_tick = 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
	s->ncpus = sysconf(_SC_NPROCESSORS_CONF);
	if (s->ncpus < 1)
		s->ncpus = 1;
	pb_buf_init(&s->pkt);
	return s;
}

static void ss_describe(void *state)
{
	struct ss_inst *s = state;

	for (unsigned i = 0; i < NPOLLERS; i++)
		if (s->cfg.period_ms[i])
			vp_log_info("linux.sys_stats: %s "
				"every %u ms\n", poller_names[i],
				s->cfg.period_ms[i]);
}

static struct procfs_source g_ss = {
	.name = "linux.sys_stats",
	.thread_name = "vp_sysstats",
	.create = ss_create,
	.poll = ss_thread,
	.destroy = ss_inst_free,
	.describe = ss_describe,
	PROCFS_SOURCE_INIT,
};

int sys_stats_probe_register(const struct probes_options *opt)
{
	(void)opt;
	return procfs_source_register(&g_ss);
}
