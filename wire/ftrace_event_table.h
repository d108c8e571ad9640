/*
 * ftrace_event_table.h - the ftrace events vperfetto knows by name, one
 * table for every part: the probes encode the ones marked for them as
 * typed FtraceEvent payloads, the merge remaps the pid fields it marks,
 * the processor names the ftrace_event table's args from it.
 *
 * The table is generated at build time (gen_ftrace_events.py) from the
 * list in ftrace_event_table.def and the numbers and types in protos/.
 */
#ifndef VP_FTRACE_EVENT_TABLE_H
#define VP_FTRACE_EVENT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A payload field's kind, from its type in protos/. */
enum ft_field_type {
	FT_FIELD_STR,  /* string, bytes */
	FT_FIELD_INT,  /* int32, int64, sint*, sfixed*, bool, enum */
	FT_FIELD_UINT, /* uint32, uint64, fixed* */
};

/* Uses of an event (ft_event_desc.uses). */
enum {
	FT_USE_PROBES = 1 << 0,    /* vtraced_probes encodes it typed */
	FT_USE_PROCESSOR = 1 << 1, /* vperfetto_tp gives it a row */
};

/* The CompactSched column form an event has, if any. */
enum ft_event_compact {
	FT_EVENT_COMPACT_NONE,
	FT_EVENT_COMPACT_SWITCH,
	FT_EVENT_COMPACT_WAKING,
};

struct ft_event_field {
	uint32_t num;      /* the payload message's field number */
	const char *name;  /* Perfetto's field name, also the kernel's */
	const char *kname; /* the kernel's name on another architecture */
	uint8_t type;      /* enum ft_field_type */
	bool pid;          /* the merge remaps it as a pid */
};

struct ft_event_desc {
	uint32_t id;       /* the FtraceEvent field number */
	const char *name;  /* the processor's row name (usually the event's) */
	const char *event; /* the event's name in tracefs and in the schema */
	const char *group; /* the kernel's event group; NULL if unused */
	uint8_t uses;      /* FT_USE_* */
	uint8_t compact;   /* enum ft_event_compact */
	uint8_t nfields;
	const struct ft_event_field *fields; /* in the order written */
	const uint32_t *pid_fields; /* numbers of the pid fields, 0-ended */
	const uint32_t *cpu_fields; /* numbers of the cpu fields, 0-ended */
};

/* Every event, by increasing id. */
extern const struct ft_event_desc ft_event_descs[];
extern const size_t ft_event_descs_count;

/* The event whose FtraceEvent field number is id; NULL if none. */
const struct ft_event_desc *ft_event_by_id(uint32_t id);
/* The event the kernel calls group/event; NULL if none. */
const struct ft_event_desc *ft_event_by_name(const char *group,
					     const char *event);
/* The field of d numbered num; NULL if the table has none. */
const struct ft_event_field *ft_event_field(const struct ft_event_desc *d,
					    uint32_t num);

#endif
