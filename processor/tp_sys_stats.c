/*
 * tp_sys_stats.c - SysStats packets (vtraced_probes' and traced_probes'
 * /proc and /sys polls) as counter tracks, named and dimensioned as
 * Perfetto's SystemProbesParser has them: meminfo, vmstat, cpu times,
 * interrupts, devfreq, buddyinfo, disk stats (with their derived
 * throughputs), PSI, thermal zones, cpuidle states, cpu and gpu
 * frequencies.  The counter names come from wire/sys_stats_names.
 */
#include "tp_sys_stats.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "sys_stats_names.h"
#include "tp_args.h"
#include "tp_stats.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_DISKS 256

struct disk_state {
	tp_str name;
	uint32_t machine;
	int64_t prev[8]; /* read/write/discard sectors, flush count, times */
};

struct tp_sys_stats {
	uint32_t page_size; /* from system_info, for buddyinfo's sizes */
	struct disk_state *disks;
	uint32_t ndisks, disks_cap;
	struct tp_args_builder args; /* a track's dimensions */
};

static struct tp_sys_stats *ss(struct tp_ctx *ctx)
{
	return ctx->sys_stats;
}

struct tp_sys_stats *tp_sys_stats_new(void)
{
	struct tp_sys_stats *s = vp_xcalloc(1, sizeof(*s));
	s->page_size = 4096;
	tp_args_builder_init(&s->args);
	return s;
}

void tp_sys_stats_free(struct tp_sys_stats *s)
{
	if (!s)
		return;
	tp_args_builder_free(&s->args);
	free(s->disks);
	free(s);
}

void tp_sys_stats_page_size(struct tp_ctx *ctx, uint32_t page_size)
{
	ss(ctx)->page_size = page_size;
}

/* ---- tracks ------------------------------------------------------------- */

/* A counter track of `type` named `name` with the dimension args in
 * the module's args (machine-scoped). */
static uint32_t dim_counter_track(struct tp_ctx *ctx, uint32_t machine,
				  const char *type, tp_str name, const char *unit)
{
	struct tp_track_spec spec;
	tp_track_spec_init(&spec, machine);
	spec.name = name;
	spec.type = tp_s(ctx, type);
	spec.event_type = tp_s(ctx, "counter");
	spec.counter_unit = unit ? tp_s(ctx, unit) : 0;
	spec.dimension_arg_set_id = tp_args_commit(ctx, &ss(ctx)->args);
	return tp_track_intern(ctx, &spec);
}

static void dim_reset(struct tp_ctx *ctx)
{
	tp_args_builder_reset(&ss(ctx)->args);
}

static void dim_str(struct tp_ctx *ctx, const char *key, tp_str v)
{
	tp_str k = tp_s(ctx, key);
	tp_args_add_str(&ss(ctx)->args, k, k, v);
}

/* Perfetto keeps a track's numeric dimensions as int args. */
static void dim_uint(struct tp_ctx *ctx, const char *key, uint64_t v)
{
	tp_str k = tp_s(ctx, key);
	tp_args_add_int(&ss(ctx)->args, k, k, (int64_t)v);
}

/* A counter track with no dimensions. */
static uint32_t plain_counter_track(struct tp_ctx *ctx, uint32_t machine,
				    const char *type, const char *name)
{
	dim_reset(ctx);
	return dim_counter_track(ctx, machine, type, tp_s(ctx, name), NULL);
}

/* ---- the counters -------------------------------------------------------- */

/* Reads the key (varint) and value (varint) of a {key = 1, value = 2}
 * message; false if malformed. */
static bool read_kv(const struct pb_field *f, uint64_t *key, uint64_t *val,
		    bool *has_key)
{
	struct pb_reader r;
	struct pb_field g;
	*key = *val = 0;
	*has_key = false;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == KV_KEY && g.wt == PB_WT_VARINT) {
			*key = g.val;
			*has_key = true;
		} else if (g.num == KV_VALUE && g.wt == PB_WT_VARINT) {
			*val = g.val;
		}
	}
	return r.err == PB_OK;
}

