/*
 * scan_pass.c - pass 1 of the merge: each input's sync scan, on threads
 * (see scan_pass.h).
 */
#include "scan_pass.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compressed.h"
#include "merge.h"
#include "merge_limits.h"
#include "scan_split.h"
#include "sync_skim.h"
#include "trace_io.h"
#include "vp_alloc.h"

/* A scan's state. */
struct scan_ctx {
	const char *path;
	struct sync_scanner *sc;
	struct pb_buf scratch; /* inflated compressed_packets */
	struct inflate_budget budget;
};

static int scan_fn(void *ctx, const uint8_t *pkt, size_t len, uint64_t off,
		   struct vp_error *err)
{
	struct scan_ctx *c = ctx;
	return sync_scan_packet(c->sc, pkt, len, off, err);
}

/* compressed_spill.large: a packet inside compressed_packets too large
 * to hold, written aside, skimmed as a large packet of a trace is. */
static int scan_large(void *ctx, int fd, uint64_t off, struct vp_error *err)
{
	struct scan_ctx *c = ctx;
	struct sync_skim k;
	struct trace_record rec;
	int rc = sync_skim_open_fd(&k, fd, c->path, c->sc, 0, err);

	if (rc == 0)
		rc = sync_skim_next(&k, &rec, err);
	if (rc == 1) /* read whole after all: scanned as any packet */
		rc = scan_fn(c, rec.data, rec.len, off, err);
	if (rc > 0 && rc != 2)
		rc = vp_errorf(err, "%s: byte offset %llu: compressed_packets "
			       "inside compressed_packets", c->path,
			       (unsigned long long)off);
	sync_skim_close(&k);
	return rc < 0 ? compressed_aside_error(c->path, off, err) : 0;
}

static const struct compressed_spill scan_spill = {scan_large};

/* sync_skim_compressed_fn: a large packet's compressed_packets, inflated
 * from the file as they are read. */
static int scan_compressed_at(void *ctx, struct trace_reader *rd,
			      uint64_t at, uint64_t len, uint64_t off,
			      struct vp_error *err)
{
	struct scan_ctx *c = ctx;
	int rc = compressed_each_packet_at(c->path, rd, at, len, off,
					   &c->scratch, &c->budget, scan_fn,
					   NULL, &scan_spill, c, err);

	merge_shrink_buf(&c->scratch);
	return rc;
}

/* Scans one record read whole (a packet; other records hold nothing
 * the scan wants). */
static int scan_record(struct scan_ctx *c, const struct trace_record *rec,
		       struct vp_error *err)
{
	const uint8_t *data = rec->data;
	size_t len = rec->len;
	uint64_t off = rec->data_offset;

	/* each_packet with the scanner called directly: a call less per
	 * packet */
	if (rec->field == TRACE_PACKET_FIELD && rec->wt == PB_WT_LEN) {
		int rc = sync_scan_packet(c->sc, data, len, off, err);
		if (rc > 0)
			rc = compressed_each_packet(c->path, data, len, off,
						    &c->scratch, &c->budget,
						    scan_fn, NULL, &scan_spill,
						    c, err);
		if (rc < 0)
			return -1;
		merge_shrink_buf(&c->scratch);
	}
	return 0;
}

/* The most parts of one guest's scan that wait to be joined: each holds
 * up to 8 MiB until then (sync_scan.h), which bounds the merge's
 * memory whatever the threads. */
#define SHARE_MAX_PARTS 2

/* Scans at most this many inputs (or parts) at once, whatever the
 * threads: each holds a reader's buffers of a MiB or more, so 64 at once
 * (32 guests on 64 CPUs) took 75 MiB.  Bounded memory comes first: on
 * more CPUs than this, pass 1 of very many guests leaves some idle (the
 * rewrite after it has them all). */
#define SCAN_MAX_THREADS 16

/* A part of a guest's scan that a helper took: from the first record at
 * or after `mid` (found at `start`) to the first at or after `to` (the
 * next part's mid; UINT64_MAX: the end), where it stopped (`stop`). */
struct scan_part {
	uint64_t mid, to, start, stop;
	bool done, ok;
	struct sync_scanner *sc; /* the part scanner, while ok */
};

