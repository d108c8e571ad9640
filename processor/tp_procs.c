/*
 * tp_procs.c - threads and processes: the thread and process tables and
 * the maps from tid / pid to the current utid / upid, per machine, with
 * Perfetto's ProcessTracker rules.
 *
 * Each machine keeps, per tid, the list of utids ever given that tid (the
 * latest alive one wins a lookup, and one whose process matches when a pid
 * is known), and per pid the current upid.  Row 0 of both tables is the
 * idle task ("swapper", tid 0 / pid 0) of machine 0; other machines get
 * theirs when the loader first sees one of their packets.  Thread names carry a priority so that a weaker
 * source (ftrace comm) never overwrites a stronger one (process tree,
 * track descriptor).
 */
#include <stdlib.h>
#include <string.h>

#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_procs.h"
#include "tp_process.h"
#include "tp_stats.h"
#include "vp_alloc.h"

/* The utids that had one tid on a machine, oldest first. */
struct tid_list {
	uint32_t *v;
	uint32_t n, cap;
};

struct proc_machine {
	bool init;
	struct u64map tids; /* tid -> index into procs.lists */
	struct u64map pids; /* pid -> upid */
};

/* Two threads known to share a process, neither bound yet. */
struct assoc {
	uint32_t a, b;
};

/* u64map has no erase: a pid mapped to this has no current process. */
#define NO_UPID 0xffffffffu

/* A process forked by a thread whose process is not known yet: its
 * parent is set once that thread is bound. */
struct parent_assoc {
	uint32_t parent_utid, child_upid;
};

struct tp_procs {
	struct proc_machine *machines;
	uint32_t nmachines;
	struct tid_list *lists;
	uint32_t nlists, caplists;
	uint8_t *name_prio; /* per utid */
	uint32_t cap_prio;
	uint8_t *pname_prio; /* per upid, TP_PNAME_* + 1 (0: no name yet) */
	uint32_t cap_pprio;
	struct assoc *pending;
	uint32_t npending, cappending;
	struct parent_assoc *parents;
	uint32_t nparents, capparents;
	struct tp_args_builder args; /* process args being merged */
};


static struct tp_table *threads(struct tp_ctx *ctx)
{
	return tp_tab(ctx, TP_T_THREAD);
}

static struct tp_table *processes(struct tp_ctx *ctx)
{
	return tp_tab(ctx, TP_T_PROCESS);
}

static void set_prio(struct tp_procs *p, uint32_t utid, uint8_t prio)
{
	if (utid >= p->cap_prio) {
		uint32_t ncap = p->cap_prio ? p->cap_prio : 64;
		while (ncap <= utid)
			ncap *= 2;
		p->name_prio = vp_xrealloc(p->name_prio, ncap);
		memset(p->name_prio + p->cap_prio, 0, ncap - p->cap_prio);
		p->cap_prio = ncap;
	}
	p->name_prio[utid] = prio;
}

static uint8_t get_prio(struct tp_procs *p, uint32_t utid)
{
	return utid < p->cap_prio ? p->name_prio[utid] : 0;
}

static struct tid_list *tid_list(struct tp_procs *p, struct proc_machine *m,
				 int64_t tid, bool create)
{
	uint64_t idx;

	if (u64map_get(&m->tids, (uint64_t)tid, &idx))
		return &p->lists[idx];
	if (!create)
		return NULL;
	if (p->nlists == p->caplists) {
		p->caplists = p->caplists ? p->caplists * 2 : 64;
		p->lists = vp_xrealloc(p->lists, p->caplists * sizeof *p->lists);
	}
	memset(&p->lists[p->nlists], 0, sizeof p->lists[0]);
	u64map_put(&m->tids, (uint64_t)tid, p->nlists);
	return &p->lists[p->nlists++];
}

static void tid_list_push(struct tid_list *l, uint32_t utid)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 2;
		l->v = vp_xrealloc(l->v, l->cap * sizeof *l->v);
	}
	l->v[l->n++] = utid;
}

static uint32_t add_process_row(struct tp_ctx *ctx, uint32_t machine,
				int64_t pid)
{
	struct tp_table *t = processes(ctx);
	uint32_t upid = tp_table_add_row(t);

	tp_set_int(t, TP_PROCESS_pid, upid, pid);
	tp_set_machine(t, TP_PROCESS_machine_id, upid, machine);
	return upid;
}

static uint32_t add_thread_row(struct tp_ctx *ctx, uint32_t machine,
			       int64_t tid)
{
	struct tp_table *t = threads(ctx);
	uint32_t utid = tp_table_add_row(t);

	tp_set_int(t, TP_THREAD_tid, utid, tid);
	tp_set_int(t, TP_THREAD_is_idle, utid, 0);
	tp_set_machine(t, TP_THREAD_machine_id, utid, machine);
	return utid;
}

