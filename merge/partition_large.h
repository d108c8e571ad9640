/*
 * partition_large.h - how partition.c handles a record larger than a
 * window: alone, with its owner's context, and of a packet only what the
 * job's function must see held in memory (partition_large.c).  Internal
 * to partition.c.
 */
#ifndef VP_PARTITION_LARGE_H
#define VP_PARTITION_LARGE_H

#include "partition.h"

struct trace_reader;
struct trace_record;

/* The thread of n that owns a record. */
typedef unsigned (*partition_owner_fn)(const struct partition_job *job,
				       const struct trace_record *rec,
				       unsigned n);

/* Handles rec, which the reader left unread, and hands its output to the
 * sink; out is scratch.  Returns 0, or -1 (*io_error set when the sink
 * failed). */
int partition_large_run(const struct partition_job *job,
			struct trace_reader *rd, struct trace_record *rec,
			unsigned n, partition_owner_fn owner_of,
			struct pb_buf *out, struct vp_error *err,
			int *io_error);

#endif
