/*
 * test_sdk.c - unit tests of libvperfetto through its in-process backend:
 * what the macros and the data source API write must come back from the
 * trace file, complete, in order, with consistent interning and track
 * descriptors, fragmented packets joined, losses flagged.
 *
 * The file is read with trace_io.h and every packet walked with pb_wire.h;
 * a small model of a sequence (interned tables per generation) checks that
 * every iid is defined before it is used.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>

#include <cmocka.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "trace_io.h"
#include "vperfetto/vperfetto.h"

VP_CATEGORY(cat_a, "test.a", "category a");
VP_CATEGORY(cat_b, "test.b", "category b");
VP_CATEGORY(cat_slow, "test.slow", "a slow category");
VP_CATEGORY(cat_other, "other.c", "another category");

#define MAX_NAMES 64
#define MAX_EVENTS 60000

/* One decoded track event, names resolved through the interning. */
struct ev {
	uint32_t seq;
	uint64_t ts;
	int type;
	char name[64];
	char cat[32];
	uint64_t track_uuid;
	int64_t counter;
	bool has_counter;
	int n_args;
	struct {
		char name[32];
		int kind; /* DA_* value field */
		uint64_t u;
		double d;
		char s[24];
		size_t slen;
	} args[8];
};

/* What a sequence knows in its current generation. */
struct seq_state {
	uint32_t id;
	bool valid;
	char *names[3][MAX_NAMES]; /* categories, event names, arg names */
	uint64_t thread_tid;
	char thread_name[32];
	uint64_t default_track;
	bool saw_first_packet;
};

struct parsed {
	struct ev *evs;
	size_t n_evs;
	struct seq_state seqs[64];
	size_t n_seqs;
	size_t n_packets;
	size_t n_dropped_flags;
	size_t n_process_desc;
	size_t n_thread_desc;
	size_t n_counter_desc;
	uint64_t process_uuid;
	char counter_names[8][32];
	uint64_t counter_uuids[8];
	size_t n_counters;
	size_t iid_errors;
	size_t n_for_testing;
	char for_testing[8][64];
	size_t big_string_len;
	bool big_string_ok;
};

static char g_dir[256];

static void make_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", g_dir, name);
}

static struct seq_state *seq_get(struct parsed *p, uint32_t id)
{
	for (size_t i = 0; i < p->n_seqs; i++)
		if (p->seqs[i].id == id)
			return &p->seqs[i];
	assert_true(p->n_seqs < 64);
	struct seq_state *s = &p->seqs[p->n_seqs++];
	memset(s, 0, sizeof(*s));
	s->id = id;
	return s;
}

static void seq_clear(struct seq_state *s)
{
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < MAX_NAMES; i++) {
			free(s->names[k][i]);
			s->names[k][i] = NULL;
		}
}

static void copy_str(char *dst, size_t n, const uint8_t *src, size_t len)
{
	size_t m = len < n - 1 ? len : n - 1;
	memcpy(dst, src, m);
	dst[m] = 0;
}

static void parse_interned(struct parsed *p, struct seq_state *s,
			   const uint8_t *d, size_t len)
{
	struct pb_reader r, er;
	struct pb_field f, ef;
	pb_reader_init(&r, d, len);
	while (pb_next(&r, &f)) {
		if (f.num < 1 || f.num > 3 || f.wt != PB_WT_LEN)
			continue;
		uint64_t iid = 0;
		const uint8_t *name = NULL;
		size_t nl = 0;
		pb_reader_init(&er, f.data, f.len);
		while (pb_next(&er, &ef)) {
			if (ef.num == 1)
				iid = ef.val;
			else if (ef.num == 2) {
				name = ef.data;
				nl = ef.len;
			}
		}
		if (iid == 0 || iid >= MAX_NAMES || !name) {
			p->iid_errors++;
			continue;
		}
		if (s->names[f.num - 1][iid])
			p->iid_errors++; /* defined twice in a generation */
		free(s->names[f.num - 1][iid]);
		s->names[f.num - 1][iid] = strndup((const char *)name, nl);
	}
}

