/*
 * process_probe.c - the linux.process_stats data source: processes and
 * threads from /proc, as Perfetto's traced_probes writes them.
 *
 * ProcessStatsConfig (DataSourceConfig field 103), with Perfetto's rules:
 *   scan_all_processes_on_start  at start, one ProcessTree of every
 *                                process and thread in /proc
 *   record_thread_names          threads carry their name (comm)
 *   proc_stats_poll_ms           every period (at least 100 ms), a
 *                                ProcessStats packet with the memory
 *                                counters of /proc/PID/status and
 *                                oom_score_adj of each process that has
 *                                them, then a ProcessTree of the processes
 *                                not described before
 *   proc_stats_cache_ttl_ms      a counter is written only when it changed
 *                                since it was last written; the memory of
 *                                what was written is dropped every
 *                                max(1, ttl / poll) polls (so with no ttl
 *                                every poll writes every counter)
 * Processes without memory counters (kernel threads) are not polled again.
 * Processes that vanish during a scan are skipped silently.
 *
 * The scans run on a thread per started instance (procfs_poll.h); on_stop
 * joins it, so nothing is written after on_stop returns.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "probes.h"
#include "procfs_parse.h"
#include "procfs_poll.h"
#include "u64map.h"
#include "vperfetto/vperfetto.h"
#include "vp_log.h"
#include "vp_alloc.h"

/* ProcessStats.Process's vm_size_kb .. vm_hwm_kb are fields in a row, in
 * the order of enum procfs_mem. */
_Static_assert(PSP_VM_HWM_KB - PSP_VM_SIZE_KB + 1 == PROCFS_MEM_COUNT,
	       "ProcessStats.Process follows enum procfs_mem");

#define MIN_POLL_MS 100
/* Start another packet once a ProcessTree body is this large. */
#define TREE_PACKET_SPLIT (64 * 1024)
/* Caps on what is read per process. */
#define STATUS_MAX (64 * 1024)
#define CMDLINE_MAX (128 * 1024)

/* What was last written for one process: the memory counters then
 * oom_score_adj. */
#define NCACHED (PROCFS_MEM_COUNT + 1)
struct cached_stats {
	int64_t v[NCACHED];
	uint32_t valid; /* bit i: v[i] was written */
};

struct ps_config {
	bool scan_all;
	bool thread_names;
	uint32_t poll_ms;
	uint32_t cache_ttl_ms;
};

struct ps_inst {
	struct vp_ds_instance *inst;
	struct ps_config cfg;

	/* Used by the polling thread only. */
	struct u64map seen;      /* pids and tids in a ProcessTree */
	struct u64map skip;      /* pids without memory counters */
	struct u64map cache_idx; /* pid -> index into cache */
	struct cached_stats *cache;
	size_t ncache, capcache;
	uint32_t ttl_ticks, cache_ticks;
	struct procfs_buf status, cmdline, small;
	struct pb_buf pkt;
	/* The ProcessTree being built (tree_open) and its bookmarks. */
	bool tree_open;
	size_t tree_bm;
	int32_t *pids;
	size_t npids, cappids;
};

/* ---- config ----------------------------------------------------------- */

static int parse_ps_config(const uint8_t *cfg, size_t len,
			   struct ps_config *out)
{
	struct pb_reader r, r2;
	struct pb_field f, g;

