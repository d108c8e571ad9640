/*
 * tp_memory.c - the kernel's memory ftrace events, as Perfetto's
 * FtraceParser and RssStatTracker read them:
 *
 *   rss_stat, rss_stat_throttled  a process's memory by kind (member:
 *       mem.rss.file, mem.rss.anon, mem.swap, mem.rss.shmem,
 *       mem.unreclaimable), attributed through mm_id (below)
 *   dmabuf_rss_stat               mem.dmabuf_rss of the thread's process
 *   ion_heap_grow / ion_heap_shrink, ion_stat
 *                                 mem.ion[.HEAP] (the heap's total after
 *                                 the change), mem.ion_change[.HEAP] per
 *                                 thread, ion_stat's buffers as slices
 *                                 on mem.ion_buffer
 *   dma_heap_stat                 mem.dma_heap, mem.dma_heap_change per
 *                                 thread (arg inode), buffers as slices
 *                                 on mem.dma_buffer
 *
 * rss_stat is emitted by whichever thread changes an mm, which need not be
 * the mm's owner: with curr = 1 the mm is the emitting thread's own and
 * mm_id is remembered as that thread's; with curr = 0 the value belongs to
 * the thread mm_id was last seen with, if that thread is still alive (else
 * the mm was freed and reused: the value is dropped and counted in
 * rss_stat_unknown_thread_for_mm_id).  Events without mm_id (old kernels)
 * go to the emitting thread.
 *
 * The per-process counters are written at once but get their track when
 * the parse is over, as Perfetto resolves them (tp_memevents.h): the
 * process of the thread as known at the end of the trace, else a
 * per-thread fallback track.
 */
#include "tp_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_compress.h"
#include "tp_ctx.h"
#include "tp_memevents.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_stats.h"
#include "tp_tracks.h"
#include "u64map.h"
#include "vp_alloc.h"

struct tp_memory {
	struct u64map mm_owner; /* machine << 32 | mm_id -> utid + 1 (0: none) */
};

struct tp_memory *tp_memory_new(void)
{
	struct tp_memory *m = vp_xcalloc(1, sizeof(*m));
	u64map_init(&m->mm_owner);
	return m;
}

void tp_memory_free(struct tp_memory *m)
{
	if (!m)
		return;
	u64map_free(&m->mm_owner);
	free(m);
}

/* ---- decoding ------------------------------------------------------------ */

/* The fields 1..7 of a payload (all these events have fewer); the last
 * occurrence of a field wins. */
#define NF 8
struct fields {
	bool has[NF];
	uint64_t v[NF];        /* varints */
	const uint8_t *s[NF];  /* strings */
	size_t len[NF];
};

static void fields_decode(struct fields *f, const uint8_t *p, size_t n)
{
	struct pb_reader r;
	struct pb_field g;
	memset(f, 0, sizeof(*f));
	pb_reader_init(&r, p, n);
	while (pb_next(&r, &g)) {
		if (g.num >= NF)
			continue;
		if (g.wt == PB_WT_VARINT) {
			f->has[g.num] = true;
			f->v[g.num] = g.val;
			f->s[g.num] = NULL;
		} else if (g.wt == PB_WT_LEN) {
			f->has[g.num] = true;
			f->s[g.num] = g.data;
			f->len[g.num] = g.len;
		}
	}
}

/* ---- process counters of a thread ---------------------------------------- */

static void push_process_counter(struct tp_ctx *ctx, int64_t ts, double v,
				 uint32_t utid, const char *key)
{
	/* the track process_stats' memory counters use too */
	tp_process_memory_for_thread(ctx, utid, key, ts, v);
}

/* Perfetto's ProcessTracker::IsThreadAlive: not ended, its process not
 * ended, and its pid not taken by a newer process. */
static bool thread_alive(struct tp_ctx *ctx, uint32_t machine, uint32_t utid)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD);
	struct tp_table *pt = tp_tab(ctx, TP_T_PROCESS);
	if (utid >= t->nrows || !tp_is_null(t, TP_THREAD_end_ts, utid))
		return false;
	if (tp_is_null(t, TP_THREAD_upid, utid))
		return true;
	uint32_t upid = (uint32_t)tp_get_int(t, TP_THREAD_upid, utid), cur;
	if (!tp_is_null(pt, TP_PROCESS_end_ts, upid))
		return false;
	int64_t pid = tp_get_int(pt, TP_PROCESS_pid, upid);
	return !tp_process_find(ctx, machine, pid, &cur) || cur == upid;
}

/* The thread an rss_stat with mm_id belongs to; false when unknown. */
static bool mm_thread(struct tp_ctx *ctx, uint32_t machine, int64_t pid,
		      uint32_t mm_id, bool curr, uint32_t *utid)
{
	struct tp_memory *m = ctx->memory;
	uint64_t key = (uint64_t)machine << 32 | mm_id, v;
	if (curr) {
		*utid = tp_thread_get(ctx, machine, pid);
		u64map_put(&m->mm_owner, key, (uint64_t)*utid + 1);
		return true;
	}
	if (!u64map_get(&m->mm_owner, key, &v) || v == 0)
		return false;
	if (!thread_alive(ctx, machine, (uint32_t)(v - 1))) {
		/* the mm was freed: forget it until a curr event claims it */
		u64map_put(&m->mm_owner, key, 0);
		return false;
	}
	*utid = (uint32_t)(v - 1);
	return true;
}