static const char *iid_name(struct parsed *p, struct seq_state *s, int k,
			    uint64_t iid)
{
	if (iid == 0 || iid >= MAX_NAMES || !s->names[k][iid]) {
		p->iid_errors++;
		return "?";
	}
	return s->names[k][iid];
}

static void parse_annotation(struct parsed *p, struct seq_state *s,
			     struct ev *e, const uint8_t *d, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	if (e->n_args >= 8)
		return;
	int a = e->n_args++;
	pb_reader_init(&r, d, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case DA_NAME_IID:
			snprintf(e->args[a].name, sizeof(e->args[a].name), "%s",
				 iid_name(p, s, 2, f.val));
			break;
		case DA_BOOL_VALUE:
		case DA_UINT_VALUE:
		case DA_INT_VALUE:
			e->args[a].kind = (int)f.num;
			e->args[a].u = f.val;
			break;
		case DA_DOUBLE_VALUE:
			e->args[a].kind = (int)f.num;
			memcpy(&e->args[a].d, &f.val, 8);
			break;
		case DA_STRING_VALUE:
			e->args[a].kind = (int)f.num;
			e->args[a].slen = f.len;
			copy_str(e->args[a].s, sizeof(e->args[a].s), f.data,
				 f.len);
			if (f.len > 1000) {
				p->big_string_len = f.len;
				p->big_string_ok = true;
				for (size_t i = 0; i < f.len; i++)
					if (f.data[i] != (uint8_t)('a' + i % 26))
						p->big_string_ok = false;
			}
			break;
		}
	}
}

static void parse_track_event(struct parsed *p, struct seq_state *s,
			      struct ev *e, const uint8_t *d, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	e->track_uuid = s->default_track;
	pb_reader_init(&r, d, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TE_TYPE:
			e->type = (int)f.val;
			break;
		case TE_CATEGORY_IIDS:
			snprintf(e->cat, sizeof(e->cat), "%s",
				 iid_name(p, s, 0, f.val));
			break;
		case TE_NAME_IID:
			snprintf(e->name, sizeof(e->name), "%s",
				 iid_name(p, s, 1, f.val));
			break;
		case TE_TRACK_UUID:
			e->track_uuid = f.val;
			break;
		case TE_COUNTER_VALUE:
			e->counter = (int64_t)f.val;
			e->has_counter = true;
			break;
		case TE_DEBUG_ANNOTATIONS:
			parse_annotation(p, s, e, f.data, f.len);
			break;
		}
	}
}

static void parse_descriptor(struct parsed *p, struct seq_state *s,
			     const uint8_t *d, size_t len)
{
	struct pb_reader r, sr;
	struct pb_field f, sf;
	uint64_t uuid = 0;
	char name[32] = "";
	bool counter = false;
	pb_reader_init(&r, d, len);
	while (pb_next(&r, &f)) {
		if (f.num == TD_UUID)
			uuid = f.val;
		else if (f.num == TD_NAME)
			copy_str(name, sizeof(name), f.data, f.len);
		else if (f.num == TD_COUNTER)
			counter = true;
		else if (f.num == TD_PROCESS) {
			p->n_process_desc++;
			p->process_uuid = uuid;
			pb_reader_init(&sr, f.data, f.len);
			while (pb_next(&sr, &sf))
				if (sf.num == PD_PID)
					assert_int_equal(sf.val, getpid());
		} else if (f.num == TD_THREAD) {
			p->n_thread_desc++;
			pb_reader_init(&sr, f.data, f.len);
			while (pb_next(&sr, &sf)) {
				if (sf.num == THD_TID)
					s->thread_tid = sf.val;
				else if (sf.num == THD_THREAD_NAME)
					copy_str(s->thread_name,
						 sizeof(s->thread_name),
						 sf.data, sf.len);
			}
		}
	}
	if (counter) {
		p->n_counter_desc++;
		if (p->n_counters < 8) {
			snprintf(p->counter_names[p->n_counters], 32, "%s",
				 name);
			p->counter_uuids[p->n_counters++] = uuid;
		}
	}
}

