/*
 * tp_te_tracks.c - the descriptor tracks of the track_event module (see
 * tp_te_tracks.h).
 *
 * Tokenize: each TrackDescriptor reserves its uuid (kind, pid / tid,
 * parent, name, merge behaviour, counter settings); a later descriptor of
 * the uuid must describe the same track and may only name it (the first
 * name stays, unless the track never merges: then the last one wins).
 *
 * Parse: a reservation is resolved to a thread (a thread descriptor, or
 * below one), a process, or the global scope, checking its chain of
 * parents; pid and tid reuse start new processes and threads.  Its track
 * is made when an event (or a child's event) lands on it: a thread's own
 * track, or a track of its own typed and named as Perfetto's (its
 * reservation's name, else that first event's), or, for tracks that may
 * merge with siblings of the same name or key, the lanes of a set shared
 * with them (tp_compress.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_compress.h"
#include "tp_procs.h"
#include "tp_stats.h"
#include "tp_te_tracks.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

#define MAX_ANCESTORS 100 /* links from a track up to its root */

struct tp_te_tracks {
	/* per machine (Perfetto keeps a machine's track event state apart):
	 * uuid -> index in res */
	struct u64map *res_by_uuid;
	uint32_t nmachines;
	struct res *res;
	size_t nres, capres;
	struct u64map uuid_by_utid, uuid_by_upid; /* descriptor owners */
	struct tp_compress *compress; /* merge sets, keyed by our own words */
	struct u64map first_packet_seqs; /* sequences that said they begin */
	/* ranks of process / thread descriptors, when uuid 0 orders them */
	struct u64map process_sort_index, thread_sort_index;
	struct tp_args_builder b, b2;
};

static struct tp_te_tracks *S(struct tp_ctx *ctx)
{
	return ctx->te_tracks;
}

struct tp_te_tracks *tp_te_tracks_new(void)
{
	struct tp_te_tracks *s = vp_xcalloc(1, sizeof *s);
	u64map_init(&s->uuid_by_utid);
	u64map_init(&s->uuid_by_upid);
	u64map_init(&s->first_packet_seqs);
	u64map_init(&s->process_sort_index);
	u64map_init(&s->thread_sort_index);
	s->compress = tp_compress_new();
	tp_args_builder_init(&s->b);
	tp_args_builder_init(&s->b2);
	return s;
}

void tp_te_tracks_free(struct tp_te_tracks *s)
{
	if (!s)
		return;
	for (uint32_t m = 0; m < s->nmachines; m++)
		u64map_free(&s->res_by_uuid[m]);
	free(s->res_by_uuid);
	u64map_free(&s->uuid_by_utid);
	u64map_free(&s->uuid_by_upid);
	u64map_free(&s->first_packet_seqs);
	u64map_free(&s->process_sort_index);
	u64map_free(&s->thread_sort_index);
	tp_compress_free(s->compress);
	tp_args_builder_free(&s->b);
	tp_args_builder_free(&s->b2);
	free(s->res);
	free(s);
}

void tp_te_tracks_first_packet(struct tp_ctx *ctx, uint32_t seq_id)
{
	u64map_put(&S(ctx)->first_packet_seqs, seq_id, 1);
}

static tp_str intern_bytes(struct tp_ctx *ctx, const uint8_t *p, size_t n)
{
	return tp_intern(ctx->pool, (const char *)p, strnlen((const char *)p, n));
}

/* ---- reservations (tokenize) ------------------------------------------ */

static struct res *res_find(struct tp_te_tracks *s, uint32_t machine,
			    uint64_t uuid)
{
	uint64_t i;
	if (machine >= s->nmachines)
		return NULL;
	return u64map_get(&s->res_by_uuid[machine], uuid, &i) ? &s->res[i]
							      : NULL;
}

static struct res *res_add(struct tp_te_tracks *s, uint32_t machine,
			   uint64_t uuid)
{
	if (machine >= s->nmachines) {
		s->res_by_uuid = vp_xreallocarray(s->res_by_uuid, machine + 1,
						  sizeof(*s->res_by_uuid));
		for (uint32_t m = s->nmachines; m <= machine; m++)
			u64map_init(&s->res_by_uuid[m]);
		s->nmachines = machine + 1;
	}
	if (s->nres == s->capres) {
		size_t cap = s->capres ? s->capres * 2 : 64;
		struct res *p = vp_xrealloc(s->res, cap * sizeof *p);
		s->res = p;
		s->capres = cap;
	}
	struct res *r = &s->res[s->nres];
	memset(r, 0, sizeof *r);
	r->uuid = uuid;
	r->machine = machine;
	r->track = -1;
	u64map_put(&s->res_by_uuid[machine], uuid, s->nres++);
	return r;
}


