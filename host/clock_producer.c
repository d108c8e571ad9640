/*
 * clock_producer.c - the vperfetto.clock_sync data source: a thread per
 * started instance writes (clock, cpu counter) snapshots and the KVM
 * counter relation of the VMs it knows (see clock_producer.h).
 */
#include "clock_producer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vperfetto/vperfetto.h>

#include "kvm_tsc.h"
#include "pb_wire.h"
#include "vcpu_threads.h"
#include "perfetto_fields.h"
#include "vp_clock.h"
#include "vp_log.h"

/* What the last read of one VM's debugfs gave, so that a lasting problem
 * is reported once, not every period. */
struct vm_state {
	int pid;
	int last_rc; /* 0 ok, enum kvm_tsc_err, or 1 before the first read */
};

/* A VM whose vCPU threads are mapped (a copy of its vcpu_source) and the
 * last problem reported for it. */
struct vcpu_src_state {
	int vmm_pid;
	char *vm, *qmp;
	bool failing;
};

struct clock_producer {
	struct clock_producer_opts o;
	char *kvm_debugfs;
	char *proc_root;
	struct vm_state *vms;
	struct vcpu_src_state *vsrc;
	struct vp_data_source *ds;
	pthread_mutex_t mu; /* sessions, vms */
	struct session *sessions;
	_Atomic uint64_t n_sessions, n_snapshots, n_kvm, n_vcpu_maps, n_dropped;
};

/* What a session last wrote for one VM's vCPUs. */
struct vcpu_written {
	struct vcpu_thread *t;
	int n; /* -1: nothing yet */
	int vmm_pid;
};

/* One started instance and its thread. */
struct session {
	struct clock_producer *p;
	struct vp_ds_instance *inst;
	uint64_t id;
	struct host_clock_opts o;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC */
	bool stop;
	struct kvm_tsc_tracker kvm;
	struct vcpu_written *vw; /* one per vcpu source */
	uint64_t ticks;
	struct pb_buf buf;
	struct session *next;
};

/* ------------------------------------------------------------ packets */

static void put_clock(struct pb_buf *b, uint32_t id, uint64_t ts)
{
	size_t c = pb_begin_nested(b, CS_CLOCKS);
	pb_put_varint(b, CLK_CLOCK_ID, id);
	pb_put_varint(b, CLK_TIMESTAMP, ts);
	pb_end_nested(b, c);
}

static bool write_packet(struct session *s)
{
	if (vp_ds_write_packet(s->inst, s->buf.data, s->buf.len) == 0)
		return true;
	atomic_fetch_add(&s->p->n_dropped, 1);
	return false;
}

/* The (clock, counter) snapshot: the narrowest of a few sandwiches. */
static void write_snapshot(struct session *s, uint32_t seq_flags)
{
	clockid_t clk = s->o.clock_id == VP_BUILTIN_CLOCK_MONOTONIC
				? CLOCK_MONOTONIC
				: CLOCK_BOOTTIME;
	struct vp_clock_sample smp;

	if (vp_clock_sample(&clk, 1, VP_CLOCK_SAMPLE_TRIES, &smp) < 0) {
		vp_log_error("session %llu: reading the %s clock: %s; no "
			     "snapshot this time",
			     (unsigned long long)s->id,
			     host_clock_name(s->o.clock_id), strerror(errno));
		return;
	}
	struct pb_buf *b = &s->buf;
	pb_buf_reset(b);
	pb_put_varint(b, TP_TIMESTAMP, smp.clock_ns[0]);
	if (s->o.clock_id != VP_BUILTIN_CLOCK_BOOTTIME)
		pb_put_varint(b, TP_TIMESTAMP_CLOCK_ID, s->o.clock_id);
	size_t cs = pb_begin_nested(b, TP_CLOCK_SNAPSHOT);
	put_clock(b, s->o.clock_id, smp.clock_ns[0]);
	put_clock(b, VP_CLOCK_ID_CPU_COUNTER, smp.counter);
	pb_end_nested(b, cs);
	if (seq_flags)
		pb_put_varint(b, TP_SEQUENCE_FLAGS, seq_flags);
	if (write_packet(s))
		atomic_fetch_add(&s->p->n_snapshots, 1);
}

/* ---------------------------------------------------------------- KVM */

/* Reports a VM's read problem when it differs from the last one, and the
 * recovery from one. */