/* A guest's scan that free threads may share (scan_split.h).  A helper
 * claims the second half of what the scanning thread has left before
 * the first part already taken, says where the scanning thread is to
 * stop (limit), scans that part and says it is done; the scanning
 * thread, at the first record at or after the limit, waits for it and
 * joins it and the parts after it that begin where it ended, or scans
 * on where one does not. */
struct scan_share {
	_Atomic uint64_t pos;   /* the scanning thread's next record */
	_Atomic uint64_t limit; /* the first part's mid; UINT64_MAX: none */
	uint64_t size;
	/* under mu */
	pthread_mutex_t *mu;
	pthread_cond_t *cv;
	bool running, joining;
	struct scan_part parts[SHARE_MAX_PARTS]; /* by mid */
	size_t n_parts, busy;   /* busy: parts a helper is scanning */
	uint64_t split_at;      /* where the first part joined began */
	unsigned joined;        /* parts joined */
};

/* The first part of sh, waited for and taken out (under mu). */
static struct scan_part take_part(struct scan_share *sh)
{
	while (!sh->parts[0].done)
		pthread_cond_wait(sh->cv, sh->mu);
	struct scan_part p = sh->parts[0];
	memmove(sh->parts, sh->parts + 1, --sh->n_parts * sizeof(p));
	return p;
}

/* The scanning thread at record `at`, at or past the limit: joins the
 * parts that begin where it stands, one after another, and moves the
 * reader to where the last of them ended.  0: the scan is whole; 1:
 * scan on (the limit is the next part's). */
static int join_parts(struct scan_ctx *c, struct scan_share *sh, uint64_t at,
		      struct trace_reader *rd, struct progress *pg,
		      struct vp_error *err)
{
	uint64_t from = at;

	pthread_mutex_lock(sh->mu);
	sh->joining = true; /* no helper splits what is being joined */
	while (sh->n_parts && sh->parts[0].mid <= at) {
		struct scan_part p = take_part(sh);
		pthread_mutex_unlock(sh->mu);
		if (p.ok && p.start == at &&
		    sync_scanner_join(c->sc, p.sc, scan_split_read, rd) == 0) {
			if (!sh->split_at)
				sh->split_at = p.start;
			sh->joined++;
			at = p.stop;
		}
		sync_scanner_free(p.sc);
		pthread_mutex_lock(sh->mu);
	}
	sh->joining = false;
	atomic_store_explicit(&sh->limit,
			      sh->n_parts ? sh->parts[0].mid : UINT64_MAX,
			      memory_order_relaxed);
	atomic_store_explicit(&sh->pos, at, memory_order_relaxed);
	pthread_mutex_unlock(sh->mu);
	if (at != from && pg->on)
		progress_add(pg, at - from);
	if (at == sh->size)
		return 0;
	return at == from ? 1 : trace_reader_seek(rd, at, err) < 0 ? -1 : 1;
}

/* The end of a shared scan: no helper may claim it now, and those that
 * did are waited for. */
static void share_end(struct scan_share *sh)
{
	pthread_mutex_lock(sh->mu);
	sh->running = false;
	while (sh->busy)
		pthread_cond_wait(sh->cv, sh->mu);
	while (sh->n_parts) {
		struct scan_part p = take_part(sh);
		sync_scanner_free(p.sc);
	}
	pthread_mutex_unlock(sh->mu);
}

/* A scan that copies nothing (a guest's): large packets are skimmed
 * (sync_skim.h), so most bytes of their bodies are never read.  With
 * sh, free threads may scan parts of it (scan_split.h). */
static int scan_skimming(struct scan_ctx *c, struct progress *pg,
			 volatile sig_atomic_t *cancel, struct scan_share *sh,
			 struct vp_error *err)
{
	struct sync_skim k;
	struct trace_record rec;
	int rc = sync_skim_open(&k, c->path, c->sc, SYNC_SKIM_MIN_RECORD, err);
	k.compressed = scan_compressed_at;
	k.compressed_ctx = c;