static void name_at(struct desc *d, int i, const struct pb_field *f)
{
	if (f->wt != PB_WT_LEN)
		return;
	d->names[i] = f->data;
	d->names_len[i] = f->len;
	d->has_names[i] = true;
}

bool tp_te_desc_decode(const uint8_t *p, size_t len, struct desc *d)
{
	struct pb_reader r;
	struct pb_field f;

	memset(d, 0, sizeof *d);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		bool lenf = f.wt == PB_WT_LEN;
		switch (f.num) {
		case TD_UUID: d->uuid = f.val; d->has_uuid = true; break;
		case TD_PARENT_UUID: d->parent_uuid = f.val; break;
		case TD_NAME: name_at(d, 0, &f); break;
		case TD_STATIC_NAME: name_at(d, 1, &f); break;
		case TD_ATRACE_NAME: name_at(d, 2, &f); break;
		case TD_STATE: d->is_state = true; break;
		case TD_SIBLING_MERGE_BEHAVIOR: d->merge = f.val; break;
		case TD_SIBLING_MERGE_KEY:
			if (lenf) {
				d->merge_key = f.data;
				d->merge_key_len = f.len;
				d->has_merge_key = true;
			}
			break;
		case TD_SIBLING_MERGE_KEY_INT:
			d->merge_key_int = f.val;
			d->has_merge_key_int = true;
			break;
		case TD_PROCESS_ORDERING: d->process_ordering = f.val; break;
		case TD_THREAD_ORDERING: d->thread_ordering = f.val; break;
		case TD_PROCESS:
			if (lenf) { d->process = f.data; d->process_len = f.len; }
			break;
		case TD_THREAD:
			if (lenf) { d->thread = f.data; d->thread_len = f.len; }
			break;
		case TD_COUNTER:
			if (lenf) { d->counter = f.data; d->counter_len = f.len; }
			break;
		case TD_CHROME_PROCESS:
			if (lenf) {
				d->chrome_process = f.data;
				d->chrome_process_len = f.len;
			}
			break;
		case TD_CHROME_THREAD:
			if (lenf) {
				d->chrome_thread = f.data;
				d->chrome_thread_len = f.len;
			}
			break;
		case TD_DESCRIPTION:
			if (lenf) {
				d->description = f.data;
				d->description_len = f.len;
			}
			break;
		case TD_DISALLOW_MERGING: d->disallow_merging = f.val != 0; break;
		case TD_CHILD_ORDERING:
			d->child_ordering = f.val;
			d->has_child_ordering = true;
			break;
		case TD_SIBLING_ORDER_RANK:
			d->rank = (int32_t)f.val;
			d->has_rank = true;
			break;
		default: break;
		}
	}
	/* name wins over static_name, which wins over atrace_name. */
	for (int i = 2; i >= 0; i--) {
		if (!d->has_names[i])
			continue;
		d->name = d->names[i];
		d->name_len = d->names_len[i];
		d->has_name = true;
	}
	return r.err == PB_OK;
}

/* Reads the pid / tid of a Process- or ThreadDescriptor. */
_Static_assert(PD_PID == THD_PID, "both descriptors number pid alike");
void tp_te_pid_tid(const uint8_t *p, size_t len, bool *has_pid, int64_t *pid,
		   bool *has_tid, int64_t *tid)
{
	struct pb_reader r;
	struct pb_field f;

	*has_pid = *has_tid = false;
	*pid = *tid = 0;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_VARINT)
			continue;
		if (f.num == PD_PID) { /* THD_PID too */
			*has_pid = true;
			*pid = (int32_t)f.val;
		} else if (f.num == THD_TID) {
			*has_tid = true;
			*tid = (int64_t)f.val;
		}
	}
}


/* Reads a CounterDescriptor into nr: its settings, unit and category,
 * and the name its builtin type gives an unnamed track. */
static void reserve_counter(struct tp_ctx *ctx, const struct desc *d,
			    struct res *nr)
{
	static const char *const units[] = {
		[CD_UNIT_TIME_NS] = "ns",
		[CD_UNIT_COUNT] = "count",
		[CD_UNIT_SIZE_BYTES] = "bytes",
	};
	struct pb_reader r;
	struct pb_field f;
	uint64_t type = 0, unit = 0;
	const uint8_t *unit_name = NULL;
	size_t unit_name_len = 0;
	char cats[1024];
	size_t ncats = 0;