static void parse_packet(struct parsed *p, const uint8_t *d, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint32_t seq = 0, flags = 0;
	uint64_t ts = 0;
	bool dropped = false, first = false;
	const uint8_t *te = NULL, *interned = NULL, *td = NULL, *defs = NULL;
	size_t te_len = 0, in_len = 0, td_len = 0, defs_len = 0;
	const uint8_t *ft = NULL;
	size_t ft_len = 0;

	p->n_packets++;
	pb_reader_init(&r, d, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case TP_TRUSTED_PACKET_SEQUENCE_ID:
			seq = (uint32_t)f.val;
			break;
		case TP_SEQUENCE_FLAGS:
			flags = (uint32_t)f.val;
			break;
		case TP_TIMESTAMP:
			ts = f.val;
			break;
		case TP_PREVIOUS_PACKET_DROPPED:
			dropped = f.val != 0;
			break;
		case TP_FIRST_PACKET_ON_SEQUENCE:
			first = f.val != 0;
			break;
		case TP_TRACK_EVENT:
			te = f.data;
			te_len = f.len;
			break;
		case TP_INTERNED_DATA:
			interned = f.data;
			in_len = f.len;
			break;
		case TP_TRACK_DESCRIPTOR:
			td = f.data;
			td_len = f.len;
			break;
		case TP_TRACE_PACKET_DEFAULTS:
			defs = f.data;
			defs_len = f.len;
			break;
		case 900: /* for_testing */
			ft = f.data;
			ft_len = f.len;
			break;
		}
	}
	assert_true(seq != 0);
	struct seq_state *s = seq_get(p, seq);
	if (dropped)
		p->n_dropped_flags++;
	if (first)
		s->saw_first_packet = true;
	if (flags & SEQ_INCREMENTAL_STATE_CLEARED) {
		seq_clear(s);
		s->valid = true;
	}
	if (defs) {
		struct pb_reader dr, er;
		struct pb_field df, ef;
		pb_reader_init(&dr, defs, defs_len);
		while (pb_next(&dr, &df))
			if (df.num == TPD_TRACK_EVENT_DEFAULTS) {
				pb_reader_init(&er, df.data, df.len);
				while (pb_next(&er, &ef))
					if (ef.num == TED_TRACK_UUID)
						s->default_track = ef.val;
			}
	}
	if (td)
		parse_descriptor(p, s, td, td_len);
	if (ft && p->n_for_testing < 8) {
		/* TestEvent.str (1) */
		struct pb_reader fr;
		struct pb_field ff;
		char *out = p->for_testing[p->n_for_testing++];
		pb_reader_init(&fr, ft, ft_len);
		while (pb_next(&fr, &ff))
			if (ff.num == 1 && ff.wt == PB_WT_LEN)
				copy_str(out, 64, ff.data, ff.len);
	}
	if ((flags & SEQ_NEEDS_INCREMENTAL_STATE) && !s->valid)
		return; /* state lost (ring buffer): a reader skips it */
	if (interned)
		parse_interned(p, s, interned, in_len);
	if (te) {
		assert_true(p->n_evs < MAX_EVENTS);
		struct ev *e = &p->evs[p->n_evs++];
		memset(e, 0, sizeof(*e));
		e->seq = seq;
		e->ts = ts;
		parse_track_event(p, s, e, te, te_len);
	}
}

static void parse_file(struct parsed *p, const char *path)
{
	struct trace_reader *r;
	struct trace_record rec;
	struct vp_error err;
	memset(p, 0, sizeof(*p));
	p->evs = calloc(MAX_EVENTS, sizeof(*p->evs));
	assert_non_null(p->evs);
	if (trace_reader_open(&r, path, &err) < 0)
		fail_msg("%s", err.msg);
	int rc;
	while ((rc = trace_reader_next(r, &rec, &err)) == 1) {
		assert_int_equal(rec.field, 1);
		parse_packet(p, rec.data, rec.len);
	}
	if (rc < 0)
		fail_msg("%s", err.msg);
	trace_reader_close(r);
}

