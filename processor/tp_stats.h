/*
 * tp_stats.h - the stats and metadata tables.
 *
 * Stats carry Perfetto's names (clock_sync_failure, misplaced_end_event,
 * traced_buf_* ...), severity and source.  Every known stat appears in the
 * stats table, with 0 when nothing happened, as in Perfetto; indexed stats
 * (per buffer, per cpu) appear once per index seen.  Metadata entries are
 * single (one value per name and machine) or multi (appended).
 */
#ifndef VP_TP_STATS_H
#define VP_TP_STATS_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

struct tp_ctx;

struct tp_stats *tp_stats_new(void);
void tp_stats_free(struct tp_stats *s);

/* idx < 0: not indexed. */
void tp_stat_add(struct tp_ctx *ctx, const char *name, uint32_t machine,
		 int64_t idx, int64_t delta);
void tp_stat_set(struct tp_ctx *ctx, const char *name, uint32_t machine,
		 int64_t idx, int64_t value);
int64_t tp_stat_get(struct tp_ctx *ctx, const char *name, uint32_t machine,
		    int64_t idx);
/* Whether the stat was ever set or added to; its value in *out if so. */
bool tp_stat_find(struct tp_ctx *ctx, const char *name, uint32_t machine,
		  int64_t idx, int64_t *out);
static inline void tp_stat_inc(struct tp_ctx *ctx, const char *name)
{
	tp_stat_add(ctx, name, 0, -1, 1);
}

/* Metadata.  machine < 0: a trace-wide entry (machine_id NULL, trace_id 0);
 * else a per-machine entry (machine_id set, trace_id NULL), as Perfetto
 * splits them. */
void tp_meta_set_int(struct tp_ctx *ctx, const char *name, int64_t machine,
		     int64_t v);
void tp_meta_set_str(struct tp_ctx *ctx, const char *name, int64_t machine,
		     const char *s, size_t len);
void tp_meta_append_str(struct tp_ctx *ctx, const char *name, int64_t machine,
			const char *s, size_t len); /* key_type multi */
void tp_meta_append_int(struct tp_ctx *ctx, const char *name, int64_t machine,
			int64_t v);
bool tp_meta_has(struct tp_ctx *ctx, const char *name, int64_t machine);
/* The value of a single (not multi) entry: false when there is none or it
 * holds the other type.  A string stays valid while the pool lives. */
bool tp_meta_get_int(struct tp_ctx *ctx, const char *name, int64_t machine,
		     int64_t *out);
bool tp_meta_get_str(struct tp_ctx *ctx, const char *name, int64_t machine,
		     const char **out);

/* Writes the stats and metadata tables (after parsing). */
void tp_stats_finish(struct tp_ctx *ctx);

/* Stats that are not zero, for --summary and the loader's warning. */
typedef void (*tp_stat_visit_fn)(void *arg, const char *name, int64_t idx,
				 uint32_t machine, int64_t value,
				 const char *severity);
void tp_stats_visit(struct tp_ctx *ctx, tp_stat_visit_fn fn, void *arg);

#endif
