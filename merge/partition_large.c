/*
 * partition_large.c - the records larger than a window of partition.c
 * (see partition_large.h): handled alone, and of a packet only what the
 * job's function must see is held in memory.
 *
 * Such a record is handled once every window before it is out (the
 * workers are idle then), with its owner's context, and its output goes
 * straight to the sink.  The record is not read whole when the job says
 * how to do without:
 *
 *   - Passing fields (job->passes): top-level fields the function copies
 *     byte for byte whatever they hold.  A run of them of
 *     PARTITION_STREAM_MIN bytes or more stays in the file.
 *   - Pieces (job->piece_of, job->piece): in a large top-level message
 *     (an ftrace bundle), the fields the function rewrites one by one
 *     with nothing but the message's other fields for context (its
 *     events).  A run of them stays in the file too; job->piece rewrites
 *     it a chunk at a time, twice: once to measure its output (lengths go
 *     before bodies on the wire), once to emit it.
 *   - Passing fields inside a message (job->passes_in): in a large
 *     top-level message the function edits (a track event), the fields
 *     it copies as they are (its debug annotations).  A run of them
 *     stays in the file like a run of passing top-level fields.
 *
 * The function sees a "skeleton" of the packet, each run replaced by an
 * empty field of the run's first number (a placeholder), and its output
 * gets each run back: a passing run as it is in the file, a run of pieces
 * as job->piece rewrote it, with the lengths of the message around it
 * and of the packet made good.  A packet of 60 MiB then costs a few MiB
 * whether it passes (an unknown payload), is rewritten (an ftrace bundle
 * of 60 MiB of events) or is edited around what it holds (a track event
 * with 60 MiB of debug annotations).
 *
 * Anything else (not a packet, malformed or cut short, a skeleton over
 * PARTITION_SKELETON_MAX, a single piece over it) is read whole, as
 * before, and so is a packet the function or job->piece fails on before
 * any of its output went out, so that its message names the offset in
 * the file.
 */
#include "partition_large.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "perfetto_fields.h"
#include "trace_io.h"
#include "vp_alloc.h"

#ifndef PARTITION_STREAM_MIN /* (fuzz builds set smaller ones) */
#define PARTITION_STREAM_MIN (4u << 10)
#endif
#ifndef PARTITION_SKELETON_MAX
#define PARTITION_SKELETON_MAX (4u << 20)
#endif
/* How many bytes of pieces job->piece gets at a time. */
#ifndef PARTITION_PIECE_CHUNK
#define PARTITION_PIECE_CHUNK (256u << 10)
#endif

/* No message: a run of passing top-level fields. */
#define NO_MSG ((size_t)-1)

/* A run of fields left in the file. */
struct stream_run {
	uint64_t off, len;   /* its bytes in the file */
	size_t ph_len;       /* its placeholder's: a tag and a zero length */
	size_t index;        /* its placeholder's place among the skeleton's
			      * passing fields (msg NO_MSG), or among its
			      * message's fields of the piece number */
	size_t msg;          /* in a message: its index in k->msgs */
	bool piece;          /* a run of pieces (else it passes as it is) */
	uint64_t out_len;    /* in a message: its output's length */
};

/* A top-level message of the packet with runs of its fields left out:
 * of pieces, or of fields that pass (job->passes_in). */
struct piece_msg {
	uint32_t num, sub;   /* its field number, its pieces' (or 0) */
	size_t index;        /* its place among the skeleton's top-level
			      * fields of number num */
	size_t first_run, n_runs; /* its runs, in k->runs */
	size_t body_off, body_len; /* its skeleton body, in pkt */
	uint64_t grows;      /* output bytes its runs add to their
			      * placeholders */
	uint64_t out_len;    /* its body's length in the output */
};

struct skeleton {
	struct pb_buf raw;       /* tag, length and the skeleton packet */
	struct pb_buf pkt;       /* the skeleton packet being built */
	struct pb_buf body;      /* a message's skeleton being built */
	struct stream_run *runs;
	size_t n_runs, cap_runs;
	struct piece_msg *msgs;
	size_t n_msgs, cap_msgs;
};

static int append_piece(void *ctx, const uint8_t *p, size_t n,
			struct vp_error *err)
{
	(void)err;
	pb_put_raw(ctx, p, n);
	return 0;
}

/* The field head at off (before end): 1; 0 when there is no whole field
 * there, -1 on a read error (err says). */