static void free_parsed(struct parsed *p)
{
	for (size_t i = 0; i < p->n_seqs; i++)
		seq_clear(&p->seqs[i]);
	free(p->evs);
}

static void init_inproc(const char *file, const char *cats, uint32_t kb)
{
	char path[512];
	make_path(path, sizeof(path), file);
	unlink(path);
	struct vp_init_args a = {
		.backend = VP_BACKEND_IN_PROCESS,
		.output_path = path,
		.buffer_size_kb = kb,
		.categories = cats,
	};
	assert_int_equal(vp_init(&a), 0);
	assert_true(vp_is_connected());
}

static void read_back(struct parsed *p, const char *file)
{
	char path[512];
	make_path(path, sizeof(path), file);
	parse_file(p, path);
}

/* ------------------------------------------------------- four threads */

#define N_THREADS 4
#define N_ITER 300

struct thread_arg {
	int idx;
	pid_t tid;
};

static void *tracer(void *v)
{
	struct thread_arg *a = v;
	char name[16];
	snprintf(name, sizeof(name), "tracer%d", a->idx);
	pthread_setname_np(pthread_self(), name);
	a->tid = gettid();
	for (int i = 0; i < N_ITER; i++) {
		TRACE_EVENT_BEGIN(cat_a, "outer", VP_ARG_UINT("i", i),
				  VP_ARG_INT("neg", -i),
				  VP_ARG_DOUBLE("half", i / 2.0),
				  VP_ARG_STRING("who", name),
				  VP_ARG_BOOL("odd", i & 1));
		TRACE_EVENT_INSTANT(cat_b, "tick");
		TRACE_COUNTER(cat_b, "ctr", i * 10 + a->idx);
		TRACE_EVENT_END(cat_a);
	}
	return NULL;
}