static void sys_meminfo(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f)
{
	uint64_t key, val;
	bool has_key;
	if (!read_kv(f, &key, &val, &has_key))
		return;
	const char *cname = sys_stats_meminfo_counter_name((uint32_t)key);
	if (key > UINT32_MAX || !cname) {
		tp_stat_add(ctx, "meminfo_unknown_keys", pkt->machine, -1, 1);
		return;
	}
	tp_str name = tp_s(ctx, cname);
	dim_reset(ctx);
	dim_str(ctx, "meminfo_key", name);
	uint32_t t = dim_counter_track(ctx, pkt->machine, "meminfo", name,
				       "bytes");
	tp_counter_add(ctx, t, pkt->ts, (double)val * 1024.0, -1);
}

static void sys_vmstat(struct tp_ctx *ctx, const struct tp_packet *pkt,
		       const struct pb_field *f)
{
	uint64_t key, val;
	bool has_key;
	if (!read_kv(f, &key, &val, &has_key))
		return;
	const char *cname = sys_stats_vmstat_counter_name((uint32_t)key);
	if (key > UINT32_MAX || !cname) {
		tp_stat_add(ctx, "vmstat_unknown_keys", pkt->machine, -1, 1);
		return;
	}
	tp_str name = tp_s(ctx, cname);
	dim_reset(ctx);
	dim_str(ctx, "vmstat_key", name);
	uint32_t t = dim_counter_track(ctx, pkt->machine, "vmstat", name, NULL);
	tp_counter_add(ctx, t, pkt->ts, (double)val, -1);
}

static const char *const cpustat_keys[] = {
	"user_ns", "user_nice_ns", "system_mode_ns", "idle_ns",
	"io_wait_ns", "irq_ns", "softirq_ns", "steal_ns",
};

_Static_assert(CT_STEAL_NS - CT_USER_NS == 7,
	       "CpuTimes: the eight times are fields in a row");

static void sys_cpu_stat(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	uint64_t v[8] = { 0 };
	uint64_t cpu = 0;
	bool has_cpu = false;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.wt != PB_WT_VARINT)
			continue;
		if (g.num == CT_CPU_ID) {
			cpu = g.val;
			has_cpu = true;
		} else if (g.num >= CT_USER_NS && g.num <= CT_STEAL_NS) {
			v[g.num - CT_USER_NS] = g.val;
		}
	}
	if (!has_cpu || r.err != PB_OK) {
		tp_stat_add(ctx, "invalid_cpu_times", pkt->machine, -1, 1);
		return;
	}
	for (unsigned i = 0; i < 8; i++) {
		dim_reset(ctx);
		dim_uint(ctx, "cpu", (uint32_t)cpu);
		dim_str(ctx, "cpustat_key", tp_s(ctx, cpustat_keys[i]));
		tp_str name = tp_intern_fmt(ctx->pool, "cpu.times.%s", cpustat_keys[i]);
		uint32_t t = dim_counter_track(ctx, pkt->machine, "cpustat",
					       name, NULL);
		tp_counter_add(ctx, t, pkt->ts, (double)v[i], -1);
	}
}

static void sys_irq(struct tp_ctx *ctx, const struct tp_packet *pkt,
		    const struct pb_field *f, bool soft)
{
	struct pb_reader r;
	struct pb_field g;
	int64_t irq = 0;
	uint64_t count = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == IC_IRQ && g.wt == PB_WT_VARINT)
			irq = (int32_t)g.val;
		else if (g.num == IC_COUNT && g.wt == PB_WT_VARINT)
			count = g.val;
	}
	const char *type = soft ? "num_softirq" : "num_irq";
	dim_reset(ctx);
	dim_uint(ctx, "irq", (uint32_t)irq);
	tp_str name = tp_intern_fmt(ctx->pool, "%s (id: %u)", type, (uint32_t)irq);
	uint32_t t = dim_counter_track(ctx, pkt->machine, type, name, NULL);
	tp_counter_add(ctx, t, pkt->ts, (double)count, -1);
}

