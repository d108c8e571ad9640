/*
 * tp_system.c - system probes and packets written by the tracing service:
 * sys_stats counters, system_info and cpu_info (metadata, machine and cpu
 * tables), trace_stats and ftrace_stats (stats), trace_config (metadata,
 * including the config printed as protobuf text), service events, triggers,
 * chrome metadata, trace uuid and trace attributes, initial display state.
 *
 * Counters are written at tokenize time with the packet timestamp; trigger
 * slices go through the sorter because slices must arrive in time order
 * (and the first trigger in time order names the trace).
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_args.h"
#include "tp_diag.h"
#include "tp_seq.h"
#include "tp_modules.h"
#include "perfetto_fields.h"
#include "textproto.h"
#include "vp_alloc.h"
#include "perfetto/config/config.pb-c.h"
#include "tp_slices.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "tp_syscalls.h"
#include "tp_sys_stats.h"
#include "tp_tracks.h"

/* TracePacket field numbers (TP_*) are in perfetto_fields.h. */

/* What the sorter carries for the parse stage. */
enum {
	EV_TRIGGER = 1,
	EV_CLONE_SNAPSHOT_TRIGGER = 2,
	EV_CHROME_TRIGGER = 3,
	EV_INITIAL_DISPLAY_STATE = 4,
	EV_SYS_STATS = 5,
};

enum { TRIGGER_NONE, TRIGGER_TRACE, TRIGGER_CLONE_SNAPSHOT };

struct tp_system_state {
	uint8_t kind;               /* sorter kind of our events */
	bool uuid_found;
	int trigger_type;
	uint32_t chrome_metadata_count;
	/* From the trace config, for the streaming-mode stats. */
	bool write_into_file;
	uint64_t file_write_period_ms;
	int64_t config_buffers; /* TraceConfig.buffers entries */
	/* trace_attribute.* keys set by a TracePacket.trace_attributes. */
	struct u64map packet_attrs;
	/* Sequences whose ftrace setup errors are counted (once each). */
	struct u64map setup_error_seqs;
	struct tp_args_builder args;
};

/* ---- small helpers --------------------------------------------------------- */

static struct tp_system_state *sys(struct tp_ctx *ctx)
{
	return ctx->sys;
}

static uint64_t hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- system_info ------------------------------------------------------------ */

/* Android version (from the build fingerprint) to SDK level. */
static int64_t sdk_of_version(const char *v, size_t n)
{
	static const struct {
		const char *v;
		int sdk;
	} map[] = {
		{ "12", 31 }, { "11", 30 },  { "10", 29 },    { "9", 28 },
		{ "8.1", 27 }, { "8.0", 26 }, { "7.1", 25 },  { "7.0", 24 },
		{ "6.0", 23 }, { "5.1", 22 }, { "5.1.1", 22 }, { "5.0", 21 },
		{ "5.0.1", 21 }, { "5.0.2", 21 },
	};
	if (n > 0 && (v[0] == 'S' || v[0] == 'T'))
		return 31;
	for (size_t i = 0; i < NELEM(map); i++)
		if (strlen(map[i].v) == n && memcmp(map[i].v, v, n) == 0)
			return map[i].sdk;
	return -1;
}

/* brand/product/device:VERSION/BUILD_ID/INCREMENTAL:type/tags */
static int64_t fingerprint_sdk(const char *fp, size_t n)
{
	const char *colon = memchr(fp, ':', n);
	if (!colon)
		return -1;
	const char *v = colon + 1, *end = fp + n;
	const char *slash = memchr(v, '/', (size_t)(end - v));
	if (!slash)
		return -1;
	return sdk_of_version(v, (size_t)(slash - v));
}

static bool fingerprint_incremental(const char *fp, size_t n, const char **s,
				    size_t *len)
{
	const char *end = fp + n;
	const char *p = memchr(fp, ':', n);
	if (!p)
		return false;
	for (int i = 0; i < 2; i++) {
		p = memchr(p, '/', (size_t)(end - p));
		if (!p)
			return false;
		p++;
	}
	const char *q = memchr(p, ':', (size_t)(end - p));
	if (!q)
		return false;
	*s = p;
	*len = (size_t)(q - p);
	return true;
}

static bool machine_row(struct tp_ctx *ctx, uint32_t machine, uint32_t *row)
{
	struct tp_table *t = tp_tab(ctx, TP_T_MACHINE);
	if (machine >= t->nrows)
		return false;
	*row = machine;
	return true;
}

static void meta_str_field(struct tp_ctx *ctx, const char *name,
			   int64_t machine, const struct pb_field *g)
{
	tp_meta_set_str(ctx, name, machine, (const char *)g->data, g->len);
}

static void parse_utsname(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  const struct pb_field *f)
{
	static const char *const meta[] = {
		[UTS_SYSNAME] = "system_name", [UTS_VERSION] = "system_version",
		[UTS_RELEASE] = "system_release", [UTS_MACHINE] = "system_machine",
	};
	static const unsigned col[] = {
		[UTS_SYSNAME] = TP_MACHINE_sysname,
		[UTS_VERSION] = TP_MACHINE_version,
		[UTS_RELEASE] = TP_MACHINE_release,
		[UTS_MACHINE] = TP_MACHINE_arch,
	};
	struct pb_reader r;
	struct pb_field g;
	tp_str v[5] = { 0 };
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num >= UTS_SYSNAME && g.num <= UTS_MACHINE &&
		    g.wt == PB_WT_LEN)
			v[g.num] = tp_s_field(ctx, &g);
	uint32_t row = 0;
	bool have_row = machine_row(ctx, pkt->machine, &row);
	if (v[UTS_MACHINE])
		tp_syscalls_set_arch(ctx, pkt->machine,
				     tp_str_get(ctx->pool, v[UTS_MACHINE]),
				     tp_str_len(ctx->pool, v[UTS_MACHINE]));
	for (unsigned i = UTS_SYSNAME; i <= UTS_MACHINE; i++) {
		tp_str s = v[i] ? v[i] : tp_intern(ctx->pool, "", 0);
		tp_meta_set_str(ctx, meta[i], pkt->machine,
				tp_str_get(ctx->pool, s), tp_str_len(ctx->pool, s));
		if (have_row && v[i])
			tp_set_str(tp_tab(ctx, TP_T_MACHINE), col[i], row, v[i]);
	}
}

/* SystemInfo's string metadata after the fingerprint's and the sdk's, in
 * the order Perfetto sets them (the order of the metadata rows). */
static const struct {
	uint32_t num;
	const char *name;
} si_late_strings[] = {
	{SI_TRACING_SERVICE_VERSION, "tracing_service_version"},
	{SI_ANDROID_SOC_MODEL, "android_soc_model"},
	{SI_ANDROID_GUEST_SOC_MODEL, "android_guest_soc_model"},
	{SI_ANDROID_HARDWARE_REVISION, "android_hardware_revision"},
	{SI_ANDROID_STORAGE_MODEL, "android_storage_model"},
	{SI_ANDROID_RAM_MODEL, "android_ram_model"},
	{SI_ANDROID_SERIAL_CONSOLE, "android_serial_console"},
};

/* The last field of each number SystemInfo has, as a protobuf reader
 * keeps it (the numbers read here are all below SI_FIELDS). */
#define SI_FIELDS 64
_Static_assert(SI_MACHINE_NAME < SI_FIELDS && SI_UTSNAME < SI_FIELDS &&
		       SI_ANDROID_SERIAL_CONSOLE < SI_FIELDS,
	       "a SystemInfo field past SI_FIELDS");
struct si_fields {
	struct pb_field f[SI_FIELDS];
	bool has[SI_FIELDS];
};