static void test_four_threads(void **state)
{
	(void)state;
	struct thread_arg args[N_THREADS];
	pthread_t th[N_THREADS];
	struct parsed p;

	init_inproc("threads.pftrace", NULL, 8192);
	for (int i = 0; i < N_THREADS; i++) {
		args[i].idx = i;
		assert_int_equal(pthread_create(&th[i], NULL, tracer, &args[i]),
				 0);
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(th[i], NULL);
	vp_shutdown();
	assert_false(vp_is_connected());
	read_back(&p, "threads.pftrace");

	assert_int_equal(p.iid_errors, 0);
	assert_int_equal(p.n_dropped_flags, 0);
	assert_int_equal(p.n_evs, N_THREADS * N_ITER * 4);
	assert_int_equal(p.n_seqs, N_THREADS);
	assert_true(p.n_process_desc >= N_THREADS);
	assert_true(p.n_thread_desc >= N_THREADS);
	/* One counter track per sequence generation, all the same track. */
	assert_true(p.n_counters >= N_THREADS);
	for (size_t i = 0; i < p.n_counters; i++) {
		assert_string_equal(p.counter_names[i], "ctr");
		assert_true(p.counter_uuids[i] == p.counter_uuids[0]);
	}

	for (int t = 0; t < N_THREADS; t++) {
		/* The thread's sequence, found by its descriptor. */
		struct seq_state *s = NULL;
		for (size_t i = 0; i < p.n_seqs; i++)
			if (p.seqs[i].thread_tid == (uint64_t)args[t].tid)
				s = &p.seqs[i];
		assert_non_null(s);
		assert_true(s->saw_first_packet);
		char want[16];
		snprintf(want, sizeof(want), "tracer%d", t);
		assert_string_equal(s->thread_name, want);
		assert_true(s->default_track != 0);
		assert_true(s->default_track != p.process_uuid);

		int k = 0;
		uint64_t last_ts = 0;
		for (size_t j = 0; j < p.n_evs; j++) {
			struct ev *e = &p.evs[j];
			if (e->seq != s->id)
				continue;
			int i = k / 4, step = k % 4;
			k++;
			assert_true(e->ts >= last_ts);
			last_ts = e->ts;
			switch (step) {
			case 0:
				assert_int_equal(e->type, TE_TYPE_SLICE_BEGIN);
				assert_string_equal(e->name, "outer");
				assert_string_equal(e->cat, "test.a");
				assert_true(e->track_uuid == s->default_track);
				assert_int_equal(e->n_args, 5);
				assert_string_equal(e->args[0].name, "i");
				assert_int_equal(e->args[0].kind, DA_UINT_VALUE);
				assert_int_equal(e->args[0].u, i);
				assert_string_equal(e->args[1].name, "neg");
				assert_int_equal(e->args[1].kind, DA_INT_VALUE);
				assert_int_equal((int64_t)e->args[1].u, -i);
				assert_string_equal(e->args[2].name, "half");
				assert_int_equal(e->args[2].kind,
						 DA_DOUBLE_VALUE);
				assert_true(e->args[2].d == i / 2.0);
				assert_string_equal(e->args[3].name, "who");
				assert_int_equal(e->args[3].kind,
						 DA_STRING_VALUE);
				assert_string_equal(e->args[3].s, want);
				assert_string_equal(e->args[4].name, "odd");
				assert_int_equal(e->args[4].kind, DA_BOOL_VALUE);
				assert_int_equal(e->args[4].u, i & 1);
				break;
			case 1:
				assert_int_equal(e->type, TE_TYPE_INSTANT);
				assert_string_equal(e->name, "tick");
				assert_string_equal(e->cat, "test.b");
				break;
			case 2:
				assert_int_equal(e->type, TE_TYPE_COUNTER);
				assert_true(e->has_counter);
				assert_int_equal(e->counter, i * 10 + t);
				assert_true(e->track_uuid ==
					    p.counter_uuids[0]);
				break;
			case 3:
				assert_int_equal(e->type, TE_TYPE_SLICE_END);
				assert_string_equal(e->name, "");
				break;
			}
		}
		assert_int_equal(k, N_ITER * 4);
	}
	free_parsed(&p);
}

/* ----------------------------------------------------------- categories */

static size_t count_cat(struct parsed *p, const char *cat)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n_evs; i++)
		if (strcmp(p->evs[i].cat, cat) == 0)
			n++;
	return n;
}

static void emit_all_categories(void)
{
	TRACE_EVENT_INSTANT(cat_a, "a");
	TRACE_EVENT_INSTANT(cat_b, "b");
	TRACE_EVENT_INSTANT(cat_slow, "slow");
	TRACE_EVENT_INSTANT(cat_other, "other");
}

static void test_category_globs(void **state)
{
	(void)state;
	struct parsed p;

	/* Disabled before any session: one load, nothing written. */
	assert_false(VP_CATEGORY_ENABLED(cat_a));
	emit_all_categories();

	init_inproc("globs.pftrace", "test.*,-test.slow", 0);
	assert_true(VP_CATEGORY_ENABLED(cat_a));
	assert_true(VP_CATEGORY_ENABLED(cat_b));
	assert_false(VP_CATEGORY_ENABLED(cat_slow));
	assert_false(VP_CATEGORY_ENABLED(cat_other));
	emit_all_categories();
	vp_shutdown();
	assert_false(VP_CATEGORY_ENABLED(cat_a));
	emit_all_categories(); /* after shutdown: no-ops */
	read_back(&p, "globs.pftrace");
	assert_int_equal(count_cat(&p, "test.a"), 1);
	assert_int_equal(count_cat(&p, "test.b"), 1);
	assert_int_equal(count_cat(&p, "test.slow"), 0);
	assert_int_equal(count_cat(&p, "other.c"), 0);
	free_parsed(&p);

	/* Perfetto's precedence: an exact enabled name beats a disabled
	 * glob. */
	init_inproc("exact.pftrace", "-*,other.c", 0);
	assert_false(VP_CATEGORY_ENABLED(cat_a));
	assert_true(VP_CATEGORY_ENABLED(cat_other));
	emit_all_categories();
	vp_shutdown();
	read_back(&p, "exact.pftrace");
	assert_int_equal(p.n_evs, 1);
	assert_int_equal(count_cat(&p, "other.c"), 1);
	free_parsed(&p);

	/* Only a negation: everything else. */
	init_inproc("neg.pftrace", "-test.b", 0);
	assert_true(VP_CATEGORY_ENABLED(cat_a));
	assert_false(VP_CATEGORY_ENABLED(cat_b));
	assert_true(VP_CATEGORY_ENABLED(cat_slow));
	assert_true(VP_CATEGORY_ENABLED(cat_other));
	vp_shutdown();
}

