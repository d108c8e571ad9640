/*
 * test_partition.c - the threads of a rewrite (merge/partition.h): how a
 * plan shares sequences out, and that with any plan and any number of
 * threads every sequence stays on one thread, in file order, and the
 * output is the bytes one thread writes; and that 64 threads cost no
 * more memory than a few.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "partition.h"
#include "pb_wire.h"
#include "perfetto_fields.h"
#include "vp_alloc.h"

/* ---- partition_plan ---------------------------------------------------------- */

static void plan_one_thread_hashes_all(void **state)
{
	uint64_t load[4] = {5, 0, 7, 1};
	uint8_t owner[4];

	(void)state;
	partition_plan(load, 4, 1, owner);
	for (int i = 0; i < 4; i++)
		assert_int_equal(owner[i], PARTITION_BY_HASH);
}

static void plan_unseen_left_to_hash(void **state)
{
	uint64_t load[6] = {0, 10, 0, 10, 0, 0};
	uint8_t owner[6];

	(void)state;
	partition_plan(load, 6, 2, owner);
	assert_int_equal(owner[0], PARTITION_BY_HASH);
	assert_int_equal(owner[2], PARTITION_BY_HASH);
	assert_int_equal(owner[4], PARTITION_BY_HASH);
	assert_int_not_equal(owner[1], PARTITION_BY_HASH);
	assert_int_not_equal(owner[3], PARTITION_BY_HASH);
}

static void plan_single_sequence_to_a_worker(void **state)
{
	uint64_t load[3] = {0, 1000, 0};
	uint8_t owner[3];

	(void)state;
	partition_plan(load, 3, 2, owner);
	assert_int_equal(owner[1], 1);
}

/* Eight equal sequences on two threads: the first thread, which also
 * reads for the other (two thirds of the work of handling them all),
 * gets one of them; on five threads it gets
 * none until the others have as much as its reading costs. */
static void plan_leader_gets_less(void **state)
{
	uint64_t load[8];
	uint8_t owner[8];
	unsigned count[5] = {0};

	(void)state;
	for (int i = 0; i < 8; i++)
		load[i] = 100;
	partition_plan(load, 8, 2, owner);
	for (int i = 0; i < 8; i++)
		count[owner[i]]++;
	assert_int_equal(count[0], 1);
	assert_int_equal(count[1], 7);

	memset(count, 0, sizeof(count));
	partition_plan(load, 8, 5, owner);
	for (int i = 0; i < 8; i++)
		count[owner[i]]++;
	assert_int_equal(count[0], 0);
	for (int t = 1; t < 5; t++)
		assert_int_equal(count[t], 2);
}

/* The largest first, each to the least loaded: one heavy sequence alone
 * on a worker, the light ones around it. */
static void plan_largest_first(void **state)
{
	uint64_t load[5] = {0, 600, 100, 100, 100};
	uint8_t owner[5];

	(void)state;
	partition_plan(load, 5, 3, owner);
	assert_int_equal(owner[1], 1);
	assert_int_equal(owner[2], 2);
	assert_int_equal(owner[3], 2);
	assert_int_equal(owner[4], 2);
}

/* ---- partition_run ----------------------------------------------------------------- */

#define N_SEQ 12

/* Which thread handled each sequence first, and its last record's index:
 * a sequence must stay on one thread and come in file order. */
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static int seen_thread[N_SEQ + 1];
static long seen_last[N_SEQ + 1];

struct toy_ctx {
	int thread;
};

/* Packets: a sequence id, an index, and for every fifth a field 1 (an
 * "ftrace bundle", stateless: no index to keep in order) instead. */
