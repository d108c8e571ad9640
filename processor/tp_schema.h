/*
 * tp_schema.h - the tables vperfetto_tp builds, with Perfetto's names and
 * columns, so Perfetto queries run unchanged.
 *
 * Each table is an X-macro list of (column, type).  It expands to an enum
 * of column indices (TP_SLICE_ts, ...) that parsers pass to tp_set_*(), and
 * to the column definitions in tp_schema.c.  `id` is implicit (the row
 * index) and comes first in SQL.  Tables whose Perfetto name is a view over
 * a wider table (track, thread_track, args ...) are stored under an
 * __intrinsic_ name and get their views in tp_schema.c.
 */
#ifndef VP_TP_SCHEMA_H
#define VP_TP_SCHEMA_H

#include "tp_db.h"

#define TP_SLICE_COLS(X)                                                    \
	X(SLICE, ts, INT) X(SLICE, dur, INT) X(SLICE, track_id, INT)        \
	X(SLICE, category, STR) X(SLICE, name, STR) X(SLICE, depth, INT)    \
	X(SLICE, stack_id, INT) X(SLICE, parent_stack_id, INT)              \
	X(SLICE, parent_id, INT) X(SLICE, arg_set_id, INT)                  \
	X(SLICE, thread_ts, INT) X(SLICE, thread_dur, INT)                  \
	X(SLICE, thread_instruction_count, INT)                             \
	X(SLICE, thread_instruction_delta, INT)

/* __intrinsic_track: every track; the track, thread_track, process_track,
 * counter_track, cpu_counter_track ... views select from it. */
#define TP_TRACK_COLS(X)                                                    \
	X(TRACK, name, STR) X(TRACK, parent_id, INT)                        \
	X(TRACK, source_arg_set_id, INT) X(TRACK, machine_id, INT)          \
	X(TRACK, type, STR) X(TRACK, dimension_arg_set_id, INT)             \
	X(TRACK, event_type, STR) X(TRACK, counter_unit, STR)               \
	X(TRACK, utid, INT) X(TRACK, upid, INT)                             \
	X(TRACK, track_group_id, INT)

#define TP_COUNTER_COLS(X)                                                  \
	X(COUNTER, ts, INT) X(COUNTER, track_id, INT)                       \
	X(COUNTER, value, REAL) X(COUNTER, arg_set_id, INT)

#define TP_THREAD_COLS(X)                                                   \
	X(THREAD, utid, ALIAS) X(THREAD, tid, INT) X(THREAD, name, STR)     \
	X(THREAD, start_ts, INT) X(THREAD, end_ts, INT)                     \
	X(THREAD, upid, INT) X(THREAD, is_main_thread, INT)                 \
	X(THREAD, is_idle, INT) X(THREAD, machine_id, INT)                  \
	X(THREAD, arg_set_id, INT)

#define TP_PROCESS_COLS(X)                                                  \
	X(PROCESS, upid, ALIAS) X(PROCESS, pid, INT) X(PROCESS, name, STR)  \
	X(PROCESS, start_ts, INT) X(PROCESS, end_ts, INT)                   \
	X(PROCESS, parent_upid, INT) X(PROCESS, uid, INT)                   \
	X(PROCESS, android_appid, INT) X(PROCESS, android_user_id, INT)     \
	X(PROCESS, cmdline, STR)                                            \
	X(PROCESS, arg_set_id, INT) X(PROCESS, machine_id, INT)

/* __intrinsic_args; the args view adds display_value. value_type is one of
 * int, uint, string, real, pointer, bool, json, null. */
#define TP_ARGS_COLS(X)                                                     \
	X(ARGS, arg_set_id, INT) X(ARGS, flat_key, STR) X(ARGS, key, STR)   \
	X(ARGS, int_value, INT) X(ARGS, string_value, STR)                  \
	X(ARGS, real_value, REAL) X(ARGS, value_type, STR)

