/*
 * tp_te_tracks.h - the descriptor tracks of the track_event module
 * (tp_track_event.c): TrackDescriptors reserved by uuid at tokenize,
 * resolved to a thread, a process or the global scope at parse, and made
 * into tracks (or lanes of merge sets, tp_compress.h) when events land on
 * them, with Perfetto v58's types, names, dimension and source args.
 */
#ifndef VP_TP_TE_TRACKS_H
#define VP_TP_TE_TRACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "tp_ctx.h"

enum res_kind { RES_CHILD, RES_THREAD, RES_PROCESS, RES_COUNTER };
enum scope { SCOPE_G, SCOPE_T, SCOPE_P };
/* How a track merges with its siblings (SiblingMergeBehavior). */
enum merge { MERGE_BY_NAME, MERGE_NONE, MERGE_BY_KEY };

/* A descriptor track, reserved at tokenize and resolved at parse. */
struct res {
	uint64_t uuid, parent_uuid;
	uint8_t kind;
	bool use_separate;
	bool is_incremental;
	bool has_rank;
	uint8_t child_ordering;
	int32_t rank;
	int64_t pid, tid;
	int64_t unit_multiplier;
	uint32_t machine;
	tp_str category, description;
	tp_str name;         /* the reservation's; 0: the first event's */
	uint8_t merge;       /* MERGE_* */
	bool is_state;
	bool process_ordering_explicit, thread_ordering_explicit;
	tp_str merge_key;
	tp_str unit, builtin_type, y_axis_share_key; /* counters */
	bool reserved; /* by a descriptor (not only by an event's uuid) */
	/* parse stage */
	bool resolved;
	bool interned;        /* its track, or its merge set, is settled */
	bool merged;          /* its slices take lanes of merge set `set` */
	uint32_t set;
	int64_t parent_track; /* -1: none */
	int64_t intern_seq;   /* sequence of the event that settled it */
	tp_str track_name, merge_value;
	uint8_t scope;
	bool is_root;
	uint32_t utid, upid;
	int64_t track;
};

/* A TrackDescriptor's fields, pointing into its bytes. */
struct desc {
	uint64_t uuid, parent_uuid;
	bool has_uuid;
	const uint8_t *name;
	size_t name_len;
	bool has_name;
	const uint8_t *names[3]; /* name, static_name, atrace_name */
	size_t names_len[3];
	bool has_names[3];
	bool is_state;
	uint64_t merge, process_ordering, thread_ordering;
	const uint8_t *merge_key;
	size_t merge_key_len;
	bool has_merge_key, has_merge_key_int;
	uint64_t merge_key_int;
	const uint8_t *process, *thread, *counter, *chrome_process,
		*chrome_thread, *description;
	size_t process_len, thread_len, counter_len, chrome_process_len,
		chrome_thread_len, description_len;
	bool disallow_merging;
	bool has_child_ordering, has_rank;
	uint64_t child_ordering;
	int32_t rank;
};

/* How an event uses its track: slices begin, end or are instants there
 * (taking a lane of a merged track); other events need a track of its
 * own. */
enum use { USE_BEGIN, USE_END, USE_INSTANT, USE_OTHER };

struct tp_te_tracks *tp_te_tracks_new(void);
void tp_te_tracks_free(struct tp_te_tracks *t);

/* Decodes a TrackDescriptor; false when it is malformed. */
bool tp_te_desc_decode(const uint8_t *p, size_t len, struct desc *d);
/* Reads the pid / tid of a Process- or ThreadDescriptor. */
void tp_te_pid_tid(const uint8_t *p, size_t len, bool *has_pid, int64_t *pid,
		   bool *has_tid, int64_t *tid);
/* Reserves (or names again) the track of a descriptor (tokenize). */
void tp_te_reserve(struct tp_ctx *ctx, const struct tp_packet *pkt,
		   const struct desc *d);
/* The reservation of uuid, or NULL. */
struct res *tp_te_res_find(struct tp_ctx *ctx, uint32_t machine,
			   uint64_t uuid);
/* Resolves r (and its ancestors); r again (the array may have moved), or
 * NULL when it cannot be. */
struct res *tp_te_resolve(struct tp_ctx *ctx, struct res *r, int64_t ts);
/* The reservation of an event's uuid, resolved (reserving an unknown
 * uuid); NULL when it cannot be resolved. */
struct res *tp_te_event_res(struct tp_ctx *ctx, uint64_t uuid,
			    uint32_t machine, int64_t ts);
/* The track of a resolved reservation for an event named `name` on
 * sequence seq (-1: none, the default track's events), used as `use`;
 * -1 when there is none. */
int64_t tp_te_track_for(struct tp_ctx *ctx, struct res *r, tp_str name,
			int64_t seq, enum use use);
/* A packet of sequence seq_id said it is the first the sequence wrote. */
void tp_te_tracks_first_packet(struct tp_ctx *ctx, uint32_t seq_id);
/* After the parse: the sort index hints land on processes and threads. */
void tp_te_tracks_finish(struct tp_ctx *ctx);

#endif
