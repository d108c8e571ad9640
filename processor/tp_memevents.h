/*
 * tp_memevents.h - counters of a process that events name by one of its
 * threads (Perfetto's EventTracker "process counter for thread"), and the
 * ftrace events that make only such counters: oom_score_adj_update and
 * mm_event_record.  (rss_stat and the other memory events are
 * tp_memory.h's; their process counters come here too.)
 */
#ifndef VP_TP_MEMEVENTS_H
#define VP_TP_MEMEVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

struct tp_memevents *tp_memevents_new(void);
void tp_memevents_free(struct tp_memevents *m);

/* The counter track of process (or, for the "*_thread_fallback" types,
 * thread) `id` of a type whose tracks are told apart by a string key or
 * two (NULL: none): process_memory (process_memory_key), smaps
 * (smaps_key), proc_stat_runtime (proc_stat_runtime_key), mm_event
 * (mm_event_type, mm_event_metric), oom_score_adj (none).  Its dimensions
 * are upid (utid) and the keys, as Perfetto's blueprints have them. */
uint32_t tp_process_counter_track(struct tp_ctx *ctx, uint32_t machine,
				  const char *type, int64_t id, tp_str name,
				  const char *k1, const char *v1,
				  const char *k2, const char *v2);

/* A process_memory value (key: "rss.file", "swap", "dmabuf_rss" ..., a
 * string that lives as long as the program) of thread utid's process: a
 * counter row now, on the mem.KEY track of the thread's process as known
 * at the end of the trace, or of the thread if it never got one.  Rows
 * get their tracks in the order they were pushed, whatever their kind. */
void tp_process_memory_for_thread(struct tp_ctx *ctx, uint32_t utid,
				  const char *key, int64_t ts, double value);

/* oom_score_adj_update or mm_event_record (id: the FtraceEvent field,
 * data: the payload, tid: the thread that wrote it); false if id is
 * neither. */
bool tp_memevent_parse(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		       int64_t tid, uint32_t id, const uint8_t *data,
		       size_t len);
/* At the end of the trace: puts every pending counter on its track. */
void tp_memevents_finish(struct tp_ctx *ctx);

#endif
