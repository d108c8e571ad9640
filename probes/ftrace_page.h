/*
 * ftrace_page.h - the parser of one kernel ring-buffer page as read from
 * per_cpu/cpuN/trace_pipe_raw.
 *
 * A page is a header (u64 timestamp, then a commit word of 4 or 8 bytes
 * whose low 30 bits are the data length and whose bits 31 and 30 flag
 * missed events) followed by compressed events: a u32 of type_len (5 bits)
 * and time_delta (27 bits), then per type_len the data, a padding length,
 * a time extension or an absolute time stamp.  The bytes come from the
 * kernel but are treated as untrusted: every length is checked against the
 * page, and a malformed page stops the walk with a status that names the
 * problem (Perfetto's FtraceParseStatus values).
 */
#ifndef VP_FTRACE_PAGE_H
#define VP_FTRACE_PAGE_H

#include <stddef.h>
#include <stdint.h>

#include "perfetto_fields.h"

/* enum ftrace_parse_status, Perfetto's FtraceParseStatus, is
 * perfetto_fields.h's. */

/* The page header layout (from events/header_page). */
struct ftrace_page_layout {
	unsigned commit_size; /* 4 or 8 */
};

/* What the header of a page says. */
struct ftrace_page_info {
	uint64_t base_ts;     /* the page's timestamp */
	uint32_t data_len;    /* bytes of events after the header */
	int missed_events;    /* events were lost before this page */
	uint64_t last_ts;     /* timestamp of the last event parsed */
	uint32_t n_events;    /* data events handed to the callback */
};

/* Called for each data event: its timestamp and its record bytes (which
 * start with the common fields: u16 type, u8 flags, u8 preempt count, i32
 * pid).  Return 0 to go on, non-zero to stop the walk. */
typedef int (*ftrace_event_fn)(void *ctx, uint64_t ts, const uint8_t *data,
			       size_t len);

/* Walks the events of the page page[0..len).  Fills *info; returns
 * FTRACE_STATUS_OK, or the status of the first malformation (events before
 * it were delivered). */
enum ftrace_parse_status ftrace_page_parse(const struct ftrace_page_layout *l,
					   const uint8_t *page, size_t len,
					   ftrace_event_fn fn, void *ctx,
					   struct ftrace_page_info *info);

/* Name of a status, for messages ("ABI_SHORT_EVENT_HEADER"). */
const char *ftrace_status_name(enum ftrace_parse_status s);

#endif