#define TP_STATS_COLS(X)                                                    \
	X(STATS, name, STR) X(STATS, key, INT) X(STATS, idx, INT)           \
	X(STATS, severity, STR)                                             \
	X(STATS, source, STR) X(STATS, value, INT)                          \
	X(STATS, description, STR) X(STATS, machine_id, INT)                \
	X(STATS, trace_id, INT)

#define TP_METADATA_COLS(X)                                                 \
	X(METADATA, name, STR) X(METADATA, key_type, STR)                   \
	X(METADATA, int_value, INT) X(METADATA, str_value, STR)             \
	X(METADATA, machine_id, INT) X(METADATA, trace_id, INT)

#define TP_MACHINE_COLS(X)                                                  \
	X(MACHINE, raw_id, INT) X(MACHINE, name, STR)                       \
	X(MACHINE, sysname, STR) X(MACHINE, release, STR)                   \
	X(MACHINE, version, STR) X(MACHINE, arch, STR)                      \
	X(MACHINE, num_cpus, INT) X(MACHINE, android_build_fingerprint, STR) \
	X(MACHINE, android_device_manufacturer, STR)                        \
	X(MACHINE, android_sdk_version, INT)                                \
	X(MACHINE, system_ram_bytes, INT) X(MACHINE, system_ram_gb, INT)

#define TP_CLOCK_SNAPSHOT_COLS(X)                                           \
	X(CLOCK_SNAPSHOT, ts, INT) X(CLOCK_SNAPSHOT, clock_id, INT)         \
	X(CLOCK_SNAPSHOT, clock_name, STR) X(CLOCK_SNAPSHOT, clock_value, INT) \
	X(CLOCK_SNAPSHOT, snapshot_id, INT) X(CLOCK_SNAPSHOT, machine_id, INT)

/* sched_slice; `sched` is a view. */
#define TP_SCHED_COLS(X)                                                    \
	X(SCHED, ts, INT) X(SCHED, dur, INT) X(SCHED, cpu, INT)             \
	X(SCHED, utid, INT) X(SCHED, end_state, STR)                        \
	X(SCHED, priority, INT) X(SCHED, ucpu, INT) X(SCHED, machine_id, INT)

#define TP_THREAD_STATE_COLS(X)                                             \
	X(THREAD_STATE, ts, INT) X(THREAD_STATE, dur, INT)                  \
	X(THREAD_STATE, cpu, INT) X(THREAD_STATE, utid, INT)                \
	X(THREAD_STATE, state, STR) X(THREAD_STATE, io_wait, INT)           \
	X(THREAD_STATE, blocked_function, STR)                              \
	X(THREAD_STATE, waker_utid, INT) X(THREAD_STATE, waker_id, INT)     \
	X(THREAD_STATE, irq_context, INT) X(THREAD_STATE, ucpu, INT)        \
	X(THREAD_STATE, machine_id, INT)

/* ftrace_event; `raw` is a view. */
#define TP_FTRACE_EVENT_COLS(X)                                             \
	X(FTRACE_EVENT, ts, INT) X(FTRACE_EVENT, name, STR)                 \
	X(FTRACE_EVENT, cpu, INT) X(FTRACE_EVENT, utid, INT)                \
	X(FTRACE_EVENT, arg_set_id, INT) X(FTRACE_EVENT, common_flags, INT) \
	X(FTRACE_EVENT, ucpu, INT) X(FTRACE_EVENT, machine_id, INT)

#define TP_FLOW_COLS(X)                                                     \
	X(FLOW, slice_out, INT) X(FLOW, slice_in, INT)                      \
	X(FLOW, trace_id, INT) X(FLOW, arg_set_id, INT)

/* __intrinsic_cpu: one row per cpu of a machine that anything referred
 * to; the cpu view gives it Perfetto's id (= ucpu). */
