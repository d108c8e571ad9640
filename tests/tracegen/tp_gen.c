/*
 * tp_gen.c - vperfetto_tp_gen: writes a synthetic Perfetto trace of nested
 * track-event slices, for vperfetto_tp's end-to-end test and benchmark.
 *
 *   vperfetto_tp_gen -n EVENTS -o FILE [--threads N] [--seed S]
 *
 * One process with N threads (default 8).  Each thread writes on its own
 * trusted_packet_sequence_id: a first packet that clears the incremental
 * state and carries the thread's TrackDescriptor and the interned event
 * names and debug annotation names, then SLICE_BEGIN / SLICE_END events
 * (nested up to MAX_DEPTH levels) that refer to names by iid and carry one
 * uint debug annotation each.  EVENTS is rounded down to an even number so
 * that every slice ends: the trace has exactly EVENTS / 2 slices.
 * Timestamps increase across the whole file, threads interleaved.
 * The file is written through trace_writer (temporary file + rename).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"
#include "trace_io.h"
#include "vp_error.h"

/* Perfetto field numbers (protos/perfetto/trace/...). */
enum {
	/* TracePacket */
	F_PACKET_TIMESTAMP = 8,
	F_PACKET_SEQUENCE_ID = 10,  /* trusted_packet_sequence_id */
	F_PACKET_TRACK_EVENT = 11,
	F_PACKET_INTERNED_DATA = 12,
	F_PACKET_SEQUENCE_FLAGS = 13,
	F_PACKET_TRACK_DESCRIPTOR = 60,
	/* TracePacket.SequenceFlags */
	SEQ_INCREMENTAL_STATE_CLEARED = 1,
	SEQ_NEEDS_INCREMENTAL_STATE = 2,
	/* TrackDescriptor */
	F_TRACK_UUID = 1,
	F_TRACK_PROCESS = 3,
	F_TRACK_THREAD = 4,
	/* ProcessDescriptor */
	F_PROCESS_PID = 1,
	F_PROCESS_NAME = 6,
	/* ThreadDescriptor */
	F_THREAD_PID = 1,
	F_THREAD_TID = 2,
	F_THREAD_NAME = 5,
	/* TrackEvent */
	F_EVENT_DEBUG_ANNOTATIONS = 4,
	F_EVENT_TYPE = 9,
	F_EVENT_NAME_IID = 10,
	F_EVENT_TRACK_UUID = 11,
	/* TrackEvent.Type */
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	/* DebugAnnotation */
	F_ANNOTATION_NAME_IID = 1,
	F_ANNOTATION_UINT_VALUE = 3,
	/* InternedData */
	F_INTERNED_EVENT_NAMES = 2,
	F_INTERNED_DEBUG_ANNOTATION_NAMES = 3,
	/* EventName, DebugAnnotationName */
	F_INTERNED_IID = 1,
	F_INTERNED_NAME = 2,
};

#define PID 1000
#define PROCESS_UUID 1
#define THREAD_UUID_BASE 100
#define NUM_NAMES 16
#define MAX_DEPTH 5
#define START_TS 1000000000ll /* 1 s */

struct thread_gen {
	uint32_t seq_id;
	uint64_t uuid;
	uint64_t left;  /* events still to write */
	unsigned depth; /* open slices */
};

struct gen {
	struct trace_writer *w;
	struct pb_buf pkt;
	uint64_t rng;
	int64_t ts;
	struct vp_error err;
};

static uint64_t next_rand(struct gen *g)
{
	/* xorshift64* */
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return g->rng * 0x2545F4914F6CDD1Dull;
}

static int flush_packet(struct gen *g)
{
	int rc = trace_writer_packet(g->w, g->pkt.data, g->pkt.len, &g->err);
	pb_buf_reset(&g->pkt);
	return rc;
}