	memset(out, 0, sizeof(*out));
	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f)) {
		if (f.num != DSC_PROCESS_STATS_CONFIG || f.wt != PB_WT_LEN)
			continue;
		pb_reader_init(&r2, f.data, f.len);
		while (pb_next(&r2, &g)) {
			if (g.wt != PB_WT_VARINT)
				continue;
			switch (g.num) {
			case PSC_SCAN_ALL_PROCESSES_ON_START:
				out->scan_all = g.val != 0;
				break;
			case PSC_RECORD_THREAD_NAMES:
				out->thread_names = g.val != 0;
				break;
			case PSC_PROC_STATS_POLL_MS:
				out->poll_ms = (uint32_t)g.val;
				break;
			case PSC_PROC_STATS_CACHE_TTL_MS:
				out->cache_ttl_ms = (uint32_t)g.val;
				break;
			default:
				break;
			}
		}
		if (r2.err != PB_OK) {
			vp_log_warn("linux.process_stats: "
				"malformed ProcessStatsConfig at byte %zu: %s\n",
				r2.err_off, pb_err_str(r2.err));
			return -1;
		}
	}
	if (r.err != PB_OK) {
		vp_log_warn("linux.process_stats: malformed "
			"DataSourceConfig at byte %zu: %s\n", r.err_off,
			pb_err_str(r.err));
		return -1;
	}
	if (out->poll_ms > 0 && out->poll_ms < MIN_POLL_MS)
		out->poll_ms = MIN_POLL_MS; /* Perfetto's minimum */
	return 0;
}

/* ---- /proc helpers ---------------------------------------------------- */

/* The next numeric entry of a /proc directory, or 0 at the end. */
static int32_t next_pid(DIR *d)
{
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		uint64_t v;
		if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
			continue;
		if (procfs_parse_u64(e->d_name, strlen(e->d_name), &v) &&
		    v > 0 && v <= INT32_MAX && e->d_name[0] != ' ')
			return (int32_t)v;
	}
	return 0;
}

/* Reads /proc/<dir>/<file> into b; false if the process is gone. */
static bool read_proc(const char *dir, const char *file,
		      struct procfs_buf *b, size_t max)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%s/%s", dir, file);
	return procfs_read_file(path, b, max) == 0;
}

/* ---- ProcessTree ------------------------------------------------------ */

/* Writes the packet in s->pkt.  The first one on the writer's sequence
 * (and the first after incremental state was cleared) says
 * incremental_state_cleared, as traced_probes' process_stats does: what
 * this source remembers (the processes already described) starts over
 * there. */
static void write_packet(struct ps_inst *s)
{
	if (vp_ds_first_packet_on_sequence(s->inst))
		pb_put_varint(&s->pkt, TP_INCREMENTAL_STATE_CLEARED, 1);
	vp_ds_write_packet(s->inst, s->pkt.data, s->pkt.len);
}

static void tree_begin(struct ps_inst *s)
{
	if (s->tree_open)
		return;
	pb_buf_reset(&s->pkt);
	pb_put_varint(&s->pkt, TP_TIMESTAMP, vp_now_ns());
	s->tree_bm = pb_begin_nested(&s->pkt, TP_PROCESS_TREE);
	s->tree_open = true;
}

static void tree_end(struct ps_inst *s)
{
	if (!s->tree_open)
		return;
	pb_put_varint(&s->pkt, PT_COLLECTION_END_TIMESTAMP, vp_now_ns());
	pb_end_nested(&s->pkt, s->tree_bm);
	write_packet(s);
	s->tree_open = false;
}

static void tree_maybe_split(struct ps_inst *s)
{
	if (s->tree_open && s->pkt.len > TREE_PACKET_SPLIT)
		tree_end(s);
}

/* A Process entry for tgid, whose status st has been parsed. */
static void write_process(struct ps_inst *s, int32_t tgid,
			  const struct procfs_status *st)
{
	char dir[16];
	bool any = false;

	tree_begin(s);
	size_t bm = pb_begin_nested(&s->pkt, PT_PROCESSES);
	pb_put_varint(&s->pkt, PTP_PID, (uint64_t)(int64_t)tgid);
	pb_put_varint(&s->pkt, PTP_PPID, (uint64_t)(int64_t)st->ppid);
	snprintf(dir, sizeof(dir), "%d", tgid);
	if (read_proc(dir, "cmdline", &s->cmdline, CMDLINE_MAX)) {
		size_t pos = 0, n;
		const char *a;
		while (procfs_cmdline_next(s->cmdline.data, s->cmdline.len,
					   &pos, &a, &n)) {
			pb_put_bytes(&s->pkt, PTP_CMDLINE, a, n);
			any = true;
		}
	}
	if (!any) {
		/* Kernel threads and zombies: the comm stands in. */
		pb_put_string(&s->pkt, PTP_CMDLINE, st->name);
		pb_put_varint(&s->pkt, PTP_CMDLINE_IS_COMM, 1);
	}
	if (st->has_uid)
		pb_put_varint(&s->pkt, PTP_UID, st->uid);
	pb_end_nested(&s->pkt, bm);
	u64map_put(&s->seen, (uint64_t)tgid, 1);
}