/* --------------------------------------------------------- fragmentation */

static void test_large_packet(void **state)
{
	(void)state;
	struct parsed p;
	size_t n = 20000;
	char *big = malloc(n + 1);
	assert_non_null(big);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)('a' + i % 26);
	big[n] = 0;

	init_inproc("big.pftrace", "test.a", 0);
	TRACE_EVENT_INSTANT(cat_a, "before");
	TRACE_EVENT_INSTANT(cat_a, "big", VP_ARG_STRING("blob", big));
	TRACE_EVENT_INSTANT(cat_a, "after");
	vp_shutdown();
	free(big);
	read_back(&p, "big.pftrace");
	assert_int_equal(p.iid_errors, 0);
	assert_int_equal(p.n_evs, 3);
	assert_string_equal(p.evs[0].name, "before");
	assert_string_equal(p.evs[1].name, "big");
	assert_string_equal(p.evs[2].name, "after");
	assert_int_equal(p.big_string_len, n);
	assert_true(p.big_string_ok);
	free_parsed(&p);
}

/* ---------------------------------------------------------- ring buffer */

static void test_ring_overwrite(void **state)
{
	(void)state;
	struct parsed p;
	const int n = 5000;

	init_inproc("ring.pftrace", "test.a", 16);
	for (int i = 0; i < n; i++)
		TRACE_EVENT_INSTANT(cat_a, "spin", VP_ARG_UINT("i", i));
	vp_shutdown();
	read_back(&p, "ring.pftrace");
	assert_true(p.n_packets > 0);
	assert_true(p.n_evs < (size_t)n);
	assert_true(p.n_dropped_flags >= 1);
	/* What survived is the newest: the last event is there. */
	if (p.n_evs) {
		struct ev *last = &p.evs[p.n_evs - 1];
		assert_string_equal(last->name, "spin");
		assert_int_equal(last->args[0].u, n - 1);
	}
	free_parsed(&p);
}

/* Incremental state cleared periodically: every generation defines its
 * iids again. */
static void test_clear_period(void **state)
{
	(void)state;
	struct parsed p;
	char path[512];
	make_path(path, sizeof(path), "clear.pftrace");
	unlink(path);
	struct vp_init_args a = {
		.backend = VP_BACKEND_IN_PROCESS,
		.output_path = path,
		.categories = "test.a",
		.clear_period_ms = 1,
	};
	assert_int_equal(vp_init(&a), 0);
	for (int i = 0; i < 50; i++) {
		TRACE_EVENT_BEGIN(cat_a, "x");
		usleep(300);
		TRACE_EVENT_END(cat_a);
	}
	vp_flush(); /* written once mid-way, then appended to */
	TRACE_EVENT_INSTANT(cat_a, "late");
	vp_shutdown();
	read_back(&p, "clear.pftrace");
	assert_int_equal(p.iid_errors, 0);
	assert_int_equal(p.n_evs, 101);
	assert_string_equal(p.evs[100].name, "late");
	assert_true(p.n_process_desc >= 5); /* several generations */
	free_parsed(&p);
}

/* A long sequence starts a new generation every VP_GEN_MAX_BYTES (32 KiB)
 * of chunks, so a ring buffer keeps a decodable tail; every generation
 * defines its iids again. */