static const struct pb_field *si_get(const struct si_fields *sf, uint32_t num,
				     unsigned wt)
{
	if (num >= SI_FIELDS || !sf->has[num] || sf->f[num].wt != wt)
		return NULL;
	return &sf->f[num];
}

/* The machine table's columns a SystemInfo fills. */
static void system_info_machine(struct tp_ctx *ctx, uint32_t row,
				const struct si_fields *sf)
{
	struct tp_table *mt = tp_tab(ctx, TP_T_MACHINE);
	const struct pb_field *g;

	if ((g = si_get(sf, SI_ANDROID_BUILD_FINGERPRINT, PB_WT_LEN)))
		tp_set_str(mt, TP_MACHINE_android_build_fingerprint, row,
			   tp_s_field(ctx, g));
	if ((g = si_get(sf, SI_ANDROID_SDK_VERSION, PB_WT_VARINT)))
		tp_set_int(mt, TP_MACHINE_android_sdk_version, row,
			   (int64_t)g->val);
	if ((g = si_get(sf, SI_NUM_CPUS, PB_WT_VARINT)))
		tp_set_int(mt, TP_MACHINE_num_cpus, row, (uint32_t)g->val);
	if ((g = si_get(sf, SI_ANDROID_DEVICE_MANUFACTURER, PB_WT_LEN)))
		tp_set_str(mt, TP_MACHINE_android_device_manufacturer, row,
			   tp_s_field(ctx, g));
	if ((g = si_get(sf, SI_SYSTEM_RAM_BYTES, PB_WT_VARINT))) {
		tp_set_int(mt, TP_MACHINE_system_ram_bytes, row,
			   (int64_t)g->val);
		tp_set_int(mt, TP_MACHINE_system_ram_gb, row,
			   (int64_t)((g->val + 500000000ull) / 1000000000ull));
	}
	if ((g = si_get(sf, SI_MACHINE_NAME, PB_WT_LEN)))
		tp_set_str(mt, TP_MACHINE_name, row, tp_s_field(ctx, g));
}

static void parse_system_info(struct tp_ctx *ctx, const struct tp_packet *pkt,
			      const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	int64_t m = pkt->machine;
	struct si_fields *sf = vp_xcalloc(1, sizeof(*sf));
	const struct pb_field *v;

	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num < SI_FIELDS) {
			sf->f[g.num] = g;
			sf->has[g.num] = true;
		}
	uint32_t row = 0;
	if (machine_row(ctx, pkt->machine, &row))
		system_info_machine(ctx, row, sf);

	/* the metadata, in Perfetto's order */
	if ((v = si_get(sf, SI_UTSNAME, PB_WT_LEN)))
		parse_utsname(ctx, pkt, v);
	if ((v = si_get(sf, SI_TIMEZONE_OFF_MINS, PB_WT_VARINT)))
		tp_meta_set_int(ctx, "timezone_off_mins", m, (int32_t)v->val);
	const struct pb_field *fp =
		si_get(sf, SI_ANDROID_BUILD_FINGERPRINT, PB_WT_LEN);
	const struct pb_field *sdk = si_get(sf, SI_ANDROID_SDK_VERSION,
					    PB_WT_VARINT);
	int64_t fp_sdk = -1;
	if (fp) {
		const char *inc;
		size_t inc_len;
		meta_str_field(ctx, "android_build_fingerprint", m, fp);
		if (fingerprint_incremental((const char *)fp->data, fp->len,
					    &inc, &inc_len))
			tp_meta_set_str(ctx, "android_incremental_build", m, inc,
					inc_len);
		if (!sdk)
			fp_sdk = fingerprint_sdk((const char *)fp->data,
						 fp->len);
	}
	if ((v = si_get(sf, SI_ANDROID_DEVICE_MANUFACTURER, PB_WT_LEN)))
		meta_str_field(ctx, "android_device_manufacturer", m, v);
	if (sdk)
		tp_meta_set_int(ctx, "android_sdk_version", m,
				(int64_t)sdk->val);
	else if (fp_sdk >= 0) {
		tp_meta_set_int(ctx, "android_sdk_version", m, fp_sdk);
		if (machine_row(ctx, pkt->machine, &row))
			tp_set_int(tp_tab(ctx, TP_T_MACHINE),
				   TP_MACHINE_android_sdk_version, row, fp_sdk);
	}
	for (size_t i = 0; i < sizeof(si_late_strings) /
				   sizeof(si_late_strings[0]); i++)
		if ((v = si_get(sf, si_late_strings[i].num, PB_WT_LEN)))
			meta_str_field(ctx, si_late_strings[i].name, m, v);
	if ((v = si_get(sf, SI_SYSTEM_RAM_BYTES, PB_WT_VARINT))) {
		tp_meta_set_int(ctx, "system_ram_bytes", m, (int64_t)v->val);
		tp_meta_set_int(ctx, "system_ram_gb", m,
				(int64_t)((v->val + 500000000ull) /
					  1000000000ull));
	}
	v = si_get(sf, SI_PAGE_SIZE, PB_WT_VARINT);
	tp_sys_stats_page_size(ctx, v && v->val ? (uint32_t)v->val : 4096);
	free(sf);
}

/* ---- cpu_info ------------------------------------------------------------------ */

#define MAX_CPUS 4096

struct cpu_desc {
	tp_str processor;
	bool has_capacity;
	uint32_t capacity;
	uint32_t max_freq;
	bool has_freq;
	int64_t arg_set;
	uint32_t cluster;
	struct pb_field msg; /* the Cpu message, read again for its freqs */
};

/* Feature bits of CpuInfo.Cpu.features this version knows. */
static const char *const cpu_feature_names[] = { "mte", "mte3" };

static int64_t cpu_args(struct tp_ctx *ctx, const struct pb_field *arm,
			uint64_t features, bool has_features)
{
	static const char *const arm_keys[] = {
		[ARM_IMPLEMENTER] = "arm_cpu_implementer",
		[ARM_ARCHITECTURE] = "arm_cpu_architecture",
		[ARM_VARIANT] = "arm_cpu_variant",
		[ARM_PART] = "arm_cpu_part",
		[ARM_REVISION] = "arm_cpu_revision",
	};
	struct tp_args_builder *b = &sys(ctx)->args;
	tp_args_builder_reset(b);
	if (arm) {
		uint64_t v[NELEM(arm_keys)] = { 0 };
		struct pb_reader r;
		struct pb_field g;
		pb_reader_init(&r, arm->data, arm->len);
		while (pb_next(&r, &g))
			if (g.num < NELEM(arm_keys) && arm_keys[g.num] &&
			    g.wt == PB_WT_VARINT)
				v[g.num] = g.val;
		for (unsigned i = 0; i < NELEM(arm_keys); i++) {
			if (!arm_keys[i])
				continue;
			tp_str k = tp_s(ctx, arm_keys[i]);
			tp_args_add_uint(b, k, k, (uint32_t)v[i]);
		}
	}
	if (has_features) {
		for (unsigned i = 0; i < NELEM(cpu_feature_names); i++) {
			if (!(features >> i & 1))
				continue;
			tp_str k = tp_intern_fmt(ctx->pool, "cpu_features.%s",
					  cpu_feature_names[i]);
			tp_args_add_bool(b, k, k, true);
		}
		/* The whole bitmap too, so bits this version has no name
		 * for stay queryable. */
		if (features) {
			tp_str k = tp_s(ctx, "cpu_features.raw_bitmap");
			tp_args_add_uint(b, k, k, features);
		}
	}
	return tp_args_commit(ctx, b);
}

