/*
 * sync_scan.c - collects clock-sync samples, exchanges and KVM counter
 * records from a trace, packet by packet (see sync_scan.h).
 */
#include "sync_scan.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "u64map.h"
#include "seq_table.h"
#include "trace_model_decode.h"
#include "vp_alloc.h"

/* Strings the scanner recognises, as literal or interned names. */
enum key {
	K_NONE = 0,
	K_CAT_CROS,
	K_CAT_VPERFETTO,
	K_NAME_SYNC,
	K_NAME_EXCHANGE,
	K_NAME_KVM_TSC,
	K_ANN_BOOT,
	K_ANN_MONO,
	K_ANN_CPU,
	K_ANN_SEQ,
	K_ANN_SEND,
	K_ANN_RECV,
	K_ANN_HOST,
	K_ANN_VM_PID,
	K_ANN_VCPU,
	K_ANN_TSC_OFFSET,
	K_ANN_TSC_RATIO,
	K_ANN_TSC_FRAC,
	K_ANN_COUNT
};

/* Which interning table a string came from. */
enum table { T_CATEGORY, T_NAME, T_ANNOTATION };

static const struct {
	enum table table;
	const char *s;
} known[K_ANN_COUNT] = {
	[K_CAT_CROS] = {T_CATEGORY, "cros"},
	[K_CAT_VPERFETTO] = {T_CATEGORY, "vperfetto"},
	[K_NAME_SYNC] = {T_NAME, "guest_clock_sync"},
	[K_NAME_EXCHANGE] = {T_NAME, "guest_clock_sync_exchange"},
	[K_NAME_KVM_TSC] = {T_NAME, "kvm_tsc"},
	[K_ANN_BOOT] = {T_ANNOTATION, "clock_sync_boottime"},
	[K_ANN_MONO] = {T_ANNOTATION, "clock_sync_monotonic"},
	[K_ANN_CPU] = {T_ANNOTATION, "clock_sync_cputime"},
	[K_ANN_SEQ] = {T_ANNOTATION, "sync_seq"},
	[K_ANN_SEND] = {T_ANNOTATION, "guest_cputime_send"},
	[K_ANN_RECV] = {T_ANNOTATION, "guest_cputime_recv"},
	[K_ANN_HOST] = {T_ANNOTATION, "host_cputime"},
	[K_ANN_VM_PID] = {T_ANNOTATION, "vm_pid"},
	[K_ANN_VCPU] = {T_ANNOTATION, "vcpu"},
	[K_ANN_TSC_OFFSET] = {T_ANNOTATION, "tsc_offset"},
	[K_ANN_TSC_RATIO] = {T_ANNOTATION, "tsc_scaling_ratio"},
	[K_ANN_TSC_FRAC] = {T_ANNOTATION, "tsc_scaling_frac_bits"},
};

static enum key lookup(enum table t, const uint8_t *s, size_t len)
{
	for (int k = 1; k < K_ANN_COUNT; k++)
		if (known[k].table == t && strlen(known[k].s) == len &&
		    memcmp(known[k].s, s, len) == 0)
			return (enum key)k;
	return K_NONE;
}

/* Per-sequence interning: (table, iid) -> key, for known strings only. */
struct seq {
	struct vp_seq_state st; /* clears (trace_model.h) */
	struct u64map interned;
	size_t n_categories; /* interned categories of ours: cros, vperfetto */
	uint32_t id;
	/* A part scanner's (sync_scanner_new_part): no clear seen yet, so
	 * what was interned before the part is not known; a packet whose
	 * scan read the interning then (relied) was kept for the join, in
	 * `kept` bytes of them, or could not be (overflow). */
	bool inherited, relied, overflow;
	size_t kept;
};

/* What a scan's results do to sync_data, in the order the packets came:
 * one of these per result, applied at once by a whole scan and logged by
 * a part scanner, for the join to apply after the parts before it. */
enum result_kind {
	R_BOOT,            /* a (counter, BOOTTIME) sample */
	R_MONO,            /* a (counter, MONOTONIC) sample */
	R_REALTIME,        /* a (REALTIME, BOOTTIME) pair */
	R_REALTIME_MONO,   /* a (REALTIME, MONOTONIC) pair */
	R_MONO_BOOT,       /* a (MONOTONIC, BOOTTIME) pair */
	R_EXCHANGE,
	R_KVM,
	R_TRACE_CLOCK,     /* a snapshot's primary_trace_clock */
	R_EVENT_SAMPLE,    /* counts of n_... */
	R_SNAPSHOT_SAMPLE,
	R_INCREMENTAL_64,
	R_BAD_SYNC_EVENT,
};

struct result {
	uint64_t off;      /* the packet's file offset */
	uint32_t seq;      /* its sequence */
	uint8_t kind;      /* enum result_kind */
	bool dep;          /* read interning from before the part */
	union {
		struct {
			uint64_t x, y;
		} xy;
		struct cm_exchange ex;
		struct kvm_tsc_record kvm;
		uint32_t clock;
	} u;
};

/* The most results a part logs, and the most bytes of packets it keeps
 * for the join: past either it gives up (the caller then scans the part
 * on after the parts before it), so its memory stays bounded. */
#define PART_MAX_RESULTS 65536
#define PART_KEPT_MAX (4u << 20)
/* A kept packet: its offset, sequence and length, then its bytes, unless
 * KEPT_IN_FILE says they are the file's at that offset (a packet read
 * whole: the join reads it again; a skim's stand-in is kept as it is). */
#define KEPT_HEAD 16
#define KEPT_IN_FILE 0x80000000u

struct part {
	struct result *log;
	size_t n_log, cap_log;
	struct pb_buf kept;
	bool dep;          /* the packet being scanned: as result.dep */
	uint32_t seq;      /* ... its sequence */
	bool in_file;      /* ... is the file's bytes at its offset */
	bool discard;      /* results only counted (a dry run) */
	bool full;         /* keeps no more packets (make_room) */
};

