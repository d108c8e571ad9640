/*
 * partition.h - runs a per-packet function over a trace file on one or
 * more threads.
 *
 * Everything the merge keeps per packet stream (interning, clocks, legacy
 * timestamps) is per sequence, so packets of different sequences can be
 * handled apart: each sequence is owned by one thread, which keeps its
 * state.  Packets whose handling reads or writes no sequence state (the
 * job's `stateless` says which: an ftrace bundle, say) may go to any
 * thread; they are spread by bytes, so one busy sequence does not leave
 * the other threads idle.  The first thread reads the file, peeks at each
 * packet and hands the others their packets window by window, which
 * costs it about two thirds of what handling them does (a packet of
 * PARTITION_DIRECT_MIN bytes or more it does not read: it looks at its
 * top-level fields' heads to know whose it is, and that thread reads
 * it).  So a plan made from the
 * sequences' load as measured beforehand (partition_plan) gives it a
 * smaller share of them than the others; sequences the plan does not
 * name go to the others by a hash of their id.
 *
 * Memory is bounded by bytes, not records: a window closes at
 * PARTITION_WINDOW_BYTES of input (or PARTITION_WINDOW_RECORDS records),
 * at most threads + 2 windows (and no more than 6) are in flight, a
 * share's record arrays grow only as its records need, and a buffer that grew past
 * a few windows for a large record is given back once it is emitted.  A
 * record larger than a window waits until every window before it is out
 * (the workers idle) and is handled alone by the first thread, with its
 * owner's context: one such record is held at a time, with its output,
 * and of a packet only what the job's function reads (`passes`, `passes_in`,
 * `piece_of`): the long runs of fields it copies as they are go from
 * file to sink, and those it rewrites one by one (an ftrace bundle's
 * events) are rewritten a chunk at a time (partition_large.c).
 *
 * With an output sink the result is the same bytes, in the same order, as
 * one thread would write: the first thread interleaves the threads' output
 * of each window back into file order before the sink sees it.
 */
#ifndef VP_PARTITION_H
#define VP_PARTITION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "vp_error.h"

#define PARTITION_MAX_THREADS 64
#define PARTITION_WINDOW_RECORDS 16384
/* Fuzz builds make windows small (meson.build), so that inputs of a few
 * KiB reach the path of records larger than a window. */
#ifndef PARTITION_WINDOW_BYTES
#define PARTITION_WINDOW_BYTES (1u << 20)
#endif

/* Handles one top-level record the calling thread owns (a packet, field 1,
 * or anything else).  Appends its output, if any, to out.  Returns 0, or
 * -1 with a message. */
typedef int (*partition_fn)(void *ctx, const uint8_t *raw, size_t raw_len,
			    uint32_t field, uint8_t wt, const uint8_t *data,
			    size_t len, uint64_t data_off, struct pb_buf *out,
			    struct vp_error *err);

struct iovec;
struct trace_reader;
struct trace_record;
/* Receives output, in file order: n pieces, one after another. */
typedef int (*partition_sink)(void *ctx, const struct iovec *iov, int n,
			      struct vp_error *err);
/* The most pieces of one call. */
#define PARTITION_SINK_IOV 64

/* True when handling this packet reads and writes no per-sequence state,
 * so any thread may take it; *seq_id is its sequence either way. */
typedef bool (*partition_stateless)(const uint8_t *pkt, size_t len,
				    uint32_t *seq_id);

/* Told how many input bytes were consumed (first thread only). */
typedef void (*partition_progress)(void *ctx, uint64_t bytes);