	nr->kind = RES_COUNTER;
	pb_reader_init(&r, d->counter, d->counter_len);
	while (pb_next(&r, &f)) {
		bool v = f.wt == PB_WT_VARINT, l = f.wt == PB_WT_LEN;
		if (f.num == CD_UNIT_MULTIPLIER && v)
			nr->unit_multiplier = (int64_t)f.val;
		else if (f.num == CD_IS_INCREMENTAL && v)
			nr->is_incremental = f.val != 0;
		else if (f.num == CD_TYPE && v)
			type = f.val;
		else if (f.num == CD_UNIT && v)
			unit = f.val;
		else if (f.num == CD_UNIT_NAME && l) {
			unit_name = f.data;
			unit_name_len = f.len;
		} else if (f.num == CD_Y_AXIS_SHARE_KEY && l) {
			nr->y_axis_share_key = intern_bytes(ctx, f.data, f.len);
		} else if (f.num == CD_CATEGORIES && l && f.len > 0 &&
			   ncats + f.len + 1 < sizeof cats) {
			/* several categories are one, joined by commas */
			if (ncats)
				cats[ncats++] = ',';
			memcpy(cats + ncats, f.data, f.len);
			ncats += f.len;
		}
	}
	if (ncats)
		nr->category = intern_bytes(ctx, (const uint8_t *)cats, ncats);
	if (type == CD_TYPE_THREAD_TIME_NS) {
		nr->builtin_type = tp_s(ctx, "thread_time");
		nr->unit = tp_s(ctx, units[CD_UNIT_TIME_NS]);
	} else if (type == CD_TYPE_THREAD_INSTRUCTION_COUNT) {
		nr->builtin_type = tp_s(ctx, "thread_instruction_count");
		nr->unit = tp_s(ctx, units[CD_UNIT_COUNT]);
	} else if (unit > 0 && unit < sizeof units / sizeof units[0]) {
		nr->unit = tp_s(ctx, units[unit]);
	} else if (unit_name) {
		nr->unit = intern_bytes(ctx, unit_name, unit_name_len);
	}
	if (!nr->name && nr->builtin_type)
		nr->name = nr->builtin_type;
}

/* Reads the track-level settings of a descriptor into nr. */
static void reserve_settings(struct tp_ctx *ctx, const struct desc *d,
			     struct res *nr)
{
	nr->parent_uuid = d->parent_uuid;
	nr->kind = RES_CHILD;
	if (d->has_name)
		nr->name = intern_bytes(ctx, d->name, d->name_len);
	if (d->description)
		nr->description =
			intern_bytes(ctx, d->description, d->description_len);
	if (d->has_child_ordering)
		nr->child_ordering = (uint8_t)d->child_ordering;
	if (d->has_rank) {
		nr->has_rank = true;
		nr->rank = d->rank;
	}
	nr->process_ordering_explicit =
		d->process_ordering == TD_PROCESS_ORDERING_EXPLICIT;
	nr->thread_ordering_explicit =
		d->thread_ordering == TD_THREAD_ORDERING_EXPLICIT;
	if (d->merge == TD_MERGE_NONE) {
		nr->merge = MERGE_NONE;
	} else if (d->merge == TD_MERGE_BY_KEY) {
		nr->merge = MERGE_BY_KEY;
		if (d->has_merge_key) {
			nr->merge_key = intern_bytes(ctx, d->merge_key,
						     d->merge_key_len);
		} else if (d->has_merge_key_int) {
			char k[64];
			snprintf(k, sizeof k, "sibling_merge_key_int:%llu",
				 (unsigned long long)d->merge_key_int);
			nr->merge_key = tp_s(ctx, k);
		}
	}
}

/* Whether a later descriptor of a uuid describes the track reserved
 * first (a track always stays where it was first put). */
static bool same_track(const struct res *a, const struct res *b)
{
	return a->kind == b->kind && a->pid == b->pid && a->tid == b->tid &&
	       (a->kind == RES_PROCESS || a->parent_uuid == b->parent_uuid) &&
	       a->is_state == b->is_state && a->merge == b->merge &&
	       a->merge_key == b->merge_key &&
	       (a->kind != RES_COUNTER ||
		(a->category == b->category &&
		 a->unit_multiplier == b->unit_multiplier &&
		 a->is_incremental == b->is_incremental &&
		 a->builtin_type == b->builtin_type &&
		 a->y_axis_share_key == b->y_axis_share_key));
}

