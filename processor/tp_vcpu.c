/*
 * tp_vcpu.c - the host side of each guest CPU: the vcpu, vcpu_state and
 * guest_thread_host_state tables.
 *
 * A merged trace holds the host's sched data and each guest's on one time
 * axis, but nothing there says which host thread runs which guest CPU.
 * This module finds that mapping, after the parse, from the trace's own
 * rows:
 *
 *  - `vperfetto`/`vcpu_map` track events on the host (written by
 *    vperfetto_host_clock: debug annotations vm, vmm_pid, vcpu, host_tid,
 *    source), each valid from its timestamp until the next one for the same
 *    vCPU (the first from the start of the trace);
 *  - without any, the host threads' names: QEMU's "CPU n/KVM", "CPU n/TCG"
 *    and crosvm's "crosvm_vcpuN", grouped by their process.
 *
 * A VM (one VMM process) is placed on a guest machine by a
 * `vperfetto`/`vm_machine` event on that machine (vperfetto_merge
 * --vm-tracks writes one, annotation vmm_pid), else, when the trace has as
 * many guest machines as VMs, in order: VMs by their first vcpu_map (the
 * order vperfetto_record names them in), machines by raw machine id (the
 * merge's order).
 *
 * vcpu_state follows the vCPU thread's thread_state rows: Running is
 * `running` (or `exit` between a kvm_exit and the next kvm_entry, where the
 * host recorded those), R / R+ `preempted`, any sleep `blocked`.  Where the
 * sched data have a hole (a row whose end the loader never saw, time before
 * the thread's first row, a sleep followed by Running with no wakeup in
 * between), the state is `unknown`: nothing is carried across a hole.
 */
#include <stdlib.h>
#include <string.h>

#include "tp_ctx.h"
#include "tp_load.h"
#include "tp_procs.h"
#include "tp_vcpu.h"
#include "vp_alloc.h"

#define NONE32 UINT32_MAX

/* Bounds on what a trace can make this module do: each mapping span walks
 * its host thread's states, so a hostile trace of many vcpu_map records
 * could otherwise cost spans x states. */
#define TP_VCPU_MAX_VCPUS 1024
#define TP_VCPU_MAX_SPANS 4096

enum vstate { VS_RUNNING, VS_PREEMPTED, VS_BLOCKED, VS_EXIT, VS_UNKNOWN };

static const char *const vstate_name[] = {
	[VS_RUNNING] = "running",   [VS_PREEMPTED] = "preempted",
	[VS_BLOCKED] = "blocked",   [VS_EXIT] = "exit",
	[VS_UNKNOWN] = "unknown",
};

/* One mapping: vCPU `vcpu` of the VM whose VMM is vmm_pid runs on host
 * thread host_tid (utid, when known directly) from ts on. */
struct vmap {
	int64_t ts; /* INT64_MIN: from the start of the trace */
	int64_t vmm_pid;
	int64_t vcpu;
	int64_t host_tid;
	uint32_t utid; /* NONE32: resolve host_tid */
	tp_str vm;
	tp_str source;
	uint32_t order; /* position in the trace, for stable sorting */
};

struct vm {
	int64_t vmm_pid;
	int64_t first_ts;
	int64_t machine; /* machine table id; -1 while not placed */
};

struct vec {
	void *v;
	size_t n, cap, size;
};

static void *vec_push(struct vec *a)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 16;
		a->v = vp_xrealloc(a->v, a->cap * a->size);
	}
	return (char *)a->v + a->size * a->n++;
}

/* The state of one build: the strings it compares against. */
struct vb {
	struct tp_ctx *ctx;
	tp_str s_vperfetto, s_vcpu_map, s_vm_machine, s_running, s_r, s_rplus;
	tp_str s_kvm_entry, s_kvm_exit, s_x, s_z;
	tp_str k_vm, k_vmm_pid, k_vcpu, k_host_tid, k_source;
	tp_str st[VS_UNKNOWN + 1];
	int64_t host_lo, host_hi; /* span of the host's sched data */
	bool have_host;
};

static int64_t machine_of_track(struct tp_ctx *ctx, int64_t track)
{
	struct tp_table *t = tp_tab(ctx, TP_T_TRACK);

	if (track < 0 || track >= t->nrows)
		return -1;
	return tp_get_int(t, TP_TRACK_machine_id, (uint32_t)track);
}

/* The int and string arguments of one vcpu_map / vm_machine event. */
struct ev_args {
	bool has_pid, has_vcpu, has_tid;
	int64_t vmm_pid, vcpu, host_tid;
	tp_str vm, source;
};