static void test_generation_bound(void **state)
{
	(void)state;
	struct parsed p;
	char pad[101];
	const int n = 3000; /* about 400 KiB */

	memset(pad, 'p', 100);
	pad[100] = 0;
	init_inproc("gens.pftrace", "test.a", 4096);
	for (int i = 0; i < n; i++)
		TRACE_EVENT_INSTANT(cat_a, "padded", VP_ARG_UINT("i", i),
				    VP_ARG_STRING("pad", pad));
	vp_shutdown();
	read_back(&p, "gens.pftrace");
	assert_int_equal(p.iid_errors, 0);
	assert_int_equal(p.n_dropped_flags, 0);
	assert_int_equal(p.n_evs, (size_t)n);
	assert_true(p.n_process_desc >= 8);
	assert_true(p.n_process_desc <= 20);
	for (int i = 0; i < n; i++) {
		assert_string_equal(p.evs[i].name, "padded");
		assert_int_equal(p.evs[i].args[0].u, (uint64_t)i);
	}
	free_parsed(&p);
}

/* ------------------------------------------- stop while threads trace */

static atomic_bool g_spin_stop;

static void *spinner(void *v)
{
	(void)v;
	uint64_t i = 0;
	while (!atomic_load(&g_spin_stop)) {
		TRACE_EVENT_INSTANT(cat_a, "spin", VP_ARG_UINT("i", i));
		if (++i % 32 == 0)
			usleep(100); /* a bounded number of events */
	}
	return NULL;
}

static void test_stop_while_tracing(void **state)
{
	(void)state;
	pthread_t th[3];
	struct parsed p;

	char path[512];
	make_path(path, sizeof(path), "race.pftrace");
	unlink(path);
	/* A ring buffer overwrites the track descriptors and interned names
	 * of a busy sequence: periodic clears emit them again. */
	struct vp_init_args a = {
		.backend = VP_BACKEND_IN_PROCESS,
		.output_path = path,
		.buffer_size_kb = 2048,
		.categories = "test.a",
		.clear_period_ms = 2,
	};
	atomic_store(&g_spin_stop, false);
	assert_int_equal(vp_init(&a), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, spinner, NULL),
				 0);
	for (int k = 0; k < 5; k++) {
		usleep(5000);
		vp_flush(); /* takes chunks from under the threads */
	}
	vp_shutdown(); /* retires writers in use */
	usleep(5000);
	atomic_store(&g_spin_stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	read_back(&p, "race.pftrace");
	assert_int_equal(p.iid_errors, 0);
	assert_true(p.n_evs > 0);
	/* Per sequence, what arrived is in order. */
	for (size_t s = 0; s < p.n_seqs; s++) {
		uint64_t last = 0;
		bool any = false;
		for (size_t j = 0; j < p.n_evs; j++) {
			if (p.evs[j].seq != p.seqs[s].id)
				continue;
			assert_string_equal(p.evs[j].name, "spin");
			if (any)
				assert_true(p.evs[j].args[0].u > last);
			last = p.evs[j].args[0].u;
			any = true;
		}
	}
	free_parsed(&p);
}

/* ---------------------------------------------------------- data source */

struct ds_ctx {
	int setups, starts, stops, flushes;
	char config_name[64];
	struct vp_ds_instance *inst;
	int traced;
};

static void ds_setup(void *ctx, struct vp_ds_instance *inst,
		     const uint8_t *cfg, size_t len)
{
	(void)inst;
	(void)cfg;
	(void)len;
	((struct ds_ctx *)ctx)->setups++;
}

static void ds_start(void *ctx, struct vp_ds_instance *inst,
		     const uint8_t *cfg, size_t len)
{
	struct ds_ctx *c = ctx;
	struct pb_reader r;
	struct pb_field f;
	c->starts++;
	c->inst = inst;
	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f))
		if (f.num == 1 && f.wt == PB_WT_LEN)
			copy_str(c->config_name, sizeof(c->config_name),
				 f.data, f.len);
}