/* A later name replaces none, or any name of a track that never merges
 * (renaming its row if it exists already). */
static void rename_reserved(struct tp_ctx *ctx, struct res *r, tp_str name)
{
	if (!name)
		return;
	if (r->name && r->merge != MERGE_NONE)
		return;
	r->name = name;
	if (r->merge == MERGE_NONE && r->track >= 0)
		tp_set_str(tp_tab(ctx, TP_T_TRACK), TP_TRACK_name,
			   (uint32_t)r->track, name);
}

void tp_te_reserve(struct tp_ctx *ctx, const struct tp_packet *pkt,
		   const struct desc *d)
{
	struct tp_te_tracks *s = S(ctx);
	struct res nr;
	bool has_pid = false, has_tid = false;

	if (d->has_child_ordering && d->child_ordering > TD_ORDER_EXPLICIT) {
		tp_stat_inc(ctx, "track_descriptor_invalid_child_ordering");
		return;
	}
	memset(&nr, 0, sizeof nr);
	reserve_settings(ctx, d, &nr);
	if (d->thread) {
		tp_te_pid_tid(d->thread, d->thread_len, &has_pid, &nr.pid, &has_tid,
			&nr.tid);
		if (!has_pid || !has_tid) {
			tp_stat_inc(ctx, "track_descriptor_thread_missing_pid_tid");
			return;
		}
		nr.kind = RES_THREAD;
		nr.use_separate = d->disallow_merging;
	} else if (d->process) {
		tp_te_pid_tid(d->process, d->process_len, &has_pid, &nr.pid, &has_tid,
			&nr.tid);
		if (!has_pid) {
			tp_stat_inc(ctx, "track_descriptor_process_missing_pid");
			return;
		}
		nr.kind = RES_PROCESS;
		nr.tid = 0;
		nr.parent_uuid = 0;
	} else if (d->counter) {
		reserve_counter(ctx, d, &nr);
	} else {
		nr.is_state = d->is_state;
	}

	/* The default track (uuid 0) has no parent. */
	if (d->uuid == 0 && nr.parent_uuid) {
		tp_stat_inc(ctx, "track_descriptor_default_track_with_parent");
		return;
	}
	struct res *r = res_find(s, pkt->machine, d->uuid);
	if (r && r->reserved) {
		if (!same_track(r, &nr)) {
			tp_stat_inc(ctx,
				    "track_descriptor_conflicting_reservation");
			return;
		}
		rename_reserved(ctx, r, nr.name);
		return;
	}
	if (!r)
		r = res_add(s, pkt->machine, d->uuid);
	/* Everything but the name is the first descriptor's. */
	uint64_t uuid = r->uuid;
	int64_t track = r->track;
	*r = nr;
	r->uuid = uuid;
	r->track = track;
	r->reserved = true;
	r->machine = pkt->machine;
}

/* ---- resolving descriptor tracks (parse) -------------------------------- */

/* The reservation of uuid; an event's uuid no descriptor named is
 * reserved then as a global track without a name ("Default Track" for
 * uuid 0). */
static struct res *res_get_or_unknown(struct tp_ctx *ctx, uint64_t uuid,
				      uint32_t machine)
{
	struct tp_te_tracks *s = S(ctx);
	struct res *r = res_find(s, machine, uuid);
	if (!r) {
		r = res_add(s, machine, uuid);
		r->kind = RES_CHILD;
		r->machine = machine;
		r->reserved = true;
		if (uuid == 0)
			r->name = tp_s(ctx, "Default Track");
	}
	return r;
}

/* Whether the chain of parents of r ends at the root without a loop, a
 * missing uuid or more than MAX_ANCESTORS links. */
static bool hierarchy_valid(struct tp_ctx *ctx, const struct res *r)
{
	struct tp_te_tracks *s = S(ctx);
	uint64_t seen[MAX_ANCESTORS];
	uint64_t uuid = r->uuid;

	for (unsigned i = 0; i < MAX_ANCESTORS; i++) {
		if (uuid == 0)
			return true;
		for (unsigned j = 0; j < i; j++) {
			if (seen[j] == uuid) {
				tp_stat_inc(ctx,
					    "track_event_track_hierarchy_loop");
				return false;
			}
		}
		const struct res *cur = res_find(s, r->machine, uuid);
		if (!cur) {
			tp_stat_inc(ctx, "track_hierarchy_missing_uuid");
			return false;
		}
		seen[i] = uuid;
		uuid = cur->parent_uuid;
	}
	tp_stat_inc(ctx, "track_event_track_hierarchy_too_deep");
	return false;
}