static void read_args(struct vb *b, int64_t arg_set_id, struct ev_args *a)
{
	struct tp_table *t = tp_tab(b->ctx, TP_T_ARGS);
	const uint32_t *rows;
	uint32_t n;

	memset(a, 0, sizeof(*a));
	n = tp_table_lookup(t, TP_ARGS_arg_set_id, arg_set_id, &rows);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = rows[i];
		tp_str key = tp_get_str(t, TP_ARGS_key, r);
		int64_t v = tp_get_int(t, TP_ARGS_int_value, r);
		bool is_int = !tp_is_null(t, TP_ARGS_int_value, r);

		if (key == b->k_vmm_pid && is_int) {
			a->has_pid = true;
			a->vmm_pid = v;
		} else if (key == b->k_vcpu && is_int) {
			a->has_vcpu = true;
			a->vcpu = v;
		} else if (key == b->k_host_tid && is_int) {
			a->has_tid = true;
			a->host_tid = v;
		} else if (key == b->k_vm) {
			a->vm = tp_get_str(t, TP_ARGS_string_value, r);
		} else if (key == b->k_source) {
			a->source = tp_get_str(t, TP_ARGS_string_value, r);
		}
	}
}

/* vcpu_map events into maps; vm_machine events into assoc (pid, machine
 * pairs). */
static void gather_recorded(struct vb *b, struct vec *maps, struct vec *assoc)
{
	struct tp_table *s = tp_tab(b->ctx, TP_T_SLICE);

	for (uint32_t r = 0; r < s->nrows; r++) {
		tp_str name = tp_get_str(s, TP_SLICE_name, r);
		struct ev_args a;

		if ((name != b->s_vcpu_map && name != b->s_vm_machine) ||
		    tp_get_str(s, TP_SLICE_category, r) != b->s_vperfetto ||
		    tp_is_null(s, TP_SLICE_arg_set_id, r))
			continue;
		int64_t machine = machine_of_track(
			b->ctx, tp_get_int(s, TP_SLICE_track_id, r));
		read_args(b, tp_get_int(s, TP_SLICE_arg_set_id, r), &a);
		if (name == b->s_vm_machine) {
			if (a.has_pid && machine > 0 &&
			    assoc->n < TP_VCPU_MAX_SPANS) {
				int64_t *p = vec_push(assoc);
				p[0] = a.vmm_pid;
				p[1] = machine;
			}
			continue;
		}
		/* A mapping belongs to the host's trace. */
		if (machine != 0 || !a.has_pid || !a.has_vcpu || !a.has_tid ||
		    a.vcpu < 0)
			continue;
		struct vmap *m = vec_push(maps);
		*m = (struct vmap){
			.ts = tp_get_int(s, TP_SLICE_ts, r),
			.vmm_pid = a.vmm_pid,
			.vcpu = a.vcpu,
			.host_tid = a.host_tid,
			.utid = NONE32,
			.vm = a.vm,
			.source = a.source ? a.source
					    : tp_s(b->ctx, "vcpu_map"),
			.order = (uint32_t)maps->n,
		};
	}
}

/* The vCPU index in a vCPU thread's name, or -1: "CPU 3/KVM",
 * "CPU 3/TCG" (QEMU), "crosvm_vcpu3" or "crosvm_vcpu 3" (crosvm). */
int64_t tp_vcpu_index_from_name(const char *name)
{
	const char *p;
	int64_t n = 0;

	if (!name)
		return -1;
	if (!strncmp(name, "CPU ", 4))
		p = name + 4;
	else if (!strncmp(name, "crosvm_vcpu", 11))
		p = name + 11 + (name[11] == ' ');
	else
		return -1;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9' && n < 1000000)
		n = n * 10 + (*p++ - '0');
	if (name[0] == 'c')
		return *p ? -1 : n;
	return !strcmp(p, "/KVM") || !strcmp(p, "/TCG") ? n : -1;
}