static void sys_devfreq(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	tp_str key = 0;
	uint64_t val = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == KV_KEY && g.wt == PB_WT_LEN)
			key = tp_s_field(ctx, &g);
		else if (g.num == KV_VALUE && g.wt == PB_WT_VARINT)
			val = g.val;
	}
	if (!key)
		key = tp_intern(ctx->pool, "", 0);
	dim_reset(ctx);
	/* Perfetto's clock_frequency track, keyed by the device */
	dim_str(ctx, "linux_device", key);
	tp_str name = tp_intern_fmt(ctx->pool, "%s Frequency", tp_str_get(ctx->pool, key));
	uint32_t t = dim_counter_track(ctx, pkt->machine, "clock_frequency",
				       name, NULL);
	tp_counter_add(ctx, t, pkt->ts, (double)val, -1);
}

static void sys_buddyinfo(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	tp_str node = 0, zone = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == BI_NODE && g.wt == PB_WT_LEN)
			node = tp_s_field(ctx, &g);
		else if (g.num == BI_ZONE && g.wt == PB_WT_LEN)
			zone = tp_s_field(ctx, &g);
	}
	if (!node)
		node = tp_intern(ctx->pool, "", 0);
	if (!zone)
		zone = tp_intern(ctx->pool, "", 0);
	/* order_pages may be packed or not: walk again. */
	unsigned order = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g) && order < 64) {
		if (g.num != BI_ORDER_PAGES)
			continue;
		uint64_t v;
		struct pb_packed_iter it;
		if (g.wt == PB_WT_LEN) {
			pb_packed_init(&it, g.data, g.len);
		} else if (g.wt == PB_WT_VARINT) {
			pb_packed_init(&it, NULL, 0);
		} else {
			continue;
		}
		bool single = g.wt == PB_WT_VARINT;
		while (order < 64 && (single || pb_packed_next(&it, &v))) {
			if (single)
				v = g.val;
			uint64_t kb = order < 40 ? ((1ull << order) *
						    ss(ctx)->page_size) / 1024
						 : 0;
			dim_reset(ctx);
			dim_str(ctx, "buddyinfo_node", node);
			dim_str(ctx, "buddyinfo_zone", zone);
			dim_uint(ctx, "buddyinfo_chunk_size_kb", (uint32_t)kb);
			tp_str name = tp_intern_fmt(ctx->pool, "mem.buddyinfo[%s][%s][%u kB]",
					     tp_str_get(ctx->pool, node),
					     tp_str_get(ctx->pool, zone),
					     (uint32_t)kb);
			uint32_t t = dim_counter_track(ctx, pkt->machine,
						       "buddyinfo", name, NULL);
			tp_counter_add(ctx, t, pkt->ts, (double)(uint32_t)v, -1);
			order++;
			if (single)
				break;
		}
	}
}

static struct disk_state *disk_find(struct tp_ctx *ctx, uint32_t machine,
				    tp_str name)
{
	struct tp_sys_stats *st = ss(ctx);
	for (uint32_t i = 0; i < st->ndisks; i++)
		if (st->disks[i].name == name && st->disks[i].machine == machine)
			return &st->disks[i];
	if (st->ndisks >= MAX_DISKS)
		return NULL;
	if (st->ndisks == st->disks_cap) {
		st->disks_cap = st->disks_cap ? st->disks_cap * 2 : 8;
		void *p = vp_xrealloc(st->disks, st->disks_cap * sizeof(*st->disks));
		st->disks = p;
	}
	struct disk_state *d = &st->disks[st->ndisks++];
	d->name = name;
	d->machine = machine;
	for (unsigned i = 0; i < 8; i++)
		d->prev[i] = -1;
	return d;
}

static void disk_counter(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 tp_str dev, const char *counter, const char *unit,
			 double value)
{
	dim_reset(ctx);
	dim_str(ctx, "device_name", dev);
	dim_str(ctx, "counter_name", tp_s(ctx, counter));
	tp_str name = tp_intern_fmt(ctx->pool, "diskstat.[%s].%s", tp_str_get(ctx->pool, dev),
			     counter);
	uint32_t t = dim_counter_track(ctx, pkt->machine, "diskstat", name, unit);
	tp_counter_add(ctx, t, pkt->ts, value, -1);
}

