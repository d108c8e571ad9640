/*
 * tp_procs.h - threads and processes (utid / upid), per machine, as
 * Perfetto's ProcessTracker keeps them.
 *
 * A tid or pid maps to the latest thread / process with that number on its
 * machine.  utid 0 and upid 0 are the idle thread and process (tid 0 /
 * pid 0) of machine 0; other machines get their own on first use.  A
 * thread seen with a different process than before, or a process started
 * again (pid reuse), gets a new row.
 */
#ifndef VP_TP_PROCS_H
#define VP_TP_PROCS_H

#include <stdbool.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

struct tp_procs *tp_procs_new(struct tp_ctx *ctx); /* creates utid/upid 0 */
void tp_procs_free(struct tp_procs *p);
/* A machine was first seen in the trace: its idle process and thread get
 * their rows now, in the order machines appear in the file, as Perfetto
 * gives them when it first reads a packet of the machine. */
void tp_procs_machine_seen(struct tp_ctx *ctx, uint32_t machine);

/* The current thread with this tid, created (without a process) if none. */
uint32_t tp_thread_get(struct tp_ctx *ctx, uint32_t machine, int64_t tid);
/* The current thread with this tid, if any. */
bool tp_thread_find(struct tp_ctx *ctx, uint32_t machine, int64_t tid,
		    uint32_t *utid);
/* The thread tid of process pid: reuses the current thread if it belongs
 * to pid (or to no process yet), else starts a new one.  Sets upid and
 * is_main_thread (tid == pid). */
uint32_t tp_thread_update(struct tp_ctx *ctx, uint32_t machine, int64_t tid,
			  int64_t pid);
/* A new thread row for tid (tid reuse), e.g. on task_newtask. */
uint32_t tp_thread_new(struct tp_ctx *ctx, uint32_t machine, int64_t tid,
		       int64_t start_ts, bool has_start_ts);
void tp_thread_set_name(struct tp_ctx *ctx, uint32_t utid, tp_str name);
void tp_thread_set_process(struct tp_ctx *ctx, uint32_t utid, uint32_t upid);

/* The current process with this pid, created if none. */
uint32_t tp_process_get(struct tp_ctx *ctx, uint32_t machine, int64_t pid);
/* The same without creating a main thread (Perfetto's
 * GetOrCreateProcessWithoutMainThread). */
uint32_t tp_process_get_no_thread(struct tp_ctx *ctx, uint32_t machine,
				  int64_t pid);
bool tp_process_find(struct tp_ctx *ctx, uint32_t machine, int64_t pid,
		     uint32_t *upid);
/* A new process row for pid (pid reuse); its main thread too. */
uint32_t tp_process_new(struct tp_ctx *ctx, uint32_t machine, int64_t pid,
			int64_t start_ts, bool has_start_ts);
/* Process name sources, weakest first (Perfetto's ProcessNamePriority):
 * a name replaces one of the same or a weaker source only. */
enum {
	TP_PNAME_OTHER = 0,
	TP_PNAME_CHROME_LABEL = 1,
	TP_PNAME_DESCRIPTOR = 2,
	TP_PNAME_CHROME_LABEL_RENDERER = 3,
	TP_PNAME_SYSTEM = 4, /* process tree, ftrace comm of the main thread */
};
void tp_process_set_name_prio(struct tp_ctx *ctx, uint32_t upid, tp_str name,
			      uint8_t prio);
/* A name from a track descriptor (TP_PNAME_DESCRIPTOR). */
void tp_process_set_name(struct tp_ctx *ctx, uint32_t upid, tp_str name);
void tp_process_set_cmdline(struct tp_ctx *ctx, uint32_t upid, tp_str cmdline);
/* Sets the parent if the process has none yet; a different one later is
 * a reparenting (counted in process_tracker_parent_pid_changed), not a
 * new process. */
void tp_process_set_parent(struct tp_ctx *ctx, uint32_t upid,
			   uint32_t parent_upid);
/* The parent is parent_utid's process: now if that thread is bound to
 * one, else as soon as it is. */
void tp_process_parent_thread(struct tp_ctx *ctx, uint32_t upid,
			      uint32_t parent_utid);
struct tp_arg;
/* Adds (or replaces) one arg of the process's arg set. */
void tp_process_add_arg(struct tp_ctx *ctx, uint32_t upid,
			const struct tp_arg *a);

#endif