static void note_vm_result(struct clock_producer *p, struct vm_state *vm,
			   int rc, const char *msg)
{
	int last;

	pthread_mutex_lock(&p->mu);
	last = vm->last_rc;
	vm->last_rc = rc < 0 ? rc : 0;
	pthread_mutex_unlock(&p->mu);
	if (rc < 0 && rc != last)
		vp_log_warn("kvm_tsc of VM pid %d: %s; no kvm_tsc records "
			    "for it until this changes (tracing goes on)",
			    vm->pid, msg);
	else if (rc >= 0 && last < 0) /* the end of the warning above */
		vp_log_warn("kvm_tsc of VM pid %d: readable again; its "
			    "kvm_tsc records resume",
			    vm->pid);
}

/* Writes the kvm_tsc events of one VM that are new or changed (all of
 * them when `all`). */
static void poll_vm(struct session *s, struct vm_state *vm, bool all)
{
	struct clock_producer *p = s->p;
	struct kvm_vcpu_tsc *v;
	struct vp_error err = {{0}};
	int n = kvm_tsc_read_vm(p->kvm_debugfs, vm->pid, &v, &err);

	note_vm_result(p, vm, n, err.msg);
	if (n <= 0)
		return;
	uint64_t now = vp_now_ns();
	bool described = false;
	for (int i = 0; i < n; i++) {
		if (!kvm_tsc_tracker_changed(&s->kvm, &v[i]) && !all)
			continue;
		/* The track first, whenever this sequence may have lost it. */
		if (all && !described) {
			pb_buf_reset(&s->buf);
			kvm_tsc_encode_track(&s->buf, vm->pid, now, 0);
			write_packet(s);
			described = true;
		}
		pb_buf_reset(&s->buf);
		kvm_tsc_encode_event(&s->buf, &v[i], now, 0);
		if (write_packet(s))
			atomic_fetch_add(&p->n_kvm, 1);
	}
	free(v);
}

/* ------------------------------------------------------- vCPU threads */

/* How often the vCPU threads are looked up: about once a second (a QMP
 * round trip or a walk of /proc/PID/task), and at every tick when the
 * period is longer. */
static bool vcpu_poll_due(const struct session *s)
{
	uint64_t every = 1000 / (s->o.period_ms ? s->o.period_ms : 1);

	return every <= 1 || s->ticks % every == 0;
}

static void note_vcpu_result(struct clock_producer *p,
			     struct vcpu_src_state *v, int rc, const char *msg)
{
	bool was;

	pthread_mutex_lock(&p->mu);
	was = v->failing;
	v->failing = rc < 0;
	pthread_mutex_unlock(&p->mu);
	if (rc < 0 && !was)
		vp_log_warn("vCPU threads of %s: %s; no vcpu_map records "
			    "for it until this changes (tracing goes on)",
			    v->vm ? v->vm : "the VM", msg);
	else if (rc >= 0 && was) /* the end of the warning above */
		vp_log_warn("vCPU threads of %s: found again; its vcpu_map "
			    "records resume",
			    v->vm ? v->vm : "the VM");
}

/* Writes the vcpu_map events of one VM that are new or changed (all of
 * them when `all`). */
static void poll_vcpus(struct session *s, size_t i, bool all)
{
	struct clock_producer *p = s->p;
	struct vcpu_src_state *v = &p->vsrc[i];
	struct vcpu_written *w = &s->vw[i];
	struct vcpu_thread t[VCPU_THREADS_MAX];
	struct vp_error err = {{0}};
	int pid = v->vmm_pid, n;
	const char *source = v->qmp ? "qmp" : "thread_name";

	/* A short wait: this thread also keeps the snapshots' period, and
	 * a monitor that is slow now answers on a later tick. */
	if (v->qmp)
		n = vcpu_threads_from_qmp(v->qmp, 200, t, VCPU_THREADS_MAX,
					  &err);
	else
		n = vcpu_threads_from_names(p->proc_root, pid, t,
					    VCPU_THREADS_MAX, &err);
	if (n == 0)
		vp_errorf(&err, "no vCPU threads found");
	note_vcpu_result(p, v, n > 0 ? 0 : -1, err.msg);
	if (n <= 0)
		return;
	if (pid <= 0)
		pid = vcpu_thread_tgid(p->proc_root, t[0].tid);
	if (pid <= 0)
		pid = 0;
	uint64_t now = vp_now_ns();
	bool described = false;
	for (int k = 0; k < n; k++) {
		bool same = false;
		for (int j = 0; !all && w->vmm_pid == pid && j < w->n; j++)
			if (w->t[j].vcpu == t[k].vcpu)
				same = w->t[j].tid == t[k].tid;
		if (same)
			continue;
		if (!described) {
			pb_buf_reset(&s->buf);
			vcpu_map_encode_track(&s->buf, pid, now);
			write_packet(s);
			described = true;
		}
		pb_buf_reset(&s->buf);
		vcpu_map_encode_event(&s->buf, v->vm, pid, &t[k], source, now);
		if (write_packet(s))
			atomic_fetch_add(&p->n_vcpu_maps, 1);
	}
	struct vcpu_thread *nt = realloc(w->t, (size_t)n * sizeof(*nt));
	if (!nt) {
		w->n = -1; /* not remembered: written again next time */
		return;
	}
	memcpy(nt, t, (size_t)n * sizeof(*nt));
	w->t = nt;
	w->n = n;
	w->vmm_pid = pid;
}

