/*
 * partition.c - one or two threads over a trace file, partitioned by
 * sequence, output back in file order (see partition.h).
 *
 * The first thread ("leader") reads the file once.  For each window of
 * WINDOW_RECORDS records it notes every record's owner, handles its own
 * records into `mine` and copies the worker's into `in`; the second thread
 * ("worker") handles `in` into `out` while the leader reads on.  Each
 * record's output is one blob (framed as a length-delimited field 1, which
 * pb_next() reads back), so the leader can interleave `mine` and `out` back
 * into file order before it hands the window to the sink.  Up to SLOTS - 1
 * windows are in flight.
 */
#include "partition.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "trace_io.h"

#define WINDOW_RECORDS 4096
#define SLOTS 4

unsigned partition_owner(uint32_t seq_id, unsigned n)
{
	if (n < 2)
		return 0;
	/* Fibonacci hashing: consecutive ids spread over the threads. */
	return (unsigned)(((uint64_t)seq_id * 0x9e3779b97f4a7c15ull) >> 63);
}

/* The thread that owns a record: packets by sequence id, everything else
 * (and anything malformed, which the leader then reports) the leader. */
static unsigned owner_of(const struct trace_record *rec, unsigned n)
{
	struct pb_reader r;
	struct pb_field f;

	if (n < 2 || rec->field != TRACE_PACKET_FIELD || rec->wt != PB_WT_LEN)
		return 0;
	pb_reader_init(&r, rec->data, rec->len);
	while (pb_next(&r, &f))
		if (f.num == TP_TRUSTED_PACKET_SEQUENCE_ID &&
		    f.wt == PB_WT_VARINT)
			return partition_owner((uint32_t)f.val, n);
	return 0;
}

static bool cancelled(const struct partition_job *job)
{
	return job->cancel && *job->cancel;
}

/* Runs fn on a record, its output framed as one blob in buf. */
static int run_record(const struct partition_job *job, void *ctx,
		      const struct trace_record *rec, struct pb_buf *buf,
		      bool framed, struct vp_error *err)
{
	size_t mark = framed ? pb_begin_nested(buf, 1) : 0;
	int rc = job->fn(ctx, rec->raw, rec->raw_len, rec->field, rec->wt,
			 rec->data, rec->len, rec->data_offset, buf, err);
	if (framed)
		pb_end_nested(buf, mark);
	return rc;
}

/* ---- one thread ---------------------------------------------------------- */

static int run_single(const struct partition_job *job, struct vp_error *err,
		      int *io_error)
{
	struct trace_reader *rd;
	struct trace_record rec;
	struct pb_buf out;
	int rc;

	if (trace_reader_open(&rd, job->path, err) < 0)
		return -1;
	pb_buf_init(&out);
	while ((rc = trace_reader_next(rd, &rec, err)) > 0) {
		if (cancelled(job)) {
			rc = vp_errorf(err, "interrupted");
			break;
		}
		pb_buf_reset(&out);
		if (run_record(job, job->ctx[0], &rec, &out, false, err) < 0) {
			rc = -1;
			break;
		}
		if (job->sink && out.len &&
		    job->sink(job->sink_ctx, out.data, out.len, err) < 0) {
			*io_error = 1;
			rc = -1;
			break;
		}
		if (job->progress)
			job->progress(job->progress_ctx, rec.raw_len);
	}
	pb_buf_free(&out);
	trace_reader_close(rd);
	return rc < 0 ? -1 : 0;
}

/* ---- two threads ------------------------------------------------------------ */

/* The worker waits for a slot to be READY (the leader has put the worker's
 * records of one window into `in`), handles them into `out`, and marks it
 * DONE; the leader then interleaves it with its own output of the window
 * (`mine`, in the order `owners` says) and frees the slot. */
enum { FREE, READY, DONE };

struct window {
	int state;              /* under pool.mu */
	/* written by the leader */
	struct pb_buf in;       /* worker's records, each framed */
	struct pb_buf mine;     /* leader's output, one blob per record */
	uint8_t owners[WINDOW_RECORDS];
	uint64_t offs[WINDOW_RECORDS]; /* payload offsets of worker records */
	size_t count;           /* records in the window */
	size_t n_theirs;        /* of which the worker's */
	/* written by the worker, on cache lines of their own */
	struct pb_buf out __attribute__((aligned(128))); /* one blob per record */
	bool failed;            /* the worker failed in this window */
	struct vp_error err;
} __attribute__((aligned(128)));

struct pool {
	const struct partition_job *job;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct window win[SLOTS];
	bool stop;
};

static void set_state(struct pool *pl, struct window *w, int state)
{
	pthread_mutex_lock(&pl->mu);
	w->state = state;
	pthread_cond_broadcast(&pl->cv);
	pthread_mutex_unlock(&pl->mu);
}

/* Waits until w is in `state`; false when told to stop first. */
static bool wait_state(struct pool *pl, struct window *w, int state)
{
	pthread_mutex_lock(&pl->mu);
	while (w->state != state && !pl->stop)
		pthread_cond_wait(&pl->cv, &pl->mu);
	bool ok = w->state == state;
	pthread_mutex_unlock(&pl->mu);
	return ok;
}

/* Handles the worker's records of one window.  Each input blob is the raw
 * record; it is re-split into the fields the job function wants. */