static void parse_one_cpu(struct tp_ctx *ctx, const struct tp_packet *pkt,
			  const struct pb_field *f, struct cpu_desc *c)
{
	struct pb_reader r;
	struct pb_field g;
	const struct pb_field *arm = NULL;
	struct pb_field arm_f;
	uint64_t features = 0;
	bool has_features = false;
	memset(c, 0, sizeof(*c));
	c->arg_set = -1;
	c->msg = *f;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == CPU_PROCESSOR && g.wt == PB_WT_LEN) {
			c->processor = tp_s_field(ctx, &g);
		} else if (g.num == CPU_FREQUENCIES) {
			struct pb_packed_iter it;
			uint64_t v;
			if (g.wt == PB_WT_VARINT) {
				c->has_freq = true;
				if ((uint32_t)g.val > c->max_freq)
					c->max_freq = (uint32_t)g.val;
			} else if (g.wt == PB_WT_LEN) {
				pb_packed_init(&it, g.data, g.len);
				while (pb_packed_next(&it, &v)) {
					c->has_freq = true;
					if ((uint32_t)v > c->max_freq)
						c->max_freq = (uint32_t)v;
				}
			}
		} else if (g.num == CPU_CAPACITY && g.wt == PB_WT_VARINT) {
			c->has_capacity = true;
			c->capacity = (uint32_t)g.val;
		} else if (g.num == CPU_ARM_IDENTIFIER && g.wt == PB_WT_LEN) {
			arm_f = g;
			arm = &arm_f;
		} else if (g.num == CPU_FEATURES && g.wt == PB_WT_VARINT) {
			features = g.val;
			has_features = true;
		}
	}
	if (has_features && features >> NELEM(cpu_feature_names))
		tp_stat_add(ctx, "cpu_info_unknown_cpu_features", pkt->machine,
			    -1, 1);
	if (arm || (has_features && features))
		c->arg_set = cpu_args(ctx, arm, features, has_features);
}

/* One __intrinsic_cpu_freq row per frequency the cpu lists, in order. */
static void add_cpu_freqs(struct tp_ctx *ctx, const struct cpu_desc *c,
			  int64_t ucpu)
{
	struct tp_table *t = tp_tab(ctx, TP_T_CPU_FREQ);
	struct pb_reader r;
	struct pb_field g;
	pb_reader_init(&r, c->msg.data, c->msg.len);
	while (pb_next(&r, &g)) {
		struct pb_packed_iter it;
		uint64_t v;
		if (g.num != CPU_FREQUENCIES)
			continue;
		if (g.wt == PB_WT_VARINT) {
			uint32_t row = tp_table_add_row(t);
			tp_set_int(t, TP_CPU_FREQ_ucpu, row, ucpu);
			tp_set_int(t, TP_CPU_FREQ_freq, row, (uint32_t)g.val);
		} else if (g.wt == PB_WT_LEN) {
			pb_packed_init(&it, g.data, g.len);
			while (pb_packed_next(&it, &v)) {
				uint32_t row = tp_table_add_row(t);
				tp_set_int(t, TP_CPU_FREQ_ucpu, row, ucpu);
				tp_set_int(t, TP_CPU_FREQ_freq, row,
					   (uint32_t)v);
			}
		}
	}
}

/* Cluster ids: cpus ranked by capacity when every cpu has one, else by
 * max frequency when every cpu has frequencies; equal values share. */
static void cpu_clusters(struct cpu_desc *c, uint32_t n)
{
	bool caps = true, freqs = true;
	for (uint32_t i = 0; i < n; i++) {
		caps &= c[i].has_capacity;
		freqs &= c[i].has_freq;
	}
	if (!caps && !freqs)
		return;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t vi = caps ? c[i].capacity : c[i].max_freq;
		/* Cluster = number of distinct smaller values. */
		uint32_t cluster = 0;
		for (uint32_t j = 0; j < n; j++) {
			uint32_t vj = caps ? c[j].capacity : c[j].max_freq;
			if (vj >= vi)
				continue;
			bool first = true;
			for (uint32_t k = 0; k < j; k++) {
				uint32_t vk = caps ? c[k].capacity : c[k].max_freq;
				if (vk == vj)
					first = false;
			}
			cluster += first;
		}
		c[i].cluster = cluster;
	}
}

static void parse_cpu_info(struct tp_ctx *ctx, const struct tp_packet *pkt,
			   const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	uint32_t n = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num == CI_CPUS && g.wt == PB_WT_LEN && n < MAX_CPUS)
			n++;
	if (n == 0) {
		tp_stat_add(ctx, "cpu_info_empty", pkt->machine, -1, 1);
		return;
	}
	struct cpu_desc *c = vp_xcalloc(n, sizeof(*c));
	uint32_t i = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g) && i < n)
		if (g.num == CI_CPUS && g.wt == PB_WT_LEN)
			parse_one_cpu(ctx, pkt, &g, &c[i++]);
	cpu_clusters(c, n);
	struct tp_table *t = tp_tab(ctx, TP_T_CPU);
	for (i = 0; i < n; i++) {
		uint32_t row = tp_cpu_row(ctx, pkt->machine, i);
		if (row == UINT32_MAX)
			break;
		tp_set_int(t, TP_CPU_cluster_id, row, c[i].cluster);
		if (c[i].processor)
			tp_set_str(t, TP_CPU_processor, row, c[i].processor);
		if (c[i].has_capacity)
			tp_set_int(t, TP_CPU_capacity, row, c[i].capacity);
		if (c[i].arg_set >= 0)
			tp_set_int(t, TP_CPU_arg_set_id, row, c[i].arg_set);
		add_cpu_freqs(ctx, &c[i], tp_cpu_ucpu(ctx, pkt->machine, i));
	}
	free(c);
}

/* ---- trace_stats ----------------------------------------------------------------- */

/* BufferStats field number -> indexed stat. */
static const char *const buffer_stat_names[] = {
	[BS_BYTES_WRITTEN] = "traced_buf_bytes_written",
	[BS_CHUNKS_WRITTEN] = "traced_buf_chunks_written",
	[BS_CHUNKS_OVERWRITTEN] = "traced_buf_chunks_overwritten",
	[BS_WRITE_WRAP_COUNT] = "traced_buf_write_wrap_count",
	[BS_PATCHES_SUCCEEDED] = "traced_buf_patches_succeeded",
	[BS_PATCHES_FAILED] = "traced_buf_patches_failed",
	[BS_READAHEADS_SUCCEEDED] = "traced_buf_readaheads_succeeded",
	[BS_READAHEADS_FAILED] = "traced_buf_readaheads_failed",
	[BS_ABI_VIOLATIONS] = "traced_buf_abi_violations",
	[BS_CHUNKS_REWRITTEN] = "traced_buf_chunks_rewritten",
	[BS_CHUNKS_COMMITTED_OUT_OF_ORDER] =
		"traced_buf_chunks_committed_out_of_order",
	[BS_BUFFER_SIZE] = "traced_buf_buffer_size",
	[BS_BYTES_OVERWRITTEN] = "traced_buf_bytes_overwritten",
	[BS_BYTES_READ] = "traced_buf_bytes_read",
	[BS_PADDING_BYTES_WRITTEN] = "traced_buf_padding_bytes_written",
	[BS_PADDING_BYTES_CLEARED] = "traced_buf_padding_bytes_cleared",
	[BS_CHUNKS_READ] = "traced_buf_chunks_read",
	[BS_CHUNKS_DISCARDED] = "traced_buf_chunks_discarded",
	[BS_TRACE_WRITER_PACKET_LOSS] = "traced_buf_trace_writer_packet_loss",
};

