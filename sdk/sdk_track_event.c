/*
 * sdk_track_event.c - the "track_event" data source: categories, their
 * enabling by TrackEventConfig, per-sequence interning, track descriptors
 * and the emit path behind the TRACE_EVENT_* macros.
 *
 * Category rules (Perfetto's, C SDK flavour): a category is enabled by the
 * first of these that matches: an exact name in enabled_categories, an
 * exact name in disabled_categories (off), a glob (fnmatch) in
 * enabled_categories, a glob in disabled_categories (off); if nothing
 * matches it is off.  So "*" enables everything, and
 * disabled "*" + enabled "foo" enables only foo.  Instance slot i of the
 * data source owns bit i of every category's `enabled` word.
 *
 * Every packet is composed with plain stores: straight into the writer's
 * chunk when an upper bound of its size fits in what is left of it (the
 * usual case), else into the writer's scratch buffer and then copied as
 * fragments.  Nested lengths get as many bytes as their bound needs and
 * are compacted to the minimal varint at the end (a memmove only for
 * bodies of 128 bytes and more).
 *
 * A sequence generation starts (at the first event, when the service
 * clears incremental state, every clear_period_ms in process, after the
 * writer dropped packets, and after VP_GEN_MAX_BYTES of chunks) with two
 * packets: the process track
 * descriptor (sequence_flags INCREMENTAL_STATE_CLEARED, the first one also
 * first_packet_on_sequence, trace_packet_defaults pointing track events at
 * the thread track) and the thread track descriptor.  Event packets set
 * NEEDS_INCREMENTAL_STATE and carry interned_data for what they use first.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perfetto_fields.h"
#include "sdk_intern.h"
#include "sdk_state.h"
#include "sdk_track_event.h"
#include "sdk_writer.h"
#include "vp_alloc.h"

#define VP_MAX_ARGS 32 /* annotations per event beyond are ignored */

static struct vp_category *g_cat_head, *g_cat_tail;
static uint32_t g_cat_count;

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/* The public event types are written as TrackEvent.Type as they are. */
_Static_assert((int)VP_EVENT_SLICE_BEGIN == (int)TE_TYPE_SLICE_BEGIN &&
		       (int)VP_EVENT_SLICE_END == (int)TE_TYPE_SLICE_END &&
		       (int)VP_EVENT_INSTANT == (int)TE_TYPE_INSTANT &&
		       (int)VP_EVENT_COUNTER == (int)TE_TYPE_COUNTER,
	       "vperfetto.h's event types are TrackEvent.Type's");

/* ----------------------------------------------------------- categories */

static bool vp_te_config_enables(const struct vp_te_config *c,
				 const char *name);

void vp_category_register(struct vp_category *cat)
{
	pthread_mutex_lock(&vp_g.mu);
	for (struct vp_category *c = g_cat_head; c; c = c->next)
		if (c == cat)
			goto out;
	cat->index = g_cat_count++;
	cat->next = NULL;
	if (g_cat_tail)
		g_cat_tail->next = cat;
	else
		g_cat_head = cat;
	g_cat_tail = cat;
	/* Sessions already running see it too. */
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++) {
		struct vp_ds_instance *inst = &vp_g.te_slots[i];
		if (atomic_load(&inst->state) == VP_INST_STARTED && inst->te &&
		    vp_te_config_enables(inst->te, cat->name))
			__atomic_fetch_or(&cat->enabled, 1u << i,
					  __ATOMIC_RELEASE);
	}
out:
	pthread_mutex_unlock(&vp_g.mu);
}

struct vp_category *vp_te_categories(void)
{
	return g_cat_head;
}

void vp_te_apply_slot(int slot, bool on)
{
	struct vp_ds_instance *inst = &vp_g.te_slots[slot];
	uint32_t bit = 1u << slot;
	for (struct vp_category *c = g_cat_head; c; c = c->next) {
		if (on && inst->te && vp_te_config_enables(inst->te, c->name))
			__atomic_fetch_or(&c->enabled, bit, __ATOMIC_RELEASE);
		else
			__atomic_fetch_and(&c->enabled, ~bit, __ATOMIC_RELEASE);
	}
}

