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

/* A guest's scan that a free thread may share (scan_split.h).  The
 * helper claims it, says where the scanning thread is to stop (limit),
 * scans from there on into `part` and says it is done; the scanning
 * thread, at the first record at or after the limit, waits for that and
 * joins the part, or scans on when the part does not begin there. */
struct scan_share {
	_Atomic uint64_t pos;   /* the scanning thread's next record */
	_Atomic uint64_t limit; /* UINT64_MAX: no split (yet) */
	uint64_t size;
	/* under mu */
	pthread_mutex_t *mu;
	pthread_cond_t *cv;
	bool running, claimed, part_done, part_ok;
	bool joined;            /* the scan was whole from two parts */
	struct sync_scanner *part;
	uint64_t part_at;
};

/* The scanning thread at record `at`, at or past the limit: waits for
 * the part and joins it.  0: the scan is whole; 1: scan on (the limit
 * is gone). */
static int join_part(struct scan_ctx *c, struct scan_share *sh, uint64_t at,
		     struct trace_reader *rd, struct progress *pg)
{
	int rc = 1;

	pthread_mutex_lock(sh->mu);
	while (!sh->part_done)
		pthread_cond_wait(sh->cv, sh->mu);
	pthread_mutex_unlock(sh->mu);
	atomic_store_explicit(&sh->limit, UINT64_MAX, memory_order_relaxed);
	if (sh->part_ok && sh->part_at == at)
		rc = sync_scanner_join(c->sc, sh->part, scan_split_read, rd);
	sh->joined = rc == 0;
	sync_scanner_free(sh->part);
	sh->part = NULL;
	if (rc == 0 && pg->on)
		progress_add(pg, sh->size - at);
	return rc;
}

/* The end of a shared scan: no helper may claim it now, and one that
 * did is waited for. */
static void share_end(struct scan_share *sh)
{
	pthread_mutex_lock(sh->mu);
	sh->running = false;
	while (sh->claimed && !sh->part_done)
		pthread_cond_wait(sh->cv, sh->mu);
	pthread_mutex_unlock(sh->mu);
	sync_scanner_free(sh->part);
	sh->part = NULL;
}

/* A scan that copies nothing (a guest's): large packets are skimmed
 * (sync_skim.h), so most bytes of their bodies are never read.  With
 * sh, a free thread may scan its second half (scan_split.h). */
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
			    join_part(c, sh, at, k.rd, pg) == 0)
				break;
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

/* Scans a trace into *out (a new scanner; the caller frees it); with
 * copy_to, copies every record there as it goes. */
static int scan_file(const char *path, struct sync_scanner **out,
		     struct trace_writer *copy_to, struct progress *pg,
		     uint64_t max_inflate, volatile sig_atomic_t *cancel,
		     struct scan_share *sh, struct vp_error *err)
{
	struct scan_ctx c = {
		.path = path,
		.sc = sync_scanner_new(path),
		.budget = {0, max_inflate},
	};
	int io_error = 0, rc;

	pb_buf_init(&c.scratch);
	if (copy_to)
		rc = scan_copying(&c, copy_to, pg, cancel, &io_error, err);
	else
		rc = scan_skimming(&c, pg, cancel, sh, err);
	if (sh)
		share_end(sh);
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

/* A thread with no input left to take: scans the second half of the
 * guest scan with the most left to do, if one has enough.  False when
 * there is none. */
static bool help_scan(struct scan_pool *sp)
{
	struct scan_share *sh = NULL;
	const char *path = NULL;
	uint64_t best = SCAN_SPLIT_MIN - 1, mid = 0, at = 0;

	pthread_mutex_lock(&sp->mu);
	for (size_t i = 0; i < sp->n; i++) {
		struct scan_share *s = &sp->shares[i];
		uint64_t pos = atomic_load_explicit(&s->pos,
						    memory_order_relaxed);
		if (s->running && !s->claimed && pos < s->size &&
		    s->size - pos > best) {
			best = s->size - pos;
			sh = s;
			path = sp->items[i].path;
			mid = pos + best / 2;
		}
	}
	if (sh) {
		sh->claimed = true;
		atomic_store_explicit(&sh->limit, mid, memory_order_relaxed);
	}
	pthread_mutex_unlock(&sp->mu);
	if (!sh)
		return false;

	struct vp_error err;
	struct sync_scanner *part = NULL;
	bool ok = false;
	if (scan_split_find(path, mid, sh->size, &at, &err) == 1) {
		part = sync_scanner_new_part(path);
		ok = scan_split_part(path, at, part, sp->cancel) == 0;
	}
	if (!ok) { /* what it holds is of no use: given back now */
		sync_scanner_free(part);
		part = NULL;
	}
	pthread_mutex_lock(&sp->mu);
	sh->part = part;
	sh->part_at = at;
	sh->part_ok = ok;
	sh->part_done = true;
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
		it->status = scan_file(it->path, &it->sc, it->copy_to, sp->pg,
				       sp->max_inflate, sp->cancel,
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
	for (unsigned t = 1; t < threads; t++) {
		if (pthread_create(&tid[started], NULL, scan_worker, &sp) != 0)
			break;
		started++;
	}
	scan_worker(&sp);
	for (unsigned t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	for (size_t i = 0; i < n; i++)
		items[i].split_at = sp.shares[i].joined ? sp.shares[i].part_at
							: 0;
	free(sp.shares);
	pthread_cond_destroy(&sp.cv);
	pthread_mutex_destroy(&sp.mu);
}