/* Creates the idle thread and process of a machine (rows 0 for machine
 * 0) and maps tid 0 / pid 0 to them. */
static void init_machine(struct tp_ctx *ctx, struct tp_procs *p,
			 uint32_t machine)
{
	struct proc_machine *m = &p->machines[machine];
	struct tp_table *t = threads(ctx);
	uint32_t upid, utid;

	m->init = true;
	u64map_init(&m->tids);
	u64map_init(&m->pids);
	upid = add_process_row(ctx, machine, 0);
	utid = add_thread_row(ctx, machine, 0);
	tp_set_int(t, TP_THREAD_upid, utid, upid);
	tp_set_int(t, TP_THREAD_is_main_thread, utid, 1);
	tp_set_int(t, TP_THREAD_is_idle, utid, 1);
	tp_set_str(t, TP_THREAD_name, utid, tp_s(ctx, "swapper"));
	set_prio(p, utid, TP_NAME_PRIO_CONSTANT);
	tid_list_push(tid_list(p, m, 0, true), utid);
	u64map_put(&m->pids, 0, upid);
}

static struct proc_machine *mach(struct tp_ctx *ctx, uint32_t machine)
{
	struct tp_procs *p = ctx->procs;

	if (machine >= p->nmachines) {
		uint32_t n = machine + 1;
		p->machines = vp_xrealloc(p->machines, n * sizeof *p->machines);
		memset(p->machines + p->nmachines, 0,
		       (n - p->nmachines) * sizeof *p->machines);
		p->nmachines = n;
	}
	if (!p->machines[machine].init)
		init_machine(ctx, p, machine);
	return &p->machines[machine];
}

void tp_procs_machine_seen(struct tp_ctx *ctx, uint32_t machine)
{
	(void)mach(ctx, machine);
}

struct tp_procs *tp_procs_new(struct tp_ctx *ctx)
{
	struct tp_procs *p = vp_xcalloc(1, sizeof *p);

	p->machines = vp_xrealloc(NULL, sizeof *p->machines);
	memset(p->machines, 0, sizeof *p->machines);
	p->nmachines = 1;
	tp_args_builder_init(&p->args);
	init_machine(ctx, p, 0);
	return p;
}

void tp_procs_free(struct tp_procs *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->nmachines; i++) {
		if (!p->machines[i].init)
			continue;
		u64map_free(&p->machines[i].tids);
		u64map_free(&p->machines[i].pids);
	}
	for (uint32_t i = 0; i < p->nlists; i++)
		free(p->lists[i].v);
	free(p->lists);
	free(p->machines);
	free(p->name_prio);
	free(p->pname_prio);
	free(p->pending);
	free(p->parents);
	tp_args_builder_free(&p->args);
	free(p);
}

/* ---- lookups ---------------------------------------------------------- */

static bool thread_alive(struct tp_ctx *ctx, struct proc_machine *m,
			 uint32_t utid)
{
	struct tp_table *t = threads(ctx), *pt = processes(ctx);
	uint64_t cur;
	uint32_t upid;

	if (!tp_is_null(t, TP_THREAD_end_ts, utid))
		return false;
	if (tp_is_null(t, TP_THREAD_upid, utid))
		return true;
	upid = (uint32_t)tp_get_int(t, TP_THREAD_upid, utid);
	if (upid >= pt->nrows)
		return true;
	if (!tp_is_null(pt, TP_PROCESS_end_ts, upid))
		return false;
	if (u64map_get(&m->pids, (uint64_t)tp_get_int(pt, TP_PROCESS_pid, upid),
		       &cur) && cur != NO_UPID && cur != upid)
		return false;
	return true;
}

/* The latest alive thread with tid, belonging to pid (or to no process)
 * when has_pid. */
static bool find_thread(struct tp_ctx *ctx, uint32_t machine, int64_t tid,
			bool has_pid, int64_t pid, uint32_t *out)
{
	struct proc_machine *m = mach(ctx, machine);
	struct tid_list *l = tid_list(ctx->procs, m, tid, false);
	struct tp_table *t = threads(ctx), *pt = processes(ctx);

	if (!l)
		return false;
	for (uint32_t i = l->n; i-- > 0;) {
		uint32_t utid = l->v[i];
		if (!thread_alive(ctx, m, utid))
			continue;
		if (tp_is_null(t, TP_THREAD_upid, utid)) {
			*out = utid;
			return true;
		}
		uint32_t upid = (uint32_t)tp_get_int(t, TP_THREAD_upid, utid);
		if (!has_pid || tp_get_int(pt, TP_PROCESS_pid, upid) == pid) {
			*out = utid;
			return true;
		}
	}
	return false;
}