/* ---------------------------------------------------------- the thread */

static void tick(struct session *s, bool final)
{
	/* A new sequence, or incremental state cleared / lost: flag the
	 * first packet and describe everything again, so a ring buffer that
	 * lost the start still has the kvm_tsc records. */
	bool first = vp_ds_first_packet_on_sequence(s->inst);

	write_snapshot(s, first ? SEQ_INCREMENTAL_STATE_CLEARED : 0);
	if (final)
		return;
	if (first)
		kvm_tsc_tracker_reset(&s->kvm);
	for (size_t i = 0; i < s->p->o.n_vm_pids; i++)
		poll_vm(s, &s->p->vms[i], first);
	if (first || vcpu_poll_due(s))
		for (size_t i = 0; i < s->p->o.n_vcpu_srcs; i++)
			poll_vcpus(s, i, first);
	s->ticks++;
}

static void *session_main(void *arg)
{
	struct session *s = arg;
	uint64_t period = (uint64_t)s->o.period_ms * 1000000ull;
	uint64_t next = vp_clock_now_ns(CLOCK_MONOTONIC);

	pthread_mutex_lock(&s->mu);
	for (;;) {
		bool stopping = s->stop;
		pthread_mutex_unlock(&s->mu);
		tick(s, stopping);
		pthread_mutex_lock(&s->mu);
		if (stopping)
			break;
		/* Fixed deadlines, so the period does not drift; a late
		 * wake-up skips the missed ones. */
		uint64_t now = vp_clock_now_ns(CLOCK_MONOTONIC);
		next += period;
		if (next <= now)
			next = now + period;
		struct timespec dl = {.tv_sec = (time_t)(next / 1000000000ull),
				      .tv_nsec = (long)(next % 1000000000ull)};
		while (!s->stop && vp_clock_now_ns(CLOCK_MONOTONIC) < next)
			if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) ==
			    ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&s->mu);
	vp_ds_flush(s->inst);
	return NULL;
}

/* ----------------------------------------------------- data source API */

static void warn_config(void *ctx, const char *msg)
{
	struct session *s = ctx;
	vp_log_warn("session %llu: %s; using the default",
		    (unsigned long long)s->id, msg);
}

static void session_free(struct session *s)
{
	kvm_tsc_tracker_free(&s->kvm);
	for (size_t i = 0; s->vw && i < s->p->o.n_vcpu_srcs; i++)
		free(s->vw[i].t);
	free(s->vw);
	pb_buf_free(&s->buf);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void on_start(void *ctx, struct vp_ds_instance *inst,
		     const uint8_t *config, size_t len)
{
	struct clock_producer *p = ctx;
	struct session *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;

	if (!s) {
		vp_log_error("out of memory: no snapshots for a new session");
		return;
	}
	s->p = p;
	s->inst = inst;
	s->id = vp_ds_instance_id(inst);
	host_clock_opts_from_ds_config(config, len, &p->o.defaults, &s->o,
				       warn_config, s);
	kvm_tsc_tracker_init(&s->kvm);
	s->vw = calloc(p->o.n_vcpu_srcs ? p->o.n_vcpu_srcs : 1, sizeof(*s->vw));
	if (!s->vw) {
		vp_log_error("session %llu: out of memory: no snapshots for "
			     "it",
			     (unsigned long long)s->id);
		free(s);
		return;
	}
	for (size_t i = 0; i < p->o.n_vcpu_srcs; i++)
		s->vw[i].n = -1;
	pb_buf_init(&s->buf);
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);

	int rc = pthread_create(&s->thread, NULL, session_main, s);
	if (rc != 0) {
		vp_log_error("session %llu: cannot start its thread: %s; no "
			     "snapshots for it",
			     (unsigned long long)s->id, strerror(rc));
		session_free(s);
		return;
	}
	atomic_fetch_add(&p->n_sessions, 1);
	vp_log_info("session %llu started: clock %s and %s every %u ms",
		    (unsigned long long)s->id, host_clock_name(s->o.clock_id),
		    vp_cpu_counter_name(), s->o.period_ms);
	pthread_mutex_lock(&p->mu);
	s->next = p->sessions;
	p->sessions = s;
	pthread_mutex_unlock(&p->mu);
}