static bool toy_stateless(const uint8_t *pkt, size_t len, uint32_t *seq_id)
{
	struct pb_reader r;
	struct pb_field f;
	bool stateless = false;

	*seq_id = 0;
	pb_reader_init(&r, pkt, len);
	while (pb_next(&r, &f)) {
		/* as trace_model.h's decoder: the last one, 0 past 32 bits */
		if (f.num == TP_TRUSTED_PACKET_SEQUENCE_ID &&
		    f.wt == PB_WT_VARINT)
			*seq_id = f.val <= UINT32_MAX ? (uint32_t)f.val : 0;
		if (f.num == 1)
			stateless = true;
	}
	return stateless;
}

/* What toy_fn copies whatever it holds: all but the fields it reads. */
static bool toy_passes(uint32_t num)
{
	return num != TP_TRUSTED_PACKET_SEQUENCE_ID && num != TP_TIMESTAMP &&
	       num != 1;
}

static int toy_fn(void *ctx, const uint8_t *raw, size_t raw_len,
		  uint32_t field, uint8_t wt, const uint8_t *data, size_t len,
		  uint64_t data_off, struct pb_buf *out, struct vp_error *err)
{
	struct toy_ctx *c = ctx;
	struct pb_reader r;
	struct pb_field f;
	uint32_t seq = 0;
	long index = -1;

	(void)field;
	(void)wt;
	(void)data_off;
	(void)err;
	if (!toy_stateless(data, len, &seq)) {
		pb_reader_init(&r, data, len);
		while (pb_next(&r, &f))
			if (f.num == TP_TIMESTAMP)
				index = (long)f.val;
		pthread_mutex_lock(&seen_mu);
		if (seen_thread[seq] < 0)
			seen_thread[seq] = c->thread;
		bool same = seen_thread[seq] == c->thread;
		bool ordered = index > seen_last[seq];
		seen_last[seq] = index;
		pthread_mutex_unlock(&seen_mu);
		if (!same || !ordered)
			return vp_errorf(err, "sequence %u: thread %d after %d, "
					 "record %ld after %ld", seq, c->thread,
					 seen_thread[seq], index, seen_last[seq]);
	}
	pb_put_raw(out, raw, raw_len);
	return 0;
}

struct sink_buf {
	struct pb_buf b;
};

static int toy_sink(void *ctx, const struct iovec *iov, int n,
		    struct vp_error *err)
{
	struct sink_buf *s = ctx;

	(void)err;
	for (int i = 0; i < n; i++)
		pb_put_raw(&s->b, iov[i].iov_base, iov[i].iov_len);
	return 0;
}

/* With big, every 3000th packet also carries 1.5 MiB of padding: a
 * record larger than a window, which the leader handles alone with its
 * owner's state (a stateful one's sequence must still see it in order,
 * on its own thread's state). */