struct sync_scanner {
	char *path;
	struct seq_table seqs; /* of struct seq */
	/* every sequence id of SYNC_SEQ_LOAD_IDS or more seen (those below
	 * have a seq_load), and the last one looked up */
	struct u64map big_seqs;
	bool have_last_seq;
	uint32_t last_seq;
	struct sync_data d;
	struct part *part; /* a part scanner's; NULL for a whole scan */
	/* the packet being scanned, for error offsets */
	const uint8_t *pkt;
	uint64_t pkt_off;
	struct vp_error *err;
};

/* Whether the next value offered to the array arr of *n elements of
 * `size` bytes is kept (sync_scan.h, SYNC_MAX_SAMPLES): every stride-th
 * one is; a full array first drops every other element, and the stride
 * doubles. */
static bool thin_keep(struct thinning *t, void *arr, size_t *n, size_t size)
{
	size_t k = t->offered++;

	if (!t->stride)
		t->stride = 1;
	if (k % t->stride)
		return false;
	if (*n < (t->max ? t->max : SYNC_MAX_SAMPLES))
		return true;
	/* element i was offered as number i * stride: keep the even ones */
	unsigned char *a = arr;
	for (size_t i = 1; 2 * i < *n; i++)
		memcpy(a + i * size, a + 2 * i * size, size);
	*n = (*n + 1) / 2;
	t->stride *= 2;
	return k % t->stride == 0;
}

size_t sync_data_thinned(const struct sync_data *d)
{
	return d->boot.thin.offered - d->boot.n +
	       d->mono.thin.offered - d->mono.n +
	       d->realtime.thin.offered - d->realtime.n +
	       d->realtime_mono.thin.offered - d->realtime_mono.n +
	       d->mono_boot.thin.offered - d->mono_boot.n +
	       d->ex_thin.offered - d->n_ex;
}

static void push_sample(struct sample_vec *v, uint64_t x, uint64_t y)
{
	if (!thin_keep(&v->thin, v->v, &v->n, sizeof(*v->v)))
		return;
	VP_XGROW(v->v, v->cap, v->n + 1);
	v->v[v->n++] = (struct cm_sample){.x = x, .y = y, .width = 0};
}

/* Keeps a kvm_tsc record that changes a value of its vCPU (the last 64
 * records are looked at: a producer writes one per change, and maybe
 * again now and then), up to SYNC_MAX_KVM. */
static void push_kvm(struct sync_data *d, const struct kvm_tsc_record *r)
{
	for (size_t i = d->n_kvm, looked = 0; i-- > 0 && looked < 64; looked++) {
		const struct kvm_tsc_record *p = &d->kvm[i];
		if (p->vm_pid != r->vm_pid || p->vcpu != r->vcpu)
			continue;
		if (p->tsc_offset == r->tsc_offset && p->ratio == r->ratio &&
		    p->frac_bits == r->frac_bits)
			return;
		break;
	}
	if (d->n_kvm >= sync_data_max_kvm(d)) {
		d->n_kvm_dropped++;
		return;
	}
	VP_XGROW(d->kvm, d->cap_kvm, d->n_kvm + 1);
	d->kvm[d->n_kvm++] = *r;
}

/* What result r does to d. */
static void apply(struct sync_data *d, const struct result *r)
{
	switch ((enum result_kind)r->kind) {
	case R_BOOT:
		push_sample(&d->boot, r->u.xy.x, r->u.xy.y);
		break;
	case R_MONO:
		push_sample(&d->mono, r->u.xy.x, r->u.xy.y);
		break;
	case R_REALTIME:
		push_sample(&d->realtime, r->u.xy.x, r->u.xy.y);
		break;
	case R_REALTIME_MONO:
		push_sample(&d->realtime_mono, r->u.xy.x, r->u.xy.y);
		break;
	case R_MONO_BOOT:
		push_sample(&d->mono_boot, r->u.xy.x, r->u.xy.y);
		break;
	case R_EXCHANGE:
		if (!thin_keep(&d->ex_thin, d->ex, &d->n_ex, sizeof(*d->ex)))
			break;
		VP_XGROW(d->ex, d->cap_ex, d->n_ex + 1);
		d->ex[d->n_ex++] = r->u.ex;
		break;
	case R_KVM:
		push_kvm(d, &r->u.kvm);
		break;
	case R_TRACE_CLOCK:
		d->trace_clock = r->u.clock;
		break;
	case R_EVENT_SAMPLE:
		d->n_event_samples++;
		break;
	case R_SNAPSHOT_SAMPLE:
		d->n_snapshot_samples++;
		break;
	case R_INCREMENTAL_64:
		d->n_incremental_64++;
		break;
	case R_BAD_SYNC_EVENT:
		d->n_bad_sync_events++;
		break;
	}
}

/* A result of the packet being scanned: applied, or in a part logged
 * (-1 with a message when the log is full). */
static int emit(struct sync_scanner *s, struct result r)
{
	struct part *pt = s->part;

	if (!pt) {
		apply(&s->d, &r);
		return 0;
	}
	if (pt->discard)
		return 0;
	if (pt->n_log == PART_MAX_RESULTS)
		return vp_errorf(s->err, "%s: byte offset %llu: more than %d "
				 "sync results in one part of the scan",
				 s->path, (unsigned long long)s->pkt_off,
				 PART_MAX_RESULTS);
	r.off = s->pkt_off;
	r.seq = pt->seq;
	r.dep = pt->dep;
	VP_XGROW(pt->log, pt->cap_log, pt->n_log + 1);
	pt->log[pt->n_log++] = r;
	return 0;
}

