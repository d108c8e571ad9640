/*
 * tp_process.c - process_tree and process_stats packets, as Perfetto's
 * SystemProbesParser handles them.
 *
 * Both are pushed to the sorter with the packet's timestamp and parsed in
 * timestamp order: process_tree names processes (argv0, the joined cmdline,
 * uid, start time) and binds threads to them; process_stats adds the
 * per-process memory counters (mem.rss, mem.virt ...) and binds the
 * threads it lists.
 */
#include <stdlib.h>
#include <string.h>

#include "tp_args.h"
#include "tp_clock.h"
#include "tp_memevents.h"
#include "tp_process.h"
#include "tp_procs.h"
#include "tp_sort.h"
#include "perfetto_fields.h"
#include "tp_stats.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

#define KTHREADD_PID 2

struct proc_hdr {
	uint32_t machine;
};


/* ---- process_tree ----------------------------------------------------- */

struct cmdline {
	char *buf;
	size_t len, cap;
	const uint8_t *argv0;
	size_t argv0_len;
	unsigned nargs;
};

static void cmdline_add(struct cmdline *c, const uint8_t *p, size_t n)
{
	if (c->len + n + 2 > c->cap) {
		c->cap = (c->len + n + 2) * 2;
		c->buf = vp_xrealloc(c->buf, c->cap);
	}
	if (c->nargs++)
		c->buf[c->len++] = ' ';
	else {
		c->argv0 = p;
		c->argv0_len = n;
	}
	memcpy(c->buf + c->len, p, n);
	c->len += n;
}

static size_t find_from(const uint8_t *p, size_t n, size_t from, char ch)
{
	for (size_t i = from; i < n; i++)
		if (p[i] == ch)
			return i;
	return n;
}

/* The length of a kworker's name without the workqueue the kernel appends
 * to it when it is read from procfs (kworker/45:2-mm_percpu_wq is worker
 * kworker/45:2 that last ran work of mm_percpu_wq, a transient detail);
 * len for any other name. */
static size_t kworker_len(const uint8_t *name, size_t len)
{
	if (len < 8 || memcmp(name, "kworker/", 8) != 0)
		return len;
	size_t a = find_from(name, len, 8, '+');
	size_t b = find_from(name, len, 8, '-');
	return a < b ? a : b;
}

/* The pids of kthreadd's children in one process_tree packet: their main
 * threads' names drop the workqueue too. */
struct kthreads {
	int64_t *pids;
	size_t n, cap;
};

static void kthreads_add(struct kthreads *k, int64_t pid)
{
	if (k->n == k->cap) {
		k->cap = k->cap ? k->cap * 2 : 16;
		k->pids = vp_xrealloc(k->pids, k->cap * sizeof *k->pids);
	}
	k->pids[k->n++] = pid;
}

static bool kthreads_has(const struct kthreads *k, int64_t pid)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->pids[i] == pid)
			return true;
	return false;
}