static char *write_toy_trace(struct pb_buf *all, bool big)
{
	static char path[64];
	struct pb_buf pkt;
	strcpy(path, "/tmp/test_partition_XXXXXX");
	int fd = mkstemp(path);
	size_t pad_len = PARTITION_WINDOW_BYTES + PARTITION_WINDOW_BYTES / 2;
	uint8_t *pad = calloc(5, pad_len);
	assert_non_null(pad);

	assert_true(fd >= 0);
	pb_buf_init(&pkt);
	pb_buf_init(all);
	srand(7);
	for (long i = 0; i < 20000; i++) {
		/* sequences of very different volume: 1 the busiest */
		uint32_t seq = 1 + (uint32_t)(rand() % (1 + rand() % N_SEQ));
		pb_buf_reset(&pkt);
		/* Fields of every wire type and long tags before the id,
		 * which the leader skims past; now and then a decoy id that
		 * a later one overrides, or one past 32 bits (sequence 0). */
		if (i % 7 == 1) {
			pb_put_fixed64(&pkt, 9001, (uint64_t)i);
			pb_put_fixed32(&pkt, 3, (uint32_t)i);
			pb_put_varint(&pkt, 9002, UINT64_MAX - (uint64_t)i);
		}
		if (i % 11 == 3)
			pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID,
				      seq % N_SEQ + 1);
		pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID,
			      i % 13 == 5 ? (1ull << 32) + seq : seq);
		/* bundles large enough to be spread by bytes, and now and
		 * then one large enough for its worker to read it itself
		 * (PARTITION_DIRECT_MIN); and stateful packets of that size,
		 * which their sequence's worker reads, in order */
		if (i % 5 == 4) {
			pb_put_bytes(&pkt, 1, pad, i % 25 == 9 ? 9000 : 600);
		} else {
			if (i % 35 == 12)
				pb_put_bytes(&pkt, 9004, pad, 9000);
			pb_put_varint(&pkt, TP_TIMESTAMP, (uint64_t)i);
		}
		if (i % 50 == 34) /* a fixed field after a large one */
			pb_put_fixed64(&pkt, 9005, (uint64_t)i);
		/* records larger than a window, of four kinds: a long field
		 * the function copies as it is, at the end; two such, around
		 * short ones; a long field it reads (kept whole in the
		 * skeleton); one too long for a skeleton (read whole) */
		if (big && i % 3000 == 2999) {
			switch ((i / 3000) % 4) {
			case 0:
				pb_put_bytes(&pkt, 9000, pad, pad_len);
				break;
			case 1:
				pb_put_bytes(&pkt, 9001, pad, pad_len);
				pb_put_fixed32(&pkt, 9002, 7);
				pb_put_varint(&pkt, TP_TIMESTAMP, (uint64_t)i);
				pb_put_bytes(&pkt, 20, pad, 100);
				pb_put_bytes(&pkt, 9003, pad, pad_len);
				pb_put_fixed64(&pkt, 3, 9);
				break;
			case 2:
				pb_put_bytes(&pkt, 1, pad, pad_len);
				break;
			default:
				pb_put_bytes(&pkt, 1, pad, 5 * pad_len);
				break;
			}
		}
		pb_put_bytes(all, 1, pkt.data, pkt.len);
	}
	assert_int_equal(write(fd, all->data, all->len), (ssize_t)all->len);
	close(fd);
	pb_buf_free(&pkt);
	free(pad);
	return path;
}

/* The job of a run over the toy trace into out, with the threads'
 * contexts in ctx, and nothing seen yet. */
static struct partition_job toy_job(const char *path, unsigned threads,
				    const uint8_t *plan, bool passes,
				    struct toy_ctx *ctx, struct sink_buf *out)
{
	struct partition_job job = {
		.path = path,
		.threads = threads,
		.fn = toy_fn,
		.stateless = toy_stateless,
		.passes = passes ? toy_passes : NULL,
		.seq_owner = plan,
		.n_seq_owner = plan ? N_SEQ + 1 : 0,
		.sink = toy_sink,
		.sink_ctx = out,
	};

	for (int s = 0; s <= N_SEQ; s++) {
		seen_thread[s] = -1;
		seen_last[s] = -1;
	}
	for (unsigned t = 0; t < threads; t++) {
		ctx[t].thread = (int)t;
		job.ctx[t] = &ctx[t];
	}
	pb_buf_init(&out->b);
	return job;
}

static void run_toy(const char *path, unsigned threads, const uint8_t *plan,
		    bool passes, const struct pb_buf *expect)
{
	struct toy_ctx ctx[PARTITION_MAX_THREADS];
	struct sink_buf out;
	struct vp_error err;
	int io_error;
	struct partition_job job = toy_job(path, threads, plan, passes, ctx,
					   &out);

	err.msg[0] = '\0';
	int rc = partition_run(&job, &err, &io_error);
	if (rc != 0)
		fail_msg("%u threads: %s", threads, err.msg);
	assert_int_equal(out.b.len, expect->len);
	assert_memory_equal(out.b.data, expect->data, expect->len);
	pb_buf_free(&out.b);
}