static const char *rss_key(int32_t member)
{
	static const char *const keys[] = {
		"rss.file", "rss.anon", "swap", "rss.shmem", "unreclaimable",
	};
	return member >= 0 && member < 5 ? keys[member] : "unknown";
}

static void rss_stat(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t pid, int32_t member, int64_t size, bool has_curr,
		     bool curr, bool has_mm, uint32_t mm_id)
{
	uint32_t utid;
	if (size < 0) {
		tp_stat_inc(ctx, "rss_stat_negative_size");
		return;
	}
	if (has_mm && has_curr) {
		if (!mm_thread(ctx, machine, pid, mm_id, curr, &utid)) {
			tp_stat_inc(ctx, "rss_stat_unknown_thread_for_mm_id");
			return;
		}
	} else {
		utid = tp_thread_get(ctx, machine, pid);
	}
	push_process_counter(ctx, ts, (double)size, utid, rss_key(member));
}

/* ---- ion and dma heaps ---------------------------------------------------- */

/* mem.<base>[.heap]; the heap only when named. */
static tp_str heap_name(struct tp_ctx *ctx, const char *base,
			const uint8_t *heap, size_t len)
{
	char buf[300];
	if (heap && len)
		snprintf(buf, sizeof(buf), "%s.%.*s", base,
			 (int)(len > 255 ? 255 : len), (const char *)heap);
	else
		snprintf(buf, sizeof(buf), "%s", base);
	return tp_s(ctx, buf);
}

/* The global counter of a heap (ion: dimension heap_name). */
static uint32_t heap_track(struct tp_ctx *ctx, uint32_t machine,
			   const char *type, tp_str name, tp_str heap)
{
	struct tp_track_spec s;
	struct tp_args_builder b;
	tp_track_spec_init(&s, machine);
	s.name = name;
	s.type = tp_s(ctx, type);
	s.event_type = tp_s(ctx, "counter");
	tp_args_builder_init(&b);
	if (heap) {
		tp_str k = tp_s(ctx, "heap_name");
		tp_args_add_str(&b, k, k, heap);
	}
	s.dimension_arg_set_id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return tp_track_intern(ctx, &s);
}

/* The per-thread change counter of a heap. */
static uint32_t change_track(struct tp_ctx *ctx, uint32_t machine,
			     const char *type, tp_str name, tp_str heap,
			     uint32_t utid)
{
	struct tp_track_spec s;
	struct tp_args_builder b;
	tp_track_spec_init(&s, machine);
	s.name = name;
	s.type = tp_s(ctx, type);
	s.event_type = tp_s(ctx, "counter");
	s.utid = utid;
	tp_args_builder_init(&b);
	if (heap) {
		tp_str k = tp_s(ctx, "heap_name");
		tp_args_add_str(&b, k, k, heap);
	}
	tp_str k = tp_s(ctx, "utid");
	tp_args_add_int(&b, k, k, utid);
	s.dimension_arg_set_id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return tp_track_intern(ctx, &s);
}

static void ion_heap_change(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			    int64_t pid, const struct fields *f, bool grow)
{
	/* total_allocated is the heap's size before the change */
	int64_t change = (int64_t)f->v[IHG_LEN] * (grow ? 1 : -1);
	int64_t total = (int64_t)f->v[IHG_TOTAL_ALLOCATED] + change;
	const uint8_t *h = f->s[IHG_HEAP_NAME];
	size_t hl = f->len[IHG_HEAP_NAME];
	/* an unnamed heap is "unknown" */
	if (!f->has[IHG_HEAP_NAME] || !h) {
		h = (const uint8_t *)"unknown";
		hl = 7;
	}
	tp_str heap = tp_intern(ctx->pool, (const char *)h, hl);
	tp_counter_add(ctx,
		       heap_track(ctx, machine, "ion",
				  heap_name(ctx, "mem.ion", h, hl), heap),
		       ts, (double)total, -1);
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	tp_counter_add(ctx,
		       change_track(ctx, machine, "ion_change",
				    heap_name(ctx, "mem.ion_change", h, hl),
				    heap, utid),
		       ts, (double)change, -1);
}

/* A buffer's life as a slice on a shared set of tracks: from the event
 * with len > 0 to the one with len 0 (the same cookie). */