static void write_thread(struct ps_inst *s, int32_t tid, int32_t tgid,
			 const struct procfs_status *st)
{
	tree_begin(s);
	size_t bm = pb_begin_nested(&s->pkt, PT_THREADS);
	pb_put_varint(&s->pkt, PTT_TID, (uint64_t)(int64_t)tid);
	pb_put_varint(&s->pkt, PTT_TGID, (uint64_t)(int64_t)tgid);
	if (s->cfg.thread_names && st->has_name)
		pb_put_string(&s->pkt, PTT_NAME, st->name);
	pb_end_nested(&s->pkt, bm);
	u64map_put(&s->seen, (uint64_t)tid, 1);
}

static bool seen(struct ps_inst *s, int32_t pid)
{
	uint64_t v;
	return u64map_get(&s->seen, (uint64_t)pid, &v);
}

/* Describes the process or thread whose /proc directory is dir (a pid, or
 * "pid/task/tid" for threads) and id is pid / tid. */
static void write_process_or_thread(struct ps_inst *s, const char *dir,
				    int32_t id)
{
	struct procfs_status st;

	if (!read_proc(dir, "status", &s->status, STATUS_MAX))
		return; /* gone */
	procfs_parse_status(s->status.data, s->status.len, &st);
	if (!st.has_tgid || st.tgid <= 0)
		return;
	if (!seen(s, st.tgid)) {
		if (st.tgid == id) {
			write_process(s, st.tgid, &st);
		} else {
			/* A thread first: describe its process from the
			 * process's own status. */
			struct procfs_status pst;
			char pdir[16];
			snprintf(pdir, sizeof(pdir), "%d", st.tgid);
			if (read_proc(pdir, "status", &s->small, STATUS_MAX)) {
				procfs_parse_status(s->small.data,
						    s->small.len, &pst);
				write_process(s, st.tgid, &pst);
			}
		}
	}
	if (id != st.tgid && !seen(s, id))
		write_thread(s, id, st.tgid, &st);
	tree_maybe_split(s);
}

/* scan_all_processes_on_start: every process and thread. */
static void write_all_processes(struct ps_inst *s, struct procfs_poller *p)
{
	DIR *proc = opendir("/proc");
	int32_t pid;

	if (!proc) {
		vp_log_warn("linux.process_stats: cannot "
			"open /proc: %s\n", strerror(errno));
		return;
	}
	while ((pid = next_pid(proc)) != 0 && !procfs_poll_stopping(p)) {
		char dir[64];
		snprintf(dir, sizeof(dir), "%d", pid);
		write_process_or_thread(s, dir, pid);
		snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
		DIR *task = opendir(dir);
		if (!task)
			continue; /* gone */
		int32_t tid;
		while ((tid = next_pid(task)) != 0) {
			if (tid == pid)
				continue;
			snprintf(dir, sizeof(dir), "%d/task/%d", pid, tid);
			write_process_or_thread(s, dir, tid);
		}
		closedir(task);
	}
	closedir(proc);
	tree_end(s);
}

/* ---- ProcessStats ----------------------------------------------------- */

static struct cached_stats *cache_of(struct ps_inst *s, int32_t pid)
{
	uint64_t idx;
	if (u64map_get(&s->cache_idx, (uint64_t)pid, &idx))
		return &s->cache[idx];
	if (s->ncache == s->capcache) {
		size_t ncap = s->capcache ? s->capcache * 2 : 256;
		struct cached_stats *n = vp_xrealloc(s->cache, ncap * sizeof(*n));
		s->cache = n;
		s->capcache = ncap;
	}
	memset(&s->cache[s->ncache], 0, sizeof(s->cache[0]));
	u64map_put(&s->cache_idx, (uint64_t)pid, s->ncache);
	return &s->cache[s->ncache++];
}