static void same_bytes_any_plan(bool big)
{
	struct pb_buf all;
	char *path = write_toy_trace(&all, big);
	uint64_t load[N_SEQ + 1] = {0};
	uint8_t plan[N_SEQ + 1];

	for (uint32_t s = 1; s <= N_SEQ; s++)
		load[s] = 1000 / s;
	for (unsigned threads = 1; threads <= 4; threads++) {
		run_toy(path, threads, NULL, false, &all);
		partition_plan(load, N_SEQ + 1, threads, plan);
		run_toy(path, threads, plan, false, &all);
		/* records larger than a window passed through, not read */
		run_toy(path, threads, plan, true, &all);
	}
	unlink(path);
	pb_buf_free(&all);
}

static void run_same_bytes_any_plan(void **state)
{
	(void)state;
	same_bytes_any_plan(false);
}

/* Runs the toy trace on `threads` threads in a child process: its peak
 * RSS in KiB, or -1 when the run failed or its output differed. */
static long child_rss_kib(const char *path, unsigned threads,
			  const struct pb_buf *expect)
{
	pid_t pid = fork();
	if (pid == 0) {
		vp_alloc_give_back_freed(); /* as vperfetto_merge does */
		struct toy_ctx ctx[PARTITION_MAX_THREADS];
		struct sink_buf out;
		struct vp_error err;
		int io_error;
		struct partition_job job = toy_job(path, threads, NULL, false,
						   ctx, &out);
		bool same = partition_run(&job, &err, &io_error) == 0 &&
			    out.b.len == expect->len &&
			    memcmp(out.b.data, expect->data, expect->len) == 0;
		_exit(same ? 0 : 1);
	}
	int status;
	struct rusage ru;
	if (pid < 0 || wait4(pid, &status, 0, &ru) != pid ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return ru.ru_maxrss;
}

/* Merges the trace at path (whose output is *all) on 2 and on `many`
 * threads, each in a child of its own, and fails when `many` take more
 * than slack_kib more peak RSS; removes the trace and frees *all. */
static void assert_threads_cost(const char *path, struct pb_buf *all,
				unsigned many_threads, long slack_kib)
{
	long two = child_rss_kib(path, 2, all);
	long many = child_rss_kib(path, many_threads, all);

	unlink(path);
	pb_buf_free(all);
	assert_true(two > 0);
	assert_true(many > 0);
	/* (a sanitizer's shadow memory is not the runner's) */
	if (getenv("ASAN_OPTIONS") || getenv("TSAN_OPTIONS"))
		return;
	if (many > two + slack_kib)
		fail_msg("%u threads: peak RSS %ld KiB, 2 threads: %ld KiB",
			 many_threads, many, two);
}

/* Memory does not grow with the threads: each window in flight has a
 * share per thread, and with 64 threads there were 66 windows, each
 * with 64 record arrays of a window's records: 420 MiB more than 2
 * threads.  Now 64 threads (on however many CPUs) take less than 32 MiB
 * more (18 measured, most of it their stacks and shares), and write the
 * same bytes. */
static void run_many_threads_bounded(void **state)
{
	struct pb_buf all;
	char *path = write_toy_trace(&all, false);

	(void)state;
	assert_threads_cost(path, &all, PARTITION_MAX_THREADS, 32 * 1024);
}

/* Sequences busy one after another, each for a few windows, in packets
 * of a kilobyte: every worker in its turn gets whole windows.  A share
 * per thread and window used to keep the room of the busiest window it
 * had: on 12 threads 50 MiB more than on 2 (160 MiB, where the trace
 * and its copy take 72), though the windows' records and the threads'
 * outputs in flight are a few MiB. */
static void run_busy_in_turn_bounded(void **state)
{
	char path[] = "/tmp/test_partition_XXXXXX";
	int fd = mkstemp(path);
	struct pb_buf all, pkt;
	uint8_t pad[1000];

	(void)state;
	assert_true(fd >= 0);
	memset(pad, 0x5a, sizeof(pad));
	pb_buf_init(&all);
	pb_buf_init(&pkt);
	for (uint32_t seq = 1; seq <= N_SEQ; seq++)
		for (long i = 0; i < 3000; i++) {
			pb_buf_reset(&pkt);
			pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID, seq);
			pb_put_varint(&pkt, TP_TIMESTAMP, (uint64_t)i);
			pb_put_bytes(&pkt, 9004, pad, sizeof(pad));
			pb_put_bytes(&all, 1, pkt.data, pkt.len);
		}
	assert_int_equal(write(fd, all.data, all.len), (ssize_t)all.len);
	close(fd);
	pb_buf_free(&pkt);

	assert_threads_cost(path, &all, N_SEQ, 24 * 1024);
}

