/*
 * tp_process.h - private interface between tp_ftrace.c, tp_process.c and
 * tp_procs.c: process_tree / process_stats packets, and the parts of the
 * thread tracker only the ftrace and process parsers need (name
 * priorities, thread end, thread association).
 */
#ifndef VP_TP_PROCESS_H
#define VP_TP_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_args.h"
#include "tp_ctx.h"

struct ftrace_machine;
struct cpu_sched;

/* The ftrace module's state (ctx->ftrace); tp_ftrace.c allocates it. */
struct tp_ftrace_state {
	uint8_t kind_event, kind_cswitch, kind_cwaking; /* sorter kinds */
	uint8_t kind_ptree, kind_pstats, kind_generic;
	struct ftrace_machine *machines;
	uint32_t nmachines;
	uint32_t *ts_last; /* per utid: its latest thread_state row */
	uint32_t *ts_blocked; /* per utid: its latest blocked row, until it
			       * runs again (sched_blocked_reason fills it) */
	uint32_t nts;
	struct cpu_sched *gk_hanging; /* per utid: a generic kernel sched
				       * slice waiting for its end state */
	uint32_t ngk_hanging;
	uint8_t *scratch;  /* payload being pushed */
	size_t scratch_cap;
	bool have_snapshot;       /* an ftrace clock snapshot was added */
	int64_t last_snapshot_ts; /* its ftrace_timestamp */
	tp_str s_running, s_runnable, s_preempted;
	/* names every sched event writes, interned once (tp_ftrace.c) */
	tp_str k_sched_switch, k_sched_waking, k_prev_comm, k_prev_pid,
		k_prev_prio, k_prev_state, k_next_comm, k_next_pid, k_next_prio,
		k_comm, k_pid, k_prio, k_target_cpu;
	/* task state texts by (machine, raw prev_state): a sched_switch's
	 * text costs a kernel version lookup and an intern otherwise */
	struct {
		uint32_t machine;
		uint32_t raw; /* the 16 bits that count; UINT32_MAX: empty */
		tp_str text;
	} state_cache[64];
	struct tp_args_builder args;
};

/* Thread name sources, weakest first (Perfetto's ThreadNamePriority). */
enum {
	TP_NAME_PRIO_OTHER = 0,
	TP_NAME_PRIO_FTRACE = 1,
	TP_NAME_PRIO_PROCESS_TREE = 2,
	TP_NAME_PRIO_THREAD_TYPE = 3, /* a descriptor's chrome thread type */
	TP_NAME_PRIO_DESCRIPTOR = 4,
	TP_NAME_PRIO_CONSTANT = 5,
};

/* The text of a raw sched_switch prev_state (its upper bits depend on
 * the machine's kernel version): "R", "R+", or the letters of its flags
 * with sep between them (none if sep is 0).  Returns its length, 0 when
 * the bits make no valid state.  buf holds TP_TASK_STATE_MAX bytes. */
#define TP_TASK_STATE_MAX 32
size_t tp_task_state_text(struct tp_ctx *ctx, uint32_t machine,
			  int64_t raw, char sep, char *buf);

void tp_thread_set_name_prio(struct tp_ctx *ctx, uint32_t utid, tp_str name,
			     uint8_t prio);
/* sched_process_free: ends the current thread tid (and its process when it
 * is the main thread). */
void tp_thread_end(struct tp_ctx *ctx, uint32_t machine, int64_t ts,
		   int64_t tid);
/* Two threads of one process (clone with CLONE_THREAD): when either gets
 * a process the other gets it too. */
void tp_threads_associate(struct tp_ctx *ctx, uint32_t utid1, uint32_t utid2);

/* process_tree (TracePacket field 2) and process_stats (field 9), at
 * tokenize time: push to the sorter. */
void tp_process_init(struct tp_ctx *ctx);
bool tp_process_tokenize(struct tp_ctx *ctx, const struct tp_packet *pkt,
			 const struct pb_field *f);

#endif
