/*
 * tp_te_desc.c - descriptors in timestamp order (see tp_te_desc.h).
 *
 * A descriptor is pushed as one byte saying what it is, the varints
 * machine and sequence id, then its bytes.  At parse a TrackDescriptor's
 * reservation is resolved (tp_te_tracks.c) and its thread or process
 * named; a legacy descriptor names the thread or process of its pid / tid.
 */
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_process.h"
#include "tp_procs.h"
#include "tp_sort.h"
#include "tp_stats.h"
#include "tp_te_desc.h"
#include "tp_te_intern.h"
#include "tp_te_state.h"
#include "tp_te_tracks.h"
#include "vp_alloc.h"

struct tp_te_desc_state {
	uint8_t kind;
	struct pb_buf buf;
};

struct tp_te_desc_state *tp_te_desc_new(uint8_t kind)
{
	struct tp_te_desc_state *d = vp_xcalloc(1, sizeof *d);
	d->kind = kind;
	pb_buf_init(&d->buf);
	return d;
}

void tp_te_desc_free(struct tp_te_desc_state *d)
{
	if (!d)
		return;
	pb_buf_free(&d->buf);
	free(d);
}

/* ---- tokenize ----------------------------------------------------------- */

void tp_te_desc_push(struct tp_ctx *ctx, const struct tp_packet *pkt,
		     uint8_t what, const uint8_t *p, size_t len)
{
	struct tp_te_desc_state *s = ctx->te->desc;
	struct pb_buf *b = &s->buf;

	pb_buf_reset(b);
	pb_put_raw(b, &what, 1);
	pb_put_raw_varint(b, pkt->machine);
	pb_put_raw_varint(b, pkt->seq ? pkt->seq->id : 0);
	pb_put_raw(b, p, len);
	tp_sort_push(ctx->sorter, pkt->queue, pkt->ts,
		     s->kind, b->data, b->len);
}

/* ---- parse -------------------------------------------------------------- */

static void set_process_arg(struct tp_ctx *ctx, uint32_t upid,
			    const char *key, tp_str value)
{
	struct tp_table *t = tp_tab(ctx, TP_T_PROCESS);
	struct tp_args_builder b;

	if (upid >= t->nrows)
		return;
	tp_args_builder_init(&b);
	if (!tp_is_null(t, TP_PROCESS_arg_set_id, upid))
		tp_args_load(ctx, tp_get_int(t, TP_PROCESS_arg_set_id, upid),
			     &b);
	tp_str k = tp_s(ctx, key);
	tp_args_add_str(&b, k, k, value);
	int64_t id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	if (id >= 0)
		tp_set_int(t, TP_PROCESS_arg_set_id, upid, id);
}

/* As Perfetto v58's ParseProcessDescriptor: a non-empty name, with the
 * descriptor's (weak) priority, and a positive start_timestamp_ns as the
 * process's start if it has none yet.  The cmdline is not read (the
 * process tree gives cmdlines). */
static void apply_process_descriptor(struct tp_ctx *ctx, uint32_t upid,
				     const uint8_t *p, size_t len)
{
	struct tp_table *pt = tp_tab(ctx, TP_T_PROCESS);
	struct pb_reader r;
	struct pb_field f;
	tp_str name = 0;
	int64_t start = 0;

	/* a field given twice: its last value, as a decoder's */
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == PD_PROCESS_NAME && f.wt == PB_WT_LEN)
			name = f.len ? tp_te_intern_bytes(ctx, f.data, f.len)
				     : 0;
		else if (f.num == PD_START_TIMESTAMP_NS &&
			 f.wt == PB_WT_VARINT)
			start = (int64_t)f.val;
	}
	if (name)
		tp_process_set_name(ctx, upid, name);
	if (start > 0 && upid < pt->nrows &&
	    tp_is_null(pt, TP_PROCESS_start_ts, upid))
		tp_set_int(pt, TP_PROCESS_start_ts, upid, start);
}

static void apply_chrome_process(struct tp_ctx *ctx, uint32_t upid,
				 const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == CPD_HOST_APP_PACKAGE_NAME && f.wt == PB_WT_LEN)
			set_process_arg(ctx, upid,
					"chrome.host_app_package_name",
					tp_te_intern_bytes(ctx, f.data, f.len));
}

/* Chrome's names of its thread types (chrome_enums.ThreadType), as
 * Perfetto's processor names threads that only give a type. */