/* Fails on records of a given index, naming it. */
static long fail_index[2];

static int failing_fn(void *ctx, const uint8_t *raw, size_t raw_len,
		      uint32_t field, uint8_t wt, const uint8_t *data,
		      size_t len, uint64_t data_off, struct pb_buf *out,
		      struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;

	(void)ctx;
	(void)field;
	(void)wt;
	(void)data_off;
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == TP_TIMESTAMP &&
		    ((long)f.val == fail_index[0] || (long)f.val == fail_index[1]))
			return vp_errorf(err, "record %ld", (long)f.val);
	pb_put_raw(out, raw, raw_len);
	return 0;
}

/* Two workers fail in one window, the second one's record first in the
 * file: that one is reported, as one thread would have. */
static void run_reports_first_failure(void **state)
{
	char path[] = "/tmp/test_partition_XXXXXX";
	int fd = mkstemp(path);
	struct pb_buf all, pkt;
	uint32_t seq_of[3] = {0, 0, 0}; /* a sequence of worker 1 and of 2 */
	struct vp_error err;
	int io_error;

	(void)state;
	assert_true(fd >= 0);
	for (uint32_t s = 1; s < 64 && (!seq_of[1] || !seq_of[2]); s++)
		seq_of[1 + partition_owner(s, 2)] = s;
	assert_true(seq_of[1] && seq_of[2]);
	pb_buf_init(&all);
	pb_buf_init(&pkt);
	for (long i = 0; i < 100; i++) {
		pb_buf_reset(&pkt);
		pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID,
			      seq_of[1 + (i & 1)]);
		pb_put_varint(&pkt, TP_TIMESTAMP, (uint64_t)i);
		pb_put_bytes(&all, 1, pkt.data, pkt.len);
	}
	assert_int_equal(write(fd, all.data, all.len), (ssize_t)all.len);
	close(fd);
	fail_index[0] = 11; /* odd: worker 2's */
	fail_index[1] = 20; /* even: worker 1's */
	struct partition_job job = {
		.path = path,
		.threads = 3,
		.fn = failing_fn,
	};
	assert_int_equal(partition_run(&job, &err, &io_error), -1);
	assert_string_equal(err.msg, "record 11");
	assert_int_equal(io_error, 0);
	unlink(path);
	pb_buf_free(&all);
	pb_buf_free(&pkt);
}

/* ... with records larger than a window among them. */
static void run_big_records(void **state)
{
	(void)state;
	same_bytes_any_plan(true);
}

/* ---- records larger than a window, rewritten in pieces ---------------------- */

/* A toy rewrite with pieces: in a packet's field 1 (a "bundle"), each
 * field 2 (an "event") has its field 1 (a "time") v made v * factor + 7,
 * factor being the bundle's field 3 (1000 without); all else is copied.
 * The lengths change, so a large bundle's output must be measured before
 * it goes out.  Events rewritten are counted, but for empty ones. */
struct piece_ctx {
	uint64_t events;
};

static uint64_t bundle_factor(const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t factor = 1000;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.num == 3 && f.wt == PB_WT_VARINT)
			factor = f.val;
	return factor;
}