bool tp_thread_find(struct tp_ctx *ctx, uint32_t machine, int64_t tid,
		    uint32_t *utid)
{
	return find_thread(ctx, machine, tid, false, 0, utid);
}

uint32_t tp_thread_new(struct tp_ctx *ctx, uint32_t machine, int64_t tid,
		       int64_t start_ts, bool has_start_ts)
{
	struct proc_machine *m = mach(ctx, machine);
	uint32_t utid = add_thread_row(ctx, machine, tid);

	if (has_start_ts)
		tp_set_int(threads(ctx), TP_THREAD_start_ts, utid, start_ts);
	set_prio(ctx->procs, utid, TP_NAME_PRIO_OTHER);
	tid_list_push(tid_list(ctx->procs, m, tid, true), utid);
	return utid;
}

uint32_t tp_thread_get(struct tp_ctx *ctx, uint32_t machine, int64_t tid)
{
	uint32_t utid;

	if (tp_thread_find(ctx, machine, tid, &utid))
		return utid;
	return tp_thread_new(ctx, machine, tid, 0, false);
}

/* ---- associations ----------------------------------------------------- */

static void bind_thread(struct tp_ctx *ctx, uint32_t utid, uint32_t upid)
{
	struct tp_table *t = threads(ctx);
	int64_t tid = tp_get_int(t, TP_THREAD_tid, utid);
	int64_t pid = tp_get_int(processes(ctx), TP_PROCESS_pid, upid);

	tp_set_int(t, TP_THREAD_upid, utid, upid);
	tp_set_int(t, TP_THREAD_is_main_thread, utid, tid == pid);
}

/* The processes forked by utid before its process was known get upid as
 * their parent. */
static void resolve_parents(struct tp_ctx *ctx, uint32_t utid, uint32_t upid)
{
	struct tp_procs *p = ctx->procs;

	for (uint32_t i = 0; i < p->nparents;) {
		if (p->parents[i].parent_utid != utid) {
			i++;
			continue;
		}
		tp_set_int(processes(ctx), TP_PROCESS_parent_upid,
			   p->parents[i].child_upid, upid);
		p->parents[i] = p->parents[--p->nparents];
	}
}

/* Binds every thread pending an association with utid (transitively) to
 * upid, and gives the processes those threads forked their parent.
 * Iterative: each resolved pair is removed, so this ends. */
static void resolve_pending(struct tp_ctx *ctx, uint32_t utid, uint32_t upid)
{
	struct tp_procs *p = ctx->procs;
	uint32_t *work = NULL, nwork = 0, capwork = 0;

	if (!p->npending && !p->nparents)
		return;
	work = vp_xrealloc(NULL, 8 * sizeof *work);
	capwork = 8;
	work[nwork++] = utid;
	while (nwork) {
		uint32_t u = work[--nwork];
		resolve_parents(ctx, u, upid);
		for (uint32_t i = 0; i < p->npending;) {
			uint32_t other;
			if (p->pending[i].a == u)
				other = p->pending[i].b;
			else if (p->pending[i].b == u)
				other = p->pending[i].a;
			else {
				i++;
				continue;
			}
			p->pending[i] = p->pending[--p->npending];
			if (tp_is_null(threads(ctx), TP_THREAD_upid, other))
				bind_thread(ctx, other, upid);
			if (nwork == capwork) {
				capwork *= 2;
				work = vp_xrealloc(work, capwork * sizeof *work);
			}
			work[nwork++] = other;
		}
	}
	free(work);
}

void tp_thread_set_process(struct tp_ctx *ctx, uint32_t utid, uint32_t upid)
{
	if (utid >= threads(ctx)->nrows || upid >= processes(ctx)->nrows)
		return;
	bind_thread(ctx, utid, upid);
	resolve_pending(ctx, utid, upid);
}

