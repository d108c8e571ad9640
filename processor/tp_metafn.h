/*
 * tp_metafn.h - SQL functions over the metadata and clock_snapshot tables
 * (extract_metadata* and the clock conversions to_realtime, to_monotonic,
 * abs_time_str, to_timecode), as Perfetto's trace processor has them.
 */
#ifndef VP_TP_METAFN_H
#define VP_TP_METAFN_H

struct sqlite3;
struct tp_ctx;

/* Registers them on db, over ctx's tables; an SQLite error code. */
int tp_metafn_register(struct sqlite3 *db, struct tp_ctx *ctx);

#endif
