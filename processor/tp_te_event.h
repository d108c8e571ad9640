/*
 * tp_te_event.h - a track event between the track_event module's files:
 * the header the tokenizer writes before its bytes in the sorter
 * (tp_te_tokenize.c writes it, tp_te_decode.c reads it), and the event as
 * the parser sees it (struct ev), which every parse-side file takes.
 */
#ifndef VP_TP_TE_EVENT_H
#define VP_TP_TE_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "tp_db.h"
#include "tp_stats.h"

/* Room for a key or a scope the parser builds (longer ones are cut). */
#define TE_KEY_MAX 1024

/* The payload header: varints flags, sequence id, interning generation,
 * then as its flags say: machine, thread time and instruction count
 * (zigzag), the slot of the sequence's thread descriptor
 * (tp_te_seq_td()), TrackEventDefaults.track_uuid, the counter value (8
 * bytes), the extra counters (a varint count of (varint uuid, 8-byte
 * value) pairs); then the TrackEvent's bytes.  What only tokenize order
 * knows (delta timestamps, the sequence's defaults, incremental counter
 * sums) travels here. */
enum {
	F_THREAD_TS = 1,
	F_TIC = 2,
	F_PIDTID = 4,
	F_DEFAULT_UUID = 8,
	F_COUNTER = 16,
	F_EXTRA = 32,
	F_MACHINE = 64,
};

static inline void put_double(struct pb_buf *b, double d)
{
	pb_put_raw(b, &d, 8);
}

/* Microseconds to nanoseconds: true when it overflows. */
static inline bool mul_overflow_us(int64_t us, int64_t *ns)
{
	return __builtin_mul_overflow(us, (int64_t)1000, ns);
}

/* Microseconds to nanoseconds, and a sum, held at INT64_MAX / INT64_MIN
 * on overflow: Perfetto's track event timestamps saturate (a negative
 * result is then dropped as any negative timestamp). */
static inline int64_t sat_us_to_ns(int64_t us)
{
	int64_t ns;
	if (__builtin_mul_overflow(us, (int64_t)1000, &ns))
		return us < 0 ? INT64_MIN : INT64_MAX;
	return ns;
}

static inline int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return a < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

static inline void parser_error(struct tp_ctx *ctx)
{
	tp_stat_inc(ctx, "track_event_parser_errors");
}

/* A TrackEvent's LegacyEvent. */
struct legacy {
	bool present;
	uint64_t name_iid;
	int32_t phase;
	bool has_phase;
	int64_t duration_us, thread_duration_us;
	bool has_unscoped_id, has_local_id, has_global_id;
	uint64_t unscoped_id, local_id, global_id;
	const uint8_t *id_scope;
	size_t id_scope_len;
	bool has_bind_id, has_flow_direction, bind_to_enclosing;
	uint64_t bind_id, flow_direction;
	uint64_t instant_event_scope;
	bool has_pid_override, has_tid_override;
	int64_t pid_override, tid_override;
};

struct ev {
	int64_t ts; /* the event's time (parse stage): a log message's row */
	/* header */
	uint32_t flags, seq_id, gen, machine;
	int64_t thread_ts, tic, pid, tid;
	uint64_t default_uuid;
	double counter;
	const uint8_t *extra;
	uint64_t nextra;
	const uint8_t *te;
	size_t te_len;
	/* TrackEvent */
	bool has_type, has_track_uuid, has_debug;
	uint64_t type, track_uuid;
	const uint8_t *histogram; /* ChromeHistogramSample */
	size_t histogram_len;
	uint64_t name_iid;
	bool has_name_iid;
	const uint8_t *name;
	size_t name_len;
	bool has_name;
	/* the args read from these fields (the last of each, as Perfetto's
	 * decoder keeps) */
	const uint8_t *log_message; /* LogMessage */
	size_t log_message_len;
	bool has_source_location_iid, has_correlation_id;
	bool has_correlation_id_str_iid, has_reflected;
	uint64_t source_location_iid, correlation_id, correlation_id_str_iid;
	const uint8_t *correlation_id_str;
	size_t correlation_id_str_len;
	unsigned ncat_iids, ncats;
	uint64_t cat_iid;
	const uint8_t *cat;
	size_t cat_len;
	bool has_flows;
	struct legacy le;
	/* importing */
	tp_str category_id, name_id;
	bool has_utid, has_upid;
	uint32_t utid, upid;
	bool has_passthrough;
	uint32_t passthrough_utid;
	bool has_source_id;
	int64_t source_id;
};

#endif
