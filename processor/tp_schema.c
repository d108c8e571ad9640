/*
 * tp_schema.c - column definitions of the tables in tp_schema.h and the
 * views that give them Perfetto's public names.
 */
#include "tp_schema.h"

#define TP_COL_DEF(T, c, ty) {#c, TP_COL_##ty},

static const struct tp_coldef slice_cols[] = {TP_SLICE_COLS(TP_COL_DEF)};
static const struct tp_coldef track_cols[] = {TP_TRACK_COLS(TP_COL_DEF)};
static const struct tp_coldef counter_cols[] = {TP_COUNTER_COLS(TP_COL_DEF)};
static const struct tp_coldef thread_cols[] = {TP_THREAD_COLS(TP_COL_DEF)};
static const struct tp_coldef process_cols[] = {TP_PROCESS_COLS(TP_COL_DEF)};
static const struct tp_coldef args_cols[] = {TP_ARGS_COLS(TP_COL_DEF)};
static const struct tp_coldef stats_cols[] = {TP_STATS_COLS(TP_COL_DEF)};
static const struct tp_coldef metadata_cols[] = {TP_METADATA_COLS(TP_COL_DEF)};
static const struct tp_coldef machine_cols[] = {TP_MACHINE_COLS(TP_COL_DEF)};
static const struct tp_coldef clock_snapshot_cols[] = {
	TP_CLOCK_SNAPSHOT_COLS(TP_COL_DEF)};
static const struct tp_coldef sched_cols[] = {TP_SCHED_COLS(TP_COL_DEF)};
static const struct tp_coldef thread_state_cols[] = {
	TP_THREAD_STATE_COLS(TP_COL_DEF)};
static const struct tp_coldef ftrace_event_cols[] = {
	TP_FTRACE_EVENT_COLS(TP_COL_DEF)};
static const struct tp_coldef flow_cols[] = {TP_FLOW_COLS(TP_COL_DEF)};
static const struct tp_coldef cpu_cols[] = {TP_CPU_COLS(TP_COL_DEF)};
static const struct tp_coldef cpu_freq_cols[] = {TP_CPU_FREQ_COLS(TP_COL_DEF)};
static const struct tp_coldef state_cols[] = {TP_STATE_COLS(TP_COL_DEF)};
static const struct tp_coldef vcpu_cols[] = {TP_VCPU_COLS(TP_COL_DEF)};
static const struct tp_coldef vcpu_state_cols[] = {
	TP_VCPU_STATE_COLS(TP_COL_DEF)};
static const struct tp_coldef gths_cols[] = {
	TP_GUEST_THREAD_HOST_STATE_COLS(TP_COL_DEF)};
static const struct tp_coldef trace_diagnostics_cols[] = {
	TP_TRACE_DIAGNOSTICS_COLS(TP_COL_DEF)};
static const struct tp_coldef logs_cols[] = {TP_LOGS_COLS(TP_COL_DEF)};

#define N(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

static const struct {
	const char *name;
	const struct tp_coldef *cols;
	unsigned ncols;
} table_defs[TP_T_COUNT] = {
	[TP_T_SLICE] = {"__intrinsic_slice", slice_cols, N(slice_cols)},
	[TP_T_TRACK] = {"__intrinsic_track", track_cols, N(track_cols)},
	[TP_T_COUNTER] = {"__intrinsic_counter", counter_cols, N(counter_cols)},
	[TP_T_THREAD] = {"thread", thread_cols, N(thread_cols)},
	[TP_T_PROCESS] = {"process", process_cols, N(process_cols)},
	[TP_T_ARGS] = {"__intrinsic_args", args_cols, N(args_cols)},
	[TP_T_STATS] = {"stats", stats_cols, N(stats_cols)},
	[TP_T_METADATA] = {"metadata", metadata_cols, N(metadata_cols)},
	[TP_T_MACHINE] = {"__intrinsic_machine", machine_cols, N(machine_cols)},
	[TP_T_CLOCK_SNAPSHOT] = {"__intrinsic_clock_snapshot", clock_snapshot_cols,
				 N(clock_snapshot_cols)},
	[TP_T_SCHED] = {"__intrinsic_sched_slice", sched_cols, N(sched_cols)},
	[TP_T_THREAD_STATE] = {"__intrinsic_thread_state", thread_state_cols,
			       N(thread_state_cols)},
	[TP_T_FTRACE_EVENT] = {"__intrinsic_ftrace_event", ftrace_event_cols,
			       N(ftrace_event_cols)},
	[TP_T_FLOW] = {"flow", flow_cols, N(flow_cols)},
	[TP_T_CPU] = {"__intrinsic_cpu", cpu_cols, N(cpu_cols)},
	[TP_T_CPU_FREQ] = {"__intrinsic_cpu_freq", cpu_freq_cols,
			   N(cpu_freq_cols)},
	[TP_T_STATE] = {"__intrinsic_state", state_cols, N(state_cols)},
	[TP_T_VCPU] = {"vcpu", vcpu_cols, N(vcpu_cols)},
	[TP_T_VCPU_STATE] = {"vcpu_state", vcpu_state_cols,
			     N(vcpu_state_cols)},
	[TP_T_GTHS] = {"guest_thread_host_state", gths_cols, N(gths_cols)},
	[TP_T_TRACE_DIAGNOSTICS] = {"__intrinsic_trace_diagnostics",
				    trace_diagnostics_cols,
				    N(trace_diagnostics_cols)},
	[TP_T_LOGS] = {"__intrinsic_logs", logs_cols, N(logs_cols)},
};

