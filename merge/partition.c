/*
 * partition.c - threads over a trace file, partitioned by sequence (or by
 * bytes, for packets without sequence state), output back in file order
 * (see partition.h).
 *
 * The first thread ("leader") reads the file once.  It cuts it into
 * windows of at most PARTITION_WINDOW_BYTES (or PARTITION_WINDOW_RECORDS
 * records), notes every record's owner, handles its own records into its
 * output of the window and copies the workers' into the window's input
 * (or, for a packet of PARTITION_DIRECT_MIN bytes or more, only makes
 * room for it there, and its worker reads it from the file itself: the
 * leader then reads just the heads of its top-level fields); each worker
 * handles its records of the window while the leader reads on.  Each
 * record's output length is noted, so the leader can interleave the
 * threads' outputs back into file order before it hands the window to
 * the sink, a run of consecutive records of one thread at a time.  At
 * most `slots` windows are in flight: the leader waits for the oldest
 * before it fills another, which is the back-pressure that bounds
 * memory; a window's input is the window's whatever the threads, and a
 * thread's output room that its load has left is given back.
 */
#include "partition.h"
#include "partition_large.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "merge_limits.h"
#include "perfetto_fields.h"
#include "trace_io.h"
#include "vp_alloc.h"

/* A buffer that grew past this (for a large record) is freed once its
 * window is emitted, so one large packet does not pin memory. */
#define SHRINK_ABOVE (4 * (size_t)PARTITION_WINDOW_BYTES)

unsigned partition_owner(uint32_t seq_id, unsigned n)
{
	if (n < 2)
		return 0;
	/* Fibonacci hashing: consecutive ids spread over the threads. */
	uint64_t h = ((uint64_t)seq_id * 0x9e3779b97f4a7c15ull) >> 32;
	return (unsigned)((h * n) >> 32);
}

/* What the first thread's reading, peeking, copying and emitting cost,
 * as a share of handling every packet (about two thirds, measured on
 * packets of tens of bytes, where that share is largest: with a half,
 * the first thread was busy all the time on two threads and the other
 * a fifth idle, and the merge 5% slower): its start in the plan. */
#define LEADER_LOAD_NUM 2
#define LEADER_LOAD_DEN 3