/* Host threads named as vCPU threads, grouped by their process. */
static void gather_named(struct vb *b, struct vec *maps)
{
	struct tp_ctx *ctx = b->ctx;
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD);
	struct tp_table *p = tp_tab(ctx, TP_T_PROCESS);
	tp_str src = tp_s(ctx, "thread_name");

	for (uint32_t r = 0; r < t->nrows; r++) {
		if (tp_get_int(t, TP_THREAD_machine_id, r) != 0)
			continue;
		const char *name =
			tp_str_get(ctx->pool, tp_get_str(t, TP_THREAD_name, r));
		int64_t idx = tp_vcpu_index_from_name(name);
		if (idx < 0)
			continue;
		int64_t pid = 0;
		if (!tp_is_null(t, TP_THREAD_upid, r)) {
			int64_t upid = tp_get_int(t, TP_THREAD_upid, r);
			if (upid >= 0 && upid < p->nrows)
				pid = tp_get_int(p, TP_PROCESS_pid,
						 (uint32_t)upid);
		}
		struct vmap *m = vec_push(maps);
		*m = (struct vmap){
			.ts = INT64_MIN,
			.vmm_pid = pid,
			.vcpu = idx,
			.host_tid = tp_get_int(t, TP_THREAD_tid, r),
			.utid = r,
			.source = src,
			.order = (uint32_t)maps->n,
		};
	}
}