static int head_at(struct trace_reader *rd, uint64_t off, uint64_t end,
		   struct trace_field_head *h, struct vp_error *err)
{
	return trace_reader_field_head(rd, off, end, 2 * PB_MAX_VARINT_LEN, h,
				       err);
}

/* The number of the pieces of top-level message num, or 0. */
static uint32_t pieces_of(const struct partition_job *job, uint32_t num)
{
	return job->piece_of && job->piece ? job->piece_of(num) : 0;
}

static bool passes_in(const struct partition_job *job, uint32_t num,
		      uint32_t sub)
{
	return job->passes_in && job->passes_in(num, sub);
}

/* Whether field (num, wt) of a message whose pieces are sub is counted
 * among them (a piece when length-delimited). */
static bool of_sub(uint32_t sub, uint32_t num, uint8_t wt)
{
	return sub == PARTITION_PIECE_ANY ? wt == PB_WT_LEN
					  : sub != 0 && num == sub;
}

/* Whether a large top-level field num is skimmed as a message: it does
 * not pass, and has pieces or fields that pass inside it. */
static bool opens(const struct partition_job *job, uint32_t num)
{
	if (job->passes && job->passes(num))
		return false;
	return pieces_of(job, num) || passes_in(job, num, 0);
}

/* ---- the skeleton -------------------------------------------------------- */

/* Ends the run of fields [*run_off, off) whose first number is num (of
 * pieces, with piece): left in the file with a placeholder in b, when
 * long enough (msg and *index name it); else copied into b.  *index
 * counts the fields of the run's kind; the run had n_fields of them. */
static bool end_run(struct trace_reader *rd, struct skeleton *k,
		    struct pb_buf *b, uint64_t *run_off, uint64_t off,
		    uint32_t num, size_t msg, bool piece, size_t *index,
		    size_t n_fields, struct vp_error *err)
{
	uint64_t len = off - *run_off;

	if (len >= PARTITION_STREAM_MIN) {
		size_t before = b->len;
		pb_put_tag(b, num, PB_WT_LEN);
		pb_put_raw_varint(b, 0);
		VP_XGROW(k->runs, k->cap_runs, k->n_runs + 1);
		k->runs[k->n_runs++] = (struct stream_run){
			.off = *run_off, .len = len,
			.ph_len = b->len - before, .index = *index, .msg = msg,
			.piece = piece};
		(*index)++;
	} else if (len) {
		if (trace_reader_pass(rd, *run_off, len, append_piece, b,
				      err) < 0)
			return false;
		*index += n_fields;
	}
	*run_off = off;
	return b->len <= PARTITION_SKELETON_MAX;
}

/* Counts of top-level fields by number, for the few numbers that have
 * pieces (job->piece_of): a message is known by its number and its place
 * among the fields of that number, in the skeleton and in its output. */
#define PIECE_NUMS 4

struct num_counts {
	uint32_t num[PIECE_NUMS];
	size_t n[PIECE_NUMS];
	size_t used;
};

/* The fields of number num counted so far, and one more; SIZE_MAX when
 * PIECE_NUMS other numbers are counted already. */
static size_t count_num(struct num_counts *c, uint32_t num)
{
	for (size_t i = 0; i < c->used; i++)
		if (c->num[i] == num)
			return c->n[i]++;
	if (c->used == PIECE_NUMS)
		return SIZE_MAX;
	c->num[c->used] = num;
	c->n[c->used++] = 1;
	return 0;
}

/* What a field of a message is to the skeleton. */
enum run_kind { KEPT, PIECE, PASSING };

/* Adds the top-level message [off, end) of number num to the skeleton
 * packet, its runs of pieces (fields sub, when not 0) and of fields that
 * pass in it left in the file. */