void partition_plan(const uint64_t *load, size_t n_ids, unsigned threads,
		    uint8_t *owner)
{
	uint64_t have[PARTITION_MAX_THREADS] = {0}, total = 0;
	size_t *order = vp_xcalloc(n_ids ? n_ids : 1, sizeof(*order));
	size_t n = 0;

	memset(owner, PARTITION_BY_HASH, n_ids);
	if (threads < 2 || threads > PARTITION_MAX_THREADS) {
		free(order);
		return;
	}
	for (size_t i = 0; i < n_ids; i++) {
		if (!load[i])
			continue;
		total += load[i];
		/* by load, largest first, then by id: an insertion sort,
		 * since there are few */
		size_t j = n++;
		while (j && load[order[j - 1]] < load[i]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	have[0] = total / LEADER_LOAD_DEN * LEADER_LOAD_NUM;
	for (size_t k = 0; k < n; k++) {
		unsigned best = 0;
		for (unsigned t = 1; t < threads; t++)
			if (have[t] < have[best])
				best = t;
		owner[order[k]] = (uint8_t)best;
		have[best] += load[order[k]];
	}
	free(order);
}

static bool cancelled(const struct partition_job *job)
{
	return job->cancel && *job->cancel;
}

static void shrink(struct pb_buf *b)
{
	if (b->cap > SHRINK_ABOVE) {
		pb_buf_free(b);
		pb_buf_init(b);
	}
}

/* Runs fn on a record, appending its output to buf; with out_len, notes
 * the output's length there. */
static int run_record(const struct partition_job *job, void *ctx,
		      const struct trace_record *rec, struct pb_buf *buf,
		      size_t *out_len, struct vp_error *err)
{
	size_t before = buf->len;
	int rc = job->fn(ctx, rec->raw, rec->raw_len, rec->field, rec->wt,
			 rec->data, rec->len, rec->data_offset, buf, err);
	if (out_len)
		*out_len = buf->len - before;
	return rc;
}

static int run_unread(const struct partition_job *job, struct trace_reader *rd,
		      struct trace_record *rec, unsigned n, struct pb_buf *out,
		      struct vp_error *err, int *io_error);

/* ---- one thread ---------------------------------------------------------- */

/* Hands what out holds to the sink and empties it. */
static int flush_single(const struct partition_job *job, struct pb_buf *out,
			struct vp_error *err)
{
	int rc = 0;

	if (job->sink && out->len) {
		struct iovec v = {out->data, out->len};
		rc = job->sink(job->sink_ctx, &v, 1, err);
	}
	pb_buf_reset(out);
	shrink(out);
	return rc;
}

static int run_single(const struct partition_job *job, struct vp_error *err,
		      int *io_error)
{
	struct trace_reader *rd;
	struct trace_record rec;
	struct pb_buf out;
	int rc;

	if (merge_reader_open(&rd, job->path, -1, err) < 0)
		return -1;
	pb_buf_init(&out);
	while ((rc = trace_reader_next_head(rd, &rec, PARTITION_WINDOW_BYTES,
					    err)) > 0) {
		if (cancelled(job)) {
			rc = vp_errorf(err, "interrupted");
			break;
		}
		if (!rec.raw) { /* larger than a window: left unread */
			if (flush_single(job, &out, err) < 0) {
				*io_error = 1;
				rc = -1;
				break;
			}
			if (run_unread(job, rd, &rec, 1, &out, err,
				       io_error) < 0) {
				rc = -1;
				break;
			}
			continue;
		}
		if (run_record(job, job->ctx[0], &rec, &out, NULL, err) < 0) {
			rc = -1;
			break;
		}
		/* The output goes to the sink a window at a time: a call and
		 * a copy per window, not per record. */
		if (out.len >= PARTITION_WINDOW_BYTES &&
		    flush_single(job, &out, err) < 0) {
			*io_error = 1;
			rc = -1;
			break;
		}
		if (job->progress)
			job->progress(job->progress_ctx, rec.raw_len);
	}
	if (rc == 0 && flush_single(job, &out, err) < 0) {
		*io_error = 1;
		rc = -1;
	}
	pb_buf_free(&out);
	trace_reader_close(rd);
	return rc < 0 ? -1 : 0;
}

/* ---- several threads ---------------------------------------------------------- */

/* Windows in flight at most: threads + 2 (the leader fills one while the
 * workers have the others), up to this many.  Each window holds a share
 * per thread, so memory grows with threads times windows; more windows
 * than this buy nothing, since every worker has a part of each. */
#define PARTITION_MAX_SLOTS 6

/* A window is FREE, READY (filled by the leader; workers busy with it) or
 * DONE (every worker finished it; the leader emits it and frees it). */
enum { FREE, READY, DONE };

/* A record copied into the window's input for a worker: enough to hand
 * it on without parsing it again. */
struct in_rec {
	uint64_t data_offset; /* of its payload in the file */
	uint32_t raw_len;     /* tag, length and payload */
	uint32_t in_off;      /* where it is in the window's `in` */
	uint32_t field;
	uint8_t wt;
	uint8_t hdr;          /* bytes of tag and length */
	bool unread;          /* not read by the leader: the worker reads it */
};

/* One thread's share of a window, on cache lines of its own. */
struct share {
	struct pb_buf out;      /* output of its records, one after another */
	size_t n_in;            /* records of the window that are its */
	size_t n_out;           /* ... handled so far */
	bool failed;
	uint64_t failed_at;     /* file offset of the record that failed */
	struct vp_error err;
} __attribute__((aligned(128)));

/* The workers' records of a window are copied into one input of the
 * window's, not one per worker: a window then holds a window's bytes of
 * input however many threads there are, where buffers of each worker's
 * would each keep as much as the busiest of its windows once needed. */
struct window {
	int state;              /* under pool.mu */
	uint64_t seqno;         /* which window of the file */
	unsigned pending;       /* workers not done yet, under pool.mu */
	uint8_t owners[PARTITION_WINDOW_RECORDS];
	struct in_rec *recs;    /* [PARTITION_WINDOW_RECORDS]: of workers' */
	size_t *out_len;        /* [PARTITION_WINDOW_RECORDS]: each output's */
	struct pb_buf in;       /* the workers' records, one after another */
	size_t count;           /* records in the window */
	size_t bytes;           /* input bytes in the window */
	struct share *sh;       /* one per thread */
};

struct pool {
	const struct partition_job *job;
	struct trace_reader *rd; /* the leader's; workers only read_at */
	unsigned n, slots;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct window *win;
	bool stop;
};

struct worker_arg {
	struct pool *pl;
	unsigned t;
};

/* The thread of a sequence: the plan's, or one of the workers by the hash
 * (never the leader, whose reading, copying and emitting take much of its
 * time; stateless packets let it help where there is time). */
static unsigned seq_owner(const struct partition_job *job, uint32_t seq_id,
			  unsigned n)
{
	if (seq_id < job->n_seq_owner && job->seq_owner[seq_id] < n)
		return job->seq_owner[seq_id];
	return 1 + partition_owner(seq_id, n - 1);
}

/* A packet of this many bytes or more (up to a window) that a worker
 * handles is read by that worker, not by the leader: the leader reads
 * only its top-level fields' heads, to know whose it is, and so reads
 * and copies far fewer bytes (ftrace bundles: most of them). */
#ifndef PARTITION_DIRECT_MIN
#define PARTITION_DIRECT_MIN (8u << 10)
#endif
#define DIRECT_READ_MAX (PARTITION_DIRECT_MIN < PARTITION_WINDOW_BYTES \
			 ? PARTITION_DIRECT_MIN : PARTITION_WINDOW_BYTES)

/* Packets below this many bytes are never spread by bytes. */
#define PARTITION_SPREAD_MIN 512

/* The packet's trusted_packet_sequence_id (the last one, as a decoder
 * reads it), 0 when it has none or is malformed (then the thread of
 * sequence 0 takes it, and reports it).  Values other than the id's are
 * skipped, not decoded: this runs on the leader for every packet. */
static uint32_t peek_seq(const struct trace_record *rec)
{
	const uint8_t *p = rec->data, *end = rec->data + rec->len;
	uint32_t seq = 0;
	uint64_t tag, v;

	while (p < end) {
		if (*p < 0x80)
			tag = *p++;
		else if (!pb_read_varint(&p, end, &tag))
			return 0;
		switch (tag & 7) {
		case PB_WT_VARINT:
			if (tag == (TP_TRUSTED_PACKET_SEQUENCE_ID << 3 |
				    PB_WT_VARINT)) {
				if (!pb_read_varint(&p, end, &v))
					return 0;
				/* as the decoder takes it (trace_model.h) */
				seq = v <= UINT32_MAX ? (uint32_t)v : 0;
				break;
			}
			while (p < end && *p >= 0x80)
				p++;
			if (p++ >= end)
				return 0;
			break;
		case PB_WT_LEN:
			if (!pb_read_varint(&p, end, &v) ||
			    v > (uint64_t)(end - p))
				return 0;
			p += v;
			break;
		case PB_WT_FIXED64:
			if (end - p < 8)
				return 0;
			p += 8;
			break;
		case PB_WT_FIXED32:
			if (end - p < 4)
				return 0;
			p += 4;
			break;
		default:
			return 0;
		}
	}
	return seq;
}

/* The thread of a packet of PARTITION_SPREAD_MIN bytes or more, pkt (or
 * its top-level fields, their bodies left out: see head_owner): its
 * sequence's, or when it touches no sequence state the one with the
 * least to do in this window. */
static unsigned spread_owner(const struct partition_job *job,
			     const uint8_t *pkt, size_t len, unsigned n,
			     const size_t *load)
{
	uint32_t seq = 0;

	if (!job->stateless(pkt, len, &seq))
		return seq_owner(job, seq, n);
	/* The leader also reads, copies and emits, which costs it about
	 * one and a half times what handling a share of the bytes does
	 * (ftrace bundles, two threads): its bytes weigh two and a half
	 * times (with three, it idled a fifth of the time, and the merge
	 * took 5% longer). */
	unsigned best = 0;
	size_t best_load = 5 * load[0] / 2;
	for (unsigned t = 1; t < n; t++)
		if (load[t] < best_load) {
			best = t;
			best_load = load[t];
		}
	return best;
}

/* The thread that owns a record: packets of sequence state by sequence id,
 * stateless packets whichever thread has the least to do in this window,
 * everything else (and anything malformed, which the leader then reports)
 * the leader. */
static unsigned owner_of(const struct partition_job *job,
			 const struct trace_record *rec, unsigned n,
			 const size_t *load)
{
	if (rec->field != TRACE_PACKET_FIELD || rec->wt != PB_WT_LEN)
		return 0;
	/* A small packet goes with its sequence: spreading it would buy
	 * less than finding out whether it may be spread costs. */
	if (!job->stateless || rec->len < PARTITION_SPREAD_MIN)
		return seq_owner(job, peek_seq(rec), n);
	return spread_owner(job, rec->data, rec->len, n, load);
}

/* Top-level fields of a packet head_owner looks at, at most. */
#define HEAD_OWNER_FIELDS 64

/* The owner of rec, a packet of PARTITION_DIRECT_MIN bytes or more that
 * the reader left unread, from its top-level fields alone (what the job's
 * `stateless` and peek_seq look at): their numbers and varints, the
 * bodies of length-delimited ones left out (skel is scratch).  Returns 1
 * with *owner set; 0 when it cannot tell (a packet cut short, malformed
 * or of very many fields: read it whole and ask owner_of); -1 on a read
 * error. */
static int head_owner(const struct partition_job *job, struct trace_reader *rd,
		      const struct trace_record *rec, unsigned n,
		      const size_t *load, struct pb_buf *skel,
		      unsigned *owner, struct vp_error *err)
{
	uint64_t off = rec->data_offset, end = rec->offset + rec->raw_len;

	if (!job->stateless || rec->field != TRACE_PACKET_FIELD ||
	    rec->wt != PB_WT_LEN || end > trace_reader_size(rd))
		return 0;
	pb_buf_reset(skel);
	for (unsigned i = 0; off < end; i++) {
		struct trace_field_head h;
		int rc = trace_reader_field_head(rd, off, end,
						 2 * PB_MAX_VARINT_LEN, &h, err);
		if (rc <= 0 || i == HEAD_OWNER_FIELDS)
			return rc < 0 ? -1 : 0;
		if (h.wt == PB_WT_LEN) {
			pb_put_tag(skel, h.num, h.wt);
			pb_put_raw_varint(skel, 0);
		} else if (h.size <= h.got) { /* varint, fixed: as it is */
			pb_put_raw(skel, h.p, (size_t)h.size);
		} else {
			return 0; /* runs past the packet: malformed */
		}
		off += h.size;
	}
	*owner = spread_owner(job, skel->data, skel->len, n, load);
	return 1;
}

/* Places rec, a packet of PARTITION_DIRECT_MIN up to a window's bytes the
 * reader left unread: when a worker owns it (head_owner), *owner and
 * *unread are set and the reader moves past it, for the worker to read
 * it itself (trace_reader_read_at); else it is read whole here.  Returns
 * 1, or -1 on an error. */
static int place_unread(const struct partition_job *job,
			struct trace_reader *rd, struct trace_record *rec,
			unsigned n, const size_t *load, struct pb_buf *skel,
			unsigned *owner, bool *unread, struct vp_error *err)
{
	int rc = head_owner(job, rd, rec, n, load, skel, owner, err);

	if (rc < 0)
		return -1;
	if (rc > 0 && *owner != 0) {
		if (trace_reader_seek(rd, rec->offset + rec->raw_len, err) < 0)
			return -1;
		*unread = true;
		return 1;
	}
	return trace_reader_reread(rd, rec, rec, err);
}

/* Handles worker t's records of window w, as the leader framed them. */
static void work_share(const struct partition_job *job,
		       struct trace_reader *rd, unsigned t, struct window *w)
{
	struct share *s = &w->sh[t];

	pb_buf_reset(&s->out);
	s->n_out = 0;
	s->failed = false;
	for (size_t i = 0; i < w->count && s->n_out < s->n_in; i++) {
		if (w->owners[i] != t)
			continue;
		const struct in_rec *m = &w->recs[i];
		const uint8_t *raw = w->in.data + m->in_off;
		struct trace_record tr = {
			.field = m->field,
			.wt = m->wt,
			.data = raw + m->hdr,
			.len = m->raw_len - m->hdr,
			.raw = raw,
			.raw_len = m->raw_len,
			.offset = m->data_offset - m->hdr,
			.data_offset = m->data_offset,
		};
		if (m->unread &&
		    trace_reader_read_at(rd, tr.offset, (uint8_t *)tr.raw,
					 tr.raw_len, &s->err) < 0) {
			s->failed = true;
			s->failed_at = m->data_offset;
			return;
		}
		if (run_record(job, job->ctx[t], &tr, &s->out, &w->out_len[i],
			       &s->err) < 0) {
			s->failed = true;
			s->failed_at = m->data_offset;
			return;
		}
		s->n_out++;
	}
}

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	struct pool *pl = wa->pl;
	unsigned t = wa->t;

	for (uint64_t n = 0;; n++) {
		struct window *w = &pl->win[n % pl->slots];
		pthread_mutex_lock(&pl->mu);
		while (!(w->state == READY && w->seqno == n) && !pl->stop)
			pthread_cond_wait(&pl->cv, &pl->mu);
		bool go = w->state == READY && w->seqno == n;
		pthread_mutex_unlock(&pl->mu);
		if (!go)
			return NULL;
		if (w->sh[t].n_in) {
			work_share(pl->job, pl->rd, t, w);
		} else {
			pb_buf_reset(&w->sh[t].out);
			w->sh[t].n_out = 0;
		}
		pthread_mutex_lock(&pl->mu);
		if (--w->pending == 0) {
			w->state = DONE;
			pthread_cond_broadcast(&pl->cv);
		}
		pthread_mutex_unlock(&pl->mu);
	}
}

