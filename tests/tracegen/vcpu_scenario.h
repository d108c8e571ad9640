/*
 * vcpu_scenario.h - a small host + guest scenario with hand-worked answers
 * for the vcpu tables (tests/unit/test_tp_vcpu.c) and vperfetto_merge
 * --vm-tracks (vcpu_gen.c): two vCPU threads of a QEMU process, a CPU hog
 * that preempts one, a missing sched_switch (a hole), kvm_entry /
 * kvm_exit, and a guest thread on each guest CPU.  Packets are built with
 * the project's wire writer.
 */
#ifndef VP_TEST_VCPU_SCENARIO_H
#define VP_TEST_VCPU_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "perfetto_fields.h"

/* Field numbers of the messages the test writes beyond perfetto_fields.h
 * (Perfetto's sched.proto, process_tree.proto). */
enum {
	SWK_COMM = 1,
	SWK_PID = 2,
	SWK_PRIO = 3,
	SWK_SUCCESS = 4,
	SWK_TARGET_CPU = 5,
	PT_PROC_CMDLINE = 3,
	PT_THREAD_NAME = 2,
};

struct trace {
	struct pb_buf out; /* Trace */
	struct pb_buf pkt; /* the packet being written */
	uint32_t seq_base; /* added to every sequence id */
};

static inline void trace_init(struct trace *t)
{
	pb_buf_init(&t->out);
	pb_buf_init(&t->pkt);
	t->seq_base = 0;
}

static inline void trace_free(struct trace *t)
{
	pb_buf_free(&t->out);
	pb_buf_free(&t->pkt);
}

/* Starts a packet on sequence seq of machine (0: the host). */
static inline void pkt_begin(struct trace *t, uint32_t seq, uint32_t machine)
{
	pb_buf_reset(&t->pkt);
	pb_put_varint(&t->pkt, TP_TRUSTED_PACKET_SEQUENCE_ID,
		      t->seq_base + seq);
	if (machine)
		pb_put_varint(&t->pkt, TP_MACHINE_ID, machine);
}

static inline void pkt_end(struct trace *t)
{
	pb_put_bytes(&t->out, 1, t->pkt.data, t->pkt.len);
}

static inline const char *comm_of(int64_t pid)
{
	switch (pid) {
	case 0:
		return "swapper/0";
	case 1001:
		return "CPU 0/TCG";
	case 1002:
		return "CPU 1/TCG";
	case 1003:
		return "CPU 0/KVM";
	case 2000:
		return "hog";
	case 50:
		return "busy";
	case 60:
		return "other";
	}
	return "x";
}

/* One ftrace bundle holding one event. */
static inline size_t ftrace_begin(struct trace *t, uint32_t seq,
				  uint32_t machine, uint32_t cpu, int64_t ts,
				  int64_t pid, size_t *ev)
{
	pkt_begin(t, seq, machine);
	size_t b = pb_begin_nested(&t->pkt, TP_FTRACE_EVENTS);
	pb_put_varint(&t->pkt, FB_CPU, cpu);
	*ev = pb_begin_nested(&t->pkt, FB_EVENT);
	pb_put_varint(&t->pkt, FE_TIMESTAMP, (uint64_t)ts);
	pb_put_varint(&t->pkt, FE_PID, (uint64_t)pid);
	return b;
}

static inline void ftrace_end(struct trace *t, size_t b, size_t ev)
{
	pb_end_nested(&t->pkt, ev);
	pb_end_nested(&t->pkt, b);
	pkt_end(t);
}

/* prev_state: 0 runnable (R), 1 sleeping (S) */
static inline void sw_seq(struct trace *t, uint32_t machine, uint32_t seq,
			  uint32_t cpu, int64_t ts, int64_t prev,
			  int64_t prev_state, int64_t next)
{
	size_t ev, b = ftrace_begin(t, seq, machine, cpu, ts, prev, &ev);
	size_t s = pb_begin_nested(&t->pkt, FE_SCHED_SWITCH);
	pb_put_string(&t->pkt, SS_PREV_COMM, comm_of(prev));
	pb_put_varint(&t->pkt, SS_PREV_PID, (uint64_t)prev);
	pb_put_varint(&t->pkt, SS_PREV_PRIO, 120);
	pb_put_varint(&t->pkt, SS_PREV_STATE, (uint64_t)prev_state);
	pb_put_string(&t->pkt, SS_NEXT_COMM, comm_of(next));
	pb_put_varint(&t->pkt, SS_NEXT_PID, (uint64_t)next);
	pb_put_varint(&t->pkt, SS_NEXT_PRIO, 120);
	pb_end_nested(&t->pkt, s);
	ftrace_end(t, b, ev);
}