	if (sh && rc == 0) { /* open to a helper from now on */
		pthread_mutex_lock(sh->mu);
		sh->size = trace_reader_size(k.rd);
		sh->running = true;
		pthread_mutex_unlock(sh->mu);
	}
	while (rc == 0) {
		if (sh) {
			uint64_t at = trace_reader_pos(k.rd);
			atomic_store_explicit(&sh->pos, at,
					      memory_order_relaxed);
			if (at >= atomic_load_explicit(&sh->limit,
						       memory_order_relaxed) &&
			    (rc = join_parts(c, sh, at, k.rd, pg, err)) <= 0)
				break;
			rc = 0;
		}
		if ((rc = sync_skim_next(&k, &rec, err)) <= 0)
			break;
		if (cancel && *cancel) {
			rc = vp_errorf(err, "interrupted");
			break;
		}
		if (rc == 1 && scan_record(c, &rec, err) < 0) {
			rc = -1;
			break;
		}
		if (pg->on)
			progress_add(pg, rec.raw_len);
		rc = 0;
	}
	sync_skim_close(&k);
	return rc < 0 ? -1 : 0;
}

/* The host's records over this many bytes are skimmed for the scanner
 * and pass to the output in pieces straight from the file, so that a
 * 64 MiB packet costs no buffer of its size; smaller ones are read whole
 * and copied, which costs less than reading them in two goes. */
#define COPY_SKIM_MIN TRACE_READ_BUF

/* A scan that copies every record to w as it is (the host's). */
static int scan_copying(struct scan_ctx *c, struct trace_writer *w,
			struct progress *pg, volatile sig_atomic_t *cancel,
			int *io_error, struct vp_error *err)
{
	struct sync_skim k;
	struct trace_record rec;
	struct trace_copy_out co = {w, false};
	int rc = sync_skim_open(&k, c->path, c->sc, COPY_SKIM_MIN, err);
	k.compressed = scan_compressed_at;
	k.compressed_ctx = c;

	while (rc == 0 && (rc = sync_skim_next(&k, &rec, err)) > 0) {
		if (cancel && *cancel) {
			rc = vp_errorf(err, "interrupted");
			break;
		}
		if (rc == 1) {
			rc = scan_record(c, &rec, err);
			if (rc == 0)
				rc = trace_copy_piece(&co, rec.raw, rec.raw_len,
						 err);
		} else {
			rc = trace_reader_pass(k.rd, rec.offset, rec.raw_len,
					       trace_copy_piece, &co, err);
		}
		if (rc < 0)
			break;
		if (pg->on)
			progress_add(pg, rec.raw_len);
	}
	sync_skim_close(&k);
	*io_error = co.failed;
	return rc < 0 ? -1 : 0;
}

/* Scans a trace, one of n_inputs, into *out (a new scanner; the caller
 * frees it); with copy_to, copies every record there as it goes. */
static int scan_file(const char *path, size_t n_inputs,
		     struct sync_scanner **out, struct trace_writer *copy_to,
		     struct progress *pg, uint64_t max_inflate,
		     volatile sig_atomic_t *cancel, struct scan_share *sh,
		     struct vp_error *err)
{
	struct scan_ctx c = {
		.path = path,
		.sc = sync_scanner_new(path),
		.budget = {0, max_inflate},
	};
	int io_error = 0, rc;

	/* the sync data of every input is held at once */
	sync_scanner_share(c.sc, n_inputs);
	pb_buf_init(&c.scratch);
	if (copy_to)
		rc = scan_copying(&c, copy_to, pg, cancel, &io_error, err);
	else
		rc = scan_skimming(&c, pg, cancel, sh, err);
	if (sh)
		share_end(sh);
	sync_scanner_end(c.sc);
	pb_buf_free(&c.scratch);
	*out = c.sc;
	if (rc < 0)
		return io_error ? MERGE_IO_ERROR : MERGE_BAD_INPUT;
	return MERGE_OK;
}

struct scan_pool {
	struct scan_item *items;
	struct scan_share *shares; /* one per item (a guest's is shared) */
	size_t n, next;          /* next: the next item to take (mu) */
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* a part is done */
	struct progress *pg;
	uint64_t max_inflate;
	volatile sig_atomic_t *cancel;
};

/* A thread with no input left to take: scans the second half of what
 * the guest scan with the most left to do has left before its parts
 * (scan_split.h), if that is enough.  False when there is none. */