/* Interleaves the threads' outputs of a finished window into the sink:
 * the outputs of consecutive records of one thread lie one after another
 * in its buffer, and are one piece; the pieces go to the sink
 * PARTITION_SINK_IOV at a time, from the threads' buffers. */
static int emit_window(const struct pool *pl, struct window *w,
		       struct vp_error *err)
{
	const struct partition_job *job = pl->job;
	size_t pos[PARTITION_MAX_THREADS], next[PARTITION_MAX_THREADS];
	struct iovec iov[PARTITION_SINK_IOV];
	int n_iov = 0;

	memset(pos, 0, pl->n * sizeof(pos[0]));
	memset(next, 0, pl->n * sizeof(next[0]));
	for (size_t i = 0; i < w->count; i++) {
		unsigned t = w->owners[i];
		const struct share *s = &w->sh[t];
		if (next[t]++ >= s->n_out || w->out_len[i] > s->out.len - pos[t])
			return vp_errorf(err, "%s: internal error: window out "
					 "of step", job->path);
		size_t len = w->out_len[i];
		uint8_t *p = s->out.data + pos[t];
		pos[t] += len;
		if (!len)
			continue;
		if (n_iov && (uint8_t *)iov[n_iov - 1].iov_base +
					     iov[n_iov - 1].iov_len == p) {
			iov[n_iov - 1].iov_len += len;
			continue;
		}
		if (n_iov == PARTITION_SINK_IOV) {
			if (job->sink && job->sink(job->sink_ctx, iov, n_iov, err) < 0)
				return -1;
			n_iov = 0;
		}
		iov[n_iov++] = (struct iovec){p, len};
	}
	if (job->sink && n_iov && job->sink(job->sink_ctx, iov, n_iov, err) < 0)
		return -1;
	return 0;
}