static int emit_xy(struct sync_scanner *s, enum result_kind kind, uint64_t x,
		   uint64_t y)
{
	return emit(s, (struct result){.kind = kind, .u.xy = {x, y}});
}

static int emit_count(struct sync_scanner *s, enum result_kind kind)
{
	return emit(s, (struct result){.kind = kind});
}

size_t sync_data_max_samples(const struct sync_data *d)
{
	return d->boot.thin.max ? d->boot.thin.max : SYNC_MAX_SAMPLES;
}

size_t sync_data_max_kvm(const struct sync_data *d)
{
	return d->max_kvm ? d->max_kvm : SYNC_MAX_KVM;
}

/* Of twice `most` (what a host and one guest keep), one of n inputs'
 * share, at least `least`. */
static size_t share_of(size_t most, size_t least, size_t n_inputs)
{
	size_t v = n_inputs > 2 ? 2 * most / n_inputs : most;
	return v > least ? v : least;
}

void sync_scanner_share(struct sync_scanner *s, size_t n_inputs)
{
	size_t max = share_of(SYNC_MAX_SAMPLES, SYNC_MIN_SAMPLES, n_inputs);

	s->d.boot.thin.max = max;
	s->d.mono.thin.max = max;
	s->d.realtime.thin.max = max;
	s->d.realtime_mono.thin.max = max;
	s->d.mono_boot.thin.max = max;
	s->d.ex_thin.max = max;
	s->d.max_kvm = share_of(SYNC_MAX_KVM, SYNC_MIN_KVM, n_inputs);
}

struct sync_scanner *sync_scanner_new(const char *path)
{
	struct sync_scanner *s = vp_xcalloc(1, sizeof(*s));
	s->path = vp_xstrdup(path);
	seq_table_init(&s->seqs, sizeof(struct seq));
	u64map_init(&s->big_seqs);
	s->d.trace_clock = BUILTIN_CLOCK_BOOTTIME;
	return s;
}

void sync_data_free(struct sync_data *d)
{
	free(d->boot.v);
	free(d->mono.v);
	free(d->realtime.v);
	free(d->realtime_mono.v);
	free(d->mono_boot.v);
	free(d->ex);
	free(d->kvm);
	memset(d, 0, sizeof(*d));
}

struct sync_scanner *sync_scanner_new_part(const char *path)
{
	struct sync_scanner *s = sync_scanner_new(path);

	s->part = vp_xcalloc(1, sizeof(*s->part));
	pb_buf_init(&s->part->kept);
	return s;
}

/* Frees what s knows of its sequences, leaving it none. */
static void free_seqs(struct sync_scanner *s)
{
	for (size_t i = 0; i < seq_table_count(&s->seqs); i++)
		u64map_free(&((struct seq *)seq_table_at(&s->seqs, i))->interned);
	seq_table_free(&s->seqs);
	seq_table_init(&s->seqs, sizeof(struct seq));
	u64map_free(&s->big_seqs);
	u64map_init(&s->big_seqs);
	s->have_last_seq = false;
}

void sync_scanner_end(struct sync_scanner *s)
{
	free_seqs(s);
}

void sync_scanner_free(struct sync_scanner *s)
{
	if (!s)
		return;
	if (s->part) {
		free(s->part->log);
		pb_buf_free(&s->part->kept);
		free(s->part);
	}
	free_seqs(s);
	seq_table_free(&s->seqs);
	sync_data_free(&s->d);
	free(s->path);
	free(s);
}

struct sync_data *sync_scanner_data(struct sync_scanner *s) { return &s->d; }

static struct seq *get_seq(struct sync_scanner *s, uint32_t id)
{
	bool made;
	struct seq *q = seq_table_get(&s->seqs, id, &made);

	if (made) {
		u64map_init(&q->interned);
		q->id = id;
		q->inherited = s->part != NULL;
	}
	return q;
}

/* Reports malformed data inside the current packet. */
static int bad(struct sync_scanner *s, const struct pb_reader *r,
	       const char *what)
{
	uint64_t at = s->pkt_off + (uint64_t)(r->base - s->pkt) + r->err_off;
	return vp_errorf(s->err, "%s: byte offset %llu: malformed %s: %s",
			 s->path, (unsigned long long)at, what,
			 pb_err_str(r->err));
}

#define IID_KEY(table, iid) (((uint64_t)(iid) << 2) | (uint64_t)(table))

/* InternedData: remember the iids of strings we look for. */
static int scan_interned(struct sync_scanner *s, struct seq *q,
			 const uint8_t *p, size_t len)
{
	struct pb_reader r, er;
	struct pb_field f, ef;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		enum table t;
		if (f.num == ID_EVENT_CATEGORIES)
			t = T_CATEGORY;
		else if (f.num == ID_EVENT_NAMES)
			t = T_NAME;
		else if (f.num == ID_DEBUG_ANNOTATION_NAMES)
			t = T_ANNOTATION;
		else
			continue;
		if (f.wt != PB_WT_LEN)
			continue;
		uint64_t iid = 0;
		enum key k = K_NONE;
		pb_reader_init(&er, f.data, f.len);
		while (pb_next(&er, &ef)) {
			if (ef.num == INTERNED_IID && ef.wt == PB_WT_VARINT)
				iid = ef.val;
			else if (ef.num == INTERNED_NAME && ef.wt == PB_WT_LEN)
				k = lookup(t, ef.data, ef.len);
		}
		if (er.err)
			return bad(s, &er, "interned entry");
		if (k != K_NONE) {
			u64map_put(&q->interned, IID_KEY(t, iid), k);
			if (t == T_CATEGORY)
				q->n_categories++;
		}
		else if (q->interned.count) {
			/* An iid re-used for another string forgets the old one. */
			uint64_t old;
			if (u64map_get(&q->interned, IID_KEY(t, iid), &old))
				u64map_put(&q->interned, IID_KEY(t, iid), K_NONE);
		}
	}
	return r.err ? bad(s, &r, "interned_data") : 0;
}