static void tree_process(struct tp_ctx *ctx, uint32_t machine,
			 struct kthreads *kt, const uint8_t *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	struct cmdline c;
	int64_t pid = 0, ppid = 0;
	bool has_uid = false, has_start = false, is_comm = false;
	bool has_kthread = false, is_kthread = false;
	uint64_t uid = 0, start = 0;

	memset(&c, 0, sizeof c);
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case PT_PROC_PID:
			pid = (int32_t)(uint32_t)f.val;
			break;
		case PT_PROC_PPID:
			ppid = (int32_t)(uint32_t)f.val;
			break;
		case PTP_CMDLINE:
			if (f.wt == PB_WT_LEN)
				cmdline_add(&c, f.data, f.len);
			break;
		case PTP_UID:
			uid = f.val;
			has_uid = true;
			break;
		case PTP_PROCESS_START_FROM_BOOT:
			start = f.val;
			has_start = true;
			break;
		case PTP_CMDLINE_IS_COMM:
			is_comm = f.val != 0;
			break;
		case PTP_IS_KTHREAD:
			has_kthread = true;
			is_kthread = f.val != 0;
			break;
		default:
			break;
		}
	}
	if (!c.nargs) {
		free(c.buf);
		return;
	}

	const uint8_t *argv0 = c.argv0;
	size_t argv0_len = c.argv0_len;
	const char *joined = c.buf;
	size_t joined_len = c.len;
	/* kworker/45:2-mm_percpu_wq: keep the worker, drop the queue. */
	if (ppid == KTHREADD_PID) {
		size_t d = kworker_len(argv0, argv0_len);
		if (d < argv0_len) {
			argv0_len = d;
			joined = (const char *)argv0;
			joined_len = d;
		}
	}
	/* One cmdline element with spaces: argv0 is its first word. */
	if (c.nargs == 1)
		argv0_len = find_from(argv0, argv0_len, 0, ' ');

	if (ppid == KTHREADD_PID)
		kthreads_add(kt, pid);
	/* Another parent than before is a reparenting, not a new process:
	 * only sched_process_free ends a pid's process. */
	uint32_t pupid = tp_process_get(ctx, machine, ppid);
	uint32_t upid = tp_process_get(ctx, machine, pid);
	struct tp_table *pt = tp_tab(ctx, TP_T_PROCESS);
	tp_process_set_parent(ctx, upid, pupid);
	tp_process_set_name_prio(ctx, upid,
				 tp_intern(ctx->pool, (const char *)argv0,
					   argv0_len),
				 TP_PNAME_SYSTEM);
	tp_process_set_cmdline(ctx, upid,
			       tp_intern(ctx->pool, joined, joined_len));
	if (is_comm) {
		uint32_t utid = tp_thread_get(ctx, machine, pid);
		tp_thread_set_name_prio(ctx, utid,
					tp_intern(ctx->pool, joined, joined_len),
					TP_NAME_PRIO_PROCESS_TREE);
	}
	if (has_uid) {
		uint32_t u = (uint32_t)uid;
		tp_set_int(pt, TP_PROCESS_uid, upid, u);
		tp_set_int(pt, TP_PROCESS_android_appid, upid, u % 100000);
		tp_set_int(pt, TP_PROCESS_android_user_id, upid, u / 100000);
	}
	if (has_start && tp_is_null(pt, TP_PROCESS_start_ts, upid)) {
		int64_t ts;
		if (tp_clock_to_trace(ctx->clocks, machine, BUILTIN_CLOCK_BOOTTIME,
				      (int64_t)start, &ts))
			tp_set_int(pt, TP_PROCESS_start_ts, upid, ts);
		else
			tp_stat_add(ctx,
				    tp_clock_failure_stat(
					    ctx->clocks, machine,
					    BUILTIN_CLOCK_BOOTTIME),
				    machine, -1, 1);
	}
	/* Linux v6.4+ says whether it is a kernel thread. */
	if (has_kthread) {
		struct tp_arg a = { 0 };
		a.flat_key = a.key = tp_s(ctx, "is_kthread");
		a.type = TP_ARG_BOOL;
		a.i = is_kthread;
		tp_process_add_arg(ctx, upid, &a);
	}
	free(c.buf);
}

static void tree_thread(struct tp_ctx *ctx, uint32_t machine,
			const struct kthreads *kt, const uint8_t *data,
			size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	int64_t tid = 0, tgid = 0;
	const uint8_t *name = NULL;
	size_t name_len = 0;
	bool has_name = false;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == PT_THREAD_TID && f.wt == PB_WT_VARINT)
			tid = (int32_t)(uint32_t)f.val;
		else if (f.num == PT_THREAD_TGID && f.wt == PB_WT_VARINT)
			tgid = (int32_t)(uint32_t)f.val;
		else if (f.num == PTT_NAME && f.wt == PB_WT_LEN) {
			name = f.data;
			name_len = f.len;
			has_name = true;
		}
	}
	uint32_t utid = tp_thread_update(ctx, machine, tid, tgid);
	if (has_name && tid == tgid && kthreads_has(kt, tid))
		name_len = kworker_len(name, name_len);
	if (has_name) {
		tp_thread_set_name_prio(ctx, utid,
					tp_intern(ctx->pool,
						  (const char *)name, name_len),
					TP_NAME_PRIO_PROCESS_TREE);
	}
}

