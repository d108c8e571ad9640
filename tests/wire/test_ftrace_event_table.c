/*
 * test_ftrace_event_table.c - the generated ftrace event table and its
 * lookups: ordered by id, what each part reads of it (the probes' groups
 * and kernel field names, the merge's pid fields, the processor's row
 * names), and the numbers protos/ gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ftrace_event_table.h"
#include "perfetto_fields.h"

static void test_ordered_and_whole(void **state)
{
	(void)state;
	assert_true(ft_event_descs_count > 90);
	for (size_t i = 0; i < ft_event_descs_count; i++) {
		const struct ft_event_desc *d = &ft_event_descs[i];
		if (i)
			assert_true(ft_event_descs[i - 1].id < d->id);
		assert_non_null(d->name);
		assert_non_null(d->event);
		/* The probes find their events by group/event. */
		if (d->uses & FT_USE_PROBES)
			assert_non_null(d->group);
		for (unsigned k = 0; k < d->nfields; k++) {
			assert_true(d->fields[k].num > 0);
			assert_non_null(d->fields[k].name);
		}
		assert_ptr_equal(ft_event_by_id(d->id), d);
	}
}

static void test_sched_switch(void **state)
{
	(void)state;
	const struct ft_event_desc *d = ft_event_by_name("sched",
							 "sched_switch");
	assert_non_null(d);
	assert_ptr_equal(ft_event_by_id(FE_SCHED_SWITCH), d);
	assert_int_equal(d->id, 4);
	assert_int_equal(d->compact, FT_EVENT_COMPACT_SWITCH);
	assert_int_equal(d->uses, FT_USE_PROBES | FT_USE_PROCESSOR);
	assert_int_equal(d->nfields, 7);
	/* In the order the probes write them: by number. */
	for (unsigned k = 0; k < d->nfields; k++)
		assert_int_equal(d->fields[k].num, k + 1);
	assert_string_equal(d->fields[0].name, "prev_comm");
	assert_int_equal(d->fields[0].type, FT_FIELD_STR);
	assert_int_equal(d->fields[3].type, FT_FIELD_INT); /* prev_state */
	assert_non_null(d->pid_fields);
	assert_int_equal(d->pid_fields[0], SS_PREV_PID);
	assert_int_equal(d->pid_fields[1], SS_NEXT_PID);
	assert_int_equal(d->pid_fields[2], 0);
	assert_true(ft_event_field(d, 2)->pid);
	assert_false(ft_event_field(d, 3)->pid);
}

static void test_pids_and_cpus_the_merge_remaps(void **state)
{
	(void)state;
	const struct ft_event_desc *w = ft_event_by_id(FE_SCHED_WAKEUP);
	assert_non_null(w->pid_fields);
	assert_int_equal(w->pid_fields[0], 2);
	assert_int_equal(w->pid_fields[1], 0);
	assert_non_null(w->cpu_fields);
	assert_int_equal(w->cpu_fields[0], SW_TARGET_CPU);
	assert_int_equal(w->cpu_fields[1], 0);
	/* the scheduler's and tasks' pid fields, for --no-machine-id */
	assert_non_null(ft_event_by_id(FE_SCHED_WAKING)->pid_fields);
	const struct ft_event_desc *f = ft_event_by_id(FE_SCHED_PROCESS_FORK);
	assert_non_null(f->pid_fields);
	assert_non_null(f->pid_fields[1]);
	assert_int_equal(f->pid_fields[2], 0);
	assert_non_null(ft_event_by_id(FE_TASK_NEWTASK)->pid_fields);
	assert_non_null(ft_event_by_id(FE_CPU_FREQUENCY)->cpu_fields);
	/* a field that is neither */
	assert_null(ft_event_by_id(FE_PRINT)->pid_fields);
	assert_null(ft_event_by_id(FE_PRINT)->cpu_fields);
}

static void test_probes_only_and_kernel_names(void **state)
{
	(void)state;
	const struct ft_event_desc *d = ft_event_by_name("kvm", "kvm_exit");
	assert_non_null(d);
	assert_int_equal(d->id, FE_KVM_EXIT);
	/* the probes encode it typed; the processor makes rows of it (the
	 * vcpu tables cut running time at kvm_exit / kvm_entry) */
	assert_int_equal(d->uses, FT_USE_PROBES | FT_USE_PROCESSOR);
	assert_string_equal(d->fields[0].name, "esr_ec");
	assert_string_equal(d->fields[0].kname, "exit_reason");
	assert_int_equal(d->fields[0].type, FT_FIELD_UINT);
	assert_null(d->fields[1].kname);
	assert_string_equal(ft_event_by_id(FE_KVM_ENTRY)->fields[0].kname,
			    "rip");
}

static void test_processor_names(void **state)
{
	(void)state;
	const struct ft_event_desc *z = ft_event_by_id(FE_ZERO);
	assert_string_equal(z->name, "0");
	assert_string_equal(z->event, "zero");
	assert_int_equal(z->uses, FT_USE_PROCESSOR);
	/* LowmemoryKillFtraceEvent as Perfetto numbers it. */
	const struct ft_event_desc *l = ft_event_by_id(35);
	assert_string_equal(l->name, "lowmemory_kill");
	assert_string_equal(ft_event_field(l, 3)->name, "pagecache_size");
	assert_null(ft_event_field(l, 6));
	/* Named only: no args. */
	assert_int_equal(ft_event_by_id(FE_GENERIC)->nfields, 0);
	assert_null(ft_event_by_id(FE_GENERIC)->fields);
}

static void test_misses(void **state)
{
	(void)state;
	assert_null(ft_event_by_id(0));
	assert_null(ft_event_by_id(99999));
	assert_null(ft_event_by_name("sched", "no_such_event"));
	assert_null(ft_event_by_name("kvm", "sched_switch"));
	/* An event is found in its own group only; one without a group
	 * (the processor's alone) in none. */
	assert_non_null(ft_event_by_name("power", "cpu_frequency"));
	assert_null(ft_event_by_name("irq", "cpu_frequency"));
	assert_null(ft_event_by_name("", "cpu_frequency"));
	assert_null(ft_event_by_name("", "tracing_mark_write"));
	assert_null(ft_event_by_name("ftrace", "tracing_mark_write"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ordered_and_whole),
		cmocka_unit_test(test_sched_switch),
		cmocka_unit_test(test_pids_and_cpus_the_merge_remaps),
		cmocka_unit_test(test_probes_only_and_kernel_names),
		cmocka_unit_test(test_processor_names),
		cmocka_unit_test(test_misses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