#define TP_CPU_COLS(X)                                                      \
	X(CPU, ucpu, INT) X(CPU, cpu, INT) X(CPU, cluster_id, INT) X(CPU, processor, STR)     \
	X(CPU, machine_id, INT) X(CPU, capacity, INT) X(CPU, arg_set_id, INT)

/* __intrinsic_cpu_freq: one row per frequency a cpu_info packet lists for
 * a cpu (ucpu is the cpu's id); the view cpu_available_frequencies reads
 * it. */
#define TP_CPU_FREQ_COLS(X) X(CPU_FREQ, ucpu, INT) X(CPU_FREQ, freq, INT)

/* vcpu: which host thread runs each guest CPU (tp_vcpu.c).  One row per
 * (guest machine, cpu, host thread); a vCPU whose thread changed has a
 * row for each, with the span the mapping held (start_ts NULL: from the
 * start of the trace; end_ts NULL: to its end).  source: 'vcpu_map' (a
 * recorded mapping) or 'thread_name' (the host thread's name). */
#define TP_VCPU_COLS(X)                                                     \
	X(VCPU, machine_id, INT) X(VCPU, cpu, INT) X(VCPU, utid, INT)       \
	X(VCPU, tid, INT) X(VCPU, name, STR) X(VCPU, vmm_pid, INT)          \
	X(VCPU, vm, STR) X(VCPU, source, STR) X(VCPU, start_ts, INT)        \
	X(VCPU, end_ts, INT)

/* vcpu_state: the host-side state of each guest CPU over time; state is
 * running, preempted, blocked, exit or unknown; host_cpu is set while the
 * vCPU thread is on a host CPU (running, exit). */
#define TP_VCPU_STATE_COLS(X)                                               \
	X(VCPU_STATE, ts, INT) X(VCPU_STATE, dur, INT)                      \
	X(VCPU_STATE, machine_id, INT) X(VCPU_STATE, cpu, INT)              \
	X(VCPU_STATE, state, STR) X(VCPU_STATE, host_cpu, INT)              \
	X(VCPU_STATE, host_utid, INT)

/* guest_thread_host_state: each guest sched slice (the guest thread runs
 * on guest CPU cpu) cut by the vcpu_state of that CPU; parts no vcpu_state
 * covers are unknown. */
#define TP_GUEST_THREAD_HOST_STATE_COLS(X)                                  \
	X(GTHS, ts, INT) X(GTHS, dur, INT) X(GTHS, machine_id, INT)         \
	X(GTHS, cpu, INT) X(GTHS, utid, INT) X(GTHS, state, STR)            \
	X(GTHS, host_cpu, INT) X(GTHS, sched_id, INT)

/* __intrinsic_trace_diagnostics: one row per problem found in the trace's
 * config (tp_diag.c); trace_id is the trace_file row (0). */
#define TP_TRACE_DIAGNOSTICS_COLS(X)                                        \
	X(TRACE_DIAGNOSTICS, key, STR) X(TRACE_DIAGNOSTICS, title, STR)     \
	X(TRACE_DIAGNOSTICS, description, STR)                              \
	X(TRACE_DIAGNOSTICS, remediation, STR)                              \
	X(TRACE_DIAGNOSTICS, confidence, REAL)                              \
	X(TRACE_DIAGNOSTICS, trace_id, INT)

/* __intrinsic_state: values of state tracks (tp_states.h); the state
 * view shows it. */
#define TP_STATE_COLS(X)                                                    \
	X(STATE, ts, INT) X(STATE, dur, INT) X(STATE, track_id, INT)        \
	X(STATE, category, STR) X(STATE, value, STR)                        \
	X(STATE, arg_set_id, INT)

/* __intrinsic_logs: log entries (Android's logcat, tp_android_log.c); the
 * logs and android_logs views show it. */
#define TP_LOGS_COLS(X)                                                     \
	X(LOGS, ts, INT) X(LOGS, utid, INT) X(LOGS, prio, INT)              \
	X(LOGS, log_source, STR) X(LOGS, tag, STR) X(LOGS, msg, STR)        \
	X(LOGS, arg_set_id, INT)