/* A share's output keeps the room the busiest of its windows needed.
 * When the work moves from thread to thread (sequences busy one after
 * another), every share of every window in flight would come to keep a
 * window's worth, a memory that grows with the threads.  So room of more
 * than SHARE_KEEP bytes of which this window used less than a quarter
 * is given back; a share whose load holds steady keeps its own. */
#define SHARE_KEEP ((size_t)64 << 10)

static bool idle_room(size_t room, size_t used)
{
	return room > SHRINK_ABOVE || (room > SHARE_KEEP && used < room / 4);
}

static void reset_buf(struct pb_buf *b)
{
	if (idle_room(b->cap, b->len)) {
		pb_buf_free(b);
		pb_buf_init(b);
	} else {
		pb_buf_reset(b);
	}
}

/* Empties a share of an emitted window for the next one. */
static void share_reset(struct share *s)
{
	reset_buf(&s->out);
	s->n_in = 0;
	s->n_out = 0;
	s->failed = false;
}

/* Finishes window w: waits for the workers, then emits it.  Returns 0, -1
 * (err set), or -2 when the sink failed. */
static int finish_window(struct pool *pl, struct window *w,
			 struct vp_error *err)
{
	int rc = 0;

	pthread_mutex_lock(&pl->mu);
	while (w->state != DONE && !pl->stop)
		pthread_cond_wait(&pl->cv, &pl->mu);
	bool done = w->state == DONE;
	pthread_mutex_unlock(&pl->mu);
	if (!done)
		return -1;
	/* Of the workers that failed, the one whose record comes first in
	 * the file: a worker stops at its first failure, but another may
	 * have failed earlier in the window. */
	const struct share *first = NULL;
	for (unsigned t = 1; t < pl->n; t++)
		if (w->sh[t].failed &&
		    (!first || w->sh[t].failed_at < first->failed_at))
			first = &w->sh[t];
	if (first) {
		*err = first->err;
		rc = -1;
	}
	if (!rc)
		rc = emit_window(pl, w, err) < 0 ? -2 : 0;
	for (unsigned t = 0; t < pl->n; t++)
		share_reset(&w->sh[t]);
	pb_buf_reset(&w->in);
	shrink(&w->in);
	w->count = 0;
	w->bytes = 0;
	pthread_mutex_lock(&pl->mu);
	w->state = FREE;
	pthread_mutex_unlock(&pl->mu);
	return rc;
}