/* The reservation of uuid 0 says whether descriptors' ranks order the
 * processes and threads. */
static void sort_index_hint(struct tp_ctx *ctx, const struct res *r)
{
	struct tp_te_tracks *s = S(ctx);
	const struct res *root = res_find(s, r->machine, 0);

	if (!root || !r->has_rank)
		return;
	if (r->kind == RES_THREAD && root->thread_ordering_explicit)
		u64map_put(&s->thread_sort_index, r->utid, (uint32_t)r->rank);
	else if (r->kind == RES_PROCESS && root->process_ordering_explicit)
		u64map_put(&s->process_sort_index, r->upid, (uint32_t)r->rank);
}

static bool resolve(struct tp_ctx *ctx, struct res *r, int depth, int64_t ts);

/* Resolves the parent of the reservation at index ridx; NULL at the root. */
static struct res *resolve_parent(struct tp_ctx *ctx, size_t ridx, int depth,
				  int64_t ts)
{
	struct tp_te_tracks *s = S(ctx);
	uint64_t puuid = s->res[ridx].parent_uuid;

	if (!puuid)
		return NULL;
	struct res *pr = res_find(s, s->res[ridx].machine, puuid);
	if (!pr)
		return NULL;
	size_t pidx = (size_t)(pr - s->res);
	if (!resolve(ctx, pr, depth + 1, ts))
		return NULL;
	return &s->res[pidx]; /* res may have moved */
}

/* Resolves r (and its ancestors) to a thread, a process or the global
 * scope, without making a track; false when it cannot be. */
static bool resolve(struct tp_ctx *ctx, struct res *r, int depth, int64_t ts)
{
	struct tp_te_tracks *s = S(ctx);

	if (r->resolved)
		return true;
	/* A chain that is not valid is checked (and counted) again at each
	 * use, as Perfetto does. */
	if (depth > MAX_ANCESTORS || !hierarchy_valid(ctx, r))
		return false;

	size_t ridx = (size_t)(r - s->res);
	struct res *parent = resolve_parent(ctx, ridx, depth, ts);
	r = &s->res[ridx];

	if (r->kind == RES_THREAD) {
		uint32_t utid = tp_thread_update(ctx, r->machine, r->tid, r->pid);
		uint64_t owner;
		if (u64map_get(&s->uuid_by_utid, utid, &owner) &&
		    owner != r->uuid) {
			/* another descriptor of this thread: its tid was
			 * reused */
			tp_thread_new(ctx, r->machine, r->tid, ts, false);
			utid = tp_thread_update(ctx, r->machine, r->tid, r->pid);
		}
		u64map_put(&s->uuid_by_utid, utid, r->uuid);
		r->scope = SCOPE_T;
		r->utid = utid;
		r->is_root = true;
	} else if (r->kind == RES_PROCESS) {
		uint32_t upid = tp_process_get(ctx, r->machine, r->pid);
		uint64_t owner;
		if (u64map_get(&s->uuid_by_upid, upid, &owner) &&
		    owner != r->uuid)
			upid = tp_process_new(ctx, r->machine, r->pid, ts, false);
		u64map_put(&s->uuid_by_upid, upid, r->uuid);
		r->scope = SCOPE_P;
		r->upid = upid;
		r->is_root = true;
	} else if (parent && parent->scope == SCOPE_T) {
		r->scope = SCOPE_T;
		r->utid = parent->utid;
	} else if (parent && parent->scope == SCOPE_P) {
		r->scope = SCOPE_P;
		r->upid = parent->upid;
	} else {
		r->scope = SCOPE_G;
	}
	r->resolved = true;
	sort_index_hint(ctx, r);
	return true;
}

static const char *ordering_name(uint8_t o)
{
	switch (o) {
	case TD_ORDER_LEXICOGRAPHIC: return "lexicographic";
	case TD_ORDER_CHRONOLOGICAL: return "chronological";
	case TD_ORDER_EXPLICIT: return "explicit";
	default: return NULL;
	}
}

static void add_str_arg(struct tp_ctx *ctx, struct tp_args_builder *b,
			const char *key, tp_str v)
{
	tp_str k = tp_s(ctx, key);
	tp_args_add_str(b, k, k, v);
}

/* The source args of a descriptor track: where it came from, its uuid,
 * its counter settings and its hints for the UI.  seq (or -1) is the
 * sequence of the event that made the track. */