/* The process track descriptor, on a sequence of its own. */
static int write_process(struct gen *g, uint32_t seq_id)
{
	size_t td, pd;

	pb_put_varint(&g->pkt, F_PACKET_TIMESTAMP, (uint64_t)g->ts);
	pb_put_varint(&g->pkt, F_PACKET_SEQUENCE_ID, seq_id);
	td = pb_begin_nested(&g->pkt, F_PACKET_TRACK_DESCRIPTOR);
	pb_put_varint(&g->pkt, F_TRACK_UUID, PROCESS_UUID);
	pd = pb_begin_nested(&g->pkt, F_TRACK_PROCESS);
	pb_put_varint(&g->pkt, F_PROCESS_PID, PID);
	pb_put_string(&g->pkt, F_PROCESS_NAME, "tp_gen");
	pb_end_nested(&g->pkt, pd);
	pb_end_nested(&g->pkt, td);
	return flush_packet(g);
}

static void put_interned(struct pb_buf *b, uint32_t field, uint64_t iid,
			 const char *name)
{
	size_t m = pb_begin_nested(b, field);
	pb_put_varint(b, F_INTERNED_IID, iid);
	pb_put_string(b, F_INTERNED_NAME, name);
	pb_end_nested(b, m);
}

/* First packet of a sequence: clears incremental state, describes the
 * thread's track and interns the names. */
static int write_thread_start(struct gen *g, const struct thread_gen *t,
			      unsigned idx)
{
	char name[32];
	size_t td, th, id;

	pb_put_varint(&g->pkt, F_PACKET_TIMESTAMP, (uint64_t)g->ts);
	pb_put_varint(&g->pkt, F_PACKET_SEQUENCE_ID, t->seq_id);
	pb_put_varint(&g->pkt, F_PACKET_SEQUENCE_FLAGS,
		      SEQ_INCREMENTAL_STATE_CLEARED);
	td = pb_begin_nested(&g->pkt, F_PACKET_TRACK_DESCRIPTOR);
	pb_put_varint(&g->pkt, F_TRACK_UUID, t->uuid);
	th = pb_begin_nested(&g->pkt, F_TRACK_THREAD);
	pb_put_varint(&g->pkt, F_THREAD_PID, PID);
	pb_put_varint(&g->pkt, F_THREAD_TID, PID + 1 + idx);
	snprintf(name, sizeof(name), "worker-%u", idx);
	pb_put_string(&g->pkt, F_THREAD_NAME, name);
	pb_end_nested(&g->pkt, th);
	pb_end_nested(&g->pkt, td);

	id = pb_begin_nested(&g->pkt, F_PACKET_INTERNED_DATA);
	for (unsigned i = 1; i <= NUM_NAMES; i++) {
		snprintf(name, sizeof(name), "event_%u", i);
		put_interned(&g->pkt, F_INTERNED_EVENT_NAMES, i, name);
	}
	put_interned(&g->pkt, F_INTERNED_DEBUG_ANNOTATION_NAMES, 1, "count");
	pb_end_nested(&g->pkt, id);
	return flush_packet(g);
}

/* One SLICE_BEGIN or SLICE_END on thread t. */
static int write_event(struct gen *g, struct thread_gen *t, uint64_t n)
{
	/* Open a slice with odds 1 / (depth + 1); close all before the end. */
	bool must_end = t->left <= t->depth;
	bool begin = !must_end &&
		     (t->depth == 0 ||
		      (t->depth < MAX_DEPTH && next_rand(g) % (t->depth + 1) == 0));
	size_t te, da;

	pb_put_varint(&g->pkt, F_PACKET_TIMESTAMP, (uint64_t)g->ts);
	pb_put_varint(&g->pkt, F_PACKET_SEQUENCE_ID, t->seq_id);
	pb_put_varint(&g->pkt, F_PACKET_SEQUENCE_FLAGS,
		      SEQ_NEEDS_INCREMENTAL_STATE);
	te = pb_begin_nested(&g->pkt, F_PACKET_TRACK_EVENT);
	pb_put_varint(&g->pkt, F_EVENT_TYPE,
		      begin ? TYPE_SLICE_BEGIN : TYPE_SLICE_END);
	pb_put_varint(&g->pkt, F_EVENT_TRACK_UUID, t->uuid);
	if (begin)
		pb_put_varint(&g->pkt, F_EVENT_NAME_IID,
			      1 + next_rand(g) % NUM_NAMES);
	da = pb_begin_nested(&g->pkt, F_EVENT_DEBUG_ANNOTATIONS);
	pb_put_varint(&g->pkt, F_ANNOTATION_NAME_IID, 1);
	pb_put_varint(&g->pkt, F_ANNOTATION_UINT_VALUE, n);
	pb_end_nested(&g->pkt, da);
	pb_end_nested(&g->pkt, te);

	if (begin)
		t->depth++;
	else
		t->depth--;
	t->left--;
	g->ts += 10 + (int64_t)(next_rand(g) % 90);
	return flush_packet(g);
}

