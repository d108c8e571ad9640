/*
 * test_tp_vcpu.c - the vcpu, vcpu_state and guest_thread_host_state tables
 * of vperfetto_tp on small synthetic merged traces whose answers are worked
 * out by hand: a host with two vCPU threads and a CPU hog, a guest machine
 * with a thread on each guest CPU, a hole in the host's sched data (a
 * sched_switch the kernel never wrote), kvm_entry / kvm_exit, mappings from
 * recorded vcpu_map events, from thread names and a mapping that changes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_ctx.h"
#include "tp_load.h"
#include "tp_query.h"
#include "tp_vcpu.h"

/* Field numbers of the messages the test writes beyond perfetto_fields.h
 * (Perfetto's ftrace_event.proto, sched.proto, kvm.proto,
 * process_tree.proto). */
enum {
	FE_KVM_ENTRY = 376,
	FE_KVM_EXIT = 377,
	SS_PREV_COMM = 1,
	SS_PREV_PRIO = 3,
	SS_PREV_STATE = 4,
	SS_NEXT_COMM = 5,
	SS_NEXT_PRIO = 7,
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
};

static void trace_init(struct trace *t)
{
	pb_buf_init(&t->out);
	pb_buf_init(&t->pkt);
}

static void trace_free(struct trace *t)
{
	pb_buf_free(&t->out);
	pb_buf_free(&t->pkt);
}

/* Starts a packet on sequence seq of machine (0: the host). */
static void pkt_begin(struct trace *t, uint32_t seq, uint32_t machine)
{
	pb_buf_reset(&t->pkt);
	pb_put_varint(&t->pkt, TP_TRUSTED_PACKET_SEQUENCE_ID, seq);
	if (machine)
		pb_put_varint(&t->pkt, TP_MACHINE_ID, machine);
}

static void pkt_end(struct trace *t)
{
	pb_put_bytes(&t->out, 1, t->pkt.data, t->pkt.len);
}

static const char *comm_of(int64_t pid)
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
static size_t ftrace_begin(struct trace *t, uint32_t machine, uint32_t cpu,
			   int64_t ts, int64_t pid, size_t *ev)
{
	pkt_begin(t, machine ? 2 : 1, machine);
	size_t b = pb_begin_nested(&t->pkt, TP_FTRACE_EVENTS);
	pb_put_varint(&t->pkt, FB_CPU, cpu);
	*ev = pb_begin_nested(&t->pkt, FB_EVENT);
	pb_put_varint(&t->pkt, FE_TIMESTAMP, (uint64_t)ts);
	pb_put_varint(&t->pkt, FE_PID, (uint64_t)pid);
	return b;
}

static void ftrace_end(struct trace *t, size_t b, size_t ev)
{
	pb_end_nested(&t->pkt, ev);
	pb_end_nested(&t->pkt, b);
	pkt_end(t);
}

