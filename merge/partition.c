/*
 * partition.c - threads over a trace file, partitioned by sequence (or by
 * bytes, for packets without sequence state), output back in file order
 * (see partition.h).
 *
 * The first thread ("leader") reads the file once.  It cuts it into
 * windows of at most PARTITION_WINDOW_BYTES (or PARTITION_WINDOW_RECORDS
 * records), notes every record's owner, handles its own records into its
 * output of the window and copies each worker's into that worker's input;
 * the workers handle their inputs while the leader reads on.  Each thread
 * notes the length of each record's output, so the leader can interleave
 * the threads' outputs back into file order before it hands the window to
 * the sink, a run of consecutive records of one thread at a time.  At most `slots`
 * windows are in flight: the leader waits for the oldest before it fills
 * another, which is the back-pressure that bounds memory.
 */
#include "partition.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

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
 * as a share of handling every packet (about half, measured on packets of
 * tens of bytes, where that share is largest): its start in the plan. */
#define LEADER_LOAD_NUM 1
#define LEADER_LOAD_DEN 2

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

	if (trace_reader_open(&rd, job->path, err) < 0)
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

/* A window is FREE, READY (filled by the leader; workers busy with it) or
 * DONE (every worker finished it; the leader emits it and frees it). */
enum { FREE, READY, DONE };

/* A record copied into a worker's input: enough to hand it on without
 * parsing it again. */
struct in_rec {
	uint64_t data_offset; /* of its payload in the file */
	uint32_t raw_len;     /* tag, length and payload */
	uint32_t field;
	uint8_t wt;
	uint8_t hdr;          /* bytes of tag and length */
};

/* One thread's share of a window, on cache lines of its own. */
struct share {
	struct pb_buf in;       /* worker's records, one after another (t >= 1) */
	struct pb_buf out;      /* output of its records, one after another */
	struct in_rec *recs;    /* where each record of `in` is, and what */
	size_t n_in;
	size_t *out_len;        /* length of each record's output in `out` */
	size_t n_out;
	bool failed;
	uint64_t failed_at;     /* file offset of the record that failed */
	struct vp_error err;
} __attribute__((aligned(128)));

struct window {
	int state;              /* under pool.mu */
	uint64_t seqno;         /* which window of the file */
	unsigned pending;       /* workers not done yet, under pool.mu */
	uint8_t owners[PARTITION_WINDOW_RECORDS];
	size_t count;           /* records in the window */
	size_t bytes;           /* input bytes in the window */
	struct share *sh;       /* one per thread */
};

struct pool {
	const struct partition_job *job;
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

/* The thread that owns a record: packets of sequence state by sequence id,
 * stateless packets whichever thread has the least to do in this window,
 * everything else (and anything malformed, which the leader then reports)
 * the leader. */
static unsigned owner_of(const struct partition_job *job,
			 const struct trace_record *rec, unsigned n,
			 const size_t *load)
{
	uint32_t seq = 0;

	if (rec->field != TRACE_PACKET_FIELD || rec->wt != PB_WT_LEN)
		return 0;
	if (!job->stateless)
		return seq_owner(job, peek_seq(rec), n);
	/* A small packet goes with its sequence: spreading it would buy
	 * less than finding out whether it may be spread costs. */
	if (rec->len < PARTITION_SPREAD_MIN)
		return seq_owner(job, peek_seq(rec), n);
	if (!job->stateless(rec->data, rec->len, &seq))
		return seq_owner(job, seq, n);
	/* The leader also reads, copies and emits, which costs it about
	 * twice what handling a share of the bytes does (ftrace bundles,
	 * two threads): its bytes weigh three times. */
	unsigned best = 0;
	size_t best_load = 3 * load[0];
	for (unsigned t = 1; t < n; t++)
		if (load[t] < best_load) {
			best = t;
			best_load = load[t];
		}
	return best;
}

/* Handles worker t's records of one window, as the leader framed them. */
static void work_share(const struct partition_job *job, unsigned t,
		       struct share *s)
{
	const uint8_t *raw = s->in.data;