static int generate(struct gen *g, uint64_t events, unsigned nthreads)
{
	uint64_t pairs = events / 2, n = 0;
	struct thread_gen *th = calloc(nthreads, sizeof(*th));
	bool more = true;
	int rc = 0;

	if (!th)
		abort();
	for (unsigned i = 0; i < nthreads; i++) {
		th[i].seq_id = i + 1;
		th[i].uuid = THREAD_UUID_BASE + i;
		th[i].left = 2 * (pairs / nthreads + (i < pairs % nthreads));
	}
	rc = write_process(g, nthreads + 1);
	for (unsigned i = 0; i < nthreads && rc == 0; i++)
		rc = write_thread_start(g, &th[i], i);
	while (more && rc == 0) {
		more = false;
		for (unsigned i = 0; i < nthreads && rc == 0; i++) {
			if (!th[i].left)
				continue;
			rc = write_event(g, &th[i], n++);
			more = true;
		}
	}
	free(th);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vperfetto_tp_gen -n EVENTS -o FILE [--threads N] "
		"[--seed S]\n"
		"Writes a Perfetto trace with EVENTS track events (rounded down\n"
		"to even) as nested slices on N threads (default 8).\n");
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-')
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"events", required_argument, NULL, 'n'},
		{"output", required_argument, NULL, 'o'},
		{"threads", required_argument, NULL, 't'},
		{"seed", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t events = 0, threads = 8, seed = 1;
	const char *out = NULL;
	bool have_n = false;
	struct gen g = {0};
	int c;

	while ((c = getopt_long(argc, argv, "n:o:t:s:h", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'n':
			have_n = parse_u64(optarg, &events);
			if (!have_n)
				goto bad;
			break;
		case 'o':
			out = optarg;
			break;
		case 't':
			if (!parse_u64(optarg, &threads) || threads == 0 ||
			    threads > 100000)
				goto bad;
			break;
		case 's':
			if (!parse_u64(optarg, &seed))
				goto bad;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (!have_n || !out || optind != argc)
		goto bad;

	g.rng = seed * 0x9E3779B97F4A7C15ull + 1;
	g.ts = START_TS;
	pb_buf_init(&g.pkt);
	if (trace_writer_open(&g.w, out, &g.err) != 0) {
		fprintf(stderr, "vperfetto_tp_gen: %s\n", g.err.msg);
		return 1;
	}
	if (generate(&g, events, (unsigned)threads) != 0) {
		fprintf(stderr, "vperfetto_tp_gen: %s\n", g.err.msg);
		trace_writer_abort(g.w);
		pb_buf_free(&g.pkt);
		return 1;
	}
	uint64_t bytes = trace_writer_bytes(g.w);
	if (trace_writer_commit(g.w, &g.err) != 0) {
		fprintf(stderr, "vperfetto_tp_gen: %s\n", g.err.msg);
		pb_buf_free(&g.pkt);
		return 1;
	}
	pb_buf_free(&g.pkt);
	printf("%s: %" PRIu64 " events (%" PRIu64 " slices) on %" PRIu64
	       " threads, %" PRIu64 " bytes\n",
	       out, events / 2 * 2, events / 2, threads, bytes);
	return 0;
bad:
	usage(stderr);
	return 2;
}
