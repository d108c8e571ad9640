/*
 * fuzz_trace_reader.c - libFuzzer target: the streaming trace reader on an
 * arbitrary file, read twice (rewind), with every record checked against
 * the file's bounds.
 */
#include <stdio.h>
#include <stdint.h>
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
		trace_reader_close(r);
	}
	close(fd);
	return 0;
}
