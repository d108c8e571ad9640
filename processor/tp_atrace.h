/*
 * tp_atrace.h - atrace's async slices (print / tracing_mark_write lines
 * S|tgid|name|cookie, F|..., G|tgid|track|name|cookie, H|tgid|track|cookie,
 * N|tgid|track|name) on the process's shared async tracks, as Perfetto's
 * SystraceParser places them.  tp_ftrace.c parses the lines.
 */
#ifndef VP_TP_ATRACE_H
#define VP_TP_ATRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

/* S (begin) and F (end): the track set is (process, name). */
void tp_atrace_async(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t tgid, tp_str name, int64_t cookie, bool begin);

/* G (begin), H (end) and N (instant) on a named track of the process;
 * pid is the thread that wrote the line. */
void tp_atrace_track_begin(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			   int64_t pid, int64_t tgid, tp_str track,
			   tp_str name, int64_t cookie);
void tp_atrace_track_end(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			 int64_t pid, int64_t tgid, tp_str track,
			 int64_t cookie);
void tp_atrace_track_instant(struct tp_ctx *ctx, int64_t ts,
			     uint32_t machine, int64_t pid, int64_t tgid,
			     tp_str track, tp_str name);

#endif