static double throughput(double amount, int64_t ms)
{
	return ms == 0 ? 0 : amount * 1000.0 / (double)ms;
}

/* /proc/diskstats deltas between two samples: amounts in MB (512-byte
 * sectors), throughputs in MB/s, flush count and time. */
static void sys_diskstat(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	tp_str dev = 0;
	/* read, write, discard sectors, flush count, read, write, discard,
	 * flush time */
	int64_t cur[8] = { 0 };
	static const uint8_t slot_of[DS_FLUSH_TIME_MS + 1] = {
		[DS_READ_SECTORS] = 0, [DS_WRITE_SECTORS] = 1,
		[DS_DISCARD_SECTORS] = 2, [DS_FLUSH_COUNT] = 3,
		[DS_READ_TIME_MS] = 4, [DS_WRITE_TIME_MS] = 5,
		[DS_DISCARD_TIME_MS] = 6, [DS_FLUSH_TIME_MS] = 7,
	};
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == DS_DEVICE_NAME && g.wt == PB_WT_LEN)
			dev = tp_s_field(ctx, &g);
		else if (g.num >= DS_READ_SECTORS && g.num <= DS_FLUSH_TIME_MS &&
			 g.wt == PB_WT_VARINT)
			cur[slot_of[g.num]] = (int64_t)g.val;
	}
	if (!dev)
		dev = tp_intern(ctx->pool, "", 0);
	struct disk_state *d = disk_find(ctx, pkt->machine, dev);
	if (!d)
		return;
	if (d->prev[0] != -1) {
		const double sectors_per_mb = 2048.0;
		double rd = (double)(cur[0] - d->prev[0]) / sectors_per_mb;
		double wr = (double)(cur[1] - d->prev[1]) / sectors_per_mb;
		double dc = (double)(cur[2] - d->prev[2]) / sectors_per_mb;
		double fl = (double)(cur[3] - d->prev[3]);
		int64_t rt = cur[4] - d->prev[4], wt = cur[5] - d->prev[5];
		int64_t dt = cur[6] - d->prev[6];
		double ft = (double)(cur[7] - d->prev[7]);
		disk_counter(ctx, pkt, dev, "read_amount", "MB", rd);
		disk_counter(ctx, pkt, dev, "read_throughput", "MB/s",
			     throughput(rd, rt));
		disk_counter(ctx, pkt, dev, "write_amount", "MB", wr);
		disk_counter(ctx, pkt, dev, "write_throughput", "MB/s",
			     throughput(wr, wt));
		disk_counter(ctx, pkt, dev, "discard_amount", "MB", dc);
		disk_counter(ctx, pkt, dev, "discard_throughput", "MB/s",
			     throughput(dc, dt));
		disk_counter(ctx, pkt, dev, "flush_amount", "count", fl);
		disk_counter(ctx, pkt, dev, "flush_time", "ms", ft);
	}
	memcpy(d->prev, cur, sizeof(cur));
}

static const char *const psi_resources[] = {
	"resource.unspecified", "cpu.some", "cpu.full", "io.some",
	"io.full", "mem.some", "mem.full",
};

static void sys_psi(struct tp_ctx *ctx, const struct tp_packet *pkt,
		    const struct pb_field *f)
{
	uint64_t res = 0, total = 0;
	struct pb_reader r;
	struct pb_field g;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == PSI_RESOURCE && g.wt == PB_WT_VARINT)
			res = g.val;
		else if (g.num == PSI_TOTAL_NS && g.wt == PB_WT_VARINT)
			total = g.val;
	}
	if (res >= NELEM(psi_resources)) {
		tp_stat_add(ctx, "psi_unknown_resource", pkt->machine, -1, 1);
		return;
	}
	tp_str key = tp_s(ctx, psi_resources[res]);
	dim_reset(ctx);
	dim_str(ctx, "psi_resource", key);
	tp_str name = tp_intern_fmt(ctx->pool, "psi.%s", psi_resources[res]);
	uint32_t t = dim_counter_track(ctx, pkt->machine, "psi", name, NULL);
	tp_counter_add(ctx, t, pkt->ts, (double)total, -1);
}