/* TraceStats field number -> single stat. */
static const char *const trace_stat_names[] = {
	[TS_PRODUCERS_CONNECTED] = "traced_producers_connected",
	[TS_PRODUCERS_SEEN] = "traced_producers_seen",
	[TS_DATA_SOURCES_REGISTERED] = "traced_data_sources_registered",
	[TS_DATA_SOURCES_SEEN] = "traced_data_sources_seen",
	[TS_TRACING_SESSIONS] = "traced_tracing_sessions",
	[TS_TOTAL_BUFFERS] = "traced_total_buffers",
	[TS_CHUNKS_DISCARDED] = "traced_chunks_discarded",
	[TS_PATCHES_DISCARDED] = "traced_patches_discarded",
	[TS_FLUSHES_REQUESTED] = "traced_flushes_requested",
	[TS_FLUSHES_SUCCEEDED] = "traced_flushes_succeeded",
	[TS_FLUSHES_FAILED] = "traced_flushes_failed",
};

static void parse_buffer_stats(struct tp_ctx *ctx, const struct tp_packet *pkt,
			       const struct pb_field *f, int64_t buf)
{
	struct pb_reader r;
	struct pb_field g;
	uint64_t v[NELEM(buffer_stat_names)] = { 0 };
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num < NELEM(buffer_stat_names) && g.wt == PB_WT_VARINT)
			v[g.num] = g.val;
	for (unsigned i = 1; i < NELEM(buffer_stat_names); i++)
		tp_stat_set(ctx, buffer_stat_names[i], pkt->machine, buf,
			    (int64_t)v[i]);
	/* Streaming mode: whatever a buffer of the config overwrote never
	 * reached the file.  A write period of a day or more still means a
	 * ring buffer (Perfetto's cutoff, as the service's long-trace
	 * test). */
	struct tp_system_state *st = sys(ctx);
	if (st->write_into_file && st->file_write_period_ms < 86400000ull &&
	    buf >= 0 && buf < st->config_buffers &&
	    v[BS_BYTES_OVERWRITTEN] > 0)
		tp_stat_set(ctx, "long_trace_mode_bytes_overwritten",
			    pkt->machine, buf, (int64_t)v[BS_BYTES_OVERWRITTEN]);
}

static void parse_filter_stats(struct tp_ctx *ctx, const struct tp_packet *pkt,
			       const struct pb_field *f)
{
	static const char *const names[] = {
		[FILTER_INPUT_PACKETS] = "filter_input_packets",
		[FILTER_INPUT_BYTES] = "filter_input_bytes",
		[FILTER_OUTPUT_BYTES] = "filter_output_bytes",
		[FILTER_ERRORS] = "filter_errors",
		[FILTER_TIME_TAKEN_NS] = "filter_time_taken_ns",
	};
	struct pb_reader r;
	struct pb_field g;
	int64_t buf = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num < NELEM(names) && names[g.num] &&
		    g.wt == PB_WT_VARINT) {
			tp_stat_set(ctx, names[g.num], pkt->machine, -1,
				    (int64_t)g.val);
		} else if (g.num == FILTER_BYTES_DISCARDED_PER_BUFFER) {
			struct pb_packed_iter it;
			uint64_t v;
			if (g.wt == PB_WT_VARINT) {
				tp_stat_set(ctx, "traced_buf_bytes_filtered_out",
					    pkt->machine, buf++, (int64_t)g.val);
			} else if (g.wt == PB_WT_LEN) {
				pb_packed_init(&it, g.data, g.len);
				while (pb_packed_next(&it, &v))
					tp_stat_set(ctx,
						    "traced_buf_bytes_filtered_out",
						    pkt->machine, buf++,
						    (int64_t)v);
			}
		}
	}
}

/* Bits of TracePacket.previous_packet_dropped (DataLossReason) -> cause
 * stat, by increasing bit. */
static const struct {
	uint32_t reason;
	const char *stat;
} loss_cause_stats[] = {
	{ DATA_LOSS_READ_GAP, "traced_buf_data_loss_read_gap" },
	{ DATA_LOSS_CHUNK_CORRUPTED, "traced_buf_data_loss_chunk_corrupted" },
	{ DATA_LOSS_ORPHAN_CONTINUATION,
	  "traced_buf_data_loss_orphan_continuation" },
	{ DATA_LOSS_REASSEMBLY_GAP, "traced_buf_data_loss_reassembly_gap" },
	{ DATA_LOSS_REASSEMBLY_BROKEN_CHAIN,
	  "traced_buf_data_loss_reassembly_broken_chain" },
	{ DATA_LOSS_OVERWRITE, "traced_buf_data_loss_overwrite" },
	{ DATA_LOSS_WRITER_ABORT, "traced_buf_data_loss_writer_abort" },
	{ DATA_LOSS_SMB_FULL, "traced_buf_data_loss_smb_full" },
};

/* Per-sequence losses the loader counted, attributed to the buffer the
 * sequence wrote into. */
static void parse_writer_stats(struct tp_ctx *ctx, const struct tp_packet *pkt,
			       const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	uint64_t seq_id = 0, buffer = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == WS_SEQUENCE_ID && g.wt == PB_WT_VARINT)
			seq_id = g.val;
		else if (g.num == WS_BUFFER && g.wt == PB_WT_VARINT)
			buffer = (uint32_t)g.val;
	}
	int64_t buf = (int64_t)buffer;
	tp_stat_add(ctx, "traced_buf_sequence_packet_loss", pkt->machine, buf,
		    0);
	tp_stat_add(ctx, "traced_buf_incremental_sequences_dropped",
		    pkt->machine, buf, 0);
	if (seq_id > UINT32_MAX)
		return;
	struct tp_seq *seq = tp_seq_find(ctx, pkt->machine, (uint32_t)seq_id);
	if (!seq)
		return;
	tp_stat_add(ctx, "traced_buf_sequence_packet_loss", pkt->machine, buf,
		    (int64_t)seq->st.losses);
	/* previous_packet_dropped is a bit mask: bit 0 says "something was
	 * lost", the next bits say why. */
	for (size_t i = 0; i < NELEM(loss_cause_stats) &&
			   seq->loss_bit_count; i++) {
		unsigned b =
			(unsigned)__builtin_ctz(loss_cause_stats[i].reason);
		if (b < TP_LOSS_BITS && seq->loss_bit_count[b])
			tp_stat_add(ctx, loss_cause_stats[i].stat,
				    pkt->machine, buf,
				    (int64_t)seq->loss_bit_count[b]);
	}
	if (seq->st.packets > 0 &&
	    seq->st.skipped == seq->st.packets)
		tp_stat_add(ctx, "traced_buf_incremental_sequences_dropped",
			    pkt->machine, buf, 1);
}

static void parse_trace_stats(struct tp_ctx *ctx, const struct tp_packet *pkt,
			      const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	int64_t buf = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == TS_BUFFER_STATS && g.wt == PB_WT_LEN) {
			parse_buffer_stats(ctx, pkt, &g, buf++);
		} else if (g.num < NELEM(trace_stat_names) &&
			   trace_stat_names[g.num] && g.wt == PB_WT_VARINT) {
			tp_stat_set(ctx, trace_stat_names[g.num], pkt->machine,
				    -1, (int64_t)g.val);
		} else if (g.num == TS_FILTER_STATS && g.wt == PB_WT_LEN) {
			parse_filter_stats(ctx, pkt, &g);
		} else if (g.num == TS_FINAL_FLUSH_OUTCOME &&
			   g.wt == PB_WT_VARINT) {
			if (g.val == 1)
				tp_stat_set(ctx, "traced_final_flush_succeeded",
					    pkt->machine, -1, 1);
			else if (g.val == 2)
				tp_stat_set(ctx, "traced_final_flush_failed",
					    pkt->machine, -1, 1);
		} else if (g.num == TS_WRITER_STATS && g.wt == PB_WT_LEN) {
			parse_writer_stats(ctx, pkt, &g);
		}
	}
}