static void put_event(struct piece_ctx *c, struct pb_buf *out,
		      const struct pb_field *ev, uint64_t factor)
{
	struct pb_reader r;
	struct pb_field f;
	size_t mark = pb_begin_nested(out, 2);

	pb_reader_init(&r, ev->data, ev->len);
	while (pb_next(&r, &f)) {
		if (f.num == 1 && f.wt == PB_WT_VARINT)
			pb_put_varint(out, 1, f.val * factor + 7);
		else
			pb_put_raw(out, f.start, (size_t)(f.end - f.start));
	}
	pb_end_nested(out, mark);
	/* an empty event counts nothing (the placeholder of a run) */
	c->events += ev->len > 0;
}

static void put_bundle(struct piece_ctx *c, struct pb_buf *out,
		       const struct pb_field *b)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t factor = bundle_factor(b->data, b->len);
	size_t mark = pb_begin_nested(out, 1);

	pb_reader_init(&r, b->data, b->len);
	while (pb_next(&r, &f)) {
		if (f.num == 2 && f.wt == PB_WT_LEN)
			put_event(c, out, &f, factor);
		else
			pb_put_raw(out, f.start, (size_t)(f.end - f.start));
	}
	pb_end_nested(out, mark);
}

static void put_packet(struct piece_ctx *c, struct pb_buf *out,
		       const uint8_t *p, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	size_t mark = pb_begin_nested(out, 1); /* Trace.packet */

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == 1 && f.wt == PB_WT_LEN)
			put_bundle(c, out, &f);
		else
			pb_put_raw(out, f.start, (size_t)(f.end - f.start));
	}
	pb_end_nested(out, mark);
}

static int piece_fn(void *ctx, const uint8_t *raw, size_t raw_len,
		    uint32_t field, uint8_t wt, const uint8_t *data,
		    size_t len, uint64_t data_off, struct pb_buf *out,
		    struct vp_error *err)
{
	(void)raw;
	(void)raw_len;
	(void)field;
	(void)wt;
	(void)data_off;
	(void)err;
	put_packet(ctx, out, data, len);
	return 0;
}

static bool piece_passes(uint32_t num)
{
	return num != 1 && num != TP_TRUSTED_PACKET_SEQUENCE_ID;
}

static uint32_t piece_of(uint32_t num)
{
	return num == 1 ? 2 : 0;
}

static int piece_piece(void *ctx, uint32_t num, const uint8_t *msg,
		       size_t msg_len, const uint8_t *p, size_t len,
		       uint64_t off, bool count, struct pb_buf *out,
		       struct vp_error *err)
{
	struct piece_ctx *c = ctx;
	struct pb_reader r;
	struct pb_field f;
	uint64_t factor = bundle_factor(msg, msg_len), before = c->events;

	(void)off;
	assert_int_equal(num, 1);
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num != 2 || f.wt != PB_WT_LEN)
			return vp_errorf(err, "field %u as a piece", f.num);
		put_event(c, out, &f, factor);
	}
	if (!count)
		c->events = before;
	return r.err ? vp_errorf(err, "malformed pieces") : 0;
}

/* Records larger than a window whose bundles are rewritten: one long run
 * of events; runs around the bundle's other fields (a factor in the
 * middle of them, a long field that is not an event, a run too short to
 * leave in the file); two such bundles with passing fields between;
 * an event too long to be a piece (read whole). */
