/*
 * tp_tracks.c - the rows of __intrinsic_track and of the counter table.
 *
 * Thread and process default tracks are found through a utid / upid map;
 * interned tracks (counters, legacy async tracks ...) through a hash of
 * their identity (machine, type, name, dimension args, utid, upid) with the
 * identity kept here, so renaming a track later does not change how it is
 * found again.
 */
#include <stdlib.h>
#include <string.h>

#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

struct track_key {
	uint32_t machine;
	tp_str type, name, event_type;
	int64_t dims, utid, upid;
	uint32_t track;
	uint32_t next; /* index + 1 of the next key in the chain, 0: end */
};

struct tp_tracks {
	/* cpus of the __intrinsic_cpu table: per machine a bitmap of the cpus
	 * that have a row, and ucpu -> row */
	uint64_t **cpu_seen;
	uint32_t ncpu_machines;
	struct u64map cpu_rows;
	struct u64map thread_tracks;  /* utid -> track */
	struct u64map process_tracks; /* upid -> track */
	struct u64map interned;       /* hash -> index + 1 of first key */
	struct track_key *keys;
	size_t nkeys, capkeys;
};

struct tp_tracks *tp_tracks_new(void)
{
	struct tp_tracks *t = vp_xcalloc(1, sizeof *t);
	u64map_init(&t->thread_tracks);
	u64map_init(&t->process_tracks);
	u64map_init(&t->interned);
	u64map_init(&t->cpu_rows);
	return t;
}

void tp_tracks_free(struct tp_tracks *t)
{
	if (!t)
		return;
	u64map_free(&t->thread_tracks);
	u64map_free(&t->process_tracks);
	u64map_free(&t->interned);
	u64map_free(&t->cpu_rows);
	for (uint32_t i = 0; i < t->ncpu_machines; i++)
		free(t->cpu_seen[i]);
	free(t->cpu_seen);
	free(t->keys);
	free(t);
}

void tp_track_spec_init(struct tp_track_spec *s, uint32_t machine)
{
	memset(s, 0, sizeof *s);
	s->parent_id = -1;
	s->source_arg_set_id = -1;
	s->dimension_arg_set_id = -1;
	s->utid = -1;
	s->upid = -1;
	s->machine = machine;
}

uint32_t tp_track_new(struct tp_ctx *ctx, const struct tp_track_spec *s)
{
	struct tp_table *t = tp_tab(ctx, TP_T_TRACK);
	uint32_t row = tp_table_add_row(t);

	if (s->name)
		tp_set_str(t, TP_TRACK_name, row, s->name);
	if (s->type)
		tp_set_str(t, TP_TRACK_type, row, s->type);
	tp_set_str(t, TP_TRACK_event_type, row,
		   s->event_type ? s->event_type : tp_s(ctx, "slice"));
	if (s->counter_unit)
		tp_set_str(t, TP_TRACK_counter_unit, row, s->counter_unit);
	if (s->parent_id >= 0)
		tp_set_int(t, TP_TRACK_parent_id, row, s->parent_id);
	if (s->source_arg_set_id >= 0)
		tp_set_int(t, TP_TRACK_source_arg_set_id, row,
			   s->source_arg_set_id);
	if (s->dimension_arg_set_id >= 0)
		tp_set_int(t, TP_TRACK_dimension_arg_set_id, row,
			   s->dimension_arg_set_id);
	if (s->utid >= 0)
		tp_set_int(t, TP_TRACK_utid, row, s->utid);
	if (s->upid >= 0)
		tp_set_int(t, TP_TRACK_upid, row, s->upid);
	tp_set_machine(t, TP_TRACK_machine_id, row, s->machine);
	/* As in Perfetto, a track with a cpu dimension makes that cpu a row
	 * of the cpu table. */
	if (s->dimension_arg_set_id >= 0) {
		struct tp_arg a;
		if (tp_args_find(ctx, s->dimension_arg_set_id, tp_s(ctx, "cpu"),
				 &a) &&
		    (a.type == TP_ARG_INT || a.type == TP_ARG_UINT) && a.i >= 0 &&
		    a.i < TP_MAX_CPUS_PER_MACHINE)
			tp_cpu_ucpu(ctx, s->machine, (uint32_t)a.i);
	}
	return row;
}

