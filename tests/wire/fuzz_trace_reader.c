/*
 * fuzz_trace_reader.c - libFuzzer target: the streaming trace reader on an
 * arbitrary file, read twice (rewind), with every record checked against
 * the file's bounds; then by heads, peeking into each large record and
 * stepping over it or reading it whole, which must give its bytes.
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz_trace", 0);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	struct trace_reader *r;
	struct trace_record rec;
	struct vp_error err;
	if (trace_reader_open(&r, path, &err) == 0) {
		for (int pass = 0; pass < 2; pass++) {
			uint64_t end = 0;
			while (trace_reader_next(r, &rec, &err) > 0) {
				if (rec.offset != end || rec.offset + rec.raw_len > size)
					__builtin_trap();
				end = rec.offset + rec.raw_len;
			}
			if (trace_reader_rewind(r, &err) < 0)
				break;
		}
		size_t whole_max = size ? data[0] : 0;
		while (trace_reader_next_head(r, &rec, whole_max, &err) > 0) {
			if (rec.raw)
				continue;
			size_t got, n = rec.len < 40 ? rec.len : 40;
			const uint8_t *p = trace_reader_peek(
				r, rec.data_offset + rec.len - n, n, &got, &err);
			/* past the end of the file (a cut record) there is
			 * nothing; before it, the file's bytes */
			uint64_t from = rec.data_offset + rec.len - n;
			if (!p || got > n ||
			    (got && (from + got > size ||
				     memcmp(p, data + from, got))))
				__builtin_trap();
			uint64_t at = rec.offset, raw_len = rec.raw_len;
			if (rec.offset % 2) {
				if (trace_reader_seek(r, at + raw_len, &err) < 0)
					break;
				continue;
			}
			if (trace_reader_seek(r, at, &err) < 0 ||
			    trace_reader_next(r, &rec, &err) <= 0)
				break;
			if (rec.offset != at || rec.raw_len != raw_len ||
			    memcmp(rec.raw, data + at, raw_len))
				__builtin_trap();
		}
		trace_reader_close(r);
	}
	close(fd);
	return 0;
}