/* prev_state: 0 runnable (R), 1 sleeping (S) */
static void sw(struct trace *t, uint32_t machine, uint32_t cpu, int64_t ts,
	       int64_t prev, int64_t prev_state, int64_t next)
{
	size_t ev, b = ftrace_begin(t, machine, cpu, ts, prev, &ev);
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

static void waking(struct trace *t, uint32_t cpu, int64_t ts, int64_t waker,
		   int64_t pid)
{
	size_t ev, b = ftrace_begin(t, 0, cpu, ts, waker, &ev);
	size_t s = pb_begin_nested(&t->pkt, FE_SCHED_WAKING);
	pb_put_string(&t->pkt, SWK_COMM, comm_of(pid));
	pb_put_varint(&t->pkt, SWK_PID, (uint64_t)pid);
	pb_put_varint(&t->pkt, SWK_PRIO, 120);
	pb_put_varint(&t->pkt, SWK_SUCCESS, 1);
	pb_put_varint(&t->pkt, SWK_TARGET_CPU, 0);
	pb_end_nested(&t->pkt, s);
	ftrace_end(t, b, ev);
}

static void kvm(struct trace *t, uint32_t cpu, int64_t ts, int64_t pid,
		bool entry)
{
	size_t ev, b = ftrace_begin(t, 0, cpu, ts, pid, &ev);
	size_t s = pb_begin_nested(&t->pkt, entry ? FE_KVM_ENTRY : FE_KVM_EXIT);
	pb_put_varint(&t->pkt, 1, 0x1000);
	pb_end_nested(&t->pkt, s);
	ftrace_end(t, b, ev);
}

/* The QEMU process 1000 with its vCPU threads, as process stats write it. */
static void process_tree(struct trace *t, bool with_1003)
{
	pkt_begin(t, 1, 0);
	pb_put_varint(&t->pkt, TP_TIMESTAMP, 500);
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
static void vcpu_map(struct trace *t, int64_t ts, int64_t vcpu, int64_t tid)
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

static void vcpu_map_track(struct trace *t)
{
	pkt_begin(t, 3, 0);
	pb_put_varint(&t->pkt, TP_TIMESTAMP, 400);
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
static void scenario(struct trace *t, bool maps, bool with_kvm)
{
	if (maps) {
		vcpu_map_track(t);
		vcpu_map(t, 600, 0, 1001);
		vcpu_map(t, 600, 1, 1002);
	}
	process_tree(t, false);
	sw(t, 0, 0, 1000, 0, 0, 1001);
	sw(t, 0, 1, 1500, 0, 0, 1002);
	sw(t, 0, 0, 2000, 1001, 0, 2000);
	sw(t, 0, 1, 2500, 1002, 1, 0);
	sw(t, 0, 0, 3000, 2000, 0, 1001);
	waking(t, 0, 3500, 2000, 1002);
	sw(t, 0, 0, 4000, 1001, 1, 0);
	sw(t, 0, 1, 4500, 1002, 1, 0); /* 1002 was never switched in */
	waking(t, 1, 5000, 0, 1001);
	sw(t, 0, 0, 5500, 0, 0, 1001);
	if (with_kvm) {
		kvm(t, 0, 5600, 1001, true);
		kvm(t, 0, 6000, 1001, false);
		kvm(t, 0, 6200, 1001, true);
		kvm(t, 0, 6900, 1001, false);
	}
	sw(t, 0, 0, 7000, 1001, 1, 0);
	sw(t, 0, 1, 8000, 0, 0, 2000);
	/* the guest, machine 1 */
	sw(t, 1, 0, 1200, 0, 0, 50);
	sw(t, 1, 1, 2000, 0, 0, 60);
	sw(t, 1, 1, 4000, 60, 1, 0);
	sw(t, 1, 0, 6500, 50, 1, 0);
}

struct loaded {
	struct tp_ctx *ctx;
	sqlite3 *db;
};

static void load(struct loaded *l, struct trace *t,
		 const struct tp_vcpu_assign *assign)
{
	struct tp_load_opts o = {.quiet = true, .vcpu_assign = assign};
	struct vp_error err;

	l->ctx = tp_ctx_new();
	assert_non_null(l->ctx);
	assert_int_equal(tp_load_buffer(l->ctx, t->out.data, t->out.len, &o),
			 0);
	l->db = tp_query_open(l->ctx, &err);
	assert_non_null(l->db);
}

static void unload(struct loaded *l)
{
	tp_query_close(l->db);
	tp_ctx_free(l->ctx);
}

/* The rows of a query, columns joined by ',' and rows by ';'. */
static char *rows(struct loaded *l, const char *sql)
{
	static char buf[4096];
	sqlite3_stmt *st;
	size_t n = 0;

	buf[0] = 0;
	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(l->db));
	while (sqlite3_step(st) == SQLITE_ROW) {
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			const char *v = (const char *)sqlite3_column_text(st, c);
			n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s",
					      c ? "," : "", v ? v : "NULL");
		}
		n += (size_t)snprintf(buf + n, sizeof buf - n, ";");
		assert_true(n < sizeof buf);
	}
	sqlite3_finalize(st);
	return buf;
}

static void test_name_parse(void **state)
{
	(void)state;
	assert_int_equal(tp_vcpu_index_from_name("CPU 0/KVM"), 0);
	assert_int_equal(tp_vcpu_index_from_name("CPU 12/TCG"), 12);
	assert_int_equal(tp_vcpu_index_from_name("crosvm_vcpu3"), 3);
	assert_int_equal(tp_vcpu_index_from_name("crosvm_vcpu 7"), 7);
	assert_int_equal(tp_vcpu_index_from_name("CPU 1/KVMx"), -1);
	assert_int_equal(tp_vcpu_index_from_name("ALL CPUs/TCG"), -1);
	assert_int_equal(tp_vcpu_index_from_name("CPU /KVM"), -1);
	assert_int_equal(tp_vcpu_index_from_name("crosvm_vcpu"), -1);
	assert_int_equal(tp_vcpu_index_from_name("crosvm_vcpu2x"), -1);
	assert_int_equal(tp_vcpu_index_from_name(NULL), -1);
}

static const char *const vcpu0_states =
	"1000,1000,running,0;2000,1000,preempted,NULL;"
	"3000,1000,running,0;4000,1000,blocked,NULL;"
	"5000,500,preempted,NULL;5500,500,running,0;6000,200,exit,0;"
	"6200,700,running,0;6900,100,exit,0;7000,1000,blocked,NULL;";
/* The hole: 1002 was woken at 3500 and next seen switching out at 4500. */
static const char *const vcpu1_states =
	"1000,500,unknown,NULL;1500,1000,running,1;2500,1000,blocked,NULL;"
	"3500,1000,unknown,NULL;4500,3500,blocked,NULL;";