void vp_te_init_slots(void)
{
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++) {
		vp_g.te_slots[i].slot = i;
		vp_g.te_slots[i].ds = &vp_g.track_event_ds;
	}
}

int vp_te_slot_alloc(void)
{
	for (int i = 0; i < VP_TE_MAX_INSTANCES; i++)
		if (atomic_load(&vp_g.te_slots[i].state) == VP_INST_FREE)
			return i;
	return -1;
}

/* --------------------------------------------------------------- config */

void vp_te_config_free(struct vp_te_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_enabled; i++)
		free(c->enabled[i]);
	for (size_t i = 0; i < c->n_disabled; i++)
		free(c->disabled[i]);
	free(c->enabled);
	free(c->disabled);
	free(c);
}

/* Appends a copy of s[0..len) to c's enabled or disabled list; false if
 * memory ran out (the list is as it was). */
static bool list_add(struct vp_te_config *c, bool disabled, const char *s,
		     size_t len)
{
	char ***list = disabled ? &c->disabled : &c->enabled;
	size_t *n = disabled ? &c->n_disabled : &c->n_enabled;
	size_t *cap = disabled ? &c->cap_disabled : &c->cap_enabled;
	char *d = strndup(s, len);
	if (!d || vp_grow((void **)list, cap, *n + 1, sizeof(**list)) < 0) {
		free(d);
		return false;
	}
	(*list)[(*n)++] = d;
	return true;
}

struct vp_te_config *vp_te_config_from_ds_config(const uint8_t *cfg,
						  size_t len)
{
	struct vp_te_config *c = calloc(1, sizeof(*c));
	struct pb_reader r, tr;
	struct pb_field f, tf;

	if (!c)
		return NULL;
	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f)) {
		if (f.num != DSC_TRACK_EVENT_CONFIG || f.wt != PB_WT_LEN)
			continue;
		pb_reader_init(&tr, f.data, f.len);
		while (pb_next(&tr, &tf)) {
			if (tf.wt != PB_WT_LEN)
				continue;
			bool ok = true;
			if (tf.num == TEC_ENABLED_CATEGORIES)
				ok = list_add(c, false, (const char *)tf.data,
					      tf.len);
			else if (tf.num == TEC_DISABLED_CATEGORIES)
				ok = list_add(c, true, (const char *)tf.data,
					      tf.len);
			if (!ok) {
				vp_te_config_free(c);
				return NULL;
			}
		}
	}
	return c;
}

struct vp_te_config *vp_te_config_from_list(const char *list)
{
	struct vp_te_config *c = calloc(1, sizeof(*c));
	bool ok = true;

	if (!c)
		return NULL;
	for (const char *p = list ? list : ""; *p && ok;) {
		size_t n = strcspn(p, ",");
		const char *s = p;
		size_t len = n;
		while (len && (*s == ' ' || *s == '\t'))
			s++, len--;
		while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
			len--;
		if (len && s[0] == '-')
			ok = len > 1 ? list_add(c, true, s + 1, len - 1) : true;
		else if (len)
			ok = list_add(c, false, s, len);
		p += n;
		if (*p == ',')
			p++;
	}
	/* Nothing enabled explicitly: everything but what is disabled. */
	if (ok && c->n_enabled == 0)
		ok = list_add(c, false, "*", 1);
	if (!ok) {
		vp_te_config_free(c);
		return NULL;
	}
	return c;
}

static bool list_exact(char **l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i], name) == 0)
			return true;
	return false;
}

static bool list_glob(char **l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (fnmatch(l[i], name, 0) == 0)
			return true;
	return false;
}