/* ---- ftrace_stats ------------------------------------------------------------------ */

static void parse_ftrace_cpu_stats(struct tp_ctx *ctx,
				   const struct tp_packet *pkt,
				   const struct pb_field *f, bool end)
{
	static const char *const names[] = {
		[FCS_ENTRIES] = "ftrace_cpu_entries",
		[FCS_OVERRUN] = "ftrace_cpu_overrun",
		[FCS_COMMIT_OVERRUN] = "ftrace_cpu_commit_overrun",
		[FCS_BYTES_READ] = "ftrace_cpu_bytes",
		[FCS_OLDEST_EVENT_TS] = "ftrace_cpu_oldest_event_ts",
		[FCS_NOW_TS] = "ftrace_cpu_now_ts",
		[FCS_DROPPED_EVENTS] = "ftrace_cpu_dropped_events",
		[FCS_READ_EVENTS] = "ftrace_cpu_read_events",
	};
	struct pb_reader r;
	struct pb_field g;
	int64_t v[NELEM(names)] = { 0 };
	uint64_t cpu = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == FCS_CPU && g.wt == PB_WT_VARINT) {
			cpu = g.val;
		} else if ((g.num == FCS_OLDEST_EVENT_TS || g.num == FCS_NOW_TS) &&
			   g.wt == PB_WT_FIXED64) {
			double d;
			memcpy(&d, &g.val, sizeof(d));
			if (isfinite(d) && fabs(d) < 9.2e9)
				v[g.num] = (int64_t)(d * 1e9);
		} else if (g.num < NELEM(names) && names[g.num] &&
			   g.wt == PB_WT_VARINT) {
			v[g.num] = (int64_t)g.val;
		}
	}
	if (cpu > 1u << 20)
		return;
	char name[96];
	for (unsigned i = 1; i < NELEM(names); i++) {
		if (!names[i])
			continue;
		snprintf(name, sizeof(name), "%s_%s", names[i],
			 end ? "end" : "begin");
		tp_stat_set(ctx, name, pkt->machine, (int64_t)cpu, v[i]);
	}
	if (!end)
		return;
	/* The deltas over the trace, only for a cpu the start of the
	 * trace counted too (Perfetto's rule: no begin, no delta). */
	static const unsigned delta_fields[] = {
		FCS_ENTRIES, FCS_OVERRUN, FCS_COMMIT_OVERRUN, FCS_BYTES_READ,
		FCS_DROPPED_EVENTS, FCS_READ_EVENTS,
	};
	for (unsigned k = 0; k < NELEM(delta_fields); k++) {
		unsigned i = delta_fields[k];
		int64_t begin;
		snprintf(name, sizeof(name), "%s_begin", names[i]);
		if (!tp_stat_find(ctx, name, pkt->machine, (int64_t)cpu,
				  &begin))
			continue;
		snprintf(name, sizeof(name), "%s_delta", names[i]);
		tp_stat_set(ctx, name, pkt->machine, (int64_t)cpu,
			    v[i] - begin);
		if (i == FCS_OVERRUN && v[i] - begin > 0)
			tp_stat_set(ctx, "ftrace_cpu_has_data_loss",
				    pkt->machine, (int64_t)cpu, 1);
	}
}

/* The setup errors a producer reports at the start of its ftrace
 * session, as Perfetto counts them in ftrace_setup_errors: one for each
 * failed or unknown event, one for atrace's errors and one for an
 * exclusive feature's, the first time a sequence reports any. */
static void count_setup_errors(struct tp_ctx *ctx, const struct tp_packet *pkt,
			       const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	int64_t n = 0;
	uint64_t seq = pkt->env ? pkt->env->seq_id : 0, dummy;

	if (u64map_get(&sys(ctx)->setup_error_seqs, seq, &dummy))
		return;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.wt != PB_WT_LEN)
			continue;
		if (g.num == FS_FAILED_FTRACE_EVENTS ||
		    g.num == FS_UNKNOWN_FTRACE_EVENTS ||
		    ((g.num == FS_ATRACE_ERRORS ||
		      g.num == FS_EXCLUSIVE_FEATURE_ERROR) && g.len))
			n++;
	}
	if (!n)
		return;
	u64map_put(&sys(ctx)->setup_error_seqs, seq, 1);
	tp_stat_add(ctx, "ftrace_setup_errors", pkt->machine, -1, n);
}

static void parse_ftrace_stats(struct tp_ctx *ctx, const struct tp_packet *pkt,
			       const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	uint64_t phase = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num == FS_PHASE && g.wt == PB_WT_VARINT)
			phase = g.val;
	if (phase != FS_PHASE_START_OF_TRACE && phase != FS_PHASE_END_OF_TRACE)
		return;
	bool end = phase == FS_PHASE_END_OF_TRACE;
	if (!end)
		count_setup_errors(ctx, pkt, f);
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == FS_CPU_STATS && g.wt == PB_WT_LEN) {
			parse_ftrace_cpu_stats(ctx, pkt, &g, end);
		} else if (g.num == FS_PRESERVE_FTRACE_BUFFER &&
			   g.wt == PB_WT_VARINT && g.val) {
			tp_ftrace_preserve_buffer(ctx, pkt->machine);
		} else if (g.num == FS_FTRACE_PARSE_ERRORS) {
			struct pb_packed_iter it;
			uint64_t v;
			if (g.wt == PB_WT_LEN)
				pb_packed_init(&it, g.data, g.len);
			else
				pb_packed_init(&it, NULL, 0);
			bool single = g.wt == PB_WT_VARINT;
			while (single || pb_packed_next(&it, &v)) {
				if (single)
					v = g.val;
				if (v == FTRACE_STATUS_ABI_ZERO_DATA_LENGTH)
					tp_stat_add(ctx,
						    "ftrace_abi_errors_skipped_zero_data_length",
						    pkt->machine, -1, 1);
				if (single)
					break;
			}
		}
	}
}

/* ---- a growable text buffer ------------------------------------------------------ */

struct text {
	char *p;
	size_t len, cap;
};

static void text_put(struct text *t, const char *s, size_t n)
{
	/* n comes from the trace (a field's length): len + n + 1 must not
	 * wrap around.  No real text gets near. */
	if (t->len > SIZE_MAX / 4 || n > SIZE_MAX / 4 - t->len)
		abort();
	VP_XGROW(t->p, t->cap, t->len + n + 1);
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = 0;
}

static void text_cstr(struct text *t, const char *s)
{
	text_put(t, s, strlen(s));
}

/* ---- trace_config, trace_uuid, trace_attributes --------------------------------- */

static void set_uuid(struct tp_ctx *ctx, uint64_t msb, uint64_t lsb)
{
	char s[40];
	snprintf(s, sizeof(s), "%08x-%04x-%04x-%04x-%012llx",
		 (unsigned)(msb >> 32), (unsigned)(msb >> 16 & 0xffff),
		 (unsigned)(msb & 0xffff), (unsigned)(lsb >> 48),
		 (unsigned long long)(lsb & 0xffffffffffffull));
	tp_meta_set_str(ctx, "trace_uuid", -1, s, strlen(s));
	sys(ctx)->uuid_found = true;
}

static void parse_trace_uuid(struct tp_ctx *ctx, const struct pb_field *f)
{
	struct pb_reader r;
	struct pb_field g;
	uint64_t msb = 0, lsb = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == UUID_MSB && g.wt == PB_WT_VARINT)
			msb = g.val;
		else if (g.num == UUID_LSB && g.wt == PB_WT_VARINT)
			lsb = g.val;
	}
	if (msb || lsb)
		set_uuid(ctx, msb, lsb);
}

/* trace_attribute.KEY metadata; attributes of a TracePacket win over the
 * config's. */