static void work_window(const struct partition_job *job, struct window *w)
{
	struct pb_reader r;
	struct pb_field f;
	size_t k = 0;

	pb_buf_reset(&w->out);
	w->failed = false;
	pb_reader_init(&r, w->in.data, w->in.len);
	while (pb_next(&r, &f)) {
		struct pb_reader rr;
		struct pb_field rec;
		struct trace_record tr;
		pb_reader_init(&rr, f.data, f.len);
		pb_next(&rr, &rec); /* the leader framed a well-formed record */
		tr.field = rec.num;
		tr.wt = rec.wt;
		tr.data = rec.data;
		tr.len = rec.len;
		tr.raw = f.data;
		tr.raw_len = f.len;
		tr.data_offset = w->offs[k++];
		tr.offset = tr.data_offset;
		if (run_record(job, job->ctx[1], &tr, &w->out, true, &w->err) < 0) {
			w->failed = true;
			return;
		}
	}
}

static void *worker_main(void *arg)
{
	struct pool *pl = arg;

	for (uint64_t n = 0;; n++) {
		struct window *w = &pl->win[n % SLOTS];
		if (!wait_state(pl, w, READY))
			return NULL;
		work_window(pl->job, w);
		set_state(pl, w, DONE);
	}
}

/* Interleaves the two outputs of a finished window into the sink. */
static int emit_window(const struct partition_job *job, struct window *w,
		       struct vp_error *err)
{
	struct pb_reader r[2];
	struct pb_field f;

	pb_reader_init(&r[0], w->mine.data, w->mine.len);
	pb_reader_init(&r[1], w->out.data, w->out.len);
	for (size_t i = 0; i < w->count; i++) {
		if (!pb_next(&r[w->owners[i]], &f))
			return vp_errorf(err, "%s: internal error: window out of "
					 "step", job->path);
		if (job->sink && f.len &&
		    job->sink(job->sink_ctx, f.data, f.len, err) < 0)
			return -1;
	}
	return 0;
}

/* Finishes window w: waits for the worker, then emits it.  Returns 0, -1
 * (err set), or -2 when the sink failed. */
static int finish_window(struct pool *pl, struct window *w,
			 struct vp_error *err)
{
	if (!wait_state(pl, w, DONE))
		return -1;
	if (w->failed) {
		*err = w->err;
		return -1;
	}
	int rc = emit_window(pl->job, w, err) < 0 ? -2 : 0;
	pb_buf_reset(&w->in);
	pb_buf_reset(&w->mine);
	w->count = 0;
	w->n_theirs = 0;
	set_state(pl, w, FREE);
	return rc;
}

static int run_two(const struct partition_job *job, struct vp_error *err,
		   int *io_error)
{
	struct pool pl;
	struct trace_reader *rd;
	struct trace_record rec;
	uint64_t n = 0, first_pending = 0; /* windows filled / not emitted */
	int rc, status = 0;
	pthread_t tid;

	if (trace_reader_open(&rd, job->path, err) < 0)
		return -1;
	memset(&pl, 0, sizeof(pl));
	pl.job = job;
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.cv, NULL);
	for (int i = 0; i < SLOTS; i++) {
		pb_buf_init(&pl.win[i].in);
		pb_buf_init(&pl.win[i].out);
		pb_buf_init(&pl.win[i].mine);
	}
	if (pthread_create(&tid, NULL, worker_main, &pl) != 0) {
		trace_reader_close(rd);
		return run_single(job, err, io_error);
	}

	struct window *w = &pl.win[0];
	for (;;) {
		rc = trace_reader_next(rd, &rec, err);
		if (rc > 0 && cancelled(job))
			rc = vp_errorf(err, "interrupted");
		if (rc > 0) {
			uint8_t owner = (uint8_t)owner_of(&rec, 2);
			w->owners[w->count] = owner;
			if (owner == 0) {
				if (run_record(job, job->ctx[0], &rec, &w->mine,
					       true, err) < 0)
					rc = -1;
			} else {
				w->offs[w->n_theirs++] = rec.data_offset;
				pb_put_bytes(&w->in, 1, rec.raw, rec.raw_len);
			}
			w->count++;
			if (job->progress)
				job->progress(job->progress_ctx, rec.raw_len);
		}
		/* A failure of the leader's own comes after everything the
		 * worker was already given: finish those first, since one of
		 * them may have failed earlier in the file. */
		if (rc <= 0 || w->count == WINDOW_RECORDS) {
			set_state(&pl, w, READY);
			n++;
			/* Keep at most SLOTS - 1 windows in flight. */
			while (first_pending < n &&
			       (rc <= 0 || n - first_pending >= SLOTS)) {
				struct vp_error werr;
				int f = finish_window(&pl, &pl.win[first_pending %
								   SLOTS], &werr);
				first_pending++;
				if (f < 0 && !status) {
					status = -1;
					*err = werr;
					*io_error = f == -2;
					rc = -1;
				}
			}
			if (rc <= 0)
				break;
			w = &pl.win[n % SLOTS];
			if (!wait_state(&pl, w, FREE))
				break;
		}
	}
	if (rc < 0)
		status = -1;

	pthread_mutex_lock(&pl.mu);
	pl.stop = true;
	pthread_cond_broadcast(&pl.cv);
	pthread_mutex_unlock(&pl.mu);
	pthread_join(tid, NULL);
	trace_reader_close(rd);
	for (int i = 0; i < SLOTS; i++) {
		pb_buf_free(&pl.win[i].in);
		pb_buf_free(&pl.win[i].out);
		pb_buf_free(&pl.win[i].mine);
	}
	pthread_cond_destroy(&pl.cv);
	pthread_mutex_destroy(&pl.mu);
	return status;
}

int partition_run(const struct partition_job *job, struct vp_error *err,
		  int *io_error)
{
	*io_error = 0;
	if (job->threads < 2)
		return run_single(job, err, io_error);
	return run_two(job, err, io_error);
}
