/*
 * scan_split.c - where a record begins past the middle of a trace, and
 * the scan of the rest from there (see scan_split.h).
 */
#include "scan_split.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "merge_limits.h"
#include "pb_wire.h"
#include "sync_skim.h"
#include "trace_io.h"

int scan_split_read(void *rd, uint64_t off, void *buf, size_t len)
{
	struct vp_error err;
	return trace_reader_read_at(rd, off, buf, len, &err);
}

/* How far past the point asked for a record is looked for: records of a
 * real trace are far smaller, and a trace made to defeat the guess only
 * goes without the split. */
#define FIND_SPAN (4u << 20)
/* Records that must follow one another, each a packet, for a place to
 * count as a record's beginning (fewer when the file ends after them). */
#define FIND_CHAIN 16

/* Where the record whose head is at[0..n) ends, when it is a packet's
 * head (tag and length, and a length the file has room for); 0 when
 * not. */
static uint64_t packet_end(const uint8_t *p, size_t n, uint64_t at,
			   uint64_t size)
{
	const uint8_t *q = p + 1, *e = p + n;
	uint64_t len;

	if (n < 2 || p[0] != (TRACE_PACKET_FIELD << 3 | PB_WT_LEN) ||
	    !pb_read_varint(&q, e, &len) || len > TRACE_MAX_PACKET)
		return 0;
	uint64_t end = at + (uint64_t)(q - p) + len;
	return end <= size ? end : 0;
}

/* Whether a run of packet records begins at `at`: their heads are read
 * from buf (the file's bytes from buf_at) when there, else from the
 * file. */
static int chain_at(struct trace_reader *rd, const uint8_t *buf,
		    uint64_t buf_at, size_t buf_n, uint64_t at, uint64_t size,
		    struct vp_error *err)
{
	uint8_t head[1 + PB_MAX_VARINT_LEN];

	for (int k = 0; k < FIND_CHAIN; k++) {
		if (at == size)
			return k > 0;
		size_t n = size - at < sizeof(head) ? (size_t)(size - at)
						   : sizeof(head);
		const uint8_t *p;
		if (at >= buf_at && at - buf_at + n <= buf_n) {
			p = buf + (at - buf_at);
		} else {
			if (trace_reader_read_at(rd, at, head, n, err) < 0)
				return -1;
			p = head;
		}
		uint64_t end = packet_end(p, n, at, size);
		if (!end)
			return 0;
		at = end;
	}
	return 1;
}

int scan_split_find(const char *path, uint64_t from, uint64_t size,
		    uint64_t *at, struct vp_error *err)
{
	struct trace_reader *rd;
	int rc = 0;

	if (from >= size)
		return 0;
	size_t n = size - from < FIND_SPAN ? (size_t)(size - from) : FIND_SPAN;
	uint8_t *buf = malloc(n);
	if (!buf)
		return 0; /* no memory to spare: no split */
	if (merge_reader_open(&rd, path, -1, err) < 0 ||
	    trace_reader_read_at(rd, from, buf, n, err) < 0) {
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		const uint8_t *p = memchr(buf + i, TRACE_PACKET_FIELD << 3 |
						       PB_WT_LEN, n - i);
		if (!p)
			break;
		i = (size_t)(p - buf);
		rc = chain_at(rd, buf, from, n, from + i, size, err);
		if (rc == 1)
			*at = from + i;
	}
out:
	trace_reader_close(rd);
	free(buf);
	return rc;
}

int scan_split_part(const char *path, uint64_t at, uint64_t to,
		    struct sync_scanner *part, volatile sig_atomic_t *cancel,
		    uint64_t *stop)
{
	struct sync_skim k;
	struct trace_record rec;
	struct vp_error err;
	int rc = sync_skim_open(&k, path, part, SYNC_SKIM_MIN_RECORD, &err);

	if (rc == 0)
		rc = trace_reader_seek(k.rd, at, &err);
	while (rc == 0 && (*stop = trace_reader_pos(k.rd)) < to &&
	       (rc = sync_skim_next(&k, &rec, &err)) > 0) {
		if (cancel && *cancel) {
			rc = -1;
			break;
		}
		rc = 0;
		/* a record read whole: a packet is scanned (one of
		 * compressed_packets, which is 1 here, gives up: the budget
		 * of what they inflate to is the whole scan's, in order) */
		if (rec.raw && rec.field == TRACE_PACKET_FIELD &&
		    rec.wt == PB_WT_LEN &&
		    sync_scan_part_packet(part, rec.data, rec.len,
					  rec.data_offset, &err) != 0)
			rc = -1;
	}
	sync_skim_close(&k);
	return rc < 0 ? -1 : 0;
}