struct partition_job {
	const char *path;
	unsigned threads;                 /* 1 .. PARTITION_MAX_THREADS */
	partition_fn fn;
	void *ctx[PARTITION_MAX_THREADS]; /* one per thread */
	partition_stateless stateless;    /* NULL: every packet by sequence */
	/* True for the packet fields (by number) fn copies byte for byte
	 * whatever they hold: a record larger than a window is then not read
	 * whole, those fields are passed from the file to the sink (partition.c,
	 * "records larger than a window").  NULL: such records are read
	 * whole. */
	bool (*passes)(uint32_t num);
	/* Of a large packet's top-level message of number num (one that
	 * does not pass), the number of the fields that piece() rewrites
	 * one by one, given the message's other fields as they are; 0 for
	 * none; PARTITION_PIECE_ANY when each of its length-delimited
	 * fields is one.  At most 4 numbers may have pieces.  NULL:
	 * none. */
	uint32_t (*piece_of)(uint32_t num);
	/* Of a large packet's top-level message of number num (one that
	 * does not pass): true when fn copies its field sub byte for byte
	 * whatever it holds and reads nothing in it (a track event's debug
	 * annotations).  Runs of such fields stay in the file as the passing
	 * top-level ones do.  With sub 0: whether message num may have
	 * such fields.  NULL: none. */
	bool (*passes_in)(uint32_t num, uint32_t sub);
	/* Appends to out what fn writes for the fields [p, p + len) (whole
	 * fields of number piece_of(num), at file offset off) of the message
	 * num whose other fields are msg: the same bytes, and, with count,
	 * the same counts.  Without count it only measures: whatever it
	 * counts is left as it was.  Returns 0, or -1 with a message (the
	 * packet is then read whole, if nothing of it went out).  fn sees
	 * an empty field of number piece_of(num) in place of each run of
	 * them, and must count nothing for it. */
	int (*piece)(void *ctx, uint32_t num, const uint8_t *msg,
		     size_t msg_len, const uint8_t *p, size_t len,
		     uint64_t off, bool count, struct pb_buf *out,
		     struct vp_error *err);
	/* Takes a record larger than a window, when it can, in place of
	 * all of the above (a packet of compressed_packets, inflated from
	 * the file as it is read), its output to the sink itself: 0 done
	 * (*io_error set when the sink failed), 1 not taken, -1 with a
	 * message.  Asked on one thread only (a trace with compressed
	 * packets is rewritten on one).  NULL: none. */
	int (*large)(const struct partition_job *job, void *ctx,
		     struct trace_reader *rd, const struct trace_record *rec,
		     int *io_error, struct vp_error *err);
	/* The owner of each sequence of id below n_seq_owner, or
	 * PARTITION_BY_HASH (partition_plan); NULL: all by the hash. */
	const uint8_t *seq_owner;
	size_t n_seq_owner;
	partition_sink sink;              /* NULL: output is dropped */
	void *sink_ctx;
	partition_progress progress;
	void *progress_ctx;
	volatile sig_atomic_t *cancel;
};

/* Returns 0, or -1 with the message of the first failure in file order.
 * *io_error is set when the failure came from the sink. */
int partition_run(const struct partition_job *job, struct vp_error *err,
		  int *io_error);

/* Handles the one record of the file open as fd (which it closes), of
 * any size, on the calling thread with context ctx, as partition_run
 * handles a record larger than a window: of a packet only what job->fn
 * must see is held in memory.  Its output goes to job->sink.  For a
 * packet that was not in a file of its own (one inside
 * compressed_packets, written aside).  Returns 0, or -1 with a
 * message. */
int partition_run_record(const struct partition_job *job, void *ctx, int fd,
			 struct vp_error *err);

/* A hash of a sequence id onto n threads, 0 .. n - 1 (with several
 * threads, a sequence the plan does not name is owned by
 * 1 + partition_owner(id, n - 1)). */
unsigned partition_owner(uint32_t seq_id, unsigned n);

#define PARTITION_BY_HASH 0xff
#define PARTITION_PIECE_ANY UINT32_MAX

/* Shares the sequences of ids 0 .. n_ids - 1 out among `threads` threads
 * by their load (any unit; 0: a sequence never seen, left to the hash):
 * the largest first, each to the thread with the least so far, the first
 * thread starting with the cost of its reading for the others.  Fills
 * owner[0 .. n_ids). */
void partition_plan(const uint64_t *load, size_t n_ids, unsigned threads,
		    uint8_t *owner);

#endif