static bool vp_te_config_enables(const struct vp_te_config *c,
				 const char *name)
{
	if (!c || !name)
		return false;
	if (list_exact(c->enabled, c->n_enabled, name))
		return true;
	if (list_exact(c->disabled, c->n_disabled, name))
		return false;
	if (list_glob(c->enabled, c->n_enabled, name))
		return true;
	return false; /* a disabled glob, or nothing: off */
}

/* ------------------------------------------------------- serialization */

#define PUT_INLINE static inline __attribute__((always_inline))

PUT_INLINE uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	return p + pb_encode_varint(p, v);
}

PUT_INLINE uint8_t *put_tag(uint8_t *p, uint32_t field, unsigned wt)
{
	return put_varint(p, ((uint64_t)field << 3) | wt);
}

PUT_INLINE uint8_t *put_vfield(uint8_t *p, uint32_t field, uint64_t v)
{
	return put_varint(put_tag(p, field, PB_WT_VARINT), v);
}

PUT_INLINE uint8_t *put_fixed64(uint8_t *p, uint32_t field, uint64_t v)
{
	p = put_tag(p, field, PB_WT_FIXED64);
	memcpy(p, &v, 8); /* little-endian hosts only (x86, arm64) */
	return p + 8;
}

PUT_INLINE uint8_t *put_bytes(uint8_t *p, uint32_t field, const void *s,
			      size_t n)
{
	p = put_varint(put_tag(p, field, PB_WT_LEN), n);
	memcpy(p, s, n);
	return p + n;
}

/* A nested message whose length is written when it ends. */
struct nest {
	uint8_t *len_at;
	unsigned width;
};

PUT_INLINE uint8_t *nest_begin(uint8_t *p, uint32_t field, size_t bound,
			       struct nest *n)
{
	p = put_tag(p, field, PB_WT_LEN);
	n->len_at = p;
	n->width = bound < (1u << 7)    ? 1
		   : bound < (1u << 14) ? 2
		   : bound < (1u << 21) ? 3
		   : bound < (1u << 28) ? 4
					: 5;
	return p + n->width;
}

PUT_INLINE uint8_t *nest_end(uint8_t *p, const struct nest *n)
{
	uint8_t *body = n->len_at + n->width;
	size_t len = (size_t)(p - body);
	unsigned need = (unsigned)pb_varint_size(len);
	if (VP_UNLIKELY(need < n->width)) {
		memmove(n->len_at + need, body, len);
		p -= n->width - need;
	}
	pb_encode_varint(n->len_at, len);
	return p;
}

/* Upper bounds of encoded sizes. */
#define B_FIELD_VARINT 12u /* tag (2) + varint (10) */
#define B_LEN_HDR 7u       /* tag (2) + length (5) */

/* ---------------------------------------------------- sequence state */

static uint64_t thread_uuid(pid_t tid)
{
	return vp_mix64(vp_g.process_uuid ^ ((uint64_t)(uint32_t)tid << 1 | 1));
}

static uint64_t counter_uuid(const struct vp_category *cat, const char *name)
{
	return vp_mix64(vp_g.process_uuid ^ vp_mix64(fnv1a(cat->name)) ^
			fnv1a(name) * 3);
}

/* Writes a packet composed in the scratch buffer: p..end. */
static bool write_scratch(struct vp_writer *w, const uint8_t *end, uint64_t ts)
{
	return vp_writer_write_packet(w, w->scratch,
				      (size_t)(end - w->scratch), ts);
}

/* Starts a new sequence generation: intern tables cleared, process and
 * thread descriptors written. */