static int cmp_map(const void *pa, const void *pb)
{
	const struct vmap *a = pa, *b = pb;

	if (a->vmm_pid != b->vmm_pid)
		return a->vmm_pid < b->vmm_pid ? -1 : 1;
	if (a->vcpu != b->vcpu)
		return a->vcpu < b->vcpu ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static int cmp_vm_first(const void *pa, const void *pb)
{
	const struct vm *a = pa, *b = pb;

	if (a->first_ts != b->first_ts)
		return a->first_ts < b->first_ts ? -1 : 1;
	return a->vmm_pid < b->vmm_pid ? -1 : a->vmm_pid > b->vmm_pid;
}

/* The VMs of the mappings (sorted by pid), in the order they were first
 * recorded. */
static void list_vms(const struct vec *maps, struct vec *vms)
{
	const struct vmap *m = maps->v;

	for (size_t i = 0; i < maps->n; i++) {
		if (i && m[i].vmm_pid == m[i - 1].vmm_pid) {
			struct vm *last = (struct vm *)vms->v + vms->n - 1;
			if (m[i].ts < last->first_ts)
				last->first_ts = m[i].ts;
			continue;
		}
		struct vm *v = vec_push(vms);
		*v = (struct vm){m[i].vmm_pid, m[i].ts, -1};
	}
	if (vms->n)
		qsort(vms->v, vms->n, sizeof(struct vm), cmp_vm_first);
}

/* Places each VM on a guest machine: explicitly (the load options, else
 * vm_machine events), else in order when the counts agree. */
static void place_vms(struct vb *b, struct vec *vms, const struct vec *assoc,
		      const struct tp_vcpu_assign *opt)
{
	struct tp_ctx *ctx = b->ctx;
	struct vm *v = vms->v;
	struct tp_table *mt = tp_tab(ctx, TP_T_MACHINE);

	if (opt && opt->n) {
		for (size_t j = 0; j < opt->n; j++) {
			int64_t pid = opt->vmm_pid[j];
			/* 0: the only VM; -k: the k-th VM recorded */
			size_t k = pid < 0 ? (size_t)(-(pid + 1)) : 0;
			if (pid <= 0 && (pid < 0 || vms->n == 1) && k < vms->n)
				v[k].machine = opt->machine[j];
			for (size_t i = 0; pid > 0 && i < vms->n; i++)
				if (v[i].vmm_pid == pid)
					v[i].machine = opt->machine[j];
		}
		return;
	}
	if (assoc->n) {
		const int64_t *a = assoc->v;
		for (size_t i = 0; i < vms->n; i++)
			for (size_t j = 0; j < assoc->n; j++)
				if (a[2 * j] == v[i].vmm_pid)
					v[i].machine = a[2 * j + 1];
		return;
	}
	/* Guest machines by raw id: the merge numbers guests 1, 2, ... in
	 * the order of its command line. */
	size_t nguest = 0;
	for (uint32_t r = 0; r < mt->nrows; r++)
		if (tp_get_int(mt, TP_MACHINE_raw_id, r) != 0)
			nguest++;
	if (nguest != vms->n || !nguest) {
		if (vms->n && nguest)
			tp_warn(ctx, "%zu VMs with vCPU threads on the host "
				"but %zu guest machines: cannot tell which "
				"is which; the vcpu tables stay empty",
				vms->n, nguest);
		return;
	}
	int64_t *ids = vp_xcalloc(nguest, sizeof(*ids));
	int64_t *raw = vp_xcalloc(nguest, sizeof(*raw));
	size_t k = 0;
	for (uint32_t r = 0; r < mt->nrows; r++) {
		int64_t rid = tp_get_int(mt, TP_MACHINE_raw_id, r);
		if (!rid)
			continue;
		size_t j = k++;
		while (j && raw[j - 1] > rid) {
			raw[j] = raw[j - 1];
			ids[j] = ids[j - 1];
			j--;
		}
		raw[j] = rid;
		ids[j] = r;
	}
	for (size_t i = 0; i < vms->n; i++)
		v[i].machine = ids[i];
	free(ids);
	free(raw);
}

static int64_t vm_machine(const struct vec *vms, int64_t pid)
{
	const struct vm *v = vms->v;

	for (size_t i = 0; i < vms->n; i++)
		if (v[i].vmm_pid == pid)
			return v[i].machine;
	return -1;
}

/* ---- vcpu_state ------------------------------------------------------- */

/* Appends rows to vcpu_state, joining a row to the previous one when it
 * continues it with the same state and host CPU. */
struct emitter {
	struct vb *b;
	int64_t machine, cpu;
	uint32_t host_utid;
	int64_t lo, hi; /* the span this mapping covers */
	int64_t cur;    /* everything before is emitted */
	uint32_t last;  /* last row emitted, NONE32 at first */
};

static void emit_row(struct emitter *e, int64_t ts, int64_t end,
		     enum vstate s, int64_t host_cpu)
{
	struct tp_table *t = tp_tab(e->b->ctx, TP_T_VCPU_STATE);
	tp_str sname = e->b->st[s];

	if (e->last != NONE32 &&
	    tp_get_str(t, TP_VCPU_STATE_state, e->last) == sname &&
	    tp_get_int(t, TP_VCPU_STATE_host_cpu, e->last) == host_cpu &&
	    tp_is_null(t, TP_VCPU_STATE_host_cpu, e->last) == (host_cpu < 0) &&
	    tp_get_int(t, TP_VCPU_STATE_ts, e->last) +
			    tp_get_int(t, TP_VCPU_STATE_dur, e->last) == ts) {
		tp_set_int(t, TP_VCPU_STATE_dur, e->last,
			   end - tp_get_int(t, TP_VCPU_STATE_ts, e->last));
		return;
	}
	uint32_t r = tp_table_add_row(t);
	tp_set_int(t, TP_VCPU_STATE_ts, r, ts);
	tp_set_int(t, TP_VCPU_STATE_dur, r, end - ts);
	tp_set_machine(t, TP_VCPU_STATE_machine_id, r, e->machine);
	tp_set_int(t, TP_VCPU_STATE_cpu, r, e->cpu);
	tp_set_str(t, TP_VCPU_STATE_state, r, sname);
	if (host_cpu >= 0)
		tp_set_int(t, TP_VCPU_STATE_host_cpu, r, host_cpu);
	if (e->host_utid != NONE32)
		tp_set_int(t, TP_VCPU_STATE_host_utid, r, e->host_utid);
	e->last = r;
}

/* [ts, end) in state s, clipped to the span; the time since the last
 * known state is unknown. */
static void emit(struct emitter *e, int64_t ts, int64_t end, enum vstate s,
		 int64_t host_cpu)
{
	if (ts < e->cur)
		ts = e->cur;
	if (end > e->hi)
		end = e->hi;
	if (end <= ts)
		return;
	if (ts > e->cur)
		emit_row(e, e->cur, ts, VS_UNKNOWN, -1);
	emit_row(e, ts, end, s, host_cpu);
	e->cur = end;
}

static enum vstate classify(struct vb *b, tp_str s)
{
	if (!s || s == b->s_x || s == b->s_z)
		return VS_UNKNOWN;
	if (s == b->s_running)
		return VS_RUNNING;
	if (s == b->s_r || s == b->s_rplus)
		return VS_PREEMPTED;
	return VS_BLOCKED;
}

struct ts_row {
	int64_t ts;
	uint32_t row;
};

static int cmp_ts_row(const void *pa, const void *pb)
{
	const struct ts_row *a = pa, *b = pb;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->row < b->row ? -1 : a->row > b->row;
}

/* Rows of table t whose integer column `col` is v, by ts_col then id. */
static uint32_t *rows_by_ts(struct tp_table *t, unsigned col, int64_t v,
			    unsigned ts_col, uint32_t *n)
{
	const uint32_t *idx;
	uint32_t cnt = tp_table_lookup(t, col, v, &idx);
	struct ts_row *tr = vp_xmalloc((cnt ? cnt : 1) * sizeof(*tr));
	uint32_t *rows = vp_xmalloc((cnt ? cnt : 1) * sizeof(*rows));

	for (uint32_t i = 0; i < cnt; i++)
		tr[i] = (struct ts_row){tp_get_int(t, ts_col, idx[i]), idx[i]};
	qsort(tr, cnt, sizeof(*tr), cmp_ts_row);
	for (uint32_t i = 0; i < cnt; i++)
		rows[i] = tr[i].row;
	free(tr);
	*n = cnt;
	return rows;
}

/* The thread's kvm_entry (in guest from then) and kvm_exit (in the VMM)
 * events in time order: ts and whether it entered. */
struct kvm_ev {
	int64_t ts;
	bool entry;
};

static struct kvm_ev *kvm_events(struct vb *b, uint32_t utid, size_t *n)
{
	struct tp_table *t = tp_tab(b->ctx, TP_T_FTRACE_EVENT);
	uint32_t cnt, k = 0;
	uint32_t *rows = rows_by_ts(t, TP_FTRACE_EVENT_utid, utid,
				    TP_FTRACE_EVENT_ts, &cnt);
	struct kvm_ev *ev = vp_xmalloc((cnt ? cnt : 1) * sizeof(*ev));

	for (uint32_t i = 0; i < cnt; i++) {
		tp_str name = tp_get_str(t, TP_FTRACE_EVENT_name, rows[i]);
		if (name != b->s_kvm_entry && name != b->s_kvm_exit)
			continue;
		ev[k].ts = tp_get_int(t, TP_FTRACE_EVENT_ts, rows[i]);
		ev[k++].entry = name == b->s_kvm_entry;
	}
	free(rows);
	*n = k;
	return ev;
}

/* A Running interval [s, e) on host_cpu, cut at the kvm events: in the
 * guest after kvm_entry, in the VMM (exit) after kvm_exit; before the
 * thread's first kvm event, running. */
static void emit_running(struct emitter *e, int64_t s, int64_t end,
			 int64_t host_cpu, const struct kvm_ev *ev, size_t n)
{
	size_t i = 0;
	enum vstate cur = VS_RUNNING;

	while (i < n && ev[i].ts <= s)
		cur = ev[i++].entry ? VS_RUNNING : VS_EXIT;
	while (i < n && ev[i].ts < end) {
		emit(e, s, ev[i].ts, cur, host_cpu);
		s = ev[i].ts;
		cur = ev[i++].entry ? VS_RUNNING : VS_EXIT;
	}
	emit(e, s, end, cur, host_cpu);
}

/* The states of host thread utid over the emitter's span. */
static void thread_states(struct emitter *e, uint32_t utid)
{
	struct vb *b = e->b;
	struct tp_table *t = tp_tab(b->ctx, TP_T_THREAD_STATE);
	uint32_t n;
	size_t nkvm;
	uint32_t *rows = rows_by_ts(t, TP_THREAD_STATE_utid, utid,
				    TP_THREAD_STATE_ts, &n);
	struct kvm_ev *kvm = kvm_events(b, utid, &nkvm);

	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = rows[i];
		int64_t ts = tp_get_int(t, TP_THREAD_STATE_ts, r);
		int64_t dur = tp_get_int(t, TP_THREAD_STATE_dur, r);
		int64_t end;

		enum vstate s = classify(b, tp_get_str(t, TP_THREAD_STATE_state,
						       r));
		/* A row the loader never closed: its end was lost (a
		 * missing or mismatched sched_switch), so its state is
		 * unknown until the next row.  The last row of the thread
		 * lasts, unchanged, to the end of the host's sched data,
		 * unless it is runnable: the switch that would have ended
		 * it is the kind these kernels omit (idle to task). */
		if (dur < 0) {
			if (i + 1 < n || s == VS_PREEMPTED)
				continue;
			end = b->host_hi;
		} else {
			end = ts + dur;
		}
		/* A sleep that ends in Running with no wakeup between: the
		 * sched_waking was lost, so when the thread became runnable
		 * (blocked, then preempted) is not known. */
		if (s == VS_BLOCKED && i + 1 < n &&
		    tp_get_str(t, TP_THREAD_STATE_state, rows[i + 1]) ==
			    b->s_running)
			continue;
		int64_t cpu = tp_is_null(t, TP_THREAD_STATE_cpu, r)
				      ? -1
				      : tp_get_int(t, TP_THREAD_STATE_cpu, r);
		if (s == VS_RUNNING)
			emit_running(e, ts, end, cpu, kvm, nkvm);
		else if (s != VS_UNKNOWN)
			emit(e, ts, end, s, -1);
	}
	/* What is left of the span is unknown. */
	if (e->cur < e->hi)
		emit_row(e, e->cur, e->hi, VS_UNKNOWN, -1);
	e->cur = e->hi;
	free(rows);
	free(kvm);
}