void tp_threads_associate(struct tp_ctx *ctx, uint32_t utid1, uint32_t utid2)
{
	struct tp_table *t = threads(ctx);
	struct tp_procs *p = ctx->procs;
	bool has1 = !tp_is_null(t, TP_THREAD_upid, utid1);
	bool has2 = !tp_is_null(t, TP_THREAD_upid, utid2);

	if (utid1 == utid2)
		return;
	if (has1 && !has2) {
		tp_thread_set_process(ctx, utid2,
				      (uint32_t)tp_get_int(t, TP_THREAD_upid, utid1));
		return;
	}
	if (has2 && !has1) {
		tp_thread_set_process(ctx, utid1,
				      (uint32_t)tp_get_int(t, TP_THREAD_upid, utid2));
		return;
	}
	if (has1) {
		if (tp_get_int(t, TP_THREAD_upid, utid1) !=
		    tp_get_int(t, TP_THREAD_upid, utid2))
			tp_stat_inc(ctx, "process_tracker_errors");
		return;
	}
	if (p->npending == p->cappending) {
		p->cappending = p->cappending ? p->cappending * 2 : 16;
		p->pending = vp_xrealloc(p->pending,
				      p->cappending * sizeof *p->pending);
	}
	p->pending[p->npending++] = (struct assoc){ utid1, utid2 };
}

/* ---- processes -------------------------------------------------------- */

bool tp_process_find(struct tp_ctx *ctx, uint32_t machine, int64_t pid,
		     uint32_t *upid)
{
	struct proc_machine *m = mach(ctx, machine);
	uint64_t v;

	if (!u64map_get(&m->pids, (uint64_t)pid, &v) || v == NO_UPID)
		return false;
	*upid = (uint32_t)v;
	return true;
}

uint32_t tp_thread_update(struct tp_ctx *ctx, uint32_t machine, int64_t tid,
			  int64_t pid)
{
	uint32_t upid = tp_process_get(ctx, machine, pid);
	uint32_t utid;

	if (!find_thread(ctx, machine, tid, true, pid, &utid))
		utid = tp_thread_new(ctx, machine, tid, 0, false);
	if (tp_is_null(threads(ctx), TP_THREAD_upid, utid))
		bind_thread(ctx, utid, upid);
	resolve_pending(ctx, utid,
			(uint32_t)tp_get_int(threads(ctx), TP_THREAD_upid, utid));
	return utid;
}

uint32_t tp_process_get(struct tp_ctx *ctx, uint32_t machine, int64_t pid)
{
	struct proc_machine *m = mach(ctx, machine);
	uint32_t upid;

	if (tp_process_find(ctx, machine, pid, &upid))
		return upid;
	upid = add_process_row(ctx, machine, pid);
	u64map_put(&m->pids, (uint64_t)pid, upid);
	/* The main thread: an existing thread with this tid may be it. */
	tp_thread_update(ctx, machine, pid, pid);
	return upid;
}

uint32_t tp_process_get_no_thread(struct tp_ctx *ctx, uint32_t machine,
				  int64_t pid)
{
	struct proc_machine *m = mach(ctx, machine);
	uint32_t upid;

	if (tp_process_find(ctx, machine, pid, &upid))
		return upid;
	upid = add_process_row(ctx, machine, pid);
	u64map_put(&m->pids, (uint64_t)pid, upid);
	return upid;
}

uint32_t tp_process_new(struct tp_ctx *ctx, uint32_t machine, int64_t pid,
			int64_t start_ts, bool has_start_ts)
{
	struct tp_procs *p = ctx->procs;
	struct proc_machine *m = mach(ctx, machine);
	struct tid_list *l;
	uint32_t upid;

	/* Forget the old process and every thread that had tid == pid. */
	u64map_put(&m->pids, (uint64_t)pid, NO_UPID);
	l = tid_list(p, m, pid, false);
	if (l)
		l->n = 0;
	tp_thread_new(ctx, machine, pid, start_ts, has_start_ts);
	upid = add_process_row(ctx, machine, pid);
	u64map_put(&m->pids, (uint64_t)pid, upid);
	tp_thread_update(ctx, machine, pid, pid);
	if (has_start_ts)
		tp_set_int(processes(ctx), TP_PROCESS_start_ts, upid, start_ts);
	return upid;
}

void tp_process_set_name_prio(struct tp_ctx *ctx, uint32_t upid, tp_str name,
			      uint8_t prio)
{
	struct tp_procs *p = ctx->procs;

	if (!name || upid >= processes(ctx)->nrows)
		return;
	if (upid >= p->cap_pprio) {
		uint32_t n = p->cap_pprio ? p->cap_pprio : 64;
		while (n <= upid)
			n *= 2;
		p->pname_prio = vp_xrealloc(p->pname_prio, n);
		memset(p->pname_prio + p->cap_pprio, 0, n - p->cap_pprio);
		p->cap_pprio = n;
	}
	/* Stored + 1 so that any first name wins. */
	if (prio + 1 < p->pname_prio[upid])
		return;
	tp_set_str(processes(ctx), TP_PROCESS_name, upid, name);
	p->pname_prio[upid] = (uint8_t)(prio + 1);
}