static void parse_attributes(struct tp_ctx *ctx, const struct pb_field *f,
			     bool from_packet)
{
	struct tp_system_state *st = sys(ctx);
	struct pb_reader r;
	struct pb_field g;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num != TA_ATTRIBUTE || g.wt != PB_WT_LEN)
			continue;
		struct pb_reader a;
		struct pb_field h, key = { 0 }, sval = { 0 };
		bool has_key = false, has_s = false, has_i = false;
		int64_t ival = 0;
		pb_reader_init(&a, g.data, g.len);
		while (pb_next(&a, &h)) {
			if (h.num == ATTR_KEY && h.wt == PB_WT_LEN) {
				key = h;
				has_key = true;
			} else if (h.num == ATTR_LONG && h.wt == PB_WT_VARINT) {
				ival = (int64_t)h.val;
				has_i = true;
			} else if (h.num == ATTR_STRING && h.wt == PB_WT_LEN) {
				sval = h;
				has_s = true;
			}
		}
		if (!has_key || key.len > 1000 || (!has_s && !has_i))
			continue;
		char name[1100];
		snprintf(name, sizeof(name), "trace_attribute.%.*s",
			 (int)key.len, (const char *)key.data);
		uint64_t h64 = hash_bytes(name, strlen(name)), dummy;
		if (from_packet)
			u64map_put(&st->packet_attrs, h64, 1);
		else if (u64map_get(&st->packet_attrs, h64, &dummy))
			continue;
		if (has_s)
			tp_meta_set_str(ctx, name, -1, (const char *)sval.data,
					sval.len);
		else
			tp_meta_set_int(ctx, name, -1, ival);
	}
}

static void config_buffers(struct tp_ctx *ctx, const struct tp_packet *pkt,
			   const struct pb_field *f, bool write_into_file,
			   bool has_flush_period)
{
	struct pb_reader r;
	struct pb_field g;
	int64_t buf = 0;
	sys(ctx)->config_buffers = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num == TC_BUFFERS && g.wt == PB_WT_LEN)
			sys(ctx)->config_buffers++;
	if (!write_into_file)
		return;
	if (!has_flush_period)
		tp_stat_set(ctx, "config_write_into_file_no_flush", pkt->machine,
			    -1, 1);
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num != TC_BUFFERS || g.wt != PB_WT_LEN)
			continue;
		struct pb_reader b;
		struct pb_field h;
		pb_reader_init(&b, g.data, g.len);
		while (pb_next(&b, &h))
			if (h.num == BC_FILL_POLICY && h.wt == PB_WT_VARINT &&
			    h.val == FILL_DISCARD)
				tp_stat_set(ctx, "config_write_into_file_discard",
					    pkt->machine, buf, 1);
		buf++;
	}
}

static void parse_trace_config(struct tp_ctx *ctx, const struct tp_packet *pkt,
			       const struct pb_field *f)
{
	struct tp_system_state *st = sys(ctx);
	struct pb_reader r;
	struct pb_field g;
	uint64_t msb = 0, lsb = 0;
	bool write_into_file = false, has_flush_period = false;
	uint64_t period = 0;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		bool vi = g.wt == PB_WT_VARINT;
		if (g.num == TC_TRACE_UUID_MSB && vi)
			msb = g.val;
		else if (g.num == TC_TRACE_UUID_LSB && vi)
			lsb = g.val;
		else if (g.num == TC_WRITE_INTO_FILE && vi)
			write_into_file = g.val != 0;
		else if (g.num == TC_FILE_WRITE_PERIOD_MS && vi)
			period = g.val;
		else if (g.num == TC_FLUSH_PERIOD_MS && vi)
			has_flush_period = g.val != 0;
		else if (g.num == TC_UNIQUE_SESSION_NAME && g.wt == PB_WT_LEN)
			meta_str_field(ctx, "unique_session_name", -1, &g);
		else if (g.num == TC_TRACE_ATTRIBUTES && g.wt == PB_WT_LEN)
			parse_attributes(ctx, &g, false);
	}
	st->write_into_file = write_into_file;
	st->file_write_period_ms = period;
	config_buffers(ctx, pkt, f, write_into_file, has_flush_period);
	if (!st->uuid_found && (msb || lsb))
		set_uuid(ctx, msb, lsb);
	/* As Perfetto's processor prints it: through the schema's
	 * descriptor, in wire order (wire/pbtxt_wire.c). */
	char *text = vp_textproto_print_wire(
		&perfetto__protos__trace_config__descriptor, f->data, f->len);
	tp_meta_set_str(ctx, "trace_config_pbtxt", -1, text, strlen(text));
	free(text);
	tp_diag_set_config(ctx, pkt->machine, f->data, f->len);
}

/* ---- service events ---------------------------------------------------------------- */

static void data_sources_meta(struct tp_ctx *ctx, const struct pb_field *f,
			      const char *name, int64_t machine)
{
	struct pb_reader r;
	struct pb_field g;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num != DSS_DATA_SOURCE || g.wt != PB_WT_LEN)
			continue;
		struct pb_reader d;
		struct pb_field h, prod = { 0 }, ds = { 0 };
		pb_reader_init(&d, g.data, g.len);
		while (pb_next(&d, &h)) {
			if (h.num == DSS_PRODUCER_NAME && h.wt == PB_WT_LEN)
				prod = h;
			else if (h.num == DSS_DATA_SOURCE_NAME &&
				 h.wt == PB_WT_LEN)
				ds = h;
		}
		struct text t = { 0 };
		if (prod.len)
			text_put(&t, (const char *)prod.data, prod.len);
		text_put(&t, " ", 1);
		if (ds.len)
			text_put(&t, (const char *)ds.data, ds.len);
		tp_meta_append_str(ctx, name, machine, t.p, t.len);
		free(t.p);
	}
}

static void parse_service_event(struct tp_ctx *ctx, const struct tp_packet *pkt,
				const struct pb_field *f)
{
	static const char *const ts_names[] = {
		[SE_ALL_DATA_SOURCES_STARTED] = "all_data_source_started_ns",
		[SE_TRACING_STARTED] = "tracing_started_ns",
		[SE_ALL_DATA_SOURCES_FLUSHED] = "all_data_source_flushed_ns",
		[SE_TRACING_DISABLED] = "tracing_disabled_ns",
	};
	struct pb_reader r;
	struct pb_field g;
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		/* The sorter's windows follow the flushes and the buffer
		 * reads, as Perfetto's do (tp_sort.h). */
		if (g.num == SE_ALL_DATA_SOURCES_FLUSHED && ctx->sorter &&
		    g.wt == PB_WT_VARINT && g.val)
			tp_sort_flush_event(ctx->sorter);
		if (g.num == SE_READ_TRACING_BUFFERS_COMPLETED && ctx->sorter &&
		    g.wt == PB_WT_VARINT && g.val)
			tp_sort_read_buffer_event(ctx->sorter, ctx);
		/* Perfetto scopes these to (machine, trace);
		 * all_data_source_flushed_ns is a multi key: one row per
		 * flush. */
		if (g.num < NELEM(ts_names) && ts_names[g.num] &&
		    g.wt == PB_WT_VARINT && g.val && pkt->has_ts) {
			if (g.num == SE_ALL_DATA_SOURCES_FLUSHED)
				tp_meta_append_int(ctx, ts_names[g.num],
						   pkt->machine, pkt->ts);
			else
				tp_meta_set_int(ctx, ts_names[g.num],
						pkt->machine, pkt->ts);
		} else if (g.num == SE_SLOW_STARTING_DATA_SOURCES &&
			 g.wt == PB_WT_LEN)
			data_sources_meta(ctx, &g, "slow_start_data_source",
					  pkt->machine);
		else if (g.num == SE_LAST_FLUSH_SLOW_DATA_SOURCES &&
			 g.wt == PB_WT_LEN)
			data_sources_meta(ctx, &g, "last_flush_slow_data_source",
					  -1);
	}
}