static bool skim_message(const struct partition_job *job,
			 struct trace_reader *rd, struct skeleton *k,
			 uint32_t num, uint32_t sub, size_t index,
			 uint64_t off, uint64_t end, struct vp_error *err)
{
	struct pb_buf *b = &k->body;
	uint64_t run_off = off;
	size_t n_sub = 0, n_pass = 0, run_fields = 0, msg = k->n_msgs;
	size_t first_run = k->n_runs;
	enum run_kind run = KEPT;
	uint32_t run_num = 0;

	pb_buf_reset(b);
	for (;;) {
		struct trace_field_head h;
		enum run_kind kind = KEPT;
		if (off < end) {
			if (head_at(rd, off, end, &h, err) <= 0)
				return false;
			if (of_sub(sub, h.num, h.wt))
				kind = h.wt == PB_WT_LEN ? PIECE : KEPT;
			else if (passes_in(job, num, h.num))
				kind = PASSING;
		}
		if (run != KEPT && (kind != run || off >= end)) {
			bool piece = run == PIECE;
			if (!end_run(rd, k, b, &run_off, off, run_num, msg,
				     piece, piece ? &n_sub : &n_pass,
				     run_fields, err))
				return false;
			run = KEPT;
		}
		if (off >= end)
			break;
		if (kind != KEPT) {
			if (run == KEPT) {
				run = kind;
				run_num = h.num;
				run_fields = 0;
				run_off = off;
			}
			run_fields++;
			off += h.size;
			continue;
		}
		n_sub += of_sub(sub, h.num, h.wt); /* no piece, but counted */
		if (h.size > PARTITION_SKELETON_MAX - b->len ||
		    trace_reader_pass(rd, off, h.size, append_piece, b,
				      err) < 0)
			return false;
		off += h.size;
		run_off = off;
	}
	VP_XGROW(k->msgs, k->cap_msgs, k->n_msgs + 1);
	struct piece_msg *m = &k->msgs[k->n_msgs++];
	*m = (struct piece_msg){.num = num, .sub = sub, .index = index,
				.first_run = first_run,
				.n_runs = k->n_runs - first_run};
	pb_put_bytes(&k->pkt, num, b->data, b->len);
	m->body_off = k->pkt.len - b->len;
	m->body_len = b->len;
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
	uint32_t run_num = 0;
	size_t n_pass = 0, run_fields = 0;
	struct num_counts cnt = {.used = 0};

	pb_buf_reset(&k->pkt);
	pb_buf_reset(&k->raw);
	k->n_runs = k->n_msgs = 0;
	if ((!job->passes && !job->piece_of && !job->passes_in) ||
	    rec->field != TRACE_PACKET_FIELD || rec->wt != PB_WT_LEN ||
	    trace_reader_size(rd) < end)
		return false;
	while (off < end) {
		struct trace_field_head h;
		if (head_at(rd, off, end, &h, err) <= 0)
			return false;
		if (job->passes && job->passes(h.num)) {
			if (!run_fields)
				run_num = h.num;
			run_fields++;
			off += h.size;
			continue;
		}
		if (!end_run(rd, k, &k->pkt, &run_off, off, run_num, NO_MSG,
			     false, &n_pass, run_fields, err))
			return false;
		run_fields = 0;
		bool is_msg = opens(job, h.num);
		size_t index = is_msg ? count_num(&cnt, h.num) : 0;
		if (index == SIZE_MAX)
			return false;
		if (is_msg && h.wt == PB_WT_LEN &&
		    h.size >= PARTITION_STREAM_MIN) {
			if (!skim_message(job, rd, k, h.num,
					  pieces_of(job, h.num), index,
					  off + h.hdr, off + h.size, err))
				return false;
		} else if (h.size > PARTITION_SKELETON_MAX - k->pkt.len ||
			   trace_reader_pass(rd, off, h.size, append_piece,
					     &k->pkt, err) < 0) {
			return false; /* too long: not copied in first */
		}
		off += h.size;
		run_off = off;
	}
	if (!end_run(rd, k, &k->pkt, &run_off, off, run_num, NO_MSG, false,
		     &n_pass, run_fields, err))
		return false;
	pb_put_bytes(&k->raw, TRACE_PACKET_FIELD, k->pkt.data, k->pkt.len);
	return true;
}

/* ---- pieces -------------------------------------------------------------- */

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

/* Scratch of the runs of pieces. */
struct piece_bufs {
	struct pb_buf in, out;
};

/* Runs job->piece over run r, a chunk of whole pieces at a time: with
 * emit, each chunk's output goes to the sink (and must add up to the
 * length measured); else its length is measured into r->out_len. */