int64_t tp_cpu_ucpu_slow(struct tp_ctx *ctx, uint32_t machine, uint32_t cpu)
{
	struct tp_tracks *tt = ctx->tracks;
	int64_t ucpu = (int64_t)machine * TP_MAX_CPUS_PER_MACHINE + cpu;
	if (cpu >= TP_MAX_CPUS_PER_MACHINE)
		return ucpu;
	if (machine >= tt->ncpu_machines) {
		uint32_t n = machine + 1;
		uint64_t **v = vp_xrealloc(tt->cpu_seen, n * sizeof *v);
		for (uint32_t i = tt->ncpu_machines; i < n; i++)
			v[i] = NULL;
		tt->cpu_seen = v;
		tt->ncpu_machines = n;
	}
	if (!tt->cpu_seen[machine]) {
		tt->cpu_seen[machine] =
			vp_xcalloc(TP_MAX_CPUS_PER_MACHINE / 64, sizeof(uint64_t));
	}
	uint64_t *bits = tt->cpu_seen[machine];
	if (bits[cpu >> 6] >> (cpu & 63) & 1)
		return ucpu;
	bits[cpu >> 6] |= 1ull << (cpu & 63);
	struct tp_table *t = tp_tab(ctx, TP_T_CPU);
	uint32_t r = tp_table_add_row(t);
	tp_set_int(t, TP_CPU_ucpu, r, ucpu);
	tp_set_int(t, TP_CPU_cpu, r, cpu);
	tp_set_int(t, TP_CPU_cluster_id, r, 0);
	tp_set_machine(t, TP_CPU_machine_id, r, machine);
	u64map_put(&tt->cpu_rows, (uint64_t)ucpu, r);
	return ucpu;
}

bool tp_cpu_known(struct tp_ctx *ctx, uint32_t machine, uint32_t cpu)
{
	struct tp_tracks *tt = ctx->tracks;
	return cpu < TP_MAX_CPUS_PER_MACHINE && machine < tt->ncpu_machines &&
	       tt->cpu_seen[machine] &&
	       (tt->cpu_seen[machine][cpu >> 6] >> (cpu & 63) & 1);
}