static void sys_thermal(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	tp_str type = 0;
	uint64_t temp = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == TZ_TYPE && g.wt == PB_WT_LEN)
			type = tp_s_field(ctx, &g);
		else if (g.num == TZ_TEMP && g.wt == PB_WT_VARINT)
			temp = g.val;
	}
	if (!type)
		type = tp_intern(ctx->pool, "", 0);
	dim_reset(ctx);
	dim_str(ctx, "thermal_zone", type);
	uint32_t t = dim_counter_track(ctx, pkt->machine,
				       "thermal_temperature_sys", type, "C");
	tp_counter_add(ctx, t, pkt->ts, (double)temp, -1);
}

static void sys_cpuidle(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	uint32_t cpu = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num == CIS_CPU_ID && g.wt == PB_WT_VARINT)
			cpu = (uint32_t)g.val;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num != CIS_ENTRY || g.wt != PB_WT_LEN)
			continue;
		struct pb_reader e;
		struct pb_field h;
		tp_str state = 0;
		uint64_t dur = 0;
		pb_reader_init(&e, g.data, g.len);
		while (pb_next(&e, &h)) {
			if (h.num == CISE_STATE && h.wt == PB_WT_LEN)
				state = tp_s_field(ctx, &h);
			else if (h.num == CISE_DURATION_US &&
				 h.wt == PB_WT_VARINT)
				dur = h.val;
		}
		if (!state)
			state = tp_intern(ctx->pool, "", 0);
		dim_reset(ctx);
		dim_uint(ctx, "cpu", cpu);
		dim_str(ctx, "state", state);
		tp_str name = tp_intern_fmt(ctx->pool, "cpuidle%u.%s", cpu,
				     tp_str_get(ctx->pool, state));
		uint32_t t = dim_counter_track(ctx, pkt->machine,
					       "cpu_idle_state", name, "us");
		tp_counter_add(ctx, t, pkt->ts, (double)dur, -1);
	}
}

/* Calls fn for each value of a repeated varint field, packed or not. */
static void each_varint(const struct pb_field *f,
			void (*fn)(struct tp_ctx *, const struct tp_packet *,
				   uint32_t, uint64_t),
			struct tp_ctx *ctx, const struct tp_packet *pkt,
			uint32_t *i)
{
	if (f->wt == PB_WT_VARINT) {
		fn(ctx, pkt, (*i)++, f->val);
		return;
	}
	if (f->wt != PB_WT_LEN)
		return;
	struct pb_packed_iter it;
	uint64_t v;
	pb_packed_init(&it, f->data, f->len);
	while (pb_packed_next(&it, &v))
		fn(ctx, pkt, (*i)++, v);
}

static void cpufreq_value(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  uint32_t cpu, uint64_t v)
{
	uint32_t t = tp_track_counter(ctx, pkt->machine,
				      tp_s(ctx, "cpu_frequency"),
				      tp_s(ctx, "cpufreq"), cpu, 0);
	tp_counter_add(ctx, t, pkt->ts, (double)(uint32_t)v, -1);
}

static void gpufreq_value(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  uint32_t i, uint64_t v)
{
	(void)i;
	dim_reset(ctx);
	/* Perfetto counts every value as gpu 0's; its ugpu is the row of
	 * its gpu table, and gpu 0 is the only gpu this processor knows, so
	 * the first row: 0. */
	dim_uint(ctx, "ugpu", 0);
	dim_uint(ctx, "gpu", 0);
	uint32_t t = dim_counter_track(ctx, pkt->machine, "gpu_frequency",
				       tp_s(ctx, "gpufreq"), "kHz");
	tp_counter_add(ctx, t, pkt->ts, (double)v, -1);
}