/* True if value i of c should be written (and records it). */
static bool changed(struct cached_stats *c, unsigned i, int64_t v)
{
	if ((c->valid >> i & 1) && c->v[i] == v)
		return false;
	c->v[i] = v;
	c->valid |= 1u << i;
	return true;
}

static void remember_pid(struct ps_inst *s, int32_t pid)
{
	if (s->npids == s->cappids) {
		size_t ncap = s->cappids ? s->cappids * 2 : 256;
		int32_t *n = vp_xrealloc(s->pids, ncap * sizeof(*n));
		s->pids = n;
		s->cappids = ncap;
	}
	s->pids[s->npids++] = pid;
}

/* The counters of one process into the ProcessStats being built; returns
 * false for a process without memory counters (or gone). */
static bool stats_one(struct ps_inst *s, int32_t pid)
{
	struct procfs_status st;
	char dir[16];
	int64_t oom;

	snprintf(dir, sizeof(dir), "%d", pid);
	if (!read_proc(dir, "status", &s->status, STATUS_MAX))
		return true; /* gone: not a kernel thread */
	procfs_parse_status(s->status.data, s->status.len, &st);
	if (!st.mem_present)
		return false;
	struct cached_stats *c = cache_of(s, pid);
	size_t bm = 0;
	bool open = false;
	for (unsigned i = 0; i < PROCFS_MEM_COUNT; i++) {
		if (!(st.mem_present >> i & 1) ||
		    !changed(c, i, (int64_t)st.mem_kb[i]))
			continue;
		if (!open) {
			bm = pb_begin_nested(&s->pkt, PS_PROCESSES);
			pb_put_varint(&s->pkt, PSP_PID, (uint64_t)(int64_t)pid);
			open = true;
		}
		pb_put_varint(&s->pkt, PSP_VM_SIZE_KB + i, st.mem_kb[i]);
	}
	if (read_proc(dir, "oom_score_adj", &s->small, 64) &&
	    procfs_parse_i64(s->small.data, s->small.len, &oom) &&
	    changed(c, PROCFS_MEM_COUNT, oom)) {
		if (!open) {
			bm = pb_begin_nested(&s->pkt, PS_PROCESSES);
			pb_put_varint(&s->pkt, PSP_PID, (uint64_t)(int64_t)pid);
			open = true;
		}
		pb_put_varint(&s->pkt, PSP_OOM_SCORE_ADJ, (uint64_t)oom);
	}
	if (open)
		pb_end_nested(&s->pkt, bm);
	remember_pid(s, pid);
	return true;
}

/* One poll: ProcessStats of every process, then the processes not
 * described before. */
static void poll_stats(struct ps_inst *s, struct procfs_poller *p)
{
	DIR *proc = opendir("/proc");
	int32_t pid;
	uint64_t v;

	if (!proc) {
		vp_log_warn("linux.process_stats: cannot "
			"open /proc: %s\n", strerror(errno));
		return;
	}
	s->npids = 0;
	pb_buf_reset(&s->pkt);
	pb_put_varint(&s->pkt, TP_TIMESTAMP, vp_now_ns());
	size_t bm = pb_begin_nested(&s->pkt, TP_PROCESS_STATS);
	size_t empty_len = s->pkt.len;
	while ((pid = next_pid(proc)) != 0 && !procfs_poll_stopping(p)) {
		if (u64map_get(&s->skip, (uint64_t)pid, &v))
			continue;
		if (!stats_one(s, pid))
			u64map_put(&s->skip, (uint64_t)pid, 1);
	}
	closedir(proc);
	bool any = s->pkt.len != empty_len;
	pb_put_varint(&s->pkt, PS_COLLECTION_END_TIMESTAMP, vp_now_ns());
	pb_end_nested(&s->pkt, bm);
	if (any)
		write_packet(s);

	/* Long-lived facts (cmdline, parent) of processes new to us. */
	for (size_t i = 0; i < s->npids && !procfs_poll_stopping(p); i++) {
		char dir[16];
		if (seen(s, s->pids[i]))
			continue;
		snprintf(dir, sizeof(dir), "%d", s->pids[i]);
		write_process_or_thread(s, dir, s->pids[i]);
	}
	tree_end(s);

	if (++s->cache_ticks >= s->ttl_ticks) {
		s->cache_ticks = 0;
		u64map_clear(&s->cache_idx);
		s->ncache = 0;
	}
}