/* Column index enums: TP_SLICE_ts, TP_TRACK_name, ... */
#define TP_COL_ENUM(T, c, ty) TP_##T##_##c,
enum { TP_SLICE_COLS(TP_COL_ENUM) TP_SLICE_NCOLS };
enum { TP_TRACK_COLS(TP_COL_ENUM) TP_TRACK_NCOLS };
enum { TP_COUNTER_COLS(TP_COL_ENUM) TP_COUNTER_NCOLS };
enum { TP_THREAD_COLS(TP_COL_ENUM) TP_THREAD_NCOLS };
enum { TP_PROCESS_COLS(TP_COL_ENUM) TP_PROCESS_NCOLS };
enum { TP_ARGS_COLS(TP_COL_ENUM) TP_ARGS_NCOLS };
enum { TP_STATS_COLS(TP_COL_ENUM) TP_STATS_NCOLS };
enum { TP_METADATA_COLS(TP_COL_ENUM) TP_METADATA_NCOLS };
enum { TP_MACHINE_COLS(TP_COL_ENUM) TP_MACHINE_NCOLS };
enum { TP_CLOCK_SNAPSHOT_COLS(TP_COL_ENUM) TP_CLOCK_SNAPSHOT_NCOLS };
enum { TP_SCHED_COLS(TP_COL_ENUM) TP_SCHED_NCOLS };
enum { TP_THREAD_STATE_COLS(TP_COL_ENUM) TP_THREAD_STATE_NCOLS };
enum { TP_FTRACE_EVENT_COLS(TP_COL_ENUM) TP_FTRACE_EVENT_NCOLS };
enum { TP_FLOW_COLS(TP_COL_ENUM) TP_FLOW_NCOLS };
enum { TP_CPU_COLS(TP_COL_ENUM) TP_CPU_NCOLS };
enum { TP_CPU_FREQ_COLS(TP_COL_ENUM) TP_CPU_FREQ_NCOLS };
enum { TP_STATE_COLS(TP_COL_ENUM) TP_STATE_NCOLS };
enum { TP_VCPU_COLS(TP_COL_ENUM) TP_VCPU_NCOLS };
enum { TP_VCPU_STATE_COLS(TP_COL_ENUM) TP_VCPU_STATE_NCOLS };
enum { TP_GUEST_THREAD_HOST_STATE_COLS(TP_COL_ENUM) TP_GTHS_NCOLS };
enum { TP_TRACE_DIAGNOSTICS_COLS(TP_COL_ENUM) TP_TRACE_DIAGNOSTICS_NCOLS };
enum { TP_LOGS_COLS(TP_COL_ENUM) TP_LOGS_NCOLS };
#undef TP_COL_ENUM

/* The tables, in the order tp_ctx holds them. */
enum tp_table_id {
	TP_T_SLICE,
	TP_T_TRACK,
	TP_T_COUNTER,
	TP_T_THREAD,
	TP_T_PROCESS,
	TP_T_ARGS,
	TP_T_STATS,
	TP_T_METADATA,
	TP_T_MACHINE,
	TP_T_CLOCK_SNAPSHOT,
	TP_T_SCHED,
	TP_T_THREAD_STATE,
	TP_T_FTRACE_EVENT,
	TP_T_FLOW,
	TP_T_CPU,
	TP_T_CPU_FREQ,
	TP_T_STATE,
	TP_T_VCPU,
	TP_T_VCPU_STATE,
	TP_T_GTHS,
	TP_T_TRACE_DIAGNOSTICS,
	TP_T_LOGS,
	TP_T_COUNT
};

/* Initialises tables[i] for every enum tp_table_id. */
void tp_schema_init(struct tp_table *tables, struct tp_strpool *pool);
/* SQL that creates the views (track, thread_track, args, sched, raw ...),
 * run once after tp_db_attach(). */
extern const char tp_schema_views_sql[];

#endif
