/*
 * tp_memevents.h - kernel memory events that describe a process but name
 * one of its threads (rss_stat, rss_stat_throttled, oom_score_adj_update,
 * mm_event_record): counters on the process's track, as Perfetto's
 * RssStatTracker and EventTracker make them.
 */
#ifndef VP_TP_MEMEVENTS_H
#define VP_TP_MEMEVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tp_ctx;

struct tp_memevents *tp_memevents_new(void);
void tp_memevents_free(struct tp_memevents *m);

/* One event: id is its FtraceEvent field, data its payload, tid the
 * thread that wrote it.  False if id is none of the events above. */
bool tp_memevent_parse(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		       int64_t tid, uint32_t id, const uint8_t *data,
		       size_t len);
/* At the end of the trace: puts every counter on its process's track, or
 * on its thread's when the thread's process is still unknown. */
void tp_memevents_finish(struct tp_ctx *ctx);

#endif