static void on_stop(void *ctx, struct vp_ds_instance *inst)
{
	struct clock_producer *p = ctx;
	struct session *s = NULL;

	pthread_mutex_lock(&p->mu);
	for (struct session **pp = &p->sessions; *pp; pp = &(*pp)->next)
		if ((*pp)->inst == inst) {
			s = *pp;
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&p->mu);
	if (!s)
		return;
	/* The thread writes the final snapshot and flushes before it ends;
	 * the instance still takes packets until this returns. */
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	vp_log_info("session %llu stopped", (unsigned long long)s->id);
	session_free(s);
}

int clock_producer_new(const struct clock_producer_opts *o,
		       struct clock_producer **out, struct vp_error *err)
{
	if (!vp_cpu_counter_name())
		return vp_errorf(err, "this CPU architecture has no counter "
				      "shared with guests (need x86-64 or "
				      "arm64)");
	struct clock_producer *p = calloc(1, sizeof(*p));
	if (!p)
		return vp_errorf(err, "out of memory");
	pthread_mutex_init(&p->mu, NULL);
	p->o = *o;
	p->o.vm_pids = NULL;
	p->o.vcpu_srcs = NULL;
	p->o.n_vcpu_srcs = 0;
	p->kvm_debugfs = strdup(o->kvm_debugfs ? o->kvm_debugfs
					       : KVM_TSC_DEFAULT_DEBUGFS);
	p->proc_root = strdup(o->proc_root ? o->proc_root : "/proc");
	p->vms = calloc(o->n_vm_pids ? o->n_vm_pids : 1, sizeof(*p->vms));
	p->vsrc = calloc(o->n_vcpu_srcs ? o->n_vcpu_srcs : 1, sizeof(*p->vsrc));
	if (!p->kvm_debugfs || !p->proc_root || !p->vms || !p->vsrc) {
		clock_producer_free(p);
		return vp_errorf(err, "out of memory");
	}
	for (size_t i = 0; i < o->n_vcpu_srcs; i++) {
		struct vcpu_src_state *v = &p->vsrc[i];
		v->vmm_pid = o->vcpu_srcs[i].vmm_pid;
		v->vm = o->vcpu_srcs[i].vm ? strdup(o->vcpu_srcs[i].vm) : NULL;
		v->qmp = o->vcpu_srcs[i].qmp ? strdup(o->vcpu_srcs[i].qmp)
					     : NULL;
		p->o.n_vcpu_srcs = i + 1;
		if ((o->vcpu_srcs[i].vm && !v->vm) ||
		    (o->vcpu_srcs[i].qmp && !v->qmp)) {
			clock_producer_free(p);
			return vp_errorf(err, "out of memory");
		}
	}
	p->o.kvm_debugfs = p->kvm_debugfs;
	for (size_t i = 0; i < o->n_vm_pids; i++)
		p->vms[i] = (struct vm_state){.pid = o->vm_pids[i], .last_rc = 1};

	struct vp_data_source_desc d = {
		.name = CLOCK_PRODUCER_DS_NAME,
		.ctx = p,
		.on_start = on_start,
		.on_stop = on_stop,
	};
	p->ds = vp_data_source_register(&d);
	if (!p->ds) {
		clock_producer_free(p);
		return vp_errorf(err, "cannot register the data source %s",
				 CLOCK_PRODUCER_DS_NAME);
	}
	*out = p;
	return 0;
}

void clock_producer_get_stats(struct clock_producer *p,
			      struct clock_producer_stats *out)
{
	out->sessions = atomic_load(&p->n_sessions);
	out->snapshots = atomic_load(&p->n_snapshots);
	out->kvm_records = atomic_load(&p->n_kvm);
	out->vcpu_maps = atomic_load(&p->n_vcpu_maps);
	out->dropped = atomic_load(&p->n_dropped);
}

void clock_producer_free(struct clock_producer *p)
{
	if (!p)
		return;
	/* Sessions still running (vp_shutdown() was not called): stop
	 * their threads; nothing more is written. */
	while (p->sessions) {
		struct session *s = p->sessions;
		p->sessions = s->next;
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
		session_free(s);
	}
	pthread_mutex_destroy(&p->mu);
	free(p->kvm_debugfs);
	free(p->proc_root);
	for (size_t i = 0; p->vsrc && i < p->o.n_vcpu_srcs; i++) {
		free(p->vsrc[i].vm);
		free(p->vsrc[i].qmp);
	}
	free(p->vsrc);
	free(p->vms);
	free(p);
}