static int run_pieces(const struct partition_job *job, struct trace_reader *rd,
		      void *ctx, const struct skeleton *k,
		      struct stream_run *r, bool emit, struct piece_bufs *pb,
		      int *io_error, struct vp_error *err)
{
	const struct piece_msg *m = &k->msgs[r->msg];
	uint64_t off = r->off, end = r->off + r->len, total = 0;

	while (off < end) {
		uint64_t cend = off;
		while (cend < end && cend - off < PARTITION_PIECE_CHUNK) {
			struct trace_field_head h;
			int got = head_at(rd, cend, end, &h, err);
			if (got < 0)
				return -1;
			if (got == 0)
				return vp_errorf(err, "%s: byte offset %llu: "
						 "the file changed under the "
						 "merge", job->path,
						 (unsigned long long)cend);
			if (h.size > PARTITION_SKELETON_MAX)
				return vp_errorf(err, "%s: byte offset %llu: "
						 "a field of %llu bytes",
						 job->path,
						 (unsigned long long)cend,
						 (unsigned long long)h.size);
			cend += h.size;
		}
		pb_buf_reset(&pb->in);
		pb_buf_reset(&pb->out);
		if (trace_reader_pass(rd, off, cend - off, append_piece,
				      &pb->in, err) < 0 ||
		    job->piece(ctx, m->num, k->pkt.data + m->body_off,
			       m->body_len, pb->in.data, pb->in.len, off, emit,
			       &pb->out, err) < 0)
			return -1;
		total += pb->out.len;
		if (emit && sink_bytes(job, pb->out.data, pb->out.len,
				       io_error, err) < 0)
			return -1;
		off = cend;
	}
	if (!emit)
		r->out_len = total;
	else if (total != r->out_len)
		return vp_errorf(err, "%s: internal error: a large packet's "
				 "pieces came out %llu bytes long, measured "
				 "%llu", job->path, (unsigned long long)total,
				 (unsigned long long)r->out_len);
	return 0;
}

/* Measures every run in a message (a passing one is as long as in the
 * file), and what each message grows by. */
static int measure_pieces(const struct partition_job *job,
			  struct trace_reader *rd, void *ctx,
			  struct skeleton *k, struct piece_bufs *pb,
			  struct vp_error *err)
{
	int io_error = 0;

	for (size_t i = 0; i < k->n_runs; i++) {
		struct stream_run *r = &k->runs[i];
		if (r->msg == NO_MSG)
			continue;
		if (!r->piece)
			r->out_len = r->len;
		else if (run_pieces(job, rd, ctx, k, r, false, pb, &io_error,
				    err) < 0)
			return -1;
		k->msgs[r->msg].grows += r->out_len - r->ph_len;
	}
	return 0;
}

/* ---- the output ---------------------------------------------------------- */

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

/* Which of k's messages the output's top-level field f is: *next (then
 * moved on) or NO_MSG.  Messages come out in the order they went in. */
static size_t msg_of(const struct partition_job *job,
		     const struct skeleton *k, const struct pb_field *f,
		     struct num_counts *cnt, size_t *next)
{
	if (!opens(job, f->num))
		return NO_MSG;
	size_t index = count_num(cnt, f->num);
	if (*next >= k->n_msgs || k->msgs[*next].num != f->num ||
	    k->msgs[*next].index != index || f->wt != PB_WT_LEN)
		return NO_MSG;
	return (*next)++;
}

/* Bytes of a length-delimited field's tag and length. */
static size_t head_len(uint32_t num, uint64_t len)
{
	uint8_t tmp[2 * PB_MAX_VARINT_LEN];
	return pb_encode_varint(tmp, (uint64_t)num << 3 | PB_WT_LEN) +
	       pb_encode_varint(tmp, len);
}

/* Emits a length-delimited field's tag and length. */
static int sink_head(const struct partition_job *job, uint32_t num,
		     uint64_t len, int *io_error, struct vp_error *err)
{
	uint8_t hdr[2 * PB_MAX_VARINT_LEN];
	size_t n = pb_encode_varint(hdr, (uint64_t)num << 3 | PB_WT_LEN);

	n += pb_encode_varint(hdr + n, len);
	return sink_bytes(job, hdr, n, io_error, err);
}

/* Emits message mi's output body f, each placeholder of its runs
 * replaced by the run: its pieces as job->piece rewrites them, or its
 * fields that pass as they are in the file. */
static int emit_message(const struct partition_job *job,
			struct trace_reader *rd, void *ctx,
			struct skeleton *k, size_t mi, const struct pb_field *f,
			struct piece_bufs *pb, int *io_error,
			struct vp_error *err)
{
	const struct piece_msg *m = &k->msgs[mi];
	struct pb_reader r;
	struct pb_field g;
	struct pass_to_sink ps = {job, io_error};
	const uint8_t *run = f->data;
	size_t n_sub = 0, n_pass = 0, next = m->first_run;
	size_t end = m->first_run + m->n_runs;