static void pool_free(struct pool *pl)
{
	for (unsigned i = 0; i < pl->slots; i++) {
		struct window *w = &pl->win[i];
		for (unsigned t = 0; w->sh && t < pl->n; t++)
			pb_buf_free(&w->sh[t].out);
		free(w->sh);
		pb_buf_free(&w->in);
		free(w->recs);
		free(w->out_len);
	}
	free(pl->win);
	pthread_cond_destroy(&pl->cv);
	pthread_mutex_destroy(&pl->mu);
}


/* Hands the filled window w, the n-th of the file, to the workers. */
static void dispatch(struct pool *pl, struct window *w, uint64_t n)
{
	pthread_mutex_lock(&pl->mu);
	w->seqno = n;
	w->pending = pl->n - 1;
	w->state = READY;
	pthread_cond_broadcast(&pl->cv);
	pthread_mutex_unlock(&pl->mu);
}

/* Finishes the oldest windows in flight (*first_pending .. n - 1) until
 * at most `keep` are left; the first failure sets *status and *err. */
static void drain(struct pool *pl, uint64_t *first_pending, uint64_t n,
		  uint64_t keep, int *status, struct vp_error *err,
		  int *io_error)
{
	while (*first_pending < n && n - *first_pending > keep) {
		struct vp_error werr;
		int f = finish_window(pl, &pl->win[*first_pending % pl->slots],
				      &werr);
		(*first_pending)++;
		if (f < 0 && !*status) {
			*status = -1;
			*err = werr;
			*io_error = f == -2;
		}
	}
}