static void buffer_slice(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			 const char *type, const char *name, int64_t cookie,
			 int64_t len)
{
	struct tp_track_spec s;
	tp_track_spec_init(&s, machine);
	s.type = tp_s(ctx, type);
	s.name = tp_s(ctx, name);
	if (len > 0) {
		char buf[32];
		snprintf(buf, sizeof(buf), "%lld kB", (long long)(len / 1024));
		uint32_t t = tp_compress_track(ctx, &s, NULL,
					       TP_COMPRESS_BEGIN, cookie);
		tp_slice_begin(ctx, t, ts, 0, tp_s(ctx, buf), -1);
	} else {
		uint32_t t = tp_compress_track(ctx, &s, NULL,
					       TP_COMPRESS_END, cookie);
		tp_slice_end(ctx, t, ts, 0, 0, -1);
	}
}

static void ion_stat(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t pid, const struct fields *f)
{
	int64_t len = (int64_t)f->v[IS_LEN];
	tp_counter_add(ctx,
		       heap_track(ctx, machine, "ion", tp_s(ctx, "mem.ion"), 0),
		       ts, (double)f->v[IS_TOTAL_ALLOCATED], -1);
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	tp_counter_add(ctx,
		       change_track(ctx, machine, "ion_change",
				    tp_s(ctx, "mem.ion_change"), 0, utid),
		       ts, (double)len, -1);
	buffer_slice(ctx, ts, machine, "android_ion_allocations",
		     "mem.ion_buffer", (int64_t)(uint32_t)f->v[IS_BUFFER_ID],
		     len);
}

static void dma_heap_stat(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			  int64_t pid, const struct fields *f)
{
	int64_t len = (int64_t)f->v[DHS_LEN];
	struct tp_track_spec s;
	tp_track_spec_init(&s, machine);
	s.name = tp_s(ctx, "mem.dma_heap");
	s.type = tp_s(ctx, "android_dma_heap");
	s.event_type = tp_s(ctx, "counter");
	tp_counter_add(ctx, tp_track_intern(ctx, &s), ts,
		       (double)f->v[DHS_TOTAL_ALLOCATED], -1);

	uint32_t utid = tp_thread_get(ctx, machine, pid);
	struct tp_args_builder b;
	tp_args_builder_init(&b);
	tp_str k = tp_s(ctx, "inode");
	tp_args_add_uint(&b, k, k, f->v[DHS_INODE]);
	int64_t args = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	tp_counter_add(ctx,
		       change_track(ctx, machine, "android_dma_heap_change",
				    tp_s(ctx, "mem.dma_heap_change"), 0, utid),
		       ts, (double)len, args);
	buffer_slice(ctx, ts, machine, "android_dma_allocations",
		     "mem.dma_buffer", (int64_t)f->v[DHS_INODE], len);
}

/* ---- entry points ----------------------------------------------------------- */

bool tp_memory_ftrace(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t pid, uint32_t id, const uint8_t *data,
		      size_t len)
{
	struct fields f;
	switch (id) {
	case FE_RSS_STAT:
		fields_decode(&f, data, len);
		rss_stat(ctx, ts, machine, pid, (int32_t)f.v[RSS_MEMBER],
			 (int64_t)f.v[RSS_SIZE], f.has[RSS_CURR],
			 f.v[RSS_CURR] != 0, f.has[RSS_MM_ID],
			 (uint32_t)f.v[RSS_MM_ID]);
		return true;
	case FE_RSS_STAT_THROTTLED:
		/* always from a kernel that knows mm_id */
		fields_decode(&f, data, len);
		rss_stat(ctx, ts, machine, pid, (int32_t)f.v[RSST_MEMBER],
			 (int64_t)f.v[RSST_SIZE], true, f.v[RSST_CURR] != 0,
			 true, (uint32_t)f.v[RSST_MM_ID]);
		return true;
	case FE_DMABUF_RSS_STAT:
		fields_decode(&f, data, len);
		push_process_counter(ctx, ts, (double)f.v[DRS_RSS],
				     tp_thread_get(ctx, machine, pid),
				     "dmabuf_rss");
		return true;
	case FE_ION_HEAP_GROW:
	case FE_ION_HEAP_SHRINK:
		/* both payloads number their fields alike (checked below) */
		fields_decode(&f, data, len);
		ion_heap_change(ctx, ts, machine, pid, &f,
				id == FE_ION_HEAP_GROW);
		return true;
	case FE_ION_STAT:
		fields_decode(&f, data, len);
		ion_stat(ctx, ts, machine, pid, &f);
		return true;
	case FE_DMA_HEAP_STAT:
		fields_decode(&f, data, len);
		dma_heap_stat(ctx, ts, machine, pid, &f);
		return true;
	default:
		return false;
	}
}

_Static_assert(IHG_HEAP_NAME == IHS_HEAP_NAME && IHG_LEN == IHS_LEN &&
		       IHG_TOTAL_ALLOCATED == IHS_TOTAL_ALLOCATED,
	       "ion_heap_grow and ion_heap_shrink number their fields alike");
_Static_assert(RSS_MM_ID < NF && RSST_SIZE < NF && IHG_TOTAL_ALLOCATED < NF &&
		       IS_TOTAL_ALLOCATED < NF && DHS_TOTAL_ALLOCATED < NF &&
		       DRS_RSS < NF,
	       "fields_decode keeps the fields these events use");