/* A vcpu row and its states for one mapping span [lo, hi). */
static void one_span(struct vb *b, int64_t machine, const struct vmap *m,
		     int64_t lo, int64_t hi)
{
	struct tp_ctx *ctx = b->ctx;
	struct tp_table *v = tp_tab(ctx, TP_T_VCPU);
	struct tp_table *th = tp_tab(ctx, TP_T_THREAD);
	uint32_t utid = m->utid;

	if (utid == NONE32 && !tp_thread_find(ctx, 0, m->host_tid, &utid))
		utid = NONE32;
	uint32_t r = tp_table_add_row(v);
	tp_set_machine(v, TP_VCPU_machine_id, r, machine);
	tp_set_int(v, TP_VCPU_cpu, r, m->vcpu);
	tp_set_int(v, TP_VCPU_tid, r, m->host_tid);
	tp_set_int(v, TP_VCPU_vmm_pid, r, m->vmm_pid);
	if (m->vm)
		tp_set_str(v, TP_VCPU_vm, r, m->vm);
	tp_set_str(v, TP_VCPU_source, r, m->source);
	if (lo != INT64_MIN)
		tp_set_int(v, TP_VCPU_start_ts, r, lo);
	if (hi != INT64_MAX)
		tp_set_int(v, TP_VCPU_end_ts, r, hi);
	if (utid != NONE32) {
		tp_set_int(v, TP_VCPU_utid, r, utid);
		tp_set_str(v, TP_VCPU_name, r,
			   tp_get_str(th, TP_THREAD_name, utid));
	}
	if (!b->have_host)
		return;
	struct emitter e = {
		.b = b,
		.machine = machine,
		.cpu = m->vcpu,
		.host_utid = utid,
		.lo = lo > b->host_lo ? lo : b->host_lo,
		.hi = hi < b->host_hi ? hi : b->host_hi,
		.last = NONE32,
	};
	e.cur = e.lo;
	if (e.lo >= e.hi)
		return;
	if (utid == NONE32) {
		emit_row(&e, e.lo, e.hi, VS_UNKNOWN, -1);
		return;
	}
	thread_states(&e, utid);
}

