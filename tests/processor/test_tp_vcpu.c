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
#include "vcpu_scenario.h"

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
	scenario(&t, SC_HOST | SC_MAPS | SC_KVM | SC_GUEST, 0, 1, 1);
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
	scenario(&t, SC_HOST | SC_KVM | SC_GUEST, 0, 1, 1);
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
	scenario(&t, SC_HOST | SC_MAPS | SC_GUEST, 0, 1, 1);
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
	scenario(&t, SC_HOST | SC_MAPS | SC_GUEST, 0, 1, 1);
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

/* vCPU 1's thread sleeps at 2500 and is next seen running at 3000 with
 * no sched_waking between (a lost event): when it became runnable is not
 * known, so 2500-3000 is unknown, not blocked.  Woken at 4600 and never
 * seen switched in before the trace ends: unknown too, not preempted. */
static void test_lost_wakeup(void **state)
{
	(void)state;
	struct trace t;
	struct loaded l;

	trace_init(&t);
	vcpu_map_track(&t, 400);
	vcpu_map(&t, 600, 1, 1002);
	sw(&t, 0, 1, 1000, 0, 0, 1002);
	sw(&t, 0, 1, 2000, 1002, 1, 0);
	waking(&t, 0, 2200, 0, 1002);
	sw(&t, 0, 1, 2300, 0, 0, 1002);
	sw(&t, 0, 1, 2500, 1002, 1, 0);
	sw(&t, 0, 1, 3000, 0, 0, 1002); /* no waking before */
	sw(&t, 0, 1, 4000, 1002, 1, 0);
	waking(&t, 0, 4600, 0, 1002); /* and never seen running again */
	sw(&t, 0, 1, 5000, 0, 0, 2000);
	sw_seq(&t, 1, 2, 1, 1000, 0, 0, 60);
	sw_seq(&t, 1, 2, 1, 4500, 60, 1, 0);
	load(&l, &t, NULL);
	assert_string_equal(
		rows(&l, "select ts, dur, state from vcpu_state order by ts"),
		"1000,1000,running;2000,200,blocked;2200,100,preempted;"
		"2300,200,running;2500,500,unknown;3000,1000,running;"
		"4000,600,blocked;4600,400,unknown;");
	assert_string_equal(
		rows(&l, "select running_dur, host_running_dur, preempted_dur,"
			 " blocked_dur, unknown_dur"
			 " from guest_thread_host_summary"),
		"3500,2200,100,700,500;");
	unload(&l);
	trace_free(&t);
}

/* A trace naming more vCPUs than the tables take: they stop at 1024.
 * (Eleven maps a time: instants at one time stack, and a track holds
 * at most 512 slices open, as in Perfetto.) */
static void test_bounds(void **state)
{
	(void)state;
	struct trace t;
	struct loaded l;

	trace_init(&t);
	vcpu_map_track(&t, 400);
	for (int i = 0; i < 1100; i++)
		vcpu_map(&t, 500 + i % 100, i, 1001);
	scenario(&t, SC_HOST | SC_GUEST, 0, 1, 1);
	load(&l, &t, NULL);
	assert_string_equal(rows(&l, "select count(*), max(cpu) from vcpu"),
			    "1024,1023;");
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
	scenario(&t, SC_HOST | SC_MAPS | SC_GUEST, 0, 1, 1);
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
		cmocka_unit_test(test_lost_wakeup),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_assign),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