static enum key interned(const struct seq *q, enum table t, uint64_t iid)
{
	uint64_t k;
	return u64map_get(&q->interned, IID_KEY(t, iid), &k) ? (enum key)k
							      : K_NONE;
}

/* One debug annotation's name and integer value. */
static int scan_annotation(struct sync_scanner *s, const struct seq *q,
			   const uint8_t *p, size_t len, enum key *name,
			   bool *has_val, uint64_t *val)
{
	struct pb_reader r;
	struct pb_field f;

	*name = K_NONE;
	*has_val = false;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case DA_NAME_IID:
			if (f.wt == PB_WT_VARINT)
				*name = interned(q, T_ANNOTATION, f.val);
			break;
		case DA_NAME:
			if (f.wt == PB_WT_LEN)
				*name = lookup(T_ANNOTATION, f.data, f.len);
			break;
		case DA_UINT_VALUE:
		case DA_INT_VALUE:
			if (f.wt == PB_WT_VARINT) {
				*val = f.val; /* int64 as two's complement */
				*has_val = true;
			}
			break;
		}
	}
	return r.err ? bad(s, &r, "debug annotation") : 0;
}

/* A cheap filter before scan_track_event(): an event of ours has category
 * cros or vperfetto, either interned on its sequence or written literally,
 * and a literal category is a field 22 whose bytes are easy to look for.
 * Most events of a trace fail this test without being parsed. */
static bool maybe_ours(const struct seq *q, const uint8_t *te, size_t len)
{
	if (q->n_categories)
		return true;
	/* field 22 tag (0xb2 0x01), then length 4 "cros" or 9 "vperfetto" */
	for (size_t i = 0; i + 7 <= len; i++) {
		if (te[i] != 0xb2 || te[i + 1] != 0x01)
			continue;
		if (te[i + 2] == 4 && !memcmp(te + i + 3, "cros", 4))
			return true;
		if (te[i + 2] == 9 && i + 12 <= len &&
		    !memcmp(te + i + 3, "vperfetto", 9))
			return true;
	}
	return false;
}

/* TrackEvent: is it one of ours, and with which values? */
static int scan_track_event(struct sync_scanner *s, const struct seq *q,
			    const uint8_t *p, size_t len, uint64_t ts)
{
	struct pb_reader r;
	struct pb_field f;
	enum key cat = K_NONE, name = K_NONE;
	const uint8_t *ann[16];
	size_t ann_len[16], n_ann = 0;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TE_CATEGORIES:
			if (f.wt == PB_WT_LEN && cat == K_NONE)
				cat = lookup(T_CATEGORY, f.data, f.len);
			break;
		case TE_CATEGORY_IIDS:
			if (f.wt == PB_WT_VARINT && cat == K_NONE) {
				cat = interned(q, T_CATEGORY, f.val);
			} else if (f.wt == PB_WT_LEN && cat == K_NONE) {
				struct pb_packed_iter it;
				uint64_t iid;
				pb_packed_init(&it, f.data, f.len);
				while (cat == K_NONE && pb_packed_next(&it, &iid))
					cat = interned(q, T_CATEGORY, iid);
			}
			break;
		case TE_NAME:
			if (f.wt == PB_WT_LEN)
				name = lookup(T_NAME, f.data, f.len);
			break;
		case TE_NAME_IID:
			if (f.wt == PB_WT_VARINT)
				name = interned(q, T_NAME, f.val);
			break;
		case TE_DEBUG_ANNOTATIONS:
			if (f.wt == PB_WT_LEN && n_ann < 16) {
				ann[n_ann] = f.data;
				ann_len[n_ann++] = f.len;
			}
			break;
		}
	}
	if (r.err)
		return bad(s, &r, "track_event");

	bool sync = cat == K_CAT_CROS &&
		    (name == K_NAME_SYNC || name == K_NAME_EXCHANGE);
	bool kvm = cat == K_CAT_VPERFETTO && name == K_NAME_KVM_TSC;
	if (!sync && !kvm)
		return 0;

	uint64_t v[K_ANN_COUNT] = {0};
	bool has[K_ANN_COUNT] = {false};
	for (size_t i = 0; i < n_ann; i++) {
		enum key k;
		bool hv;
		uint64_t val = 0;
		if (scan_annotation(s, q, ann[i], ann_len[i], &k, &hv, &val) < 0)
			return -1;
		if (k != K_NONE && hv) {
			v[k] = val;
			has[k] = true;
		}
	}

	if (name == K_NAME_SYNC) {
		if (!has[K_ANN_CPU] || (!has[K_ANN_BOOT] && !has[K_ANN_MONO]))
			return emit_count(s, R_BAD_SYNC_EVENT);
		if (has[K_ANN_BOOT] &&
		    emit_xy(s, R_BOOT, v[K_ANN_CPU], v[K_ANN_BOOT]) < 0)
			return -1;
		if (has[K_ANN_MONO] &&
		    emit_xy(s, R_MONO, v[K_ANN_CPU], v[K_ANN_MONO]) < 0)
			return -1;
		return emit_count(s, R_EVENT_SAMPLE);
	}
	if (name == K_NAME_EXCHANGE) {
		if (!has[K_ANN_SEND] || !has[K_ANN_RECV] || !has[K_ANN_HOST] ||
		    v[K_ANN_RECV] < v[K_ANN_SEND])
			return emit_count(s, R_BAD_SYNC_EVENT);
		return emit(s, (struct result){
			.kind = R_EXCHANGE,
			.u.ex = {
				.guest_send = v[K_ANN_SEND],
				.guest_recv = v[K_ANN_RECV],
				.host = v[K_ANN_HOST],
				.seq = v[K_ANN_SEQ],
			}});
	}
	if (!has[K_ANN_TSC_OFFSET])
		return emit_count(s, R_BAD_SYNC_EVENT);
	return emit(s, (struct result){
		.kind = R_KVM,
		.u.kvm = {
			.vm_pid = (int64_t)v[K_ANN_VM_PID],
			.vcpu = (int64_t)v[K_ANN_VCPU],
			.tsc_offset = (int64_t)v[K_ANN_TSC_OFFSET],
			.ratio = has[K_ANN_TSC_RATIO] ? v[K_ANN_TSC_RATIO] : 0,
			.frac_bits = v[K_ANN_TSC_FRAC],
			.ts = ts,
		}});
}