	pb_reader_init(&r, f->data, f->len);
	while (next < end && pb_next(&r, &g)) {
		struct stream_run *sr = &k->runs[next];
		size_t index;
		/* counted as skim_message counted them */
		bool sub = of_sub(m->sub, g.num, g.wt);
		if (sub)
			index = n_sub++;
		else if (passes_in(job, m->num, g.num))
			index = n_pass++;
		else
			continue;
		if (sr->piece != sub || index != sr->index)
			continue;
		if (g.wt != PB_WT_LEN || g.len != 0 ||
		    (size_t)(g.end - g.start) != sr->ph_len)
			break;
		if (sink_bytes(job, run, (size_t)(g.start - run), io_error,
			       err) < 0)
			return -1;
		if (sr->piece ? run_pieces(job, rd, ctx, k, sr, true, pb,
					   io_error, err) < 0
			      : trace_reader_pass(rd, sr->off, sr->len,
						  pass_piece, &ps, err) < 0)
			return -1;
		run = g.end;
		next++;
	}
	if (next < end)
		return vp_errorf(err, "%s: internal error: a large packet's "
				 "output lost a run of fields it left out",
				 job->path);
	return sink_bytes(job, run, (size_t)(f->data + f->len - run),
			  io_error, err);
}

/* The length of the output packet rec once its runs are back. */
static int output_length(const struct partition_job *job,
			 struct skeleton *k, const struct pb_field *rec,
			 uint64_t *len, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;
	struct num_counts cnt = {.used = 0};
	size_t next = 0;

	*len = rec->len;
	for (size_t i = 0; i < k->n_runs; i++)
		if (k->runs[i].msg == NO_MSG)
			*len += k->runs[i].len - k->runs[i].ph_len;
	pb_reader_init(&r, rec->data, rec->len);
	while (pb_next(&r, &f)) {
		size_t mi = msg_of(job, k, &f, &cnt, &next);
		if (mi == NO_MSG)
			continue;
		struct piece_msg *m = &k->msgs[mi];
		m->out_len = f.len + m->grows;
		*len += head_len(f.num, m->out_len) -
			(size_t)(f.data - f.start) + m->grows;
	}
	if (next != k->n_msgs)
		return vp_errorf(err, "%s: internal error: a large packet's "
				 "output lost a message it rewrites in pieces",
				 job->path);
	return 0;
}

/* Emits the function's output for a skeleton (one packet record, its
 * payload at off) with each placeholder replaced by its run: passed from
 * the file, or rewritten by job->piece.  An output longer than a packet
 * may be is an error before any of it goes out. */
static int emit_skeleton_output(const struct partition_job *job,
				struct trace_reader *rd, void *ctx,
				struct skeleton *k, const struct pb_buf *out,
				uint64_t off, struct piece_bufs *pb,
				int *io_error, struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field rec, f;
	struct pass_to_sink ps = {job, io_error};
	struct num_counts cnt = {.used = 0};
	size_t next_msg = 0;
	uint64_t len;

	pb_reader_init(&r, out->data, out->len);
	if (!pb_next(&r, &rec) || rec.num != TRACE_PACKET_FIELD ||
	    rec.wt != PB_WT_LEN || rec.end != out->data + out->len)
		return vp_errorf(err, "%s: internal error: a large packet's "
				 "output is not one packet", job->path);
	if (output_length(job, k, &rec, &len, err) < 0 ||
	    trace_output_fits(job->path, off, len, err) < 0 ||
	    sink_head(job, TRACE_PACKET_FIELD, len, io_error, err) < 0)
		return -1;

	const uint8_t *run = rec.data;
	size_t n_pass = 0, next = 0, left = k->n_runs;
	while (next < k->n_runs && k->runs[next].msg != NO_MSG)
		next++;
	pb_reader_init(&r, rec.data, rec.len);
	while (left && pb_next(&r, &f)) {
		size_t mi = msg_of(job, k, &f, &cnt, &next_msg);
		if (mi != NO_MSG) {
			const struct piece_msg *m = &k->msgs[mi];
			if (sink_bytes(job, run, (size_t)(f.start - run),
				       io_error, err) < 0 ||
			    sink_head(job, f.num, m->out_len, io_error,
				      err) < 0 ||
			    emit_message(job, rd, ctx, k, mi, &f, pb, io_error,
					 err) < 0)
				return -1;
			left -= m->n_runs;
			run = f.end;
			continue;
		}
		if (next >= k->n_runs || !job->passes || !job->passes(f.num))
			continue;
		if (n_pass++ != k->runs[next].index)
			continue;
		const struct stream_run *sr = &k->runs[next];
		if (f.wt != PB_WT_LEN || f.len != 0 ||
		    (size_t)(f.end - f.start) != sr->ph_len)
			break;
		for (next++; next < k->n_runs && k->runs[next].msg != NO_MSG;)
			next++;
		left--;
		if (sink_bytes(job, run, (size_t)(f.start - run), io_error,
			       err) < 0 ||
		    trace_reader_pass(rd, sr->off, sr->len, pass_piece, &ps,
				      err) < 0)
			return -1;
		run = f.end;
	}
	if (left)
		return vp_errorf(err, "%s: internal error: a large packet's "
				 "output lost a field it passes", job->path);
	return sink_bytes(job, run, (size_t)(rec.data + rec.len - run),
			  io_error, err);
}