/* ---- triggers (parse stage) -------------------------------------------------------- */

static void push_event(struct tp_ctx *ctx, const struct tp_packet *pkt,
		       uint8_t type, const struct pb_field *f)
{
	if (!pkt->has_ts || !ctx->sorter)
		return;
	size_t n = 1 + 4 + f->len;
	uint8_t *buf = vp_xmalloc(n);
	buf[0] = type;
	memcpy(buf + 1, &pkt->machine, 4);
	memcpy(buf + 5, f->data, f->len);
	tp_sort_push(ctx->sorter, pkt->queue, pkt->ts, sys(ctx)->kind, buf, n);
	free(buf);
}

static uint32_t triggers_track(struct tp_ctx *ctx)
{
	struct tp_track_spec spec;
	tp_track_spec_init(&spec, 0);
	spec.name = tp_s(ctx, "Trace Triggers");
	spec.type = tp_s(ctx, "triggers");
	return tp_track_intern(ctx, &spec);
}

static void parse_trigger_event(struct tp_ctx *ctx, int64_t ts,
				const uint8_t *msg, size_t len, bool clone)
{
	struct tp_system_state *st = sys(ctx);
	struct pb_reader r;
	struct pb_field g;
	tp_str name = 0, producer = 0;
	bool has_uid = false;
	int64_t uid = 0;
	pb_reader_init(&r, msg, len);
	while (pb_next(&r, &g)) {
		if (g.num == TRG_TRIGGER_NAME && g.wt == PB_WT_LEN)
			name = tp_s_field(ctx, &g);
		else if (g.num == TRG_PRODUCER_NAME && g.wt == PB_WT_LEN)
			producer = tp_s_field(ctx, &g);
		else if (g.num == TRG_TRUSTED_PRODUCER_UID &&
			 g.wt == PB_WT_VARINT) {
			uid = (int32_t)g.val;
			has_uid = true;
		}
	}
	if (!name)
		name = tp_intern(ctx->pool, "", 0);
	struct tp_args_builder *b = &st->args;
	tp_args_builder_reset(b);
	if (producer && tp_str_len(ctx->pool, producer)) {
		tp_str k = tp_s(ctx, "producer_name");
		tp_args_add_str(b, k, k, producer);
	}
	if (has_uid) {
		tp_str k = tp_s(ctx, "trusted_producer_uid");
		tp_args_add_int(b, k, k, uid);
	}
	int64_t args = tp_args_commit(ctx, b);
	tp_slice_complete(ctx, triggers_track(ctx), ts, 0, 0, name, args);
	const char *s = tp_str_get(ctx->pool, name);
	if (clone && st->trigger_type != TRIGGER_CLONE_SNAPSHOT) {
		st->trigger_type = TRIGGER_CLONE_SNAPSHOT;
		tp_meta_set_str(ctx, "trace_trigger", -1, s, strlen(s));
		tp_stat_set(ctx, "traced_clone_trigger_timestamp_ns", 0, -1, ts);
	} else if (!clone && st->trigger_type == TRIGGER_NONE) {
		st->trigger_type = TRIGGER_TRACE;
		tp_meta_set_str(ctx, "trace_trigger", -1, s, strlen(s));
	}
}

static void parse_chrome_trigger_event(struct tp_ctx *ctx, int64_t ts,
				       const uint8_t *msg, size_t len)
{
	struct pb_reader r;
	struct pb_field g;
	tp_str name = 0;
	uint32_t hash = 0;
	pb_reader_init(&r, msg, len);
	while (pb_next(&r, &g)) {
		if (g.num == CTRG_TRIGGER_NAME && g.wt == PB_WT_LEN)
			name = tp_s_field(ctx, &g);
		else if (g.num == CTRG_TRIGGER_NAME_HASH &&
			 (g.wt == PB_WT_FIXED32 || g.wt == PB_WT_VARINT))
			hash = (uint32_t)g.val;
	}
	struct tp_args_builder *b = &sys(ctx)->args;
	tp_args_builder_reset(b);
	tp_str k = tp_s(ctx, "chrome_trigger.name_hash");
	tp_args_add_uint(b, k, k, hash);
	if (name) {
		k = tp_s(ctx, "chrome_trigger.name");
		tp_args_add_str(b, k, k, name);
	}
	int64_t args = tp_args_commit(ctx, b);
	tp_slice_complete(ctx, triggers_track(ctx), ts, 0, 0,
			  name ? name : tp_s(ctx, "chrome_trigger"), args);
	tp_meta_set_int(ctx, "cr-triggered_rule_name_hash", -1, hash);
}

static void parse_initial_display_state(struct tp_ctx *ctx, uint32_t machine,
					int64_t ts, const uint8_t *data,
					size_t len);

static void system_parse(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			 size_t len)
{
	if (len < 5)
		return;
	const uint8_t *msg = p + 5;
	size_t n = len - 5;
	switch (p[0]) {
	case EV_TRIGGER:
		parse_trigger_event(ctx, ts, msg, n, false);
		break;
	case EV_CLONE_SNAPSHOT_TRIGGER:
		parse_trigger_event(ctx, ts, msg, n, true);
		break;
	case EV_CHROME_TRIGGER:
		parse_chrome_trigger_event(ctx, ts, msg, n);
		break;
	case EV_INITIAL_DISPLAY_STATE: {
		uint32_t machine;
		memcpy(&machine, p + 1, 4);
		parse_initial_display_state(ctx, machine, ts, msg, n);
		break;
	}
	case EV_SYS_STATS: {
		struct tp_packet pkt = { .ts = ts, .has_ts = true };
		struct pb_field f = { .num = TP_SYS_STATS, .wt = PB_WT_LEN,
				      .data = msg, .len = n };
		memcpy(&pkt.machine, p + 1, 4);
		tp_sys_stats_parse(ctx, &pkt, &f);
		break;
	}
	default:
		break;
	}
}

/* ---- chrome metadata ----------------------------------------------------------------- */

static void base64_encode(struct text *t, const uint8_t *s, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		char out[4] = { tab[v >> 18 & 63], tab[v >> 12 & 63],
				i + 1 < n ? tab[v >> 6 & 63] : '=',
				i + 2 < n ? tab[v & 63] : '=' };
		text_put(t, out, 4);
	}
}

static void chrome_btm(struct tp_ctx *ctx, const struct pb_field *f)
{
	struct text t = { 0 };
	base64_encode(&t, f->data, f->len);
	tp_meta_set_str(ctx, "cr-background_tracing_metadata", -1,
			t.p ? t.p : "", t.len);
	free(t.p);
	struct pb_reader r;
	struct pb_field g;
	/* the scenario, then the rule: Perfetto's order of the rows */
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g))
		if (g.num == BTM_SCENARIO_NAME_HASH &&
		    (g.wt == PB_WT_FIXED32 || g.wt == PB_WT_VARINT))
			tp_meta_set_int(ctx, "cr-scenario_name_hash", -1,
					(uint32_t)g.val);
	pb_reader_init(&r, f->data, f->len);
	while (pb_next(&r, &g)) {
		if (g.num == BTM_TRIGGERED_RULE && g.wt == PB_WT_LEN) {
			struct pb_reader tr;
			struct pb_field h;
			pb_reader_init(&tr, g.data, g.len);
			while (pb_next(&tr, &h))
				if (h.num == TR_NAME_HASH &&
				    (h.wt == PB_WT_FIXED32 ||
				     h.wt == PB_WT_VARINT))
					tp_meta_set_int(ctx,
							"cr-triggered_rule_name_hash",
							-1, (uint32_t)h.val);
		}
	}
}