/* ClockSnapshot: a (counter, BOOTTIME/MONOTONIC) sample when clock 64 is a
 * plain counter; Perfetto's SDK also uses 64 for incremental timestamps,
 * which must never be taken for the counter. */
static int scan_clock_snapshot(struct sync_scanner *s, const uint8_t *p,
			       size_t len)
{
	struct vp_snapshot_iter it;
	struct vp_clock_reading c;
	bool have_cyc = false, have_boot = false, have_mono = false;
	bool have_rt = false, incremental_64 = false;
	uint64_t cyc = 0, boot = 0, mono = 0, rt = 0;

	vp_snapshot_begin(&it, p, len);
	while (vp_snapshot_next(&it, &c)) {
		if (!c.has_ts)
			continue;
		if (c.id == CPU_COUNTER_CLOCK_ID) {
			if (c.incremental || c.unit_ns) {
				incremental_64 = true;
			} else {
				cyc = c.ts;
				have_cyc = true;
			}
		} else if (c.id == BUILTIN_CLOCK_BOOTTIME) {
			boot = c.ts;
			have_boot = true;
		} else if (c.id == BUILTIN_CLOCK_MONOTONIC) {
			mono = c.ts;
			have_mono = true;
		} else if (c.id == BUILTIN_CLOCK_REALTIME) {
			rt = c.ts;
			have_rt = true;
		}
	}
	if (it.bad)
		return bad(s, it.bad, it.bad_what);
	if (it.has_primary &&
	    emit(s, (struct result){.kind = R_TRACE_CLOCK,
				    .u.clock = (uint32_t)it.primary}) < 0)
		return -1;
	if (have_rt && have_boot && emit_xy(s, R_REALTIME, rt, boot) < 0)
		return -1;
	if (have_rt && have_mono &&
	    emit_xy(s, R_REALTIME_MONO, rt, mono) < 0)
		return -1;
	if (have_mono && have_boot && emit_xy(s, R_MONO_BOOT, mono, boot) < 0)
		return -1;
	if (incremental_64 && emit_count(s, R_INCREMENTAL_64) < 0)
		return -1;
	if (!have_cyc || incremental_64 || (!have_boot && !have_mono))
		return 0;
	if (have_boot && emit_xy(s, R_BOOT, cyc, boot) < 0)
		return -1;
	if (have_mono && emit_xy(s, R_MONO, cyc, mono) < 0)
		return -1;
	return emit_count(s, R_SNAPSHOT_SAMPLE);
}

/* The first cpu of an FtraceEventBundle in bytes p[0..len): true and
 * *cpu when one comes before the bytes end or stop being a field.  Only
 * the bundle's own fields are walked: its events are skipped by their
 * lengths. */
static bool first_bundle_cpu(const uint8_t *p, size_t len, uint32_t *cpu)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != FB_CPU || f.wt != PB_WT_VARINT || f.val > UINT32_MAX)
			continue;
		*cpu = (uint32_t)f.val;
		return true;
	}
	return false;
}

/* The bundle's cpu, for moving a guest's cpus clear of the host's
 * (--no-machine-id). */
static void note_ftrace_cpu(struct sync_scanner *s, const uint8_t *p,
			    size_t len)
{
	uint32_t cpu;

	if (!first_bundle_cpu(p, len, &cpu))
		return;
	if (!s->d.have_cpu || cpu > s->d.max_cpu)
		s->d.max_cpu = cpu;
	s->d.have_cpu = true;
}

bool sync_scan_field_skim(uint32_t num, const uint8_t *head, size_t n,
			  struct pb_buf *out)
{
	uint32_t cpu;

	switch (num) {
	/* what sync_scan_packet reads the inside of */
	case TP_INTERNED_DATA:
	case TP_TRACE_PACKET_DEFAULTS:
	case TP_CLOCK_SNAPSHOT:
	case TP_TRACK_EVENT:
	case TP_COMPRESSED_PACKETS:
		return false;
	case TP_FTRACE_EVENTS: /* of which note_ftrace_cpu reads the cpu */
		if (!first_bundle_cpu(head, n, &cpu))
			return false;
		pb_put_varint(out, FB_CPU, cpu);
		return true;
	default:
		return true;
	}
}

/* What scan_track_event and scan_annotation read of a track event
 * (path[1..depth)). */
static enum sync_need track_event_need(const uint32_t *path, size_t depth)
{
	switch (path[1]) {
	case TE_CATEGORIES:
	case TE_NAME:
		return SYNC_NAME;
	case TE_CATEGORY_IIDS:
	case TE_NAME_IID:
		return SYNC_ALL;
	case TE_DEBUG_ANNOTATIONS:
		if (depth == 2)
			return SYNC_FIELDS;
		switch (path[2]) {
		case DA_NAME:
			return SYNC_NAME;
		case DA_NAME_IID:
		case DA_UINT_VALUE:
		case DA_INT_VALUE:
			return SYNC_ALL;
		default:
			return SYNC_SKIP;
		}
	default:
		return SYNC_SKIP;
	}
}