static int64_t source_args(struct tp_ctx *ctx, const struct res *r,
			   bool is_root_in_scope, int64_t seq)
{
	struct tp_te_tracks *s = S(ctx);
	struct tp_args_builder *b = &s->b;
	tp_str k;

	tp_args_builder_reset(b);
	add_str_arg(ctx, b, "source", tp_s(ctx, "descriptor"));
	k = tp_s(ctx, "trace_id");
	tp_args_add_int(b, k, k, (int64_t)r->uuid);
	k = tp_s(ctx, "is_root_in_scope");
	tp_args_add_bool(b, k, k, is_root_in_scope);
	if (r->kind == RES_COUNTER) {
		if (r->category)
			add_str_arg(ctx, b, "category", r->category);
		if (r->builtin_type)
			add_str_arg(ctx, b, "builtin_counter_type",
				    r->builtin_type);
		if (r->y_axis_share_key)
			add_str_arg(ctx, b, "y_axis_share_key",
				    r->y_axis_share_key);
	}
	uint64_t v;
	if (seq >= 0 && u64map_get(&s->first_packet_seqs, (uint64_t)seq, &v)) {
		k = tp_s(ctx, "has_first_packet_on_sequence");
		tp_args_add_bool(b, k, k, true);
	}
	const char *o = ordering_name(r->child_ordering);
	if (o)
		add_str_arg(ctx, b, "child_ordering", tp_s(ctx, o));
	if (r->has_rank) {
		k = tp_s(ctx, "sibling_order_rank");
		tp_args_add_int(b, k, k, r->rank);
	}
	if (r->description)
		add_str_arg(ctx, b, "description", r->description);
	return tp_args_commit(ctx, b);
}

/* The classification of a descriptor track, by scope and kind. */
static const char *track_type(const struct res *r)
{
	static const char *const names[3][3] = {
		[SCOPE_G] = {"global_track_event", "global_counter_track_event",
			     "global_state_track_event"},
		[SCOPE_T] = {"thread_track_event", "thread_counter_track_event",
			     "thread_state_track_event"},
		[SCOPE_P] = {"process_track_event",
			     "process_counter_track_event",
			     "process_state_track_event"},
	};
	int kind = r->kind == RES_COUNTER ? 1 : r->is_state ? 2 : 0;
	return names[r->scope][kind];
}

/* Dimension args of a descriptor track: its thread or process, then the
 * words that tell it from its siblings.  (Perfetto stores utid and upid
 * dimensions as signed integers.) */
static void scope_dims(struct tp_ctx *ctx, const struct res *r,
		       struct tp_args_builder *b)
{
	tp_str k;

	tp_args_builder_reset(b);
	if (r->scope == SCOPE_T) {
		k = tp_s(ctx, "utid");
		tp_args_add_int(b, k, k, r->utid);
	} else if (r->scope == SCOPE_P) {
		k = tp_s(ctx, "upid");
		tp_args_add_int(b, k, k, r->upid);
	}
}

static void set_source_args(struct tp_ctx *ctx, const struct res *r,
			    uint32_t track, int64_t seq)
{
	int64_t args = source_args(ctx, r, r->is_root || r->uuid == 0, seq);
	if (args >= 0)
		tp_set_int(tp_tab(ctx, TP_T_TRACK), TP_TRACK_source_arg_set_id,
			   track, args);
}

/* Makes the one track of a reservation that does not merge with its
 * siblings; name is the first event's, used when the track has no name
 * of its own. */
static int64_t create_track(struct tp_ctx *ctx, struct res *r, tp_str name,
			    int64_t seq)
{
	struct tp_te_tracks *s = S(ctx);
	struct tp_track_spec sp;
	bool counter = r->kind == RES_COUNTER;
	tp_str k;

	/* A thread's own track is the one every thread event shares. */
	if (r->is_root && r->scope == SCOPE_T && !r->use_separate && !counter &&
	    !r->is_state)
		return tp_track_thread(ctx, r->utid);

	tp_track_spec_init(&sp, r->machine);
	sp.event_type = counter ? tp_s(ctx, "counter")
			: r->is_state ? tp_s(ctx, "state") : tp_s(ctx, "slice");
	sp.type = tp_s(ctx, track_type(r));
	if (counter)
		sp.counter_unit = r->unit;
	if (r->scope == SCOPE_T)
		sp.utid = r->utid;
	else if (r->scope == SCOPE_P)
		sp.upid = r->upid;
	sp.parent_id = r->parent_track;
	sp.name = r->name;
	if (!sp.name && !r->is_root && !counter)
		sp.name = name;
	scope_dims(ctx, r, &s->b2);
	k = tp_s(ctx, "track_uuid");
	tp_args_add_int(&s->b2, k, k, (int64_t)r->uuid);
	sp.dimension_arg_set_id = tp_args_commit(ctx, &s->b2);
	uint32_t track = tp_track_new(ctx, &sp);
	set_source_args(ctx, r, track, seq);
	return track;
}