static void parse_tree(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
		       size_t len)
{
	struct proc_hdr h;
	struct pb_reader r;
	struct pb_field f;
	struct kthreads kt = { 0 };

	(void)ts;
	if (len < sizeof h)
		return;
	memcpy(&h, p, sizeof h);
	p += sizeof h;
	len -= sizeof h;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == PT_PROCESSES && f.wt == PB_WT_LEN)
			tree_process(ctx, h.machine, &kt, f.data, f.len);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == PT_THREADS && f.wt == PB_WT_LEN)
			tree_thread(ctx, h.machine, &kt, f.data, f.len);
	free(kt.pids);
}

/* ---- process_stats ---------------------------------------------------- */

static const char *memory_key(uint32_t num)
{
	switch (num) {
	case PSP_VM_SIZE_KB:
		return "mem.virt";
	case PSP_VM_RSS_KB:
		return "mem.rss";
	case PSP_RSS_ANON_KB:
		return "mem.rss.anon";
	case PSP_RSS_FILE_KB:
		return "mem.rss.file";
	case PSP_RSS_SHMEM_KB:
		return "mem.rss.shmem";
	case PSP_VM_SWAP_KB:
		return "mem.swap";
	case PSP_VM_LOCKED_KB:
		return "mem.locked";
	case PSP_VM_HWM_KB:
		return "mem.rss.watermark";
	default:
		return NULL;
	}
}

static const char *smaps_key(uint32_t num)
{
	switch (num) {
	case PSP_SMR_RSS_KB:
		return "mem.smaps.rss";
	case PSP_SMR_PSS_KB:
		return "mem.smaps.pss";
	case PSP_SMR_PSS_ANON_KB:
		return "mem.smaps.pss.anon";
	case PSP_SMR_PSS_FILE_KB:
		return "mem.smaps.pss.file";
	case PSP_SMR_PSS_SHMEM_KB:
		return "mem.smaps.pss.shmem";
	case PSP_SMR_SWAP_PSS_KB:
		return "mem.smaps.swap.pss";
	default:
		return NULL;
	}
}

/* A process_stats counter.  Tracks of one type are told apart by a key,
 * the name without its prefix (mem.rss.file: process_memory_key
 * rss.file), as Perfetto's blueprints have them; the rss_stat ftrace
 * events share the process_memory ones. */
static void process_counter(struct tp_ctx *ctx, uint32_t machine,
			    uint32_t upid, const char *type, const char *name,
			    int64_t ts, double v)
{
	static const struct {
		const char *type, *dim, *prefix;
	} keys[] = {
		{ "process_memory", "process_memory_key", "mem." },
		{ "smaps", "smaps_key", "mem.smaps." },
		{ "proc_stat_runtime", "proc_stat_runtime_key", "runtime." },
	};
	const char *dim = NULL, *key = NULL;

	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		size_t n = strlen(keys[i].prefix);
		if (!strcmp(type, keys[i].type) &&
		    !strncmp(name, keys[i].prefix, n)) {
			dim = keys[i].dim;
			key = name + n;
		}
	}
	tp_counter_add(ctx,
		       tp_process_counter_track(ctx, machine, type, upid,
						tp_s(ctx, name), dim, key,
						NULL, NULL),
		       ts, v, -1);
}