/* The span of the host's sched data: the first and the last thing the
 * host's scheduler was seen doing. */
static void host_span(struct vb *b)
{
	struct tp_table *t = tp_tab(b->ctx, TP_T_SCHED);

	for (uint32_t r = 0; r < t->nrows; r++) {
		if (tp_get_int(t, TP_SCHED_machine_id, r) != 0)
			continue;
		int64_t ts = tp_get_int(t, TP_SCHED_ts, r);
		int64_t dur = tp_get_int(t, TP_SCHED_dur, r);
		int64_t end = ts + (dur > 0 ? dur : 0);
		if (!b->have_host) {
			b->host_lo = ts;
			b->host_hi = end;
			b->have_host = true;
		}
		if (ts < b->host_lo)
			b->host_lo = ts;
		if (end > b->host_hi)
			b->host_hi = end;
	}
}

/* ---- guest_thread_host_state ------------------------------------------ */

/* The rows of vcpu_state for one guest CPU: [first, first + n). */
struct cpu_rows {
	int64_t machine, cpu;
	uint32_t first, n;
};

/* *hint: where the last one was (consecutive slices often share it). */
static const struct cpu_rows *cpu_rows_find(const struct vec *c,
					    int64_t machine, int64_t cpu,
					    size_t *hint)
{
	const struct cpu_rows *r = c->v;

	if (*hint < c->n && r[*hint].machine == machine &&
	    r[*hint].cpu == cpu)
		return &r[*hint];
	for (size_t i = 0; i < c->n; i++)
		if (r[i].machine == machine && r[i].cpu == cpu) {
			*hint = i;
			return &r[i];
		}
	return NULL;
}