/* Field trials, as Perfetto prints them: "{ name: N, group: G } " each,
 * a newline before every second one after the first two. */
static void chrome_field_trial(struct text *t, int *line,
			       const struct pb_field *g)
{
	uint64_t fn = 0, fg = 0;
	struct pb_reader h;
	struct pb_field e;
	char buf[64];

	pb_reader_init(&h, g->data, g->len);
	while (pb_next(&h, &e)) {
		if (e.num == FH_NAME)
			fn = e.val;
		else if (e.num == FH_GROUP)
			fg = e.val;
	}
	if (*line == 2) {
		text_put(t, "\n", 1);
		*line = 1;
	} else {
		(*line)++;
	}
	snprintf(buf, sizeof(buf), "{ name: %u, group: %u } ", (uint32_t)fn,
		 (uint32_t)fg);
	text_cstr(t, buf);
}

/* One field of a ChromeMetadataPacket, as metadata named with prefix. */
static void chrome_metadata_field(struct tp_ctx *ctx, const char *prefix,
				  const struct pb_field *g)
{
	bool len = g->wt == PB_WT_LEN, vi = g->wt == PB_WT_VARINT;
	const char *key = NULL;
	char name[64];

	switch (g->num) {
	case CM_BACKGROUND_TRACING_METADATA:
		if (len)
			chrome_btm(ctx, g);
		return;
	case CM_CHROME_VERSION_CODE:
		if (vi) {
			snprintf(name, sizeof(name), "%splaystore_version_code",
				 prefix);
			tp_meta_set_int(ctx, name, -1, (int32_t)g->val);
		}
		return;
	case CM_CHANNEL:
		if (vi) {
			snprintf(name, sizeof(name), "%schannel", prefix);
			tp_meta_set_int(ctx, name, -1, (int64_t)g->val);
		}
		return;
	case CM_ENABLED_CATEGORIES:
		key = "enabled_categories";
		break;
	case CM_APP_PACKAGE_NAME:
		key = "package-name";
		break;
	case CM_APP_VERSION:
		key = "product-version";
		break;
	case CM_OS_NAME:
		key = "os-name";
		break;
	default:
		return;
	}
	if (len) {
		snprintf(name, sizeof(name), "%s%s", prefix, key);
		meta_str_field(ctx, name, -1, g);
	}
}

/* A ChromeMetadataPacket: its fields field by field in the order Perfetto
 * sets them (the order of its rows), whatever their order on the wire. */
static void parse_chrome_metadata(struct tp_ctx *ctx, const struct pb_field *f)
{
	static const uint32_t order[] = {
		CM_CHROME_VERSION_CODE, CM_APP_VERSION, CM_OS_NAME,
		CM_APP_PACKAGE_NAME, CM_CHANNEL, CM_ENABLED_CATEGORIES,
		CM_FIELD_TRIAL_HASHES, CM_BACKGROUND_TRACING_METADATA,
	};
	struct tp_system_state *st = sys(ctx);
	char prefix[8], name[64];
	struct pb_reader r;
	struct pb_field g;

	snprintf(prefix, sizeof(prefix), "cr-%c-",
		 'a' + (int)(st->chrome_metadata_count % 26));
	st->chrome_metadata_count++;
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		struct text trials = { 0 };
		int line = 0;
		pb_reader_init(&r, f->data, f->len);
		while (pb_next(&r, &g)) {
			if (g.num != order[k])
				continue;
			if (g.num != CM_FIELD_TRIAL_HASHES)
				chrome_metadata_field(ctx, prefix, &g);
			else if (g.wt == PB_WT_LEN)
				chrome_field_trial(&trials, &line, &g);
		}
		if (trials.p) {
			snprintf(name, sizeof(name), "%sfield_trial_hashes",
				 prefix);
			tp_meta_set_str(ctx, name, -1, trials.p, trials.len);
		}
		free(trials.p);
	}
}

/* ---- initial display state ---------------------------------------------------------- */

static void parse_initial_display_state(struct tp_ctx *ctx, uint32_t machine,
					int64_t ts, const uint8_t *data,
					size_t len)
{
	struct pb_reader r;
	struct pb_field g;
	bool has = false;
	int64_t state = 0;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &g))
		if (g.num == IDS_DISPLAY_STATE && g.wt == PB_WT_VARINT) {
			state = (int32_t)g.val;
			has = true;
		}
	if (!has)
		return;
	uint32_t t = tp_track_counter(ctx, machine, tp_s(ctx, "screen_state"),
				      tp_s(ctx, "ScreenState"), -1, 0);
	tp_counter_add(ctx, t, ts, (double)state, -1);
}

/* ---- entry points -------------------------------------------------------------------- */

void tp_system_init(struct tp_ctx *ctx)
{
	struct tp_system_state *st = vp_xcalloc(1, sizeof(*st));
	u64map_init(&st->packet_attrs);
	u64map_init(&st->setup_error_seqs);
	tp_args_builder_init(&st->args);
	if (ctx->sorter)
		st->kind = tp_sort_register(ctx->sorter, system_parse);
	ctx->sys = st;
	ctx->sys_stats = tp_sys_stats_new();
}

bool tp_system_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			const struct pb_field *f)
{
	if (!ctx->sys)
		return false;
	if (f->wt != PB_WT_LEN)
		return false;
	switch (f->num) {
	case TP_SYS_STATS: /* parsed in timestamp order, as Perfetto does */
		push_event(ctx, pkt, EV_SYS_STATS, f);
		return true;
	case TP_TRACE_CONFIG:
		parse_trace_config(ctx, pkt, f);
		return true;
	case TP_FTRACE_STATS:
		parse_ftrace_stats(ctx, pkt, f);
		return true;
	case TP_TRACE_STATS:
		parse_trace_stats(ctx, pkt, f);
		return true;
	case TP_SYSTEM_INFO:
		parse_system_info(ctx, pkt, f);
		return true;
	case TP_TRIGGER:
		push_event(ctx, pkt, EV_TRIGGER, f);
		return true;
	case TP_CLONE_SNAPSHOT_TRIGGER:
		push_event(ctx, pkt, EV_CLONE_SNAPSHOT_TRIGGER, f);
		return true;
	case TP_CHROME_TRIGGER:
		push_event(ctx, pkt, EV_CHROME_TRIGGER, f);
		return true;
	case TP_CHROME_METADATA:
		parse_chrome_metadata(ctx, f);
		return true;
	case TP_CPU_INFO:
		parse_cpu_info(ctx, pkt, f);
		return true;
	case TP_SERVICE_EVENT:
		parse_service_event(ctx, pkt, f);
		return true;
	case TP_INITIAL_DISPLAY_STATE:
		/* parsed in timestamp order, as Perfetto does */
		push_event(ctx, pkt, EV_INITIAL_DISPLAY_STATE, f);
		return true;
	case TP_TRACE_UUID:
		parse_trace_uuid(ctx, f);
		return true;
	case TP_TRACE_ATTRIBUTES:
		parse_attributes(ctx, f, true);
		return true;
	default:
		return false;
	}
}

void tp_system_finish(struct tp_ctx *ctx)
{
	(void)ctx;
}

void tp_system_free(struct tp_ctx *ctx)
{
	struct tp_system_state *st = ctx->sys;
	if (!st)
		return;
	tp_sys_stats_free(ctx->sys_stats);
	ctx->sys_stats = NULL;
	u64map_free(&st->packet_attrs);
	u64map_free(&st->setup_error_seqs);
	tp_args_builder_free(&st->args);
	free(st);
	ctx->sys = NULL;
}