/* A host sched_switch (sequence 1). */
static inline void sw(struct trace *t, uint32_t machine, uint32_t cpu,
		      int64_t ts, int64_t prev, int64_t prev_state,
		      int64_t next)
{
	sw_seq(t, machine, 1, cpu, ts, prev, prev_state, next);
}

static inline void waking(struct trace *t, uint32_t cpu, int64_t ts,
			  int64_t waker,
		   int64_t pid)
{
	size_t ev, b = ftrace_begin(t, 1, 0, cpu, ts, waker, &ev);
	size_t s = pb_begin_nested(&t->pkt, FE_SCHED_WAKING);
	pb_put_string(&t->pkt, SWK_COMM, comm_of(pid));
	pb_put_varint(&t->pkt, SWK_PID, (uint64_t)pid);
	pb_put_varint(&t->pkt, SWK_PRIO, 120);
	pb_put_varint(&t->pkt, SWK_SUCCESS, 1);
	pb_put_varint(&t->pkt, SWK_TARGET_CPU, 0);
	pb_end_nested(&t->pkt, s);
	ftrace_end(t, b, ev);
}

static inline void kvm(struct trace *t, uint32_t cpu, int64_t ts, int64_t pid,
		bool entry)
{
	size_t ev, b = ftrace_begin(t, 1, 0, cpu, ts, pid, &ev);
	size_t s = pb_begin_nested(&t->pkt, entry ? FE_KVM_ENTRY : FE_KVM_EXIT);
	pb_put_varint(&t->pkt, 1, 0x1000);
	pb_end_nested(&t->pkt, s);
	ftrace_end(t, b, ev);
}

/* The QEMU process 1000 with its vCPU threads, as process stats write it. */
static inline void process_tree(struct trace *t, int64_t ts, bool with_1003)
{
	pkt_begin(t, 1, 0);
	pb_put_varint(&t->pkt, TP_TIMESTAMP, (uint64_t)ts);
	size_t tree = pb_begin_nested(&t->pkt, TP_PROCESS_TREE);
	size_t p = pb_begin_nested(&t->pkt, PT_PROCESSES);
	pb_put_varint(&t->pkt, PT_PROC_PID, 1000);
	pb_put_varint(&t->pkt, PT_PROC_PPID, 1);
	pb_put_string(&t->pkt, PT_PROC_CMDLINE, "qemu-system-x86_64");
	pb_end_nested(&t->pkt, p);
	int64_t tids[] = {1001, 1002, 1003};
	for (int i = 0; i < (with_1003 ? 3 : 2); i++) {
		size_t th = pb_begin_nested(&t->pkt, PT_THREADS);
		pb_put_varint(&t->pkt, PT_THREAD_TID, (uint64_t)tids[i]);
		pb_put_string(&t->pkt, PT_THREAD_NAME, comm_of(tids[i]));
		pb_put_varint(&t->pkt, PT_THREAD_TGID, 1000);
		pb_end_nested(&t->pkt, th);
	}
	pb_end_nested(&t->pkt, tree);
	pkt_end(t);
}

/* A `vperfetto`/`vcpu_map` instant on the host clock producer's track. */
static inline void vcpu_map(struct trace *t, int64_t ts, int64_t vcpu,
			    int64_t tid)
{
	pkt_begin(t, 3, 0);
	pb_put_varint(&t->pkt, TP_TIMESTAMP, (uint64_t)ts);
	size_t te = pb_begin_nested(&t->pkt, TP_TRACK_EVENT);
	pb_put_varint(&t->pkt, TE_TYPE, TE_TYPE_INSTANT);
	pb_put_varint(&t->pkt, TE_TRACK_UUID, 77);
	pb_put_string(&t->pkt, TE_CATEGORIES, "vperfetto");
	pb_put_string(&t->pkt, TE_NAME, "vcpu_map");
	size_t a = pb_begin_nested(&t->pkt, TE_DEBUG_ANNOTATIONS);
	pb_put_string(&t->pkt, DA_NAME, "vm");
	pb_put_string(&t->pkt, DA_STRING_VALUE, "testvm");
	pb_end_nested(&t->pkt, a);
	const char *names[] = {"vmm_pid", "vcpu", "host_tid"};
	int64_t vals[] = {1000, vcpu, tid};
	for (int i = 0; i < 3; i++) {
		a = pb_begin_nested(&t->pkt, TE_DEBUG_ANNOTATIONS);
		pb_put_string(&t->pkt, DA_NAME, names[i]);
		pb_put_varint(&t->pkt, DA_INT_VALUE, (uint64_t)vals[i]);
		pb_end_nested(&t->pkt, a);
	}
	a = pb_begin_nested(&t->pkt, TE_DEBUG_ANNOTATIONS);
	pb_put_string(&t->pkt, DA_NAME, "source");
	pb_put_string(&t->pkt, DA_STRING_VALUE, "qmp");
	pb_end_nested(&t->pkt, a);
	pb_end_nested(&t->pkt, te);
	pkt_end(t);
}