/* ---- the instance thread ---------------------------------------------- */

static void ps_thread(void *arg, struct procfs_poller *p)
{
	struct ps_inst *s = arg;

	if (s->cfg.scan_all) {
		write_all_processes(s, p);
		vp_ds_flush(s->inst);
	}
	if (!s->cfg.poll_ms)
		return;
	uint64_t period = (uint64_t)s->cfg.poll_ms * 1000000ull;
	uint64_t next = procfs_mono_ns();
	do {
		poll_stats(s, p);
		vp_ds_flush(s->inst);
		next += period;
		uint64_t now = procfs_mono_ns();
		if (next < now) /* fell behind: skip the missed polls */
			next = now + period - (now - next) % period;
	} while (procfs_poll_sleep_until(p, next));
}

static void ps_inst_free(void *state)
{
	struct ps_inst *s = state;

	u64map_free(&s->seen);
	u64map_free(&s->skip);
	u64map_free(&s->cache_idx);
	free(s->cache);
	free(s->pids);
	procfs_buf_free(&s->status);
	procfs_buf_free(&s->cmdline);
	procfs_buf_free(&s->small);
	pb_buf_free(&s->pkt);
	free(s);
}

/* ---- callbacks -------------------------------------------------------- */

static void *ps_create(const struct procfs_source *src,
		       struct vp_ds_instance *inst, const uint8_t *config,
		       size_t len)
{
	struct ps_config cfg;

	(void)src; /* one kind of source; the callback type takes it */
	if (parse_ps_config(config, len, &cfg) != 0)
		return NULL;
	if (!cfg.scan_all && !cfg.poll_ms) {
		/* Perfetto dumps on demand for pids other data sources see;
		 * with neither option there is nothing to do here. */
		vp_log_info("linux.process_stats: "
				"neither scan_all_processes_on_start nor "
				"proc_stats_poll_ms: nothing to record\n");
		return NULL;
	}
	struct ps_inst *s = calloc(1, sizeof(*s));
	if (!s) {
		vp_log_warn("linux.process_stats: out of "
			"memory\n");
		return NULL;
	}
	s->inst = inst;
	s->cfg = cfg;
	u64map_init(&s->seen);
	u64map_init(&s->skip);
	u64map_init(&s->cache_idx);
	pb_buf_init(&s->pkt);
	s->ttl_ticks = 1;
	if (cfg.poll_ms && cfg.cache_ttl_ms / cfg.poll_ms > 1)
		s->ttl_ticks = cfg.cache_ttl_ms / cfg.poll_ms;
	return s;
}

static void ps_describe(void *state)
{
	struct ps_inst *s = state;

	vp_log_info("linux.process_stats started "
		"(scan_all %d, thread names %d, poll %u ms, ttl %u polls)\n",
		s->cfg.scan_all, s->cfg.thread_names, s->cfg.poll_ms,
		s->ttl_ticks);
}

static struct procfs_source g_ps = {
	.name = "linux.process_stats",
	.thread_name = "vp_procstats",
	.create = ps_create,
	.poll = ps_thread,
	.destroy = ps_inst_free,
	.describe = ps_describe,
	PROCFS_SOURCE_INIT,
};

int process_probe_register(const struct probes_options *opt)
{
	(void)opt;
	return procfs_source_register(&g_ps);
}