static bool te_reset_state(struct vp_writer *w, uint64_t ts)
{
	struct vp_ds_instance *inst = w->inst;
	size_t pn = strlen(vp_g.process_name), tn = strlen(w->thread_name);
	uint8_t *s = vp_writer_scratch(w, 256 + pn + tn);
	struct nest td, pd, tpd, ted;

	if (!s)
		return false;
	vp_intern_clear(&w->names);
	vp_intern_clear(&w->cats);
	vp_intern_clear(&w->arg_names);
	vp_intern_clear(&w->counters);
	w->clear_gen_seen = atomic_load_explicit(&inst->clear_gen,
						 memory_order_relaxed);
	w->state_since_ns = ts;
	w->gen_bytes = 0;

	/* The process track, opening the generation. */
	uint8_t *p = put_vfield(s, TP_TIMESTAMP, ts);
	p = put_vfield(p, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	if (!w->ever_written)
		p = put_vfield(p, TP_FIRST_PACKET_ON_SEQUENCE, 1);
	p = nest_begin(p, TP_TRACE_PACKET_DEFAULTS, 2 * B_FIELD_VARINT, &tpd);
	p = nest_begin(p, TPD_TRACK_EVENT_DEFAULTS, B_FIELD_VARINT, &ted);
	p = put_vfield(p, TED_TRACK_UUID, thread_uuid(w->tid));
	p = nest_end(p, &ted);
	p = nest_end(p, &tpd);
	p = nest_begin(p, TP_TRACK_DESCRIPTOR, 64 + pn, &td);
	p = put_vfield(p, TD_UUID, vp_g.process_uuid);
	p = nest_begin(p, TD_PROCESS, 32 + pn, &pd);
	p = put_vfield(p, PD_PID, (uint64_t)(uint32_t)vp_g.pid);
	p = put_bytes(p, PD_PROCESS_NAME, vp_g.process_name, pn);
	p = nest_end(p, &pd);
	p = nest_end(p, &td);
	if (!write_scratch(w, p, ts))
		return false;
	w->ever_written = true;

	/* The thread track. */
	p = put_vfield(s, TP_TIMESTAMP, ts);
	p = nest_begin(p, TP_TRACK_DESCRIPTOR, 96 + tn, &td);
	p = put_vfield(p, TD_UUID, thread_uuid(w->tid));
	p = put_vfield(p, TD_PARENT_UUID, vp_g.process_uuid);
	p = nest_begin(p, TD_THREAD, 48 + tn, &pd);
	p = put_vfield(p, THD_PID, (uint64_t)(uint32_t)vp_g.pid);
	p = put_vfield(p, THD_TID, (uint64_t)(uint32_t)w->tid);
	p = put_bytes(p, THD_THREAD_NAME, w->thread_name, tn);
	p = nest_end(p, &pd);
	p = nest_end(p, &td);
	if (!write_scratch(w, p, ts))
		return false;
	w->state_valid = true;
	w->lost_state = false;
	return true;
}

static inline bool te_needs_reset(const struct vp_writer *w, uint64_t ts)
{
	const struct vp_ds_instance *inst = w->inst;
	if (VP_UNLIKELY(!w->state_valid || w->lost_state))
		return true;
	if (VP_UNLIKELY(w->clear_gen_seen !=
			atomic_load_explicit(&inst->clear_gen,
					     memory_order_relaxed)))
		return true;
	return VP_UNLIKELY(inst->clear_period_ns != 0 &&
			   ts > w->state_since_ns &&
			   ts - w->state_since_ns >= inst->clear_period_ns);
}

/* The calling thread's writer for track_event slot i, locked, with a chunk
 * and valid incremental state; NULL if nothing can be written. */
static struct vp_writer *te_writer_slow(int slot);

static inline struct vp_writer *te_begin(int slot, uint64_t ts)
{
	struct vp_thread_state *t = vp_thread_state();
	struct vp_writer *w = t->te[slot];
	struct vp_ds_instance *inst = &vp_g.te_slots[slot];

	if (VP_UNLIKELY(!w || w->inst_gen != atomic_load_explicit(
						     &inst->gen,
						     memory_order_acquire))) {
		w = te_writer_slow(slot);
		if (!w)
			return NULL;
	}
	vp_writer_lock(w);
	if (VP_UNLIKELY(w->retired) || !vp_writer_ensure_chunk(w, ts))
		goto fail;
	if (te_needs_reset(w, ts)) {
		if (!te_reset_state(w, ts)) {
			w->lost_state = true;
			goto fail;
		}
		if (!vp_writer_ensure_chunk(w, ts))
			goto fail;
	}
	return w;
fail:
	vp_writer_unlock(w);
	return NULL;
}

static struct vp_writer *te_writer_slow(int slot)
{
	struct vp_thread_state *t = vp_thread_state();
	struct vp_ds_instance *inst = &vp_g.te_slots[slot];
	struct vp_writer *old = t->te[slot];

	if (old) {
		/* Retired by a stop (it is never relinked): ours to free. */
		vp_writer_lock(old);
		bool retired = old->retired;
		vp_writer_unlock(old);
		if (!retired)
			return old; /* a generation race; use it this once */
		t->te[slot] = NULL;
		vp_writer_free(old);
	}
	if (atomic_load(&inst->state) != VP_INST_STARTED)
		return NULL;
	vp_thread_attach();
	struct vp_writer *w = vp_writer_create(inst);
	t->te[slot] = w;
	return w;
}

/* --------------------------------------------------------------- events */

struct new_str {
	uint32_t field; /* InternedData field */
	uint64_t iid;
	const char *s;
	size_t len;
};

/* Interns s in t; records it in nw[] if new.  Returns its iid or 0. */
static inline uint64_t intern_str(struct vp_writer *w, struct vp_intern *t,
				  uint32_t field, const char *s,
				  struct new_str *nw, unsigned *nn)
{
	uint64_t iid = vp_intern_get(t, s, NULL);
	if (VP_LIKELY(iid))
		return iid;
	iid = t->next_iid;
	if (!vp_intern_put(t, s, NULL, iid)) {
		w->lost_state = true;
		return 0;
	}
	t->next_iid++;
	nw[*nn] = (struct new_str){field, iid, s, strlen(s)};
	(*nn)++;
	return iid;
}

/* An event lost for want of memory: counted as a drop, the next packet
 * says previous_packet_dropped, and the sequence's incremental state is
 * emitted again (what this event interned never reached the trace). */
static void te_drop_oom(struct vp_writer *w)
{
	w->dropped_packets++;
	w->prev_dropped = true;
	w->lost_state = true;
}

static void te_emit_slot(int slot, struct vp_category *cat,
			 enum vp_event_type type, const char *name,
			 uint64_t ts, const struct vp_arg *args, size_t n_args)
{
	struct vp_writer *w = te_begin(slot, ts);
	struct new_str nw[VP_MAX_ARGS + 2];
	uint64_t arg_iid[VP_MAX_ARGS];
	unsigned nn = 0;

	if (!w)
		return;
	if (n_args > VP_MAX_ARGS)
		n_args = VP_MAX_ARGS;

	/* Interning, and the size bound that goes with it. */
	size_t bound = 4 * B_FIELD_VARINT + 2 * B_LEN_HDR + 3;
	uint64_t cat_iid = intern_str(w, &w->cats, ID_EVENT_CATEGORIES,
				      cat->name, nw, &nn);
	uint64_t name_iid = 0;
	if (name && type != VP_EVENT_SLICE_END)
		name_iid = intern_str(w, &w->names, ID_EVENT_NAMES, name, nw,
				      &nn);
	size_t te_bound = 3 * B_FIELD_VARINT;
	for (size_t i = 0; i < n_args; i++) {
		const struct vp_arg *a = &args[i];
		arg_iid[i] = a->name ? intern_str(w, &w->arg_names,
						  ID_DEBUG_ANNOTATION_NAMES,
						  a->name, nw, &nn)
				     : 0;
		te_bound += B_LEN_HDR + B_FIELD_VARINT + B_FIELD_VARINT;
		if (a->type == VP_ARG_TYPE_STRING)
			te_bound += B_LEN_HDR + (a->v.s ? strlen(a->v.s) : 6);
	}
	if (VP_UNLIKELY(w->lost_state)) {
		te_drop_oom(w); /* out of memory interning */
		vp_writer_unlock(w);
		return;
	}
	size_t id_bound = 0;
	for (unsigned i = 0; i < nn; i++)
		id_bound += B_LEN_HDR + B_FIELD_VARINT + B_LEN_HDR + nw[i].len;
	bound += te_bound + id_bound;

	bool direct = (size_t)(w->cend - w->wptr) >=
		      VP_FRAGMENT_LEN_SIZE + bound;
	uint8_t *out = direct ? w->wptr + VP_FRAGMENT_LEN_SIZE
			      : vp_writer_scratch(w, bound);
	if (!out) {
		te_drop_oom(w);
		vp_writer_unlock(w);
		return;
	}

	uint8_t *p = put_vfield(out, TP_TIMESTAMP, ts);
	p = put_vfield(p, TP_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	if (VP_UNLIKELY(w->prev_dropped)) {
		p = put_vfield(p, TP_PREVIOUS_PACKET_DROPPED, 1);
		w->prev_dropped = false;
	}
	if (nn) {
		struct nest idn, en;
		p = nest_begin(p, TP_INTERNED_DATA, id_bound, &idn);
		for (unsigned i = 0; i < nn; i++) {
			p = nest_begin(p, nw[i].field,
				       B_FIELD_VARINT + B_LEN_HDR + nw[i].len,
				       &en);
			p = put_vfield(p, INTERNED_IID, nw[i].iid);
			p = put_bytes(p, INTERNED_NAME, nw[i].s, nw[i].len);
			p = nest_end(p, &en);
		}
		p = nest_end(p, &idn);
	}
	struct nest ten;
	p = nest_begin(p, TP_TRACK_EVENT, te_bound, &ten);
	p = put_vfield(p, TE_CATEGORY_IIDS, cat_iid);
	p = put_vfield(p, TE_TYPE, (uint64_t)type);
	if (name_iid)
		p = put_vfield(p, TE_NAME_IID, name_iid);
	for (size_t i = 0; i < n_args; i++) {
		const struct vp_arg *a = &args[i];
		const char *s = NULL;
		size_t sl = 0;
		if (a->type == VP_ARG_TYPE_STRING) {
			s = a->v.s ? a->v.s : "(null)";
			sl = strlen(s);
		}
		struct nest an;
		p = nest_begin(p, TE_DEBUG_ANNOTATIONS,
			       2 * B_FIELD_VARINT + B_LEN_HDR + sl, &an);
		if (arg_iid[i])
			p = put_vfield(p, DA_NAME_IID, arg_iid[i]);
		switch (a->type) {
		case VP_ARG_TYPE_UINT:
			p = put_vfield(p, DA_UINT_VALUE, a->v.u);
			break;
		case VP_ARG_TYPE_INT:
			p = put_vfield(p, DA_INT_VALUE, (uint64_t)a->v.i);
			break;
		case VP_ARG_TYPE_DOUBLE: {
			uint64_t bits;
			memcpy(&bits, &a->v.d, 8);
			p = put_fixed64(p, DA_DOUBLE_VALUE, bits);
			break;
		}
		case VP_ARG_TYPE_STRING:
			p = put_bytes(p, DA_STRING_VALUE, s, sl);
			break;
		case VP_ARG_TYPE_BOOL:
			p = put_vfield(p, DA_BOOL_VALUE, a->v.b ? 1 : 0);
			break;
		}
		p = nest_end(p, &an);
	}
	p = nest_end(p, &ten);

	if (direct) {
		vp_writer_commit_direct(w, p);
	} else if (!write_scratch(w, p, ts)) {
		w->lost_state = true; /* interned data may be gone with it */
	}
	vp_writer_unlock(w);
}

void vp_track_event_emit(struct vp_category *cat, enum vp_event_type type,
			 const char *name, uint64_t ts_ns,
			 const struct vp_arg *args, size_t n_args)
{
	uint32_t en = __atomic_load_n(&cat->enabled, __ATOMIC_ACQUIRE);
	if (!en)
		return;
	if (!ts_ns)
		ts_ns = vp_now_ns();
	while (en) {
		int slot = __builtin_ctz(en);
		en &= en - 1;
		if (slot < VP_TE_MAX_INSTANCES)
			te_emit_slot(slot, cat, type, name, ts_ns, args,
				     n_args);
	}
}

/* ------------------------------------------------------------- counters */

static void te_counter_slot(int slot, struct vp_category *cat,
			    const char *name, uint64_t ts, int64_t iv,
			    double dv, bool is_double)
{
	struct vp_writer *w = te_begin(slot, ts);
	if (!w)
		return;

	uint64_t uuid = vp_intern_get(&w->counters, name, cat);
	if (VP_UNLIKELY(!uuid)) {
		/* The counter track, once per sequence generation. */
		size_t nl = strlen(name);
		uint8_t *s = vp_writer_scratch(w, 64 + nl);
		struct nest td, cd;
		uuid = counter_uuid(cat, name);
		if (!s) {
			te_drop_oom(w);
			goto out;
		}
		uint8_t *p = put_vfield(s, TP_TIMESTAMP, ts);
		p = nest_begin(p, TP_TRACK_DESCRIPTOR, 40 + nl, &td);
		p = put_vfield(p, TD_UUID, uuid);
		p = put_vfield(p, TD_PARENT_UUID, vp_g.process_uuid);
		p = put_bytes(p, TD_NAME, name, nl);
		p = nest_begin(p, TD_COUNTER, 0, &cd);
		p = nest_end(p, &cd);
		p = nest_end(p, &td);
		if (!write_scratch(w, p, ts) ||
		    !vp_intern_put(&w->counters, name, cat, uuid) ||
		    !vp_writer_ensure_chunk(w, ts))
			goto out;
	}

	size_t bound = 6 * B_FIELD_VARINT + B_LEN_HDR;
	bool direct = (size_t)(w->cend - w->wptr) >=
		      VP_FRAGMENT_LEN_SIZE + bound;
	uint8_t *out = direct ? w->wptr + VP_FRAGMENT_LEN_SIZE
			      : vp_writer_scratch(w, bound);
	if (!out) {
		te_drop_oom(w);
		goto out;
	}
	struct nest ten;
	uint8_t *p = put_vfield(out, TP_TIMESTAMP, ts);
	if (VP_UNLIKELY(w->prev_dropped)) {
		p = put_vfield(p, TP_PREVIOUS_PACKET_DROPPED, 1);
		w->prev_dropped = false;
	}
	p = nest_begin(p, TP_TRACK_EVENT, 4 * B_FIELD_VARINT, &ten);
	p = put_vfield(p, TE_TYPE, TE_TYPE_COUNTER);
	p = put_vfield(p, TE_TRACK_UUID, uuid);
	if (is_double) {
		uint64_t bits;
		memcpy(&bits, &dv, 8);
		p = put_fixed64(p, TE_DOUBLE_COUNTER_VALUE, bits);
	} else {
		p = put_vfield(p, TE_COUNTER_VALUE, (uint64_t)iv);
	}
	p = nest_end(p, &ten);
	if (direct) {
		vp_writer_commit_direct(w, p);
	} else {
		write_scratch(w, p, ts);
	}
out:
	vp_writer_unlock(w);
}

void vp_track_event_counter(struct vp_category *cat, const char *name,
			    uint64_t ts_ns, int64_t ivalue, double dvalue,
			    bool is_double)
{
	uint32_t en = __atomic_load_n(&cat->enabled, __ATOMIC_ACQUIRE);
	if (!en || !name)
		return;
	if (!ts_ns)
		ts_ns = vp_now_ns();
	while (en) {
		int slot = __builtin_ctz(en);
		en &= en - 1;
		if (slot < VP_TE_MAX_INSTANCES)
			te_counter_slot(slot, cat, name, ts_ns, ivalue, dvalue,
					is_double);
	}
}
