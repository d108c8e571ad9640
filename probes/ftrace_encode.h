/*
 * ftrace_encode.h - turns raw ftrace records into Perfetto's FtraceEvent
 * protos and collects them into FtraceEventBundle packets.
 *
 * A translation table (built from the kernel's event formats by
 * ftrace_events.c) says, per kernel event id, where each field sits in the
 * record and which proto field it becomes: a typed payload of FtraceEvent
 * (sched_switch, ...) or GenericFtraceEvent (FtraceEvent.generic).
 * Records are untrusted bytes: every read is checked against the record's
 * length and a field that does not fit is left out.  Nothing here
 * touches tracefs, so the unit tests and the fuzz target drive it on plain
 * buffers.
 */
#ifndef VP_FTRACE_ENCODE_H
#define VP_FTRACE_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftrace_event_table.h"
#include "pb_wire.h"
#include "perfetto_fields.h"

/* How a field's value is read. */
enum ft_vtype { FT_V_INT, FT_V_UINT, FT_V_STR };
/* Where it is: at its offset, behind a __data_loc word (absolute or
 * relative offset), or the rest of the record (a "char buf[]"). */
enum ft_loc { FT_LOC_FIXED, FT_LOC_DYNAMIC, FT_LOC_DYNAMIC_REL, FT_LOC_TAIL };

struct ft_field {
	char *name;      /* the kernel's name (GenericFtraceEvent) */
	uint32_t proto;  /* field number in the typed payload */
	uint32_t offset;
	uint32_t size;
	uint8_t vtype;   /* enum ft_vtype */
	uint8_t loc;     /* enum ft_loc */
};

/* The wire table's values: ft_event_from_tep copies them from it. */
enum ft_compact {
	FT_COMPACT_NONE = FT_EVENT_COMPACT_NONE,
	FT_COMPACT_SWITCH = FT_EVENT_COMPACT_SWITCH,
	FT_COMPACT_WAKING = FT_EVENT_COMPACT_WAKING,
};

/* The translation of one kernel event. */
struct ft_event {
	uint32_t id;       /* kernel event id */
	uint32_t proto_id; /* FtraceEvent oneof number (FE_GENERIC: generic) */
	uint8_t compact;   /* enum ft_compact: goes to CompactSched instead */
	char *name;        /* event name */
	uint32_t nfields;
	struct ft_field *fields;
};

struct ft_table {
	uint32_t max_id;         /* by_id has max_id + 1 slots */
	struct ft_event **by_id; /* NULL: not enabled, dropped */
};

/* Adds ev (taking ownership) to the table; 0, or -1 if the id is huge or
 * taken. */
int ft_table_add(struct ft_table *t, struct ft_event *ev);
void ft_table_free(struct ft_table *t);
void ft_event_free(struct ft_event *ev);

/* One bundle being built (one cpu, one drain). */
#define FT_INTERN_MAX 1024
struct ft_bundle {
	struct pb_buf events;  /* FtraceEventBundle.event fields */
	struct pb_buf errors;  /* FtraceEventBundle.error fields */
	struct pb_buf col[13]; /* CompactSched packed columns by number */
	uint64_t last_switch_ts, last_waking_ts;
	uint32_t n_switch, n_waking;
	uint32_t n_intern;
	char intern[FT_INTERN_MAX][16];
	uint8_t intern_len[FT_INTERN_MAX];
	uint32_t n_events;     /* all records encoded (typed, generic, compact) */
	uint64_t first_ts, last_ts;
	bool lost_events;
	bool compact_enabled;
};

void ft_bundle_init(struct ft_bundle *b, bool compact_enabled);
void ft_bundle_reset(struct ft_bundle *b);
void ft_bundle_free(struct ft_bundle *b);
/* Bytes encoded so far (to cut bundles at a size). */
size_t ft_bundle_size(const struct ft_bundle *b);

/* Results of ft_encode_record. */
enum ft_encode_result {
	FT_ENC_OK,
	FT_ENC_UNKNOWN, /* no translation for this id: not enabled here */
	FT_ENC_INVALID, /* shorter than the common fields */
};

/* Encodes one record (the bytes a page event carries) at time ts. */
enum ft_encode_result ft_encode_record(const struct ft_table *t,
				       struct ft_bundle *b, uint64_t ts,
				       const uint8_t *data, size_t len);

/* Records a parse error of the page read at ts (FtraceEventBundle.error). */
void ft_bundle_add_error(struct ft_bundle *b, uint64_t ts, int status);

/* Writes the TracePacket body of the bundle to out (which is reset):
 * timestamp (the first event's, else prev_end_ts), ftrace_events { cpu,
 * event..., lost_events, compact_sched, error..., previous_bundle_end_timestamp }. */
void ft_bundle_packet(const struct ft_bundle *b, uint32_t cpu,
		      uint64_t prev_end_ts, struct pb_buf *out);

#endif