static void ds_stop(void *ctx, struct vp_ds_instance *inst)
{
	struct ds_ctx *c = ctx;
	static const uint8_t last[] = {0xa2, 0x38, 6, 0x0a, 4,
				      'l',  'a',  's', 't'};
	c->stops++;
	/* Final packets may still be written from on_stop. */
	assert_int_equal(vp_ds_write_packet(inst, last, sizeof(last)), 0);
}

static void ds_flush(void *ctx, struct vp_ds_instance *inst)
{
	(void)inst;
	((struct ds_ctx *)ctx)->flushes++;
}

static void trace_fn(struct vp_ds_instance *inst, void *ctx)
{
	struct ds_ctx *c = ctx;
	/* TracePacket.for_testing (900) { str (1): "hello" }. */
	static const uint8_t pkt[] = {0xa2, 0x38, 7,   0x0a, 5,
				     'h',  'e',  'l', 'l',  'o'};
	c->traced++;
	assert_ptr_equal(inst, c->inst);
	assert_int_equal(vp_ds_write_packet(inst, pkt, sizeof(pkt)), 0);
}

static void test_data_source(void **state)
{
	(void)state;
	struct ds_ctx c = {0};
	struct parsed p;
	struct vp_data_source_desc d = {
		.name = "test.ds",
		.ctx = &c,
		.on_setup = ds_setup,
		.on_start = ds_start,
		.on_stop = ds_stop,
		.on_flush = ds_flush,
	};

	assert_null(vp_data_source_register(&d)); /* before vp_init */
	init_inproc("ds.pftrace", "test.a", 0);
	struct vp_data_source *ds = vp_data_source_register(&d);
	assert_non_null(ds);
	assert_null(vp_data_source_register(&d)); /* twice */
	assert_int_equal(c.setups, 1);
	assert_int_equal(c.starts, 1);
	assert_string_equal(c.config_name, "test.ds");
	assert_non_null(c.inst);
	assert_true(vp_ds_first_packet_on_sequence(c.inst));
	assert_false(vp_ds_first_packet_on_sequence(c.inst));
	vp_data_source_trace(ds, trace_fn, &c);
	assert_int_equal(c.traced, 1);
	vp_ds_flush(c.inst);
	vp_flush();
	assert_int_equal(c.flushes, 1);
	vp_data_source_trace(ds, trace_fn, &c);
	vp_shutdown();
	assert_int_equal(c.stops, 1);
	read_back(&p, "ds.pftrace");
	assert_int_equal(p.n_for_testing, 3);
	assert_string_equal(p.for_testing[0], "hello");
	assert_string_equal(p.for_testing[1], "hello");
	assert_string_equal(p.for_testing[2], "last");
	free_parsed(&p);
}

static void test_init_errors(void **state)
{
	(void)state;
	struct vp_init_args bad = {.backend = 0};
	assert_int_equal(vp_init(&bad), -1);
	assert_int_equal(vp_init(NULL), -1);
	struct vp_init_args nopath = {.backend = VP_BACKEND_IN_PROCESS};
	assert_int_equal(vp_init(&nopath), -1);
	struct vp_init_args unwritable = {
		.backend = VP_BACKEND_IN_PROCESS,
		.output_path = "/nonexistent-dir/x/trace.pftrace",
	};
	assert_int_equal(vp_init(&unwritable), -1);
	assert_false(vp_is_connected());
	init_inproc("twice.pftrace", NULL, 0);
	struct vp_init_args again = {
		.backend = VP_BACKEND_IN_PROCESS,
		.output_path = "/tmp/x",
	};
	assert_int_equal(vp_init(&again), -1);
	vp_shutdown();
	vp_shutdown(); /* harmless */
}

static int setup_dir(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof(g_dir), "%s/test_sdk.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
	(void)state;
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_errors),
		cmocka_unit_test(test_four_threads),
		cmocka_unit_test(test_category_globs),
		cmocka_unit_test(test_large_packet),
		cmocka_unit_test(test_ring_overwrite),
		cmocka_unit_test(test_clear_period),
		cmocka_unit_test(test_generation_bound),
		cmocka_unit_test(test_stop_while_tracing),
		cmocka_unit_test(test_data_source),
	};
	return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