static void gths_row(struct vb *b, int64_t ts, int64_t end, int64_t machine,
		     int64_t cpu, int64_t utid, tp_str state, int64_t host_cpu,
		     uint32_t sched_id)
{
	struct tp_table *g = tp_tab(b->ctx, TP_T_GTHS);
	uint32_t r;

	if (end <= ts)
		return;
	r = tp_table_add_row(g);
	tp_set_int(g, TP_GTHS_ts, r, ts);
	tp_set_int(g, TP_GTHS_dur, r, end - ts);
	tp_set_machine(g, TP_GTHS_machine_id, r, machine);
	tp_set_int(g, TP_GTHS_cpu, r, cpu);
	tp_set_int(g, TP_GTHS_utid, r, utid);
	tp_set_str(g, TP_GTHS_state, r, state);
	if (host_cpu >= 0)
		tp_set_int(g, TP_GTHS_host_cpu, r, host_cpu);
	tp_set_int(g, TP_GTHS_sched_id, r, sched_id);
}

static bool idle_thread(struct tp_ctx *ctx, int64_t utid)
{
	struct tp_table *t = tp_tab(ctx, TP_T_THREAD);

	if (utid < 0 || utid >= t->nrows)
		return true;
	return tp_get_int(t, TP_THREAD_tid, (uint32_t)utid) == 0 ||
	       tp_get_int(t, TP_THREAD_is_idle, (uint32_t)utid) == 1;
}