/* What scan_interned reads of interned data (path[1..depth)). */
static enum sync_need interned_need(const uint32_t *path, size_t depth)
{
	switch (path[1]) {
	case ID_EVENT_CATEGORIES:
	case ID_EVENT_NAMES:
	case ID_DEBUG_ANNOTATION_NAMES:
		if (depth == 2)
			return SYNC_FIELDS;
		return path[2] == INTERNED_NAME ? SYNC_NAME
		       : path[2] == INTERNED_IID ? SYNC_ALL
						 : SYNC_SKIP;
	default:
		return SYNC_SKIP;
	}
}

enum sync_need sync_scan_need(const uint32_t *path, size_t depth)
{
	/* the longest name of known[] is well within SYNC_NAME_MAX */
	switch (path[0]) {
	case TP_TRACK_EVENT:
		return depth == 1 ? SYNC_FIELDS : track_event_need(path, depth);
	case TP_INTERNED_DATA:
		return depth == 1 ? SYNC_FIELDS : interned_need(path, depth);
	default:
		return SYNC_ALL;
	}
}

/* Counts sequence id, once; fails past SYNC_MAX_SEQUENCES.  Before the
 * packet's seq_load is added: a load of 0 is an id not seen yet. */
static int note_sequence(struct sync_scanner *s, uint32_t id)
{
	uint64_t v;

	if (id < SYNC_SEQ_LOAD_IDS) {
		if (s->d.seq_load[id])
			return 0;
	} else {
		if (s->have_last_seq && s->last_seq == id)
			return 0;
		s->have_last_seq = true;
		s->last_seq = id;
		if (u64map_get(&s->big_seqs, id, &v))
			return 0;
		u64map_put(&s->big_seqs, id, 1);
	}
	if (++s->d.n_sequences <= SYNC_MAX_SEQUENCES)
		return 0;
	return vp_errorf(s->err, "%s: byte offset %llu: sequence %u is one "
			 "more than the %d packet sequences a trace may have "
			 "(the merge keeps state for each)", s->path,
			 (unsigned long long)s->pkt_off, id,
			 SYNC_MAX_SEQUENCES);
}

/* The bytes a kept packet at k takes in the kept buffer. */
static size_t kept_size(const uint8_t *k)
{
	uint32_t len;
	memcpy(&len, k + 12, 4);
	return KEPT_HEAD + (len & KEPT_IN_FILE ? 0 : len);
}

/* Makes room in the kept buffer by giving up, in one pass over it, the
 * kept packets of every sequence that keeps at least the average: the
 * busy ones, whose interning from before the part is most likely empty
 * (the guest agent's sequence, which interned names of ours, writes
 * few packets).  When that frees less than a quarter of it, the part
 * keeps nothing more (`full`), so that a trace of many small keepers
 * costs no pass per packet. */
static void make_room(struct sync_scanner *s)
{
	struct pb_buf *k = &s->part->kept;
	size_t keepers = 0, sum = 0;

	for (size_t i = 0; i < seq_table_count(&s->seqs); i++) {
		const struct seq *q = seq_table_at(&s->seqs, i);
		keepers += q->kept != 0;
		sum += q->kept;
	}
	size_t avg = keepers ? sum / keepers : 0, to = 0, before = k->len;
	for (size_t i = 0; i < seq_table_count(&s->seqs); i++) {
		struct seq *q = seq_table_at(&s->seqs, i);
		if (q->kept && q->kept >= avg) {
			q->kept = 0;
			q->overflow = true; /* its packets go below */
		}
	}
	for (size_t at = 0; at < k->len;) {
		size_t n = kept_size(k->data + at);
		uint32_t id;
		memcpy(&id, k->data + at + 8, 4);
		const struct seq *q = seq_table_find(&s->seqs, id);
		if (!q->overflow) {
			memmove(k->data + to, k->data + at, n);
			to += n;
		}
		at += n;
	}
	k->len = to;
	if (before - to < PART_KEPT_MAX / 4)
		s->part->full = true;
}

/* Keeps packet pkt of q (on which a part relies) for the join, which
 * scans it again if what q interned before the part matters. */
static void keep_packet(struct sync_scanner *s, struct seq *q,
			const uint8_t *pkt, size_t len)
{
	struct pb_buf *k = &s->part->kept;
	uint8_t head[KEPT_HEAD];
	bool in_file = s->part->in_file;
	size_t need = KEPT_HEAD + (in_file ? 0 : len);
	uint32_t n = (uint32_t)len | (in_file ? KEPT_IN_FILE : 0);

	q->relied = true;
	if (q->overflow)
		return;
	if (need > PART_KEPT_MAX - k->len && !s->part->full)
		make_room(s);
	if (q->overflow || need > PART_KEPT_MAX - k->len) {
		q->overflow = true;
		return;
	}
	q->kept += need;
	memcpy(head, &s->pkt_off, 8);
	memcpy(head + 8, &q->id, 4);
	memcpy(head + 12, &n, 4);
	pb_put_raw(k, head, KEPT_HEAD);
	if (!in_file)
		pb_put_raw(k, pkt, len);
}

/* The part of a packet's scan that reads and writes its sequence's
 * state: its clears, its interning and its track event (p decoded from
 * s->pkt). */
static int scan_sequenced(struct sync_scanner *s, const struct vp_packet *p,
			  const uint8_t *te, size_t te_len)
{
	/* Only the interning matters here: every packet is scanned, also
	 * one that its sequence's state would skip. */
	struct seq *q = get_seq(s, p->seq_id);
	if (vp_seq_update(&q->st, p) & VP_SEQ_CLEARED) {
		u64map_clear(&q->interned);
		q->n_categories = 0;
		q->inherited = false;
	}
	if (q->inherited) {
		s->part->dep = true;
		keep_packet(s, q, p->data, p->len);
	}
	if (p->interned.data &&
	    scan_interned(s, q, p->interned.data, p->interned.len) < 0)
		return -1;
	if (te && maybe_ours(q, te, te_len) &&
	    scan_track_event(s, q, te, te_len, p->ts) < 0)
		return -1;
	return 0;
}