static inline void vcpu_map_track(struct trace *t, int64_t ts)
{
	pkt_begin(t, 3, 0);
	pb_put_varint(&t->pkt, TP_TIMESTAMP, (uint64_t)ts);
	size_t td = pb_begin_nested(&t->pkt, TP_TRACK_DESCRIPTOR);
	pb_put_varint(&t->pkt, TD_UUID, 77);
	pb_put_string(&t->pkt, TD_NAME, "vperfetto_host_clock");
	pb_end_nested(&t->pkt, td);
	pkt_end(t);
}

/*
 * The scenario (ns).  Host CPU 0: vCPU 0's thread 1001 runs 1000-2000, is
 * preempted by the hog 2000-3000, runs 3000-4000, sleeps 4000-5000, is
 * woken at 5000 and runs 5500-7000 (kvm_entry 5600, kvm_exit 6000,
 * kvm_entry 6200), then sleeps.  Host CPU 1: vCPU 1's thread 1002 runs
 * 1500-2500, sleeps, is woken at 3500; its switch in is missing (the hole)
 * and it is seen going to sleep again at 4500.  The last host event is at
 * 8000.  Guest: "busy" (50) runs on guest CPU 0 1200-6500, "other" (60) on
 * guest CPU 1 2000-4000.
 */
enum {
	SC_HOST = 1,   /* the host's packets */
	SC_MAPS = 2,   /* with vcpu_map events */
	SC_KVM = 4,    /* with kvm_entry / kvm_exit */
	SC_GUEST = 8,  /* the guest's sched packets */
};

/* Times are base + scale * the numbers below; the guest's packets carry
 * machine_id guest_machine (0: none, for a guest trace of its own). */
static inline void scenario(struct trace *t, unsigned what, int64_t base,
			    int64_t scale, uint32_t guest_machine)
{
#define T(x) (base + scale * (int64_t)(x))
	if (what & SC_HOST) {
		if (what & SC_MAPS) {
			vcpu_map_track(t, T(400));
			vcpu_map(t, T(600), 0, 1001);
			vcpu_map(t, T(600), 1, 1002);
		}
		process_tree(t, T(500), false);
		sw(t, 0, 0, T(1000), 0, 0, 1001);
		sw(t, 0, 1, T(1500), 0, 0, 1002);
		sw(t, 0, 0, T(2000), 1001, 0, 2000);
		sw(t, 0, 1, T(2500), 1002, 1, 0);
		sw(t, 0, 0, T(3000), 2000, 0, 1001);
		waking(t, 0, T(3500), 2000, 1002);
		sw(t, 0, 0, T(4000), 1001, 1, 0);
		sw(t, 0, 1, T(4500), 1002, 1, 0); /* never switched in */
		waking(t, 1, T(5000), 0, 1001);
		sw(t, 0, 0, T(5500), 0, 0, 1001);
		if (what & SC_KVM) {
			kvm(t, 0, T(5600), 1001, true);
			kvm(t, 0, T(6000), 1001, false);
			kvm(t, 0, T(6200), 1001, true);
			kvm(t, 0, T(6900), 1001, false);
		}
		sw(t, 0, 0, T(7000), 1001, 1, 0);
		sw(t, 0, 1, T(8000), 0, 0, 2000);
	}
	if (what & SC_GUEST) {
		uint32_t g = guest_machine;
		sw_seq(t, g, 2, 0, T(1200), 0, 0, 50);
		sw_seq(t, g, 2, 1, T(2000), 0, 0, 60);
		sw_seq(t, g, 2, 1, T(4000), 60, 1, 0);
		sw_seq(t, g, 2, 0, T(6500), 50, 1, 0);
	}
#undef T
}

#endif