void tp_process_set_name(struct tp_ctx *ctx, uint32_t upid, tp_str name)
{
	tp_process_set_name_prio(ctx, upid, name, TP_PNAME_DESCRIPTOR);
}

void tp_process_set_cmdline(struct tp_ctx *ctx, uint32_t upid, tp_str cmdline)
{
	if (upid < processes(ctx)->nrows)
		tp_set_str(processes(ctx), TP_PROCESS_cmdline, upid, cmdline);
}

void tp_process_set_parent(struct tp_ctx *ctx, uint32_t upid,
			   uint32_t parent_upid)
{
	struct tp_table *pt = processes(ctx);

	if (upid >= pt->nrows)
		return;
	/* A different parent later is the process being reparented (its
	 * parent died): the first parent says more, so it stays. */
	if (tp_is_null(pt, TP_PROCESS_parent_upid, upid))
		tp_set_int(pt, TP_PROCESS_parent_upid, upid, parent_upid);
	else if (tp_get_int(pt, TP_PROCESS_parent_upid, upid) != parent_upid)
		tp_stat_inc(ctx, "process_tracker_parent_pid_changed");
}

void tp_process_parent_thread(struct tp_ctx *ctx, uint32_t upid,
			      uint32_t parent_utid)
{
	struct tp_procs *p = ctx->procs;
	struct tp_table *t = threads(ctx);

	if (upid >= processes(ctx)->nrows || parent_utid >= t->nrows)
		return;
	if (!tp_is_null(t, TP_THREAD_upid, parent_utid)) {
		tp_set_int(processes(ctx), TP_PROCESS_parent_upid, upid,
			   tp_get_int(t, TP_THREAD_upid, parent_utid));
		return;
	}
	if (p->nparents == p->capparents) {
		p->capparents = p->capparents ? p->capparents * 2 : 16;
		p->parents = vp_xrealloc(p->parents,
					 p->capparents * sizeof *p->parents);
	}
	p->parents[p->nparents++] = (struct parent_assoc){ parent_utid, upid };
}

void tp_process_add_arg(struct tp_ctx *ctx, uint32_t upid,
			const struct tp_arg *a)
{
	struct tp_args_builder *b = &ctx->procs->args;
	struct tp_table *pt = processes(ctx);
	int64_t id;

	if (upid >= pt->nrows)
		return;
	tp_args_builder_reset(b);
	if (!tp_is_null(pt, TP_PROCESS_arg_set_id, upid))
		tp_args_load(ctx, tp_get_int(pt, TP_PROCESS_arg_set_id, upid),
			     b);
	tp_args_add(b, a);
	id = tp_args_commit(ctx, b);
	if (id >= 0)
		tp_set_int(pt, TP_PROCESS_arg_set_id, upid, id);
}

/* ---- names and ends --------------------------------------------------- */

void tp_thread_set_name_prio(struct tp_ctx *ctx, uint32_t utid, tp_str name,
			     uint8_t prio)
{
	struct tp_procs *p = ctx->procs;

	if (!name || utid >= threads(ctx)->nrows)
		return;
	if (prio < get_prio(p, utid))
		return;
	tp_set_str(threads(ctx), TP_THREAD_name, utid, name);
	set_prio(p, utid, prio);
}

void tp_thread_set_name(struct tp_ctx *ctx, uint32_t utid, tp_str name)
{
	tp_thread_set_name_prio(ctx, utid, name, TP_NAME_PRIO_DESCRIPTOR);
}

void tp_thread_end(struct tp_ctx *ctx, uint32_t machine, int64_t ts,
		   int64_t tid)
{
	struct tp_procs *p = ctx->procs;
	struct proc_machine *m = mach(ctx, machine);
	struct tp_table *t = threads(ctx), *pt = processes(ctx);
	struct tid_list *l;
	uint32_t utid, upid;

	if (!tp_thread_find(ctx, machine, tid, &utid))
		return;
	tp_set_int(t, TP_THREAD_end_ts, utid, ts);
	l = tid_list(p, m, tid, false);
	if (l) {
		uint32_t j = 0;
		for (uint32_t i = 0; i < l->n; i++)
			if (l->v[i] != utid)
				l->v[j++] = l->v[i];
		l->n = j;
	}
	if (tp_is_null(t, TP_THREAD_upid, utid))
		return;
	upid = (uint32_t)tp_get_int(t, TP_THREAD_upid, utid);
	if (tp_get_int(pt, TP_PROCESS_pid, upid) != tid)
		return;
	tp_set_int(pt, TP_PROCESS_end_ts, upid, ts);
	u64map_put(&m->pids, (uint64_t)tid, NO_UPID);
}
