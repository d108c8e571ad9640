/*
 * ftrace_formats.h - event format texts (as a Linux 6.x x86_64 kernel
 * prints them in events/<group>/<name>/format) for the unit tests and the
 * fuzz target, parsed with libtraceevent like the probe parses tracefs.
 */
#ifndef VP_TEST_FTRACE_FORMATS_H
#define VP_TEST_FTRACE_FORMATS_H

#define FMT_COMMON                                                         \
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" \
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" \
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;"      \
	"\tsigned:0;\n"                                                        \
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"

static const char fmt_sched_switch[] =
	"name: sched_switch\nID: 372\nformat:\n" FMT_COMMON
	"\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
	"\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
	"\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n"
	"print fmt: \"prev_comm=%s next_comm=%s\", REC->prev_comm, "
	"REC->next_comm\n";

static const char fmt_sched_waking[] =
	"name: sched_waking\nID: 375\nformat:\n" FMT_COMMON
	"\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n\n"
	"print fmt: \"comm=%s pid=%d\", REC->comm, REC->pid\n";

static const char fmt_print[] =
	"name: print\nID: 5\nformat:\n" FMT_COMMON
	"\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
	"\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n\n"
	"print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n";

static const char fmt_sched_process_exec[] =
	"name: sched_process_exec\nID: 370\nformat:\n" FMT_COMMON
	"\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n"
	"\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n"
	"\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n\n"
	"print fmt: \"filename=%s pid=%d old_pid=%d\", __get_str(filename), "
	"REC->pid, REC->old_pid\n";

static const char fmt_kvm_exit[] =
	"name: kvm_exit\nID: 103\nformat:\n" FMT_COMMON
	"\tfield:unsigned int exit_reason;\toffset:8;\tsize:4;\tsigned:0;\n"
	"\tfield:unsigned long guest_rip;\toffset:16;\tsize:8;\tsigned:0;\n"
	"\tfield:u32 isa;\toffset:24;\tsize:4;\tsigned:0;\n"
	"\tfield:unsigned int vcpu_id;\toffset:56;\tsize:4;\tsigned:0;\n\n"
	"print fmt: \"vcpu %u\", REC->vcpu_id\n";

/* Not typed in Perfetto: goes out as GenericFtraceEvent. */
static const char fmt_my_generic[] =
	"name: my_event\nID: 900\nformat:\n" FMT_COMMON
	"\tfield:int delta;\toffset:8;\tsize:4;\tsigned:1;\n"
	"\tfield:unsigned int count;\toffset:12;\tsize:4;\tsigned:0;\n"
	"\tfield:__data_loc char[] label;\toffset:16;\tsize:4;\tsigned:0;\n"
	"\tfield:char tag[8];\toffset:20;\tsize:8;\tsigned:0;\n"
	"\tfield:u64 arr[2];\toffset:28;\tsize:16;\tsigned:0;\n\n"
	"print fmt: \"delta=%d\", REC->delta\n";

struct test_format {
	const char *sys;
	const char *text;
};

static const struct test_format test_formats[] = {
	{ "sched", fmt_sched_switch },
	{ "sched", fmt_sched_waking },
	{ "ftrace", fmt_print },
	{ "sched", fmt_sched_process_exec },
	{ "kvm", fmt_kvm_exit },
	{ "mine", fmt_my_generic },
};

#endif