uint32_t tp_cpu_row(struct tp_ctx *ctx, uint32_t machine, uint32_t cpu)
{
	uint64_t v = 0;
	int64_t ucpu = tp_cpu_ucpu(ctx, machine, cpu);
	if (!u64map_get(&ctx->tracks->cpu_rows, (uint64_t)ucpu, &v))
		return UINT32_MAX;
	return (uint32_t)v;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t key_hash(const struct tp_track_spec *s)
{
	uint64_t h = 0x12345;
	h = mix(h, s->machine);
	h = mix(h, s->type);
	h = mix(h, s->name);
	h = mix(h, s->event_type);
	h = mix(h, (uint64_t)s->dimension_arg_set_id);
	h = mix(h, (uint64_t)s->utid);
	h = mix(h, (uint64_t)s->upid);
	return h;
}

static bool key_eq(const struct track_key *k, const struct tp_track_spec *s)
{
	return k->machine == s->machine && k->type == s->type &&
	       k->name == s->name && k->event_type == s->event_type &&
	       k->dims == s->dimension_arg_set_id && k->utid == s->utid &&
	       k->upid == s->upid;
}

uint32_t tp_track_intern(struct tp_ctx *ctx, const struct tp_track_spec *s)
{
	struct tp_tracks *tt = ctx->tracks;
	uint64_t h = key_hash(s), first = 0;

	if (u64map_get(&tt->interned, h, &first)) {
		for (uint64_t i = first; i; i = tt->keys[i - 1].next)
			if (key_eq(&tt->keys[i - 1], s))
				return tt->keys[i - 1].track;
	}
	if (tt->nkeys == tt->capkeys) {
		size_t cap = tt->capkeys ? tt->capkeys * 2 : 64;
		struct track_key *k = vp_xrealloc(tt->keys, cap * sizeof *k);
		tt->keys = k;
		tt->capkeys = cap;
	}
	struct track_key *k = &tt->keys[tt->nkeys++];
	k->machine = s->machine;
	k->type = s->type;
	k->name = s->name;
	k->event_type = s->event_type;
	k->dims = s->dimension_arg_set_id;
	k->utid = s->utid;
	k->upid = s->upid;
	k->track = tp_track_new(ctx, s);
	k->next = (uint32_t)first;
	u64map_put(&tt->interned, h, tt->nkeys);
	return k->track;
}

static uint32_t row_machine(struct tp_ctx *ctx, enum tp_table_id tab,
			    unsigned col, uint32_t row)
{
	struct tp_table *t = tp_tab(ctx, tab);
	if (row >= t->nrows)
		return 0;
	return (uint32_t)tp_get_int(t, col, row);
}

uint32_t tp_track_thread(struct tp_ctx *ctx, uint32_t utid)
{
	uint64_t v;
	if (u64map_get(&ctx->tracks->thread_tracks, utid, &v))
		return (uint32_t)v;
	struct tp_track_spec s;
	tp_track_spec_init(&s, row_machine(ctx, TP_T_THREAD,
					   TP_THREAD_machine_id, utid));
	/* Perfetto's "main" slice track of a thread: type thread_execution,
	 * its utid as the one dimension. */
	s.type = tp_s(ctx, "thread_execution");
	s.utid = utid;
	s.dimension_arg_set_id = tp_args_one_int(ctx, "utid", utid);
	uint32_t id = tp_track_new(ctx, &s);
	u64map_put(&ctx->tracks->thread_tracks, utid, id);
	return id;
}

uint32_t tp_track_process(struct tp_ctx *ctx, uint32_t upid)
{
	uint64_t v;
	if (u64map_get(&ctx->tracks->process_tracks, upid, &v))
		return (uint32_t)v;
	struct tp_track_spec s;
	tp_track_spec_init(&s, row_machine(ctx, TP_T_PROCESS,
					   TP_PROCESS_machine_id, upid));
	s.type = tp_s(ctx, "process");
	s.upid = upid;
	uint32_t id = tp_track_new(ctx, &s);
	u64map_put(&ctx->tracks->process_tracks, upid, id);
	return id;
}

uint32_t tp_track_counter(struct tp_ctx *ctx, uint32_t machine, tp_str type,
			  tp_str name, int64_t cpu, tp_str unit)
{
	struct tp_track_spec s;
	tp_track_spec_init(&s, machine);
	s.type = type;
	s.name = name;
	s.event_type = tp_s(ctx, "counter");
	s.counter_unit = unit;
	if (cpu >= 0)
		s.dimension_arg_set_id = tp_args_one_int(ctx, "cpu", cpu);
	return tp_track_intern(ctx, &s);
}

uint32_t tp_track_cpu_slices(struct tp_ctx *ctx, uint32_t machine,
			     const char *type, const char *name, uint32_t cpu)
{
	struct tp_track_spec s;
	tp_track_spec_init(&s, machine);
	s.type = tp_s(ctx, type);
	s.name = tp_s(ctx, name);
	s.dimension_arg_set_id = tp_args_one_int(ctx, "cpu", cpu);
	return tp_track_intern(ctx, &s);
}

uint32_t tp_counter_add(struct tp_ctx *ctx, uint32_t track, int64_t ts,
			double value, int64_t arg_set_id)
{
	struct tp_table *t = tp_tab(ctx, TP_T_COUNTER);
	uint32_t row = tp_table_add_row(t);
	tp_set_int(t, TP_COUNTER_ts, row, ts);
	tp_set_int(t, TP_COUNTER_track_id, row, track);
	tp_set_real(t, TP_COUNTER_value, row, value);
	if (arg_set_id >= 0)
		tp_set_int(t, TP_COUNTER_arg_set_id, row, arg_set_id);
	return row;
}