/* Makes the track of lane `lane` of the merge set of r. */
static int64_t create_merged_track(struct tp_ctx *ctx, const struct res *r,
				   uint32_t lane)
{
	static const char *const types[3] = {
		[SCOPE_G] = "global_merged_track_event",
		[SCOPE_T] = "thread_merged_track_event",
		[SCOPE_P] = "process_merged_track_event",
	};
	struct tp_te_tracks *s = S(ctx);
	struct tp_track_spec sp;
	tp_str k;

	tp_track_spec_init(&sp, r->machine);
	sp.event_type = tp_s(ctx, "slice");
	sp.type = tp_s(ctx, types[r->scope]);
	if (r->scope == SCOPE_T)
		sp.utid = r->utid;
	else if (r->scope == SCOPE_P)
		sp.upid = r->upid;
	sp.parent_id = r->parent_track;
	sp.name = r->track_name;
	scope_dims(ctx, r, &s->b2);
	k = tp_s(ctx, "parent_track_uuid");
	tp_args_add_int(&s->b2, k, k, (int64_t)r->parent_uuid);
	k = tp_s(ctx, "merge_key_type");
	tp_args_add_int(&s->b2, k, k, r->merge);
	if (r->merge_value) {
		k = tp_s(ctx, "merge_key_value");
		tp_args_add_str(&s->b2, k, k, r->merge_value);
	}
	k = tp_s(ctx, "track_compressor_idx");
	tp_args_add_int(&s->b2, k, k, lane);
	sp.dimension_arg_set_id = tp_args_commit(ctx, &s->b2);
	uint32_t track = tp_track_new(ctx, &sp);
	set_source_args(ctx, r, track, r->intern_seq);
	return track;
}

/* Whether r's slices share rows with siblings of the same name (or merge
 * key) under the same parent: tracks below a thread, process or the
 * root that are neither counters nor states and do not forbid it. */
static bool mergeable(const struct res *r)
{
	return !r->is_root && r->kind != RES_COUNTER && !r->is_state &&
	       r->merge != MERGE_NONE;
}

static int64_t lane_track(struct tp_ctx *ctx, size_t i, uint32_t lane)
{
	struct tp_te_tracks *s = S(ctx);
	int64_t *t = tp_compress_lane_track(s->compress, s->res[i].set, lane);
	if (*t < 0) {
		*t = create_merged_track(ctx, &s->res[i], lane);
		tp_compress_mark_track(ctx, s->compress, s->res[i].set,
				       (uint32_t)*t);
	}
	return *t;
}

static bool intern_res(struct tp_ctx *ctx, size_t i, tp_str name,
		       int64_t seq, int depth);

/* The track children of the reservation at index i hang below. */
static int64_t parent_track(struct tp_ctx *ctx, size_t i, int64_t seq,
			    int depth)
{
	struct tp_te_tracks *s = S(ctx);

	if (!intern_res(ctx, i, 0, seq, depth))
		return -1;
	if (!s->res[i].merged)
		return s->res[i].track;
	return lane_track(ctx, i, tp_compress_lane_first(s->compress,
							 s->res[i].set));
}

/* Settles, the first time an event (or a child's) needs the resolved
 * reservation at index i, how its track is made: its own track now, or
 * the merge set whose lanes its slices will take. */
static bool intern_res(struct tp_ctx *ctx, size_t i, tp_str name,
		       int64_t seq, int depth)
{
	struct tp_te_tracks *s = S(ctx);
	struct res *r = &s->res[i];

	if (r->interned)
		return r->merged || r->track >= 0;
	if (!r->resolved || depth > MAX_ANCESTORS)
		return false;
	int64_t ptrack = -1;
	bool parent_is_root = true;
	struct res *pr = r->parent_uuid
				 ? res_find(s, r->machine, r->parent_uuid)
				 : NULL;
	if (pr && pr->resolved) {
		size_t pidx = (size_t)(pr - s->res);
		ptrack = parent_track(ctx, pidx, seq, depth + 1);
		parent_is_root = s->res[pidx].is_root;
	}
	r = &s->res[i];
	r->interned = true;
	r->intern_seq = seq;
	/* Only tracks below another descriptor track (not below a thread's
	 * or process's own) have a parent. */
	r->parent_track = r->is_root || parent_is_root ? -1 : ptrack;
	if (!mergeable(r)) {
		r->track = create_track(ctx, r, name, seq);
		return r->track >= 0;
	}
	r->merged = true;
	r->track_name = r->name ? r->name : name;
	r->merge_value = r->merge == MERGE_BY_KEY ? r->merge_key
						  : r->track_name;
	/* Perfetto's compressor is per machine: so are the sets. */
	uint64_t key[4] = {
		(uint64_t)r->machine << 32 | (uint64_t)r->scope << 8 | r->merge,
		r->scope == SCOPE_T ? r->utid : r->scope == SCOPE_P ? r->upid : 0,
		r->parent_uuid,
		r->merge_value,
	};
	r->set = tp_compress_set(s->compress, key, 4);
	return true;
}

