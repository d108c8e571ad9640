/*
 * packet_build.h - small builders of Perfetto messages for the unit tests,
 * on the project's own wire writer.
 */
#ifndef VP_TEST_PACKET_BUILD_H
#define VP_TEST_PACKET_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "pb_wire.h"
#include "perfetto_fields.h"

/* ClockSnapshot.Clock {id, ts, is_incremental?, unit_multiplier_ns?} */
static inline void put_clock(struct pb_buf *b, uint32_t id, uint64_t ts,
			     bool incr, uint64_t unit)
{
	size_t m = pb_begin_nested(b, CS_CLOCKS);
	pb_put_varint(b, CLK_CLOCK_ID, id);
	pb_put_varint(b, CLK_TIMESTAMP, ts);
	if (incr)
		pb_put_varint(b, CLK_IS_INCREMENTAL, 1);
	if (unit)
		pb_put_varint(b, CLK_UNIT_MULTIPLIER_NS, unit);
	pb_end_nested(b, m);
}

/* An InternedData entry {iid, name} in table `table`. */
static inline void put_interned(struct pb_buf *b, uint32_t table, uint64_t iid,
				const char *name)
{
	size_t m = pb_begin_nested(b, table);
	pb_put_varint(b, INTERNED_IID, iid);
	pb_put_string(b, INTERNED_NAME, name);
	pb_end_nested(b, m);
}

/* A debug annotation with a literal name (iid 0) or an interned one, and
 * an integer value in `value_field` (DA_UINT_VALUE or DA_INT_VALUE). */
static inline void put_annotation(struct pb_buf *b, const char *name,
				  uint64_t iid, uint32_t value_field, uint64_t v)
{
	size_t m = pb_begin_nested(b, TE_DEBUG_ANNOTATIONS);
	if (iid)
		pb_put_varint(b, DA_NAME_IID, iid);
	else
		pb_put_string(b, DA_NAME, name);
	pb_put_varint(b, value_field, v);
	pb_end_nested(b, m);
}

#endif