/* SysStats' fields in the order Perfetto's parser reads them (the order
 * of the tracks and counter rows it makes), whatever their order on the
 * wire. */
static const uint32_t sys_stats_order[] = {
	SS_MEMINFO, SS_DEVFREQ, SS_CPUFREQ_KHZ, SS_VMSTAT, SS_CPU_STAT,
	SS_NUM_IRQ, SS_NUM_SOFTIRQ, SS_NUM_FORKS, SS_NUM_IRQ_TOTAL,
	SS_NUM_SOFTIRQ_TOTAL, SS_BUDDY_INFO, SS_DISK_STAT, SS_PSI,
	SS_THERMAL_ZONE, SS_CPUIDLE_STATE, SS_GPUFREQ_MHZ,
};

/* A singular counter (num_forks, num_irq_total, num_softirq_total): its
 * last value on the wire, as a protobuf reader keeps it. */
static void sys_singular(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 const struct pb_field *f, uint32_t num)
{
	struct pb_reader r;
	struct pb_field g;
	bool have = false;
	uint64_t v = 0;

	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num == num && g.wt == PB_WT_VARINT) {
			have = true;
			v = g.val;
		}
	if (!have)
		return;
	const char *n = num == SS_NUM_FORKS ? "num_forks"
			: num == SS_NUM_IRQ_TOTAL ? "num_irq_total"
						  : "num_softirq_total";
	tp_counter_add(ctx, plain_counter_track(ctx, pkt->machine, n, n),
		       pkt->ts, (double)v, -1);
}

/* Every field `num` of the message, in wire order. */
static void sys_repeated(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 const struct pb_field *f, uint32_t num)
{
	struct pb_reader r;
	struct pb_field g;
	uint32_t cpu_i = 0, gpu_i = 0;

	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num != num)
			continue;
		bool len = g.wt == PB_WT_LEN;
		switch (g.num) {
		case SS_MEMINFO:
			if (len)
				sys_meminfo(ctx, pkt, &g);
			break;
		case SS_VMSTAT:
			if (len)
				sys_vmstat(ctx, pkt, &g);
			break;
		case SS_CPU_STAT:
			if (len)
				sys_cpu_stat(ctx, pkt, &g);
			break;
		case SS_NUM_IRQ:
		case SS_NUM_SOFTIRQ:
			if (len)
				sys_irq(ctx, pkt, &g, g.num == SS_NUM_SOFTIRQ);
			break;
		case SS_DEVFREQ:
			if (len)
				sys_devfreq(ctx, pkt, &g);
			break;
		case SS_CPUFREQ_KHZ:
			each_varint(&g, cpufreq_value, ctx, pkt, &cpu_i);
			break;
		case SS_BUDDY_INFO:
			if (len)
				sys_buddyinfo(ctx, pkt, &g);
			break;
		case SS_DISK_STAT:
			if (len)
				sys_diskstat(ctx, pkt, &g);
			break;
		case SS_PSI:
			if (len)
				sys_psi(ctx, pkt, &g);
			break;
		case SS_THERMAL_ZONE:
			if (len)
				sys_thermal(ctx, pkt, &g);
			break;
		case SS_CPUIDLE_STATE:
			if (len)
				sys_cpuidle(ctx, pkt, &g);
			break;
		case SS_GPUFREQ_MHZ:
			each_varint(&g, gpufreq_value, ctx, pkt, &gpu_i);
			break;
		default:
			break;
		}
	}
}

void tp_sys_stats_parse(struct tp_ctx *ctx, const struct tp_packet *pkt,
			    const struct pb_field *f)
{
	if (!pkt->has_ts)
		return;
	for (size_t i = 0; i < sizeof(sys_stats_order) /
				   sizeof(sys_stats_order[0]); i++) {
		uint32_t num = sys_stats_order[i];
		if (num == SS_NUM_FORKS || num == SS_NUM_IRQ_TOTAL ||
		    num == SS_NUM_SOFTIRQ_TOTAL)
			sys_singular(ctx, pkt, f, num);
		else
			sys_repeated(ctx, pkt, f, num);
	}
}