/* ---- the record ---------------------------------------------------------- */

static int run_fn(const struct partition_job *job, void *ctx,
		  const struct trace_record *rec, struct pb_buf *out,
		  struct vp_error *err)
{
	return job->fn(ctx, rec->raw, rec->raw_len, rec->field, rec->wt,
		       rec->data, rec->len, rec->data_offset, out, err);
}

static void skeleton_free(struct skeleton *k)
{
	pb_buf_free(&k->raw);
	pb_buf_free(&k->pkt);
	pb_buf_free(&k->body);
	free(k->runs);
	free(k->msgs);
}

/* Handles the skeleton: 1 when it cannot be (read whole instead), else
 * 0 or -1 as partition_large_run. */
static int run_skeleton(const struct partition_job *job,
			struct trace_reader *rd, const struct trace_record *rec,
			unsigned n, partition_owner_fn owner_of,
			struct skeleton *k, struct pb_buf *out,
			struct vp_error *err, int *io_error)
{
	struct piece_bufs pb;
	struct vp_error ferr;
	int rc = 1;

	/* the skeleton as the record: the same sequence and the same
	 * stateless answer, as the runs hold neither */
	size_t hdr = k->raw.len - k->pkt.len;
	struct trace_record sk = *rec;
	sk.raw = k->raw.data;
	sk.raw_len = k->raw.len;
	sk.data = k->raw.data + hdr;
	sk.len = k->pkt.len;
	void *ctx = job->ctx[n > 1 ? owner_of(job, &sk, n) : 0];

	pb_buf_init(&pb.in);
	pb_buf_init(&pb.out);
	if (measure_pieces(job, rd, ctx, k, &pb, &ferr) < 0 ||
	    run_fn(job, ctx, &sk, out, &ferr) < 0)
		goto done; /* read whole: its message names the right offset */
	if (!k->n_runs)
		rc = sink_bytes(job, out->data, out->len, io_error, err);
	else
		rc = emit_skeleton_output(job, rd, ctx, k, out,
					  rec->data_offset, &pb, io_error,
					  err);
	if (rc == 0)
		rc = trace_reader_seek(rd, rec->offset + rec->raw_len, err);
done:
	pb_buf_free(&pb.in);
	pb_buf_free(&pb.out);
	return rc;
}

int partition_large_run(const struct partition_job *job,
			struct trace_reader *rd, struct trace_record *rec,
			unsigned n, partition_owner_fn owner_of,
			struct pb_buf *out, struct vp_error *err, int *io_error)
{
	struct skeleton k;
	int rc = 1;

	/* on one thread only: whose the record is would take reading it */
	if (job->large && n == 1) {
		rc = job->large(job, job->ctx[0], rd, rec, io_error, err);
		if (rc == 0)
			rc = trace_reader_seek(rd, rec->offset + rec->raw_len,
					       err);
		if (rc <= 0)
			return rc;
	}
	memset(&k, 0, sizeof(k));
	pb_buf_init(&k.raw);
	pb_buf_init(&k.pkt);
	pb_buf_init(&k.body);
	pb_buf_reset(out);
	if (skim_record(job, rd, rec, &k, err))
		rc = run_skeleton(job, rd, rec, n, owner_of, &k, out, err,
				  io_error);
	if (rc > 0) {
		pb_buf_reset(out);
		rc = trace_reader_reread(rd, rec, rec, err);
		if (rc >= 0)
			rc = run_fn(job, job->ctx[n > 1 ? owner_of(job, rec, n)
							: 0],
				    rec, out, err);
		if (rc == 0)
			rc = sink_bytes(job, out->data, out->len, io_error,
					err);
	}
	skeleton_free(&k);
	pb_buf_reset(out);
	return rc;
}