	pb_buf_reset(&s->out);
	s->n_out = 0;
	s->failed = false;
	for (size_t k = 0; k < s->n_in; k++) {
		const struct in_rec *m = &s->recs[k];
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
		raw += m->raw_len;
		if (run_record(job, job->ctx[t], &tr, &s->out, &s->out_len[k],
			       &s->err) < 0) {
			s->failed = true;
			s->failed_at = m->data_offset;
			return;
		}
		s->n_out = k + 1;
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
			work_share(pl->job, t, &w->sh[t]);
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
		if (next[t] >= s->n_out ||
		    s->out_len[next[t]] > s->out.len - pos[t])
			return vp_errorf(err, "%s: internal error: window out "
					 "of step", job->path);
		size_t len = s->out_len[next[t]++];
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
	for (unsigned t = 0; t < pl->n; t++) {
		pb_buf_reset(&w->sh[t].in);
		pb_buf_reset(&w->sh[t].out);
		shrink(&w->sh[t].in);
		shrink(&w->sh[t].out);
		w->sh[t].n_in = 0;
		w->sh[t].n_out = 0;
		w->sh[t].failed = false;
	}
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
		for (unsigned t = 0; w->sh && t < pl->n; t++) {
			pb_buf_free(&w->sh[t].in);
			pb_buf_free(&w->sh[t].out);
			free(w->sh[t].recs);
			free(w->sh[t].out_len);
		}
		free(w->sh);
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

/* ---- records larger than a window ----------------------------------------
 *
 * Such a record is handled alone, with its owner's context, once every
 * window before it is out (the workers are idle then), and its output
 * goes straight to the sink.  When the job says which packet fields its
 * function copies byte for byte whatever they hold (job->passes), the
 * record is not read whole: runs of such fields of PARTITION_STREAM_MIN
 * bytes or more stay in the file.  The function sees a "skeleton" of the
 * packet, each run replaced by an empty field of the run's first number,
 * and its output gets each run back, passed from the file to the sink in
 * pieces.  A packet of 60 MiB of a payload nobody rewrites then costs a
 * few MiB.  Anything else (not a packet, malformed or cut short, a
 * skeleton over PARTITION_SKELETON_MAX) is read whole, as before, and so
 * is a packet the function fails on, so that its message names the
 * offset in the file. */

#ifndef PARTITION_STREAM_MIN /* (fuzz builds set smaller ones) */
#define PARTITION_STREAM_MIN (4u << 10)
#endif
#ifndef PARTITION_SKELETON_MAX
#define PARTITION_SKELETON_MAX (4u << 20)
#endif

/* A run of passing fields left in the file. */
struct stream_run {
	uint64_t off, len;   /* its bytes in the file */
	size_t ph_len;       /* its placeholder's: a tag and a zero length */
	size_t pass_index;   /* its placeholder's place among the skeleton's
			      * passing fields */
};

struct skeleton {
	struct pb_buf raw;       /* tag, length and the skeleton packet */
	struct pb_buf pkt;       /* the skeleton packet being built */
	struct stream_run *runs;
	size_t n_runs, cap_runs;
};

static int append_piece(void *ctx, const uint8_t *p, size_t n,
			struct vp_error *err)
{
	(void)err;
	pb_put_raw(ctx, p, n);
	return 0;
}

/* Ends the run of passing fields [*run_off, off): left in the file, a
 * placeholder in its place, when long enough; else copied in. */
static bool end_run(struct trace_reader *rd, struct skeleton *k,
		    uint64_t *run_off, uint64_t off, uint32_t run_num,
		    size_t *n_pass, size_t run_fields, struct vp_error *err)
{
	uint64_t len = off - *run_off;

	if (len >= PARTITION_STREAM_MIN) {
		size_t before = k->pkt.len;
		pb_put_tag(&k->pkt, run_num, PB_WT_LEN);
		pb_put_raw_varint(&k->pkt, 0);
		VP_XGROW(k->runs, k->cap_runs, k->n_runs + 1);
		k->runs[k->n_runs++] = (struct stream_run){
			.off = *run_off, .len = len,
			.ph_len = k->pkt.len - before, .pass_index = *n_pass};
		(*n_pass)++;
	} else if (len) {
		if (trace_reader_pass(rd, *run_off, len, append_piece, &k->pkt,
				      err) < 0)
			return false;
		*n_pass += run_fields;
	}
	*run_off = off;
	return k->pkt.len <= PARTITION_SKELETON_MAX;
}

/* Builds the skeleton of rec (a record the reader left unread): false
 * when it is to be read whole instead. */
static bool skim_record(const struct partition_job *job,
			struct trace_reader *rd, const struct trace_record *rec,
			struct skeleton *k, struct vp_error *err)
{
	uint64_t off = rec->data_offset, end = rec->offset + rec->raw_len;
	uint64_t run_off = off;
	uint32_t run_num = 0, num = 0;
	size_t n_pass = 0, run_fields = 0;

	pb_buf_reset(&k->pkt);
	pb_buf_reset(&k->raw);
	k->n_runs = 0;
	if (!job->passes || rec->field != TRACE_PACKET_FIELD ||
	    rec->wt != PB_WT_LEN || trace_reader_size(rd) < end)
		return false;
	while (off < end) {
		struct trace_field_head h;
		if (trace_reader_field_head(rd, off, end, 2 * PB_MAX_VARINT_LEN,
					    &h, err) <= 0)
			return false;
		uint64_t size = h.size;
		num = h.num;
		if (job->passes(num)) {
			if (!run_fields)
				run_num = num;
			run_fields++;
		} else {
			if (!end_run(rd, k, &run_off, off, run_num, &n_pass,
				     run_fields, err))
				return false;
			run_fields = 0;
			run_off = off + size;
			if (trace_reader_pass(rd, off, size, append_piece,
					      &k->pkt, err) < 0 ||
			    k->pkt.len > PARTITION_SKELETON_MAX)
				return false;
		}
		off += size;
	}
	if (!end_run(rd, k, &run_off, off, run_num, &n_pass, run_fields, err))
		return false;
	pb_put_bytes(&k->raw, TRACE_PACKET_FIELD, k->pkt.data, k->pkt.len);
	return true;
}

/* Hands n bytes to the sink; *io_error on its failure. */
static int sink_bytes(const struct partition_job *job, const uint8_t *p,
		      size_t n, int *io_error, struct vp_error *err)
{
	struct iovec v = {(void *)p, n};

	if (!job->sink || !n)
		return 0;
	if (job->sink(job->sink_ctx, &v, 1, err) < 0) {
		*io_error = 1;
		return -1;
	}
	return 0;
}

struct pass_to_sink {
	const struct partition_job *job;
	int *io_error;
};

static int pass_piece(void *ctx, const uint8_t *p, size_t n,
		      struct vp_error *err)
{
	struct pass_to_sink *ps = ctx;
	return sink_bytes(ps->job, p, n, ps->io_error, err);
}

/* Emits the function's output for a skeleton (one packet record) with
 * each placeholder replaced by its run from the file. */
static int emit_skeleton_output(const struct partition_job *job,
				struct trace_reader *rd,
				const struct skeleton *k,
				const struct pb_buf *out, int *io_error,
				struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field rec, f;
	struct pass_to_sink ps = {job, io_error};
	uint8_t hdr[1 + PB_MAX_VARINT_LEN];

	pb_reader_init(&r, out->data, out->len);
	if (!pb_next(&r, &rec) || rec.num != TRACE_PACKET_FIELD ||
	    rec.wt != PB_WT_LEN || rec.end != out->data + out->len)
		return vp_errorf(err, "%s: internal error: a large packet's "
				 "output is not one packet", job->path);
	/* the output's length: each placeholder's empty body (one byte of
	 * length) becomes the run, which holds its own tags */
	uint64_t len = rec.len;
	for (size_t i = 0; i < k->n_runs; i++)
		len += k->runs[i].len - k->runs[i].ph_len;
	hdr[0] = TRACE_PACKET_FIELD << 3 | PB_WT_LEN;
	size_t n_hdr = 1 + pb_encode_varint(hdr + 1, len);
	if (sink_bytes(job, hdr, n_hdr, io_error, err) < 0)
		return -1;

	const uint8_t *run = rec.data;
	size_t n_pass = 0, next = 0;
	pb_reader_init(&r, rec.data, rec.len);
	while (next < k->n_runs && pb_next(&r, &f)) {
		if (!job->passes(f.num))
			continue;
		if (n_pass++ != k->runs[next].pass_index)
			continue;
		const struct stream_run *sr = &k->runs[next];
		if (f.wt != PB_WT_LEN || f.len != 0 ||
		    (size_t)(f.end - f.start) != sr->ph_len)
			break;
		next++;
		if (sink_bytes(job, run, (size_t)(f.start - run), io_error,
			       err) < 0 ||
		    trace_reader_pass(rd, sr->off, sr->len, pass_piece, &ps,
				      err) < 0)
			return -1;
		run = f.end;
	}
	if (next < k->n_runs)
		return vp_errorf(err, "%s: internal error: a large packet's "
				 "output lost a field it passes", job->path);
	return sink_bytes(job, run, (size_t)(rec.data + rec.len - run),
			  io_error, err);
}

/* Handles rec, a record larger than a window that the reader left
 * unread, with its owner's context (of n threads), and hands its output
 * to the sink.  out is scratch.  Returns 0, or -1 (*io_error set when the
 * sink failed). */
static int run_unread(const struct partition_job *job, struct trace_reader *rd,
		      struct trace_record *rec, unsigned n, struct pb_buf *out,
		      struct vp_error *err, int *io_error)
{
	size_t load[PARTITION_MAX_THREADS] = {0};
	struct skeleton k;
	uint64_t end = rec->offset + rec->raw_len;
	size_t raw_len = rec->raw_len;
	int rc = -1;

	memset(&k, 0, sizeof(k));
	pb_buf_init(&k.raw);
	pb_buf_init(&k.pkt);
	pb_buf_reset(out);
	if (skim_record(job, rd, rec, &k, err)) {
		/* the skeleton as the record: the same sequence and the same
		 * stateless answer, as the runs hold neither */
		size_t hdr = k.raw.len - k.pkt.len;
		struct trace_record sk = *rec;
		sk.raw = k.raw.data;
		sk.raw_len = k.raw.len;
		sk.data = k.raw.data + hdr;
		sk.len = k.pkt.len;
		unsigned owner = n > 1 ? owner_of(job, &sk, n, load) : 0;
		struct vp_error ferr;
		if (run_record(job, job->ctx[owner], &sk, out, NULL, &ferr) == 0) {
			rc = k.n_runs ? emit_skeleton_output(job, rd, &k, out,
							     io_error, err)
				      : sink_bytes(job, out->data, out->len,
						   io_error, err);
			if (rc == 0)
				rc = trace_reader_seek(rd, end, err);
			goto done;
		}
		/* read whole below: its message names the right offset */
	}
	pb_buf_reset(out);
	if (trace_reader_reread(rd, rec, rec, err) < 0)
		goto done;
	unsigned owner = n > 1 ? owner_of(job, rec, n, load) : 0;
	rc = run_record(job, job->ctx[owner], rec, out, NULL, err);
	if (rc == 0)
		rc = sink_bytes(job, out->data, out->len, io_error, err);
done:
	pb_buf_free(&k.raw);
	pb_buf_free(&k.pkt);
	free(k.runs);
	pb_buf_reset(out);
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

	if (trace_reader_open(&rd, job->path, err) < 0)
		return -1;
	memset(&pl, 0, sizeof(pl));
	pl.job = job;
	pl.n = job->threads;
	pl.slots = pl.n + 2;
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.cv, NULL);
	pl.win = vp_xcalloc(pl.slots, sizeof(*pl.win));
	for (unsigned i = 0; i < pl.slots; i++) {
		struct window *w = &pl.win[i];
		w->sh = vp_xaligned_alloc(128, pl.n * sizeof(*w->sh));
		memset(w->sh, 0, pl.n * sizeof(*w->sh));
		for (unsigned t = 0; t < pl.n; t++) {
			pb_buf_init(&w->sh[t].in);
			pb_buf_init(&w->sh[t].out);
			if (t)
				w->sh[t].recs = vp_xcalloc(PARTITION_WINDOW_RECORDS,
							sizeof(struct in_rec));
			w->sh[t].out_len = vp_xcalloc(PARTITION_WINDOW_RECORDS,
						      sizeof(size_t));
		}
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
	struct pb_buf big_out;
	pb_buf_init(&big_out);
	memset(load, 0, sizeof(load));
	for (;;) {
		rc = trace_reader_next_head(rd, &rec, PARTITION_WINDOW_BYTES,
					    err);
		if (rc > 0 && cancelled(job))
			rc = vp_errorf(err, "interrupted");
		if (rc > 0 && !rec.raw) { /* larger than a window: unread */
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
			unsigned owner = owner_of(job, &rec, pl.n, load);
			struct share *s = &w->sh[owner];
			w->owners[w->count] = (uint8_t)owner;
			load[owner] += rec.raw_len;
			if (owner == 0) {
				if (run_record(job, job->ctx[0], &rec, &s->out,
					       &s->out_len[s->n_out], err) < 0)
					rc = -1;
				s->n_out++;
			} else {
				s->recs[s->n_in++] = (struct in_rec){
					.data_offset = rec.data_offset,
					.raw_len = (uint32_t)rec.raw_len,
					.field = rec.field,
					.wt = rec.wt,
					.hdr = (uint8_t)(rec.data_offset - rec.offset),
				};
				pb_put_raw(&s->in, rec.raw, rec.raw_len);
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

int partition_run(const struct partition_job *job, struct vp_error *err,
		  int *io_error)
{
	*io_error = 0;
	if (job->threads < 2)
		return run_single(job, err, io_error);
	return run_many(job, err, io_error);
}