/* One guest sched slice [ts, end) cut by its CPU's host states. */
static void cut_slice(struct vb *b, const struct cpu_rows *cr, int64_t ts,
		      int64_t end, int64_t machine, int64_t cpu, int64_t utid,
		      uint32_t sched_id)
{
	struct tp_table *vs = tp_tab(b->ctx, TP_T_VCPU_STATE);
	tp_str unknown = b->st[VS_UNKNOWN];
	uint32_t lo = 0, hi = cr ? cr->n : 0;

	/* the first state that ends after ts */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint32_t r = cr->first + mid;
		if (tp_get_int(vs, TP_VCPU_STATE_ts, r) +
			    tp_get_int(vs, TP_VCPU_STATE_dur, r) <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	int64_t cur = ts;
	for (uint32_t i = lo; cr && i < cr->n && cur < end; i++) {
		uint32_t r = cr->first + i;
		int64_t s = tp_get_int(vs, TP_VCPU_STATE_ts, r);
		int64_t e = s + tp_get_int(vs, TP_VCPU_STATE_dur, r);
		if (s >= end)
			break;
		if (s > cur)
			gths_row(b, cur, s, machine, cpu, utid, unknown, -1,
				 sched_id);
		if (s < cur)
			s = cur;
		if (e > end)
			e = end;
		gths_row(b, s, e, machine, cpu, utid,
			 tp_get_str(vs, TP_VCPU_STATE_state, r),
			 tp_is_null(vs, TP_VCPU_STATE_host_cpu, r)
				 ? -1
				 : tp_get_int(vs, TP_VCPU_STATE_host_cpu, r),
			 sched_id);
		cur = e;
	}
	gths_row(b, cur, end, machine, cpu, utid, unknown, -1, sched_id);
}

static void guest_threads(struct vb *b, const struct vec *vms,
			  const struct vec *cpus)
{
	struct tp_table *t = tp_tab(b->ctx, TP_T_SCHED);
	uint32_t nm = tp_tab(b->ctx, TP_T_MACHINE)->nrows;
	const struct vm *v = vms->v;
	bool *placed = vp_xcalloc(nm ? nm : 1, sizeof(*placed));
	size_t hint = 0;

	for (size_t i = 0; i < vms->n; i++)
		if (v[i].machine >= 0 && v[i].machine < nm)
			placed[v[i].machine] = true;

	for (uint32_t r = 0; r < t->nrows; r++) {
		int64_t machine = tp_get_int(t, TP_SCHED_machine_id, r);
		int64_t dur = tp_get_int(t, TP_SCHED_dur, r);
		int64_t utid = tp_get_int(t, TP_SCHED_utid, r);

		if (machine <= 0 || machine >= nm || !placed[machine] ||
		    dur <= 0 || idle_thread(b->ctx, utid))
			continue;
		int64_t ts = tp_get_int(t, TP_SCHED_ts, r);
		int64_t cpu = tp_get_int(t, TP_SCHED_cpu, r);
		cut_slice(b, cpu_rows_find(cpus, machine, cpu, &hint), ts,
			  ts + dur, machine, cpu, utid, r);
	}
	free(placed);
}

/* ---- the build -------------------------------------------------------- */

static void vb_init(struct vb *b, struct tp_ctx *ctx)
{
	memset(b, 0, sizeof(*b));
	b->ctx = ctx;
	b->s_vperfetto = tp_s(ctx, "vperfetto");
	b->s_vcpu_map = tp_s(ctx, "vcpu_map");
	b->s_vm_machine = tp_s(ctx, "vm_machine");
	b->s_running = tp_s(ctx, "Running");
	b->s_r = tp_s(ctx, "R");
	b->s_rplus = tp_s(ctx, "R+");
	b->s_x = tp_s(ctx, "X");
	b->s_z = tp_s(ctx, "Z");
	b->s_kvm_entry = tp_s(ctx, "kvm_entry");
	b->s_kvm_exit = tp_s(ctx, "kvm_exit");
	b->k_vm = tp_s(ctx, "debug.vm");
	b->k_vmm_pid = tp_s(ctx, "debug.vmm_pid");
	b->k_vcpu = tp_s(ctx, "debug.vcpu");
	b->k_host_tid = tp_s(ctx, "debug.host_tid");
	b->k_source = tp_s(ctx, "debug.source");
	for (int i = 0; i <= VS_UNKNOWN; i++)
		b->st[i] = tp_s(ctx, vstate_name[i]);
}

/* The vcpu and vcpu_state rows of the placed VMs, one vCPU at a time;
 * cpus gets where each guest CPU's states are. */
static void build_states(struct vb *b, const struct vec *maps,
			 const struct vec *vms, struct vec *cpus)
{
	const struct vmap *m = maps->v;
	struct tp_table *vs = tp_tab(b->ctx, TP_T_VCPU_STATE);
	size_t spans = 0;

	for (size_t i = 0; i < maps->n;) {
		size_t j = i;
		while (j < maps->n && m[j].vmm_pid == m[i].vmm_pid &&
		       m[j].vcpu == m[i].vcpu)
			j++;
		int64_t machine = vm_machine(vms, m[i].vmm_pid);
		if (machine < 0) {
			i = j;
			continue;
		}
		if (cpus->n == TP_VCPU_MAX_VCPUS || spans >= TP_VCPU_MAX_SPANS) {
			tp_warn(b->ctx, "more than %d vCPUs or %d vCPU thread "
				"changes: the vcpu tables stop there",
				TP_VCPU_MAX_VCPUS, TP_VCPU_MAX_SPANS);
			break;
		}
		struct cpu_rows *cr = vec_push(cpus);
		*cr = (struct cpu_rows){machine, m[i].vcpu, vs->nrows, 0};
		/* Each change of thread starts a new span; the first span
		 * reaches back to the start of the trace. */
		for (size_t k = i; k < j && spans < TP_VCPU_MAX_SPANS;) {
			size_t next = k + 1;
			while (next < j && m[next].host_tid == m[k].host_tid &&
			       m[next].utid == m[k].utid)
				next++;
			int64_t lo = k == i ? INT64_MIN : m[k].ts;
			int64_t hi = next < j ? m[next].ts : INT64_MAX;
			one_span(b, machine, &m[k], lo, hi);
			spans++;
			k = next;
		}
		cr->n = vs->nrows - cr->first;
		i = j;
	}
}

void tp_vcpu_build(struct tp_ctx *ctx, const struct tp_vcpu_assign *assign)
{
	struct vb b;
	struct vec maps = {.size = sizeof(struct vmap)};
	struct vec assoc = {.size = 2 * sizeof(int64_t)};
	struct vec vms = {.size = sizeof(struct vm)};
	struct vec cpus = {.size = sizeof(struct cpu_rows)};

	vb_init(&b, ctx);
	gather_recorded(&b, &maps, &assoc);
	if (!maps.n)
		gather_named(&b, &maps);
	if (maps.n) {
		qsort(maps.v, maps.n, sizeof(struct vmap), cmp_map);
		list_vms(&maps, &vms);
	}
	if (vms.n > TP_VCPU_MAX_VCPUS) {
		tp_warn(ctx, "vCPU threads of %zu VMs: more than %d; no vcpu "
			"tables", vms.n, TP_VCPU_MAX_VCPUS);
		maps.n = 0;
	}
	if (maps.n) {
		place_vms(&b, &vms, &assoc, assign);
		host_span(&b);
		build_states(&b, &maps, &vms, &cpus);
		guest_threads(&b, &vms, &cpus);
	}
	free(maps.v);
	free(assoc.v);
	free(vms.v);
	free(cpus.v);
}