void tp_schema_init(struct tp_table *tables, struct tp_strpool *pool)
{
	for (unsigned i = 0; i < TP_T_COUNT; i++)
		tp_table_init(&tables[i], table_defs[i].name, table_defs[i].cols,
			      table_defs[i].ncols, pool);
}

/* The views below give Perfetto's (v58) public tables and columns, in
 * Perfetto's order, so `SELECT *` prints what Perfetto prints. */
#define TRACK_COMMON                                                        \
	"id, name, type, parent_id, source_arg_set_id, machine_id"

const char tp_schema_views_sql[] =
	"CREATE VIEW slice AS SELECT id, ts, dur, track_id, category, name,"
	" depth, parent_id, arg_set_id, thread_ts, thread_dur,"
	" thread_instruction_count, thread_instruction_delta,"
	" category AS cat, id AS slice_id FROM __intrinsic_slice;\n"
	"CREATE VIEW slices AS SELECT * FROM slice;\n"
	"CREATE VIEW instant AS SELECT ts, track_id, name, arg_set_id"
	" FROM slice WHERE dur = 0;\n"
	"CREATE VIEW counter AS SELECT id, ts, track_id, value, arg_set_id"
	" FROM __intrinsic_counter;\n"
	/* counters: the counter rows with their track's (legacy) name and
	 * unit, in ts order, as Perfetto's prelude has it */
	"CREATE VIEW counters AS SELECT v.*, t.name, t.unit FROM counter v"
	" JOIN counter_track t ON v.track_id = t.id ORDER BY ts;\n"
	"CREATE VIEW track AS SELECT id, name, type, dimension_arg_set_id,"
	" parent_id, source_arg_set_id, machine_id, track_group_id"
	" FROM __intrinsic_track;\n"
	"CREATE VIEW thread_track AS SELECT " TRACK_COMMON
	", utid FROM __intrinsic_track"
	" WHERE utid IS NOT NULL AND event_type = 'slice';\n"
	"CREATE VIEW process_track AS SELECT " TRACK_COMMON
	", upid FROM __intrinsic_track"
	" WHERE upid IS NOT NULL AND event_type = 'slice';\n"
	"CREATE VIEW cpu_track AS SELECT " TRACK_COMMON
	", EXTRACT_ARG(dimension_arg_set_id, 'cpu') AS cpu"
	" FROM __intrinsic_track WHERE event_type = 'slice'"
	" AND EXTRACT_ARG(dimension_arg_set_id, 'cpu') IS NOT NULL;\n"
	"CREATE VIEW counter_track AS SELECT id, name, parent_id, type,"
	" dimension_arg_set_id, source_arg_set_id, machine_id,"
	" counter_unit AS unit,"
	" EXTRACT_ARG(source_arg_set_id, 'description') AS description"
	" FROM __intrinsic_track WHERE event_type = 'counter';\n"
	"CREATE VIEW cpu_counter_track AS SELECT id, name, type, parent_id,"
	" source_arg_set_id, machine_id, unit, description,"
	" EXTRACT_ARG(dimension_arg_set_id, 'cpu') AS cpu"
	" FROM counter_track"
	" WHERE EXTRACT_ARG(dimension_arg_set_id, 'cpu') IS NOT NULL;\n"
	"CREATE VIEW thread_counter_track AS SELECT id, name, type, parent_id,"
	" source_arg_set_id, machine_id, counter_unit AS unit,"
	" EXTRACT_ARG(source_arg_set_id, 'description') AS description, utid"
	" FROM __intrinsic_track"
	" WHERE event_type = 'counter' AND utid IS NOT NULL;\n"
	"CREATE VIEW process_counter_track AS SELECT id, name, type, parent_id,"
	" source_arg_set_id, machine_id, counter_unit AS unit,"
	" EXTRACT_ARG(source_arg_set_id, 'description') AS description, upid"
	" FROM __intrinsic_track"
	" WHERE event_type = 'counter' AND upid IS NOT NULL;\n"
	"CREATE VIEW state AS SELECT id, ts, dur, track_id, category, value,"
	" arg_set_id FROM __intrinsic_state;\n"
	"CREATE VIEW state_track AS SELECT id, name, parent_id, type,"
	" dimension_arg_set_id, source_arg_set_id, machine_id"
	" FROM __intrinsic_track WHERE event_type = 'state';\n"
	"CREATE VIEW process_state_track AS SELECT id, name, type, parent_id,"
	" source_arg_set_id, machine_id, upid FROM __intrinsic_track"
	" WHERE event_type = 'state' AND upid IS NOT NULL;\n"
	"CREATE VIEW thread_state_track AS SELECT id, name, type, parent_id,"
	" source_arg_set_id, machine_id, utid FROM __intrinsic_track"
	" WHERE event_type = 'state' AND utid IS NOT NULL;\n"
	"CREATE VIEW args AS SELECT id, arg_set_id, flat_key, key, int_value,"
	" string_value, real_value, value_type,"
	" CASE value_type"
	"  WHEN 'int' THEN CAST(int_value AS TEXT)"
	/* A uint arg is a uint64 kept in the int column: show it unsigned. */
	"  WHEN 'uint' THEN printf('%llu', int_value)"
	"  WHEN 'bool' THEN CASE WHEN int_value THEN 'true' ELSE 'false' END"
	"  WHEN 'pointer' THEN printf('0x%x', int_value)"
	"  WHEN 'real' THEN CAST(real_value AS TEXT)"
	"  WHEN 'null' THEN NULL"
	"  ELSE string_value END AS display_value"
	" FROM __intrinsic_args;\n"
	"CREATE VIEW cpu AS SELECT ucpu AS id, ucpu, cpu, cluster_id,"
	" processor, machine_id, capacity, arg_set_id FROM __intrinsic_cpu"
	" ORDER BY ucpu;\n"
	"CREATE VIEW cpu_available_frequencies AS SELECT id, ucpu AS cpu, freq,"
	" ucpu FROM __intrinsic_cpu_freq;\n"
	/* sched, thread_state and ftrace_event show ucpu as cpu, as
	 * Perfetto does (equal to cpu on the host); join cpu USING (ucpu)
	 * for a remote machine's cpu number and machine_id. */
	"CREATE VIEW sched AS SELECT id, ts, dur, ucpu AS cpu, utid,"
	" end_state, priority, ucpu, ts + dur AS ts_end"
	" FROM __intrinsic_sched_slice;\n"
	"CREATE VIEW sched_slice AS SELECT id, ts, dur, cpu, utid, end_state,"
	" priority, ucpu FROM sched;\n"
	"CREATE VIEW thread_state AS SELECT id, ts, dur, ucpu AS cpu, utid,"
	" state, io_wait, blocked_function, waker_utid, waker_id,"
	" irq_context, ucpu FROM __intrinsic_thread_state;\n"
	"CREATE VIEW ftrace_event AS SELECT id, ts, name, ucpu AS cpu, utid,"
	" arg_set_id, common_flags, ucpu FROM __intrinsic_ftrace_event;\n"
	"CREATE VIEW raw AS SELECT * FROM ftrace_event;\n"
	"CREATE VIEW clock_snapshot AS SELECT * FROM __intrinsic_clock_snapshot;\n"
	/* logs: every source's; android_logs: logcat's, without the
	 * source and args, as Perfetto's prelude has them */
	"CREATE VIEW logs AS SELECT id, ts, utid, prio, log_source, tag, msg,"
	" arg_set_id FROM __intrinsic_logs;\n"
	"CREATE VIEW android_logs AS SELECT id, ts, utid, prio, tag, msg"
	" FROM __intrinsic_logs WHERE log_source = 'android_logcat';\n"
	/* label_index: 0 for the host (raw_id 0), else the machine's rank
	 * among the other machines */
	"CREATE VIEW machine AS SELECT *,"
	" iif(raw_id = 0, 0, sum(iif(raw_id = 0, 0, 1)) OVER (ORDER BY id))"
	" AS label_index FROM __intrinsic_machine;\n"
	/* Per guest thread: its time running in the guest, and how much
	 * of that its vCPU spent in each host-side state. */
	"CREATE VIEW guest_thread_host_summary AS SELECT g.machine_id,"
	" g.utid, t.tid, t.name, sum(g.dur) AS running_dur,"
	" sum(iif(g.state = 'running', g.dur, 0)) AS host_running_dur,"
	" sum(iif(g.state = 'preempted', g.dur, 0)) AS preempted_dur,"
	" sum(iif(g.state = 'blocked', g.dur, 0)) AS blocked_dur,"
	" sum(iif(g.state = 'exit', g.dur, 0)) AS exit_dur,"
	" sum(iif(g.state = 'unknown', g.dur, 0)) AS unknown_dur"
	" FROM guest_thread_host_state g JOIN thread t USING (utid)"
	" GROUP BY g.utid ORDER BY g.machine_id, g.utid;\n"
	"CREATE VIEW trace_bounds AS SELECT trace_start() AS start_ts,"
	" trace_end() AS end_ts;\n";