/* The track of a resolved reservation for an event on sequence seq
 * (-1: none, the default track's events); -1 when there is none. */
int64_t tp_te_track_for(struct tp_ctx *ctx, struct res *r, tp_str name,
			int64_t seq, enum use use)
{
	struct tp_te_tracks *s = S(ctx);
	size_t i = (size_t)(r - s->res);
	enum tp_compress_use cu;
	uint32_t lane;

	if (!intern_res(ctx, i, name, seq, 0))
		return -1;
	r = &s->res[i];
	if (!r->merged)
		return r->track;
	switch (use) {
	case USE_BEGIN:
		cu = TP_COMPRESS_BEGIN;
		break;
	case USE_END:
		cu = TP_COMPRESS_END;
		break;
	case USE_INSTANT:
		cu = TP_COMPRESS_INSTANT;
		break;
	default:
		return -1;
	}
	lane = tp_compress_lane(s->compress, r->set, cu, (int64_t)r->uuid);
	return lane_track(ctx, i, lane);
}

/* The reservation of uuid for an event, resolved (reserving an unknown
 * uuid); NULL when it cannot be resolved. */
struct res *tp_te_event_res(struct tp_ctx *ctx, uint64_t uuid,
			    uint32_t machine, int64_t ts)
{
	struct tp_te_tracks *s = S(ctx);
	struct res *r = res_get_or_unknown(ctx, uuid, machine);

	if (r->resolved)
		return r;
	size_t i = (size_t)(r - s->res);
	if (!resolve(ctx, r, 0, ts))
		return NULL;
	return &s->res[i];
}

struct res *tp_te_res_find(struct tp_ctx *ctx, uint32_t machine,
			   uint64_t uuid)
{
	return res_find(S(ctx), machine, uuid);
}

struct res *tp_te_resolve(struct tp_ctx *ctx, struct res *r, int64_t ts)
{
	struct tp_te_tracks *s = S(ctx);
	size_t i = (size_t)(r - s->res);

	if (!resolve(ctx, r, 0, ts))
		return NULL;
	return &s->res[i];
}

/* ---- after the parse ---------------------------------------------------- */

/* Adds key = value to the args of row `row` of a process or thread. */
static void add_row_int_arg(struct tp_ctx *ctx, struct tp_table *t,
			    unsigned col, uint32_t row, const char *key,
			    int64_t value)
{
	struct tp_args_builder *b = &S(ctx)->b;

	if (row >= t->nrows)
		return;
	tp_args_builder_reset(b);
	if (!tp_is_null(t, col, row))
		tp_args_load(ctx, tp_get_int(t, col, row), b);
	tp_str k = tp_s(ctx, key);
	tp_args_add_int(b, k, k, value);
	int64_t id = tp_args_commit(ctx, b);
	if (id >= 0)
		tp_set_int(t, col, row, id);
}

void tp_te_tracks_finish(struct tp_ctx *ctx)
{
	struct tp_te_tracks *s = S(ctx);
	const struct u64map *m = &s->process_sort_index;

	for (size_t i = 0; i < m->cap; i++)
		if (m->used[i])
			add_row_int_arg(ctx, tp_tab(ctx, TP_T_PROCESS),
					TP_PROCESS_arg_set_id,
					(uint32_t)m->keys[i],
					"process_sort_index_hint",
					(int32_t)m->vals[i]);
	m = &s->thread_sort_index;
	for (size_t i = 0; i < m->cap; i++)
		if (m->used[i])
			add_row_int_arg(ctx, tp_tab(ctx, TP_T_THREAD),
					TP_THREAD_arg_set_id,
					(uint32_t)m->keys[i],
					"thread_sort_index_hint",
					(int32_t)m->vals[i]);
}