static const char *const chrome_thread_names[] = {
	[1] = "CrProcessMain",
	[2] = "ChromeIOThread",
	[3] = "ThreadPoolBackgroundWorker&",
	[4] = "ThreadPoolForegroundWorker&",
	[5] = "ThreadPoolSingleThreadForegroundBlocking&",
	[6] = "ThreadPoolSingleThreadBackgroundBlocking&",
	[7] = "ThreadPoolService",
	[8] = "Compositor",
	[9] = "VizCompositorThread",
	[10] = "CompositorTileWorker&",
	[11] = "ServiceWorkerThread&",
	[12] = "NetworkService",
	[13] = "Chrome_ChildIOThread",
	[14] = "Chrome_IOThread",
	[15] = "CrBrowserMain",
	[16] = "CrRendererMain",
	[17] = "CrUtilityMain",
	[18] = "CrGpuMain",
	[19] = "CacheThread_BlockFile",
	[20] = "Media",
	[21] = "AudioOutputDevice",
	[22] = "AudioInputDevice",
	[23] = "GpuMemoryThread",
	[24] = "GpuVSyncThread",
	[25] = "DXVAVideoDecoderThread",
	[26] = "BrowserWatchdog",
	[27] = "WebRTC_Network",
	[28] = "Window owner thread",
	[29] = "WebRTC_Signaling",
	[30] = "WebRTC_Worker",
	[31] = "CrPPAPIMain",
	[32] = "GpuWatchdog",
	[33] = "swapper",
	[34] = "Gamepad polling thread",
	[35] = "WebCrypto",
	[36] = "Database thread",
	[37] = "Proxy Resolver",
	[38] = "Chrome_DevToolsADBThread",
	[39] = "NetworkConfigWatcher",
	[40] = "wasapi_render_thread",
	[41] = "LoaderLockSampler",
	[42] = "VSyncThread",
	[50] = "MemoryInfra",
	[51] = "StackSamplingProfiler",
	[52] = "CompositorGpuThread",
};

/* The name of chrome thread type `type`, 0 for none. */
static tp_str chrome_thread_name(struct tp_ctx *ctx, uint64_t type)
{
	size_t n = sizeof chrome_thread_names / sizeof *chrome_thread_names;
	if (type >= n || !chrome_thread_names[type])
		return 0;
	return tp_s(ctx, chrome_thread_names[type]);
}

/* A ThreadDescriptor names its thread, or else its legacy chrome thread
 * type does. */
static void apply_thread_name(struct tp_ctx *ctx, uint32_t utid,
			      const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str name = 0, type_name = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == THD_THREAD_NAME && f.wt == PB_WT_LEN && f.len)
			name = tp_te_intern_bytes(ctx, f.data, f.len);
		else if (f.num == THD_CHROME_THREAD_TYPE &&
			 f.wt == PB_WT_VARINT)
			type_name = chrome_thread_name(ctx, f.val);
	}
	tp_thread_set_name(ctx, utid, name ? name : type_name);
}

/* A ChromeThreadDescriptor's type names the thread, below any name the
 * descriptor gives. */
static void apply_chrome_thread(struct tp_ctx *ctx, uint32_t utid,
				const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == CTD_THREAD_TYPE && f.wt == PB_WT_VARINT)
			tp_thread_set_name_prio(ctx, utid,
						chrome_thread_name(ctx, f.val),
						TP_NAME_PRIO_THREAD_TYPE);
}

static void parse_track_descriptor(struct tp_ctx *ctx, int64_t ts,
				   uint32_t machine, const uint8_t *p,
				   size_t len)
{
	struct desc d;

	if (!tp_te_desc_decode(p, len, &d) || !d.has_uuid)
		return;
	struct res *r = tp_te_res_find(ctx, machine, d.uuid);
	if (!r)
		return;
	r = tp_te_resolve(ctx, r, ts);
	if (!r) {
		tp_stat_inc(ctx, "track_event_parser_errors");
		return;
	}

	if (d.thread && r->kind == RES_THREAD) {
		bool hp, ht;
		int64_t pid, tid;
		uint32_t utid = r->utid;
		tp_te_pid_tid(d.thread, d.thread_len, &hp, &pid, &ht, &tid);
		if (pid != r->pid || tid != r->tid)
			utid = tp_thread_update(ctx, machine, tid, pid);
		apply_thread_name(ctx, utid, d.thread, d.thread_len);
		if (d.chrome_thread)
			apply_chrome_thread(ctx, utid, d.chrome_thread,
					    d.chrome_thread_len);
	}
	if (d.process && r->kind == RES_PROCESS) {
		apply_process_descriptor(ctx, r->upid, d.process, d.process_len);
		if (d.chrome_process)
			apply_chrome_process(ctx, r->upid, d.chrome_process,
					     d.chrome_process_len);
	}
}

void tp_te_desc_parse(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
		      size_t len)
{
	const uint8_t *end = p + len;
	uint64_t machine, seq_id;

	if (len < 1)
		return;
	uint8_t what = *p++;
	if (!pb_read_varint(&p, end, &machine) ||
	    !pb_read_varint(&p, end, &seq_id))
		return;
	size_t n = (size_t)(end - p);
	if (what == TE_DESC_TRACK) {
		parse_track_descriptor(ctx, ts, (uint32_t)machine, p, n);
	} else if (what == TE_DESC_THREAD) {
		bool hp, ht;
		int64_t pid, tid;
		tp_te_pid_tid(p, n, &hp, &pid, &ht, &tid);
		if (!ht)
			return;
		uint32_t utid = hp ? tp_thread_update(ctx, (uint32_t)machine,
						      tid, pid)
				   : tp_thread_get(ctx, (uint32_t)machine, tid);
		apply_thread_name(ctx, utid, p, n);
	} else if (what == TE_DESC_PROCESS) {
		bool hp, ht;
		int64_t pid, tid;
		tp_te_pid_tid(p, n, &hp, &pid, &ht, &tid);
		if (!hp)
			return;
		apply_process_descriptor(
			ctx, tp_process_get(ctx, (uint32_t)machine, pid), p, n);
	}
}