static char *write_piece_trace(struct pb_buf *all)
{
	static char path[64];
	struct pb_buf pkt, b, ev;
	strcpy(path, "/tmp/test_partition_XXXXXX");
	int fd = mkstemp(path);
	uint8_t *pad = calloc(1, 5u << 20);

	assert_true(fd >= 0);
	assert_non_null(pad);
	pb_buf_init(&pkt);
	pb_buf_init(&b);
	pb_buf_init(&ev);
	pb_buf_init(all);
	for (long i = 0; i < 3000; i++) {
		pb_buf_reset(&pkt);
		pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID,
			      1 + (uint32_t)(i % 5));
		pb_buf_reset(&b);
		long n_events = i % 500 == 499 ? 40000 : 3;
		for (long e = 0; e < n_events; e++) {
			pb_buf_reset(&ev);
			pb_put_varint(&ev, 1, (uint64_t)(i * 100000 + e) << (e % 40));
			pb_put_bytes(&ev, 4, pad, (size_t)(e % 50));
			pb_put_bytes(&b, 2, ev.data, ev.len);
			if (n_events > 3 && (i / 500) % 3 == 1) {
				if (e == 20000)
					pb_put_varint(&b, 3, 17);
				if (e == 30000)
					pb_put_bytes(&b, 5, pad, 9000);
				if (e == 35000 || e == 35003)
					pb_put_fixed32(&b, 6, 1);
			}
		}
		if (n_events > 3 && (i / 500) % 3 == 2)
			pb_put_bytes(&b, 2, pad, 5u << 20);
		pb_put_bytes(&pkt, 1, b.data, b.len);
		if (n_events > 3 && (i / 500) % 2) {
			pb_put_bytes(&pkt, 9000, pad, 100000);
			pb_put_bytes(&pkt, 1, b.data, b.len);
		}
		pb_put_bytes(all, 1, pkt.data, pkt.len);
	}
	assert_int_equal(write(fd, all->data, all->len), (ssize_t)all->len);
	close(fd);
	pb_buf_free(&pkt);
	pb_buf_free(&b);
	pb_buf_free(&ev);
	free(pad);
	return path;
}

static void run_big_pieces(void **state)
{
	struct pb_buf all, expect;
	struct piece_ctx whole = {0}, ctx[4];
	char *path = write_piece_trace(&all);
	struct pb_reader r;
	struct pb_field f;

	(void)state;
	pb_buf_init(&expect);
	pb_reader_init(&r, all.data, all.len);
	while (pb_next(&r, &f))
		put_packet(&whole, &expect, f.data, f.len);
	for (unsigned threads = 1; threads <= 3; threads++) {
		for (int hooks = 0; hooks < 2; hooks++) {
			struct sink_buf out;
			struct vp_error err;
			int io_error;
			struct partition_job job = {
				.path = path,
				.threads = threads,
				.fn = piece_fn,
				.passes = hooks ? piece_passes : NULL,
				.piece_of = hooks ? piece_of : NULL,
				.piece = hooks ? piece_piece : NULL,
				.sink = toy_sink,
				.sink_ctx = &out,
			};
			uint64_t events = 0;
			for (unsigned t = 0; t < threads; t++) {
				ctx[t].events = 0;
				job.ctx[t] = &ctx[t];
			}
			pb_buf_init(&out.b);
			if (partition_run(&job, &err, &io_error) != 0)
				fail_msg("%u threads: %s", threads, err.msg);
			for (unsigned t = 0; t < threads; t++)
				events += ctx[t].events;
			if (events != whole.events)
				fail_msg("%u threads, hooks %d: %llu events, want %llu",
					 threads, hooks, (unsigned long long)events,
					 (unsigned long long)whole.events);
			assert_int_equal(out.b.len, expect.len);
			assert_memory_equal(out.b.data, expect.data,
					    expect.len);
			pb_buf_free(&out.b);
		}
	}
	unlink(path);
	pb_buf_free(&all);
	pb_buf_free(&expect);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_one_thread_hashes_all),
		cmocka_unit_test(plan_unseen_left_to_hash),
		cmocka_unit_test(plan_single_sequence_to_a_worker),
		cmocka_unit_test(plan_leader_gets_less),
		cmocka_unit_test(plan_largest_first),
		cmocka_unit_test(run_same_bytes_any_plan),
		cmocka_unit_test(run_many_threads_bounded),
		cmocka_unit_test(run_busy_in_turn_bounded),
		cmocka_unit_test(run_big_records),
		cmocka_unit_test(run_big_pieces),
		cmocka_unit_test(run_reports_first_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