static bool help_scan(struct scan_pool *sp)
{
	struct scan_share *sh = NULL;
	const char *path = NULL;
	uint64_t best = SCAN_SPLIT_MIN - 1, mid = 0, to = 0, at = 0, stop = 0;

	pthread_mutex_lock(&sp->mu);
	for (size_t i = 0; i < sp->n; i++) {
		struct scan_share *s = &sp->shares[i];
		uint64_t pos = atomic_load_explicit(&s->pos,
						    memory_order_relaxed);
		uint64_t end = s->n_parts ? s->parts[0].mid : s->size;
		if (!s->running || s->joining ||
		    s->n_parts == SHARE_MAX_PARTS || pos >= end ||
		    end - pos <= best)
			continue;
		best = end - pos;
		sh = s;
		path = sp->items[i].path;
		mid = pos + best / 2;
		to = s->n_parts ? end : UINT64_MAX;
	}
	if (sh) {
		memmove(sh->parts + 1, sh->parts,
			sh->n_parts++ * sizeof(sh->parts[0]));
		sh->parts[0] = (struct scan_part){.mid = mid, .to = to};
		sh->busy++;
		atomic_store_explicit(&sh->limit, mid, memory_order_relaxed);
	}
	pthread_mutex_unlock(&sp->mu);
	if (!sh)
		return false;

	struct vp_error err;
	struct sync_scanner *part = NULL;
	bool ok = false;
	if (scan_split_find(path, mid, sh->size, &at, &err) == 1 && at < to) {
		part = sync_scanner_new_part(path);
		ok = scan_split_part(path, at, to, part, sp->cancel,
				     &stop) == 0;
	}
	if (!ok) { /* what it holds is of no use: given back now */
		sync_scanner_free(part);
		part = NULL;
	}
	pthread_mutex_lock(&sp->mu);
	for (size_t k = 0; k < sh->n_parts; k++) /* it may have moved */
		if (sh->parts[k].mid == mid && !sh->parts[k].done) {
			sh->parts[k] = (struct scan_part){
				.mid = mid, .to = to, .start = at, .stop = stop,
				.done = true, .ok = ok, .sc = part};
			break;
		}
	sh->busy--;
	pthread_cond_broadcast(&sp->cv);
	pthread_mutex_unlock(&sp->mu);
	return true;
}

static void *scan_worker(void *arg)
{
	struct scan_pool *sp = arg;

	for (;;) {
		pthread_mutex_lock(&sp->mu);
		size_t i = sp->next++;
		pthread_mutex_unlock(&sp->mu);
		if (i >= sp->n) {
			if (help_scan(sp))
				continue;
			return NULL;
		}
		struct scan_item *it = &sp->items[i];
		it->status = scan_file(it->path, sp->n, &it->sc, it->copy_to,
				       sp->pg, sp->max_inflate, sp->cancel,
				       it->copy_to ? NULL : &sp->shares[i],
				       &it->err);
		if (it->done && it->status == MERGE_OK)
			it->done(it->done_ctx, sync_scanner_data(it->sc));
	}
}

void scan_inputs(struct scan_item *items, size_t n, unsigned threads,
		 struct progress *pg, uint64_t max_inflate,
		 volatile sig_atomic_t *cancel)
{
	struct scan_pool sp = {
		.items = items, .n = n, .pg = pg,
		.max_inflate = max_inflate, .cancel = cancel,
		.mu = PTHREAD_MUTEX_INITIALIZER,
		.cv = PTHREAD_COND_INITIALIZER,
	};
	pthread_t tid[2 * (MERGE_MAX_GUESTS + 1)];
	unsigned started = 0, guests = 0;

	sp.shares = vp_xcalloc(n ? n : 1, sizeof(*sp.shares));
	for (size_t i = 0; i < n; i++) {
		struct scan_share *sh = &sp.shares[i];
		if (items[i].copy_to)
			continue;
		atomic_init(&sh->pos, 0);
		atomic_init(&sh->limit, UINT64_MAX);
		sh->mu = &sp.mu;
		sh->cv = &sp.cv;
		guests++;
	}
	/* a thread per input, and one more per guest to share its scan */
	if (threads > n + guests)
		threads = (unsigned)(n + guests);
	if (threads > SCAN_MAX_THREADS)
		threads = SCAN_MAX_THREADS;
	for (unsigned t = 1; t < threads; t++) {
		if (pthread_create(&tid[started], NULL, scan_worker, &sp) != 0)
			break;
		started++;
	}
	scan_worker(&sp);
	for (unsigned t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	for (size_t i = 0; i < n; i++) {
		items[i].split_at = sp.shares[i].split_at;
		items[i].parts = 1 + sp.shares[i].joined;
	}
	free(sp.shares);
	pthread_cond_destroy(&sp.cv);
	pthread_mutex_destroy(&sp.mu);
}