static void check_states(struct loaded *l)
{
	assert_string_equal(
		rows(l, "select ts, dur, state, host_cpu from vcpu_state"
			" where machine_id = 1 and cpu = 0 order by ts"),
		vcpu0_states);
	assert_string_equal(
		rows(l, "select ts, dur, state, host_cpu from vcpu_state"
			" where machine_id = 1 and cpu = 1 order by ts"),
		vcpu1_states);
	/* busy on guest CPU 0, 1200-6500, cut by vCPU 0's states */
	assert_string_equal(
		rows(l, "select g.ts, g.dur, g.state from"
			" guest_thread_host_state g join thread using (utid)"
			" where tid = 50 order by g.ts"),
		"1200,800,running;2000,1000,preempted;3000,1000,running;"
		"4000,1000,blocked;5000,500,preempted;5500,500,running;"
		"6000,200,exit;6200,300,running;");
	assert_string_equal(
		rows(l, "select tid, name, running_dur, host_running_dur,"
			" preempted_dur, blocked_dur, exit_dur, unknown_dur"
			" from guest_thread_host_summary order by tid"),
		"50,busy,5300,2600,1500,1000,200,0;"
		"60,other,2000,500,0,1000,0,500;");
}

/* Mappings recorded by the host clock producer. */
static void test_recorded_map(void **state)
{
	(void)state;
	struct trace t;
	struct loaded l;

	trace_init(&t);
	scenario(&t, true, true);
	load(&l, &t, NULL);
	assert_string_equal(
		rows(&l, "select machine_id, cpu, tid, name, vmm_pid, vm, source,"
			 " start_ts, end_ts, utid is not null from vcpu"
			 " order by cpu"),
		"1,0,1001,CPU 0/TCG,1000,testvm,qmp,NULL,NULL,1;"
		"1,1,1002,CPU 1/TCG,1000,testvm,qmp,NULL,NULL,1;");
	check_states(&l);
	/* The vcpu's utid is the host thread's. */
	assert_string_equal(
		rows(&l, "select count(*) from vcpu v join thread t using (utid)"
			 " where t.tid = v.tid and t.machine_id = 0"),
		"2;");
	unload(&l);
	trace_free(&t);
}

/* No vcpu_map: QEMU's thread names say which thread runs which vCPU. */
static void test_thread_names(void **state)
{
	(void)state;
	struct trace t;
	struct loaded l;

	trace_init(&t);
	scenario(&t, false, true);
	load(&l, &t, NULL);
	assert_string_equal(
		rows(&l, "select machine_id, cpu, tid, vmm_pid, source from vcpu"
			 " order by cpu"),
		"1,0,1001,1000,thread_name;1,1,1002,1000,thread_name;");
	check_states(&l);
	unload(&l);
	trace_free(&t);
}

/* Without kvm events a vCPU that is on a host CPU is running. */
static void test_no_kvm(void **state)
{
	(void)state;
	struct trace t;
	struct loaded l;

	trace_init(&t);
	scenario(&t, true, false);
	load(&l, &t, NULL);
	assert_string_equal(
		rows(&l, "select ts, dur, state from vcpu_state where cpu = 0"
			 " and ts >= 5000 order by ts"),
		"5000,500,preempted;5500,1500,running;7000,1000,blocked;");
	assert_string_equal(
		rows(&l, "select host_running_dur, exit_dur from"
			 " guest_thread_host_summary where tid = 50"),
		"2800,0;");
	unload(&l);
	trace_free(&t);
}

/* vCPU 0 moves to thread 1003 at 5200: before, 1001's states; after,
 * 1003's, of which nothing is known. */
static void test_map_changes(void **state)
{
	(void)state;
	struct trace t;
	struct loaded l;

	trace_init(&t);
	scenario(&t, true, false);
	vcpu_map(&t, 5200, 0, 1003);
	load(&l, &t, NULL);
	assert_string_equal(
		rows(&l, "select cpu, tid, start_ts, end_ts from vcpu"
			 " order by cpu, tid"),
		"0,1001,NULL,5200;0,1003,5200,NULL;1,1002,NULL,NULL;");
	assert_string_equal(
		rows(&l, "select ts, dur, state from vcpu_state where cpu = 0"
			 " and ts >= 4000 order by ts"),
		"4000,1000,blocked;5000,200,preempted;5200,2800,unknown;");
	assert_string_equal(
		rows(&l, "select running_dur, unknown_dur from"
			 " guest_thread_host_summary where tid = 50"),
		"5300,1300;");
	unload(&l);
	trace_free(&t);
}

/* The caller (the merge) says which VM is which machine; a VM it does not
 * name gets no rows. */
static void test_assign(void **state)
{
	(void)state;
	struct trace t;
	struct loaded l;
	struct tp_vcpu_assign a = {.n = 1, .vmm_pid = {999}, .machine = {1}};

	trace_init(&t);
	scenario(&t, true, false);
	load(&l, &t, &a);
	assert_string_equal(rows(&l, "select count(*) from vcpu"), "0;");
	assert_string_equal(
		rows(&l, "select count(*) from guest_thread_host_state"), "0;");
	unload(&l);
	a.vmm_pid[0] = 1000;
	load(&l, &t, &a);
	assert_string_equal(rows(&l, "select count(*) from vcpu"), "2;");
	unload(&l);
	trace_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_parse),
		cmocka_unit_test(test_recorded_map),
		cmocka_unit_test(test_thread_names),
		cmocka_unit_test(test_no_kvm),
		cmocka_unit_test(test_map_changes),
		cmocka_unit_test(test_assign),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