/* ---- records larger than a window (partition_large.c) ------------------- */

static unsigned large_owner(const struct partition_job *job,
			    const struct trace_record *rec, unsigned n)
{
	size_t load[PARTITION_MAX_THREADS] = {0};
	return owner_of(job, rec, n, load);
}

/* Handles rec, a record larger than a window that the reader left
 * unread, with its owner's context (of n threads), and hands its output
 * to the sink.  out is scratch.  Returns 0, or -1 (*io_error set when the
 * sink failed). */
static int run_unread(const struct partition_job *job, struct trace_reader *rd,
		      struct trace_record *rec, unsigned n, struct pb_buf *out,
		      struct vp_error *err, int *io_error)
{
	size_t raw_len = rec->raw_len;
	int rc = partition_large_run(job, rd, rec, n, large_owner, out, err,
				     io_error);

	shrink(out);
	if (rc == 0 && job->progress)
		job->progress(job->progress_ctx, raw_len);
	return rc;
}

static int run_many(const struct partition_job *job, struct vp_error *err,
		    int *io_error)
{
	struct pool pl;
	struct trace_reader *rd;
	struct trace_record rec;
	uint64_t n = 0, first_pending = 0; /* windows filled / not emitted */
	int rc, status = 0;
	pthread_t tid[PARTITION_MAX_THREADS];
	struct worker_arg wa[PARTITION_MAX_THREADS];
	unsigned started = 0;
	size_t load[PARTITION_MAX_THREADS];

	if (merge_reader_open(&rd, job->path, -1, err) < 0)
		return -1;
	memset(&pl, 0, sizeof(pl));
	pl.job = job;
	pl.rd = rd;
	pl.n = job->threads;
	pl.slots = pl.n + 2 < PARTITION_MAX_SLOTS ? pl.n + 2
						  : PARTITION_MAX_SLOTS;
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.cv, NULL);
	pl.win = vp_xcalloc(pl.slots, sizeof(*pl.win));
	for (unsigned i = 0; i < pl.slots; i++) {
		struct window *w = &pl.win[i];
		w->sh = vp_xaligned_alloc(128, pl.n * sizeof(*w->sh));
		memset(w->sh, 0, pl.n * sizeof(*w->sh));
		for (unsigned t = 0; t < pl.n; t++)
			pb_buf_init(&w->sh[t].out);
		/* pages are only touched as records come */
		w->recs = vp_xcalloc(PARTITION_WINDOW_RECORDS,
				     sizeof(*w->recs));
		w->out_len = vp_xcalloc(PARTITION_WINDOW_RECORDS,
					sizeof(*w->out_len));
		pb_buf_init(&w->in);
	}
	for (unsigned t = 1; t < pl.n; t++) {
		wa[t].pl = &pl;
		wa[t].t = t;
		if (pthread_create(&tid[t], NULL, worker_main, &wa[t]) != 0)
			break;
		started++;
	}
	if (started + 1 < pl.n) { /* no threads to be had: do it alone */
		pthread_mutex_lock(&pl.mu);
		pl.stop = true;
		pthread_cond_broadcast(&pl.cv);
		pthread_mutex_unlock(&pl.mu);
		for (unsigned t = 1; t <= started; t++)
			pthread_join(tid[t], NULL);
		pool_free(&pl);
		trace_reader_close(rd);
		return run_single(job, err, io_error);
	}

	struct window *w = &pl.win[0];
	struct pb_buf big_out, skel;
	pb_buf_init(&big_out);
	pb_buf_init(&skel);
	memset(load, 0, sizeof(load));
	for (;;) {
		bool unread = false;
		unsigned owner = 0;
		rc = trace_reader_next_head(rd, &rec, DIRECT_READ_MAX, err);
		if (rc > 0 && cancelled(job))
			rc = vp_errorf(err, "interrupted");
		if (rc > 0 && !rec.raw && rec.raw_len <= PARTITION_WINDOW_BYTES)
			rc = place_unread(job, rd, &rec, pl.n, load, &skel,
					  &owner, &unread, err);
		if (rc > 0 && !rec.raw && !unread) { /* over a window */
			if (w->count) {
				dispatch(&pl, w, n++);
				memset(load, 0, sizeof(load));
				w = &pl.win[n % pl.slots];
			}
			drain(&pl, &first_pending, n, 0, &status, err,
			      io_error);
			if (status || run_unread(job, rd, &rec, pl.n, &big_out,
						 err, io_error) < 0) {
				status = -1;
				break;
			}
			continue;
		}
		if (rc > 0) {
			if (!unread)
				owner = owner_of(job, &rec, pl.n, load);
			struct share *s = &w->sh[owner];
			w->owners[w->count] = (uint8_t)owner;
			load[owner] += rec.raw_len;
			if (owner == 0) {
				if (run_record(job, job->ctx[0], &rec, &s->out,
					       &w->out_len[w->count], err) < 0)
					rc = -1;
				s->n_out++;
			} else {
				s->n_in++;
				w->recs[w->count] = (struct in_rec){
					.data_offset = rec.data_offset,
					.raw_len = (uint32_t)rec.raw_len,
					.in_off = (uint32_t)w->in.len,
					.field = rec.field,
					.wt = rec.wt,
					.hdr = (uint8_t)(rec.data_offset - rec.offset),
					.unread = unread,
				};
				if (unread) { /* its place: the worker reads it */
					pb_buf_reserve(&w->in, rec.raw_len);
					w->in.len += rec.raw_len;
				} else {
					pb_put_raw(&w->in, rec.raw, rec.raw_len);
				}
			}
			w->count++;
			w->bytes += rec.raw_len;
			if (job->progress)
				job->progress(job->progress_ctx, rec.raw_len);
		}
		/* A failure of the leader's own comes after everything the
		 * workers were already given: finish those first, since one
		 * of them may have failed earlier in the file. */
		if (rc <= 0 || w->count == PARTITION_WINDOW_RECORDS ||
		    w->bytes >= PARTITION_WINDOW_BYTES) {
			dispatch(&pl, w, n++);
			memset(load, 0, sizeof(load));
			/* Keep at most slots - 1 windows in flight. */
			drain(&pl, &first_pending, n,
			      rc <= 0 ? 0 : pl.slots - 1, &status, err,
			      io_error);
			if (status)
				rc = -1;
			if (rc <= 0)
				break;
			w = &pl.win[n % pl.slots];
		}
	}
	if (rc < 0)
		status = -1;
	/* After a failure in run_unread, windows before it may be in
	 * flight */
	drain(&pl, &first_pending, n, 0, &status, err, io_error);
	pb_buf_free(&big_out);
	pb_buf_free(&skel);

	pthread_mutex_lock(&pl.mu);
	pl.stop = true;
	pthread_cond_broadcast(&pl.cv);
	pthread_mutex_unlock(&pl.mu);
	for (unsigned t = 1; t < pl.n; t++)
		pthread_join(tid[t], NULL);
	trace_reader_close(rd);
	pool_free(&pl);
	return status;
}

int partition_run_record(const struct partition_job *job, void *ctx, int fd,
			 struct vp_error *err)
{
	struct partition_job one = *job;
	struct trace_reader *rd;
	struct trace_record rec;
	struct pb_buf out;
	int io_error = 0;

	one.threads = 1;
	one.ctx[0] = ctx;
	if (merge_reader_open(&rd, job->path, fd, err) < 0)
		return -1;
	pb_buf_init(&out);
	/* a bound of 0: the record is left unread, for the large path */
	int rc = trace_reader_next_head(rd, &rec, 0, err);
	if (rc == 0)
		rc = vp_errorf(err, "%s: internal error: no record to handle",
			       job->path);
	if (rc > 0)
		rc = partition_large_run(&one, rd, &rec, 1, NULL, &out, err,
					 &io_error);
	pb_buf_free(&out);
	trace_reader_close(rd);
	return rc < 0 ? -1 : 0;
}

int partition_run(const struct partition_job *job, struct vp_error *err,
		  int *io_error)
{
	*io_error = 0;
	if (job->threads < 2)
		return run_single(job, err, io_error);
	return run_many(job, err, io_error);
}