static void stats_process(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			  const uint8_t *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	int64_t pid = 0;
	const char *k;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == PS_PROC_PID && f.wt == PB_WT_VARINT)
			pid = (int32_t)(uint32_t)f.val;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case PS_PROC_PID:
		case PSP_IS_PEAK_RSS_RESETTABLE:
		case PSP_CHROME_PRIVATE_FOOTPRINT_KB:
		case PSP_CHROME_PEAK_RESIDENT_SET_KB:
			continue;
		case PSP_THREADS: {
			struct pb_reader tr;
			struct pb_field tf;
			if (f.wt != PB_WT_LEN)
				continue;
			pb_reader_init(&tr, f.data, f.len);
			while (pb_next(&tr, &tf))
				if (tf.num == PST_TID && tf.wt == PB_WT_VARINT)
					tp_thread_update(
						ctx, machine,
						(int32_t)(uint32_t)tf.val, pid);
			continue;
		}
		case PSP_FDS:
			tp_process_get(ctx, machine, pid);
			continue;
		default:
			break;
		}
		if (f.wt != PB_WT_VARINT)
			continue;
		uint32_t upid = tp_process_get(ctx, machine, pid);
		if (f.num == PSP_OOM_SCORE_ADJ) {
			process_counter(ctx, machine, upid, "oom_score_adj",
					"oom_score_adj", ts, (double)(int64_t)f.val);
		} else if ((k = memory_key(f.num))) {
			process_counter(ctx, machine, upid, "process_memory", k,
					ts, (double)((int64_t)f.val * 1024));
		} else if ((k = smaps_key(f.num))) {
			process_counter(ctx, machine, upid, "smaps", k, ts,
					(double)((int64_t)f.val * 1024));
		} else if (f.num == PSP_RUNTIME_USER_MODE) {
			process_counter(ctx, machine, upid, "proc_stat_runtime",
					"runtime.user_ns", ts,
					(double)(int64_t)f.val);
		} else if (f.num == PSP_RUNTIME_KERNEL_MODE) {
			process_counter(ctx, machine, upid, "proc_stat_runtime",
					"runtime.kernel_ns", ts,
					(double)(int64_t)f.val);
		} else {
			tp_stat_inc(ctx, "proc_stat_unknown_counters");
		}
	}
}

static void parse_stats(struct tp_ctx *ctx, int64_t ts, const uint8_t *p,
			size_t len)
{
	struct proc_hdr h;
	struct pb_reader r;
	struct pb_field f;

	if (len < sizeof h)
		return;
	memcpy(&h, p, sizeof h);
	p += sizeof h;
	len -= sizeof h;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == PS_PROCESSES && f.wt == PB_WT_LEN)
			stats_process(ctx, ts, h.machine, f.data, f.len);
}

/* ---- entry points ----------------------------------------------------- */

void tp_process_init(struct tp_ctx *ctx)
{
	struct tp_ftrace_state *s = ctx->ftrace;

	s->kind_ptree = tp_sort_register(ctx->sorter, parse_tree);
	s->kind_pstats = tp_sort_register(ctx->sorter, parse_stats);
}

static void push(struct tp_ctx *ctx, const struct tp_packet *pkt,
		 uint8_t kind, const struct pb_field *f)
{
	struct tp_ftrace_state *s = ctx->ftrace;
	struct proc_hdr h = { pkt->machine };
	size_t need = sizeof h + f->len;

	if (need > s->scratch_cap) {
		s->scratch_cap = need * 2;
		s->scratch = vp_xrealloc(s->scratch, s->scratch_cap);
	}
	memcpy(s->scratch, &h, sizeof h);
	memcpy(s->scratch + sizeof h, f->data, f->len);
	tp_sort_push(ctx->sorter, pkt->queue, pkt->ts, kind, s->scratch, need);
}

bool tp_process_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 const struct pb_field *f)
{
	if (f->num != TP_PROCESS_TREE && f->num != TP_PROCESS_STATS)
		return false;
	if (f->wt != PB_WT_LEN)
		return true;
	push(ctx, pkt, f->num == TP_PROCESS_TREE ? ctx->ftrace->kind_ptree
						  : ctx->ftrace->kind_pstats,
	     f);
	return true;
}