int sync_scan_packet(struct sync_scanner *s, const uint8_t *pkt, size_t len,
		     uint64_t off, struct vp_error *err)
{
	struct vp_packet p;
	struct pb_reader r;
	const uint8_t *te = NULL;
	size_t te_len = 0;

	s->pkt = pkt;
	s->pkt_off = off;
	s->err = err;

	if (!vp_packet_decode_inline(&p, pkt, len, false)) {
		pb_reader_init(&r, pkt, len);
		r.err = p.err;
		r.err_off = p.err_off;
		return bad(s, &r, "packet");
	}
	if (p.compressed) {
		s->d.n_compressed++;
		return 1; /* the caller inflates it and scans what is inside */
	}
	s->d.n_packets++;
	if (note_sequence(s, p.seq_id) < 0)
		return -1;
	if (p.seq_id < SYNC_SEQ_LOAD_IDS)
		s->d.seq_load[p.seq_id] += len + SYNC_PACKET_LOAD;
	if (p.has_machine_id && p.machine_id > s->d.max_machine_id)
		s->d.max_machine_id = p.machine_id;
	if (p.payload.data && p.payload_num == TP_TRACK_EVENT) {
		te = p.payload.data;
		te_len = p.payload.len;
	} else if (p.payload.data && p.payload_num == TP_FTRACE_EVENTS) {
		note_ftrace_cpu(s, p.payload.data, p.payload.len);
	}

	if (p.seq_id > s->d.max_seq_id)
		s->d.max_seq_id = p.seq_id;
	if (s->part) {
		s->part->seq = p.seq_id;
		s->part->dep = false;
	}
	if (p.snapshot.data &&
	    scan_clock_snapshot(s, p.snapshot.data, p.snapshot.len) < 0)
		return -1;
	if (!te && !p.interned.data && !p.clears_state)
		return 0;
	return scan_sequenced(s, &p, te, te_len);
}

/* ---- a trace scanned in two parts at once ------------------------------- */

int sync_scan_part_packet(struct sync_scanner *part, const uint8_t *pkt,
			  size_t len, uint64_t off, struct vp_error *err)
{
	part->part->in_file = true;
	int rc = sync_scan_packet(part, pkt, len, off, err);
	part->part->in_file = false;
	return rc;
}

/* The sequence part of a kept packet at k. */
static uint32_t kept_seq(const uint8_t *k)
{
	uint32_t id;
	memcpy(&id, k + 8, 4);
	return id;
}

/* Scans again the kept packet at k (as it was, so with the same offsets
 * in messages) with t: only the part that reads the sequence's state,
 * the rest having counted already.  One kept by its offset is read into
 * buf. */
static int rescan_kept(struct sync_scanner *t, const uint8_t *k,
		       sync_read_fn read, void *read_ctx, struct pb_buf *buf,
		       struct vp_error *err)
{
	struct vp_packet p;
	uint64_t off;
	uint32_t len;

	memcpy(&off, k, 8);
	memcpy(&len, k + 12, 4);
	t->pkt = k + KEPT_HEAD;
	if (len & KEPT_IN_FILE) {
		len &= ~KEPT_IN_FILE;
		pb_buf_reset(buf);
		if (!pb_buf_reserve(buf, len) ||
		    read(read_ctx, off, buf->data, len) < 0)
			return -1;
		t->pkt = buf->data;
	}
	t->pkt_off = off;
	t->err = err;
	if (!vp_packet_decode_inline(&p, t->pkt, len, false))
		return -1; /* it decoded in the part: cannot be */
	const uint8_t *te = p.payload_num == TP_TRACK_EVENT ? p.payload.data
							   : NULL;
	t->part->seq = p.seq_id;
	t->part->dep = false;
	return scan_sequenced(t, &p, te, te ? p.payload.len : 0);
}

/* Sequence m's state (its clears and interning) copied into t's of
 * the same id: the one a part's rescan starts from, or after a join
 * the one the part ended with. */
static void copy_seq(struct sync_scanner *t, const struct seq *m)
{
	struct seq *q = get_seq(t, m->id);

	q->st = m->st;
	q->n_categories = m->n_categories;
	q->inherited = false;
	u64map_clear(&q->interned);
	for (size_t i = 0; i < m->interned.cap; i++)
		if (m->interned.used[i])
			u64map_put(&q->interned, m->interned.keys[i],
				   m->interned.vals[i]);
}

/* Whether sequence q of a part needs its kept packets scanned again:
 * the part took its interning from before the part for empty, and it
 * was not. */
static bool needs_rescan(const struct sync_scanner *s, const struct seq *q)
{
	const struct seq *m = seq_table_find(&s->seqs, q->id);

	return q->relied && m && (m->interned.count || m->n_categories);
}

/* The distinct sequences the part saw that s did not. */
static size_t new_sequences(const struct sync_scanner *s,
			    const struct sync_scanner *part)
{
	size_t n = 0;
	uint64_t v;

	for (size_t id = 0; id < SYNC_SEQ_LOAD_IDS; id++)
		n += part->d.seq_load[id] && !s->d.seq_load[id];
	for (size_t i = 0; i < part->big_seqs.cap; i++)
		n += part->big_seqs.used[i] &&
		     !u64map_get(&s->big_seqs, part->big_seqs.keys[i], &v);
	return n;
}

/* What the part counted that does not depend on order. */
static void add_counts(struct sync_data *d, const struct sync_data *pd)
{
	d->n_packets += pd->n_packets;
	d->n_compressed += pd->n_compressed;
	for (size_t id = 0; id < SYNC_SEQ_LOAD_IDS; id++)
		d->seq_load[id] += pd->seq_load[id];
	if (pd->max_seq_id > d->max_seq_id)
		d->max_seq_id = pd->max_seq_id;
	if (pd->max_machine_id > d->max_machine_id)
		d->max_machine_id = pd->max_machine_id;
	if (pd->have_cpu && (!d->have_cpu || pd->max_cpu > d->max_cpu))
		d->max_cpu = pd->max_cpu;
	d->have_cpu |= pd->have_cpu;
}

/* The rescan of a part's kept packets (those of its sequences marked
 * `relied`), each sequence from a copy of s's state of it, one packet at
 * a time: rescan_next scans the next one before offset `before` into
 * t's log, for the caller to take. */
struct rescan {
	struct sync_scanner *t;
	const struct sync_scanner *part;
	const uint8_t *k, *end; /* the next kept packet */
	sync_read_fn read;
	void *read_ctx;
	struct pb_buf buf;
	struct vp_error err;
};

static void rescan_init(struct rescan *r, struct sync_scanner *s,
			const struct sync_scanner *part, sync_read_fn read,
			void *read_ctx, bool discard)
{
	r->t = sync_scanner_new_part(s->path);
	r->t->part->discard = discard;
	r->part = part;
	r->k = part->part->kept.data;
	r->end = r->k ? r->k + part->part->kept.len : NULL; /* none kept */
	r->read = read;
	r->read_ctx = read_ctx;
	pb_buf_init(&r->buf);
	for (size_t i = 0; i < seq_table_count(&part->seqs); i++) {
		const struct seq *q = seq_table_at(&part->seqs, i);
		if (q->relied)
			copy_seq(r->t, seq_table_find(&s->seqs, q->id));
	}
}

static void rescan_free(struct rescan *r)
{
	sync_scanner_free(r->t);
	pb_buf_free(&r->buf);
}

/* 1: a packet scanned; 0: none left before `before`; -1: it failed. */
static int rescan_next(struct rescan *r, uint64_t before)
{
	while (r->k < r->end) {
		const uint8_t *k = r->k;
		uint64_t off;
		memcpy(&off, k, 8);
		if (off >= before)
			return 0;
		r->k += kept_size(k);
		const struct seq *q = seq_table_find(&r->part->seqs,
						     kept_seq(k));
		if (!q->relied)
			continue;
		r->t->part->n_log = 0;
		return rescan_kept(r->t, k, r->read, r->read_ctx, &r->buf,
				   &r->err) < 0 ? -1 : 1;
	}
	return 0;
}

/* Applies to s the results of the rescan before offset `before`. */
static void rescan_apply(struct sync_scanner *s, struct rescan *r,
			 uint64_t before)
{
	while (rescan_next(r, before) == 1)
		for (size_t j = 0; j < r->t->part->n_log; j++)
			apply(&s->d, &r->t->part->log[j]);
}

/* After a join, s's state of each sequence the part saw, and the
 * sequences seen, as if s had scanned the part itself, for a part after
 * it to be joined too: the part's own where it was exact (cleared in the
 * part, or nothing interned before it), else the rescan's (t). */
static void adopt_states(struct sync_scanner *s, const struct sync_scanner *part,
			 const struct sync_scanner *t)
{
	for (size_t i = 0; i < seq_table_count(&part->seqs); i++) {
		const struct seq *q = seq_table_at(&part->seqs, i);
		const struct seq *src = q;
		if (q->inherited && q->relied)
			src = seq_table_find(&t->seqs, q->id);
		copy_seq(s, src);
	}
	for (size_t i = 0; i < part->big_seqs.cap; i++)
		if (part->big_seqs.used[i])
			u64map_put(&s->big_seqs, part->big_seqs.keys[i], 1);
}

int sync_scanner_join(struct sync_scanner *s, struct sync_scanner *part,
		      sync_read_fn read, void *read_ctx)
{
	const struct part *pt = part->part;
	struct rescan r;
	bool any = false;
	int rc = 0;

	/* one sequence too many, or a packet not kept, is said (or read)
	 * right only by scanning the part on from s */
	size_t fresh = new_sequences(s, part);
	if (s->d.n_sequences + fresh > SYNC_MAX_SEQUENCES)
		return 1;
	for (size_t i = 0; i < seq_table_count(&part->seqs); i++) {
		struct seq *q = seq_table_at(&part->seqs, i);
		q->relied = needs_rescan(s, q); /* from here: to scan again */
		if (q->relied && q->overflow)
			return 1;
		any |= q->relied;
	}
	if (any) { /* once to see that it can be done, results dropped */
		rescan_init(&r, s, part, read, read_ctx, true);
		while ((rc = rescan_next(&r, UINT64_MAX)) == 1)
			;
		rescan_free(&r);
		if (rc < 0)
			return 1;
	}

	/* The part's results and the rescan's in file order, leaving out
	 * the part's that read interning it did not know, where that was
	 * not empty; of one packet, the part's (its snapshot's) first. */
	rescan_init(&r, s, part, read, read_ctx, false);
	for (size_t i = 0; i < pt->n_log; i++) {
		const struct result *res = &pt->log[i];
		if (any)
			rescan_apply(s, &r, res->off);
		if (res->dep &&
		    ((struct seq *)seq_table_find(&part->seqs, res->seq))->relied)
			continue;
		apply(&s->d, res);
	}
	if (any)
		rescan_apply(s, &r, UINT64_MAX);
	adopt_states(s, part, r.t);
	rescan_free(&r);
	add_counts(&s->d, &part->d);
	s->d.n_sequences += fresh;
	return 0;
}
