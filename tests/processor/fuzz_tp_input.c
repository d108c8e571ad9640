/*
 * fuzz_tp_input.c - libFuzzer target for the processor's input
 * (processor/tp_input.c): the bytes are given once as a regular file (a
 * memfd) and once as a stream (a pipe, which holds the at most 64 KiB
 * the fuzz runs give it), gzip'd or not.  Whatever the bytes, the copy or
 * the inflate must end, within its cap, without a crash, a hang or a
 * leaked descriptor.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tp_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* tp_input_open on fd's /proc path; closes fd. */
static void open_through(int fd)
{
	struct vp_error err, warn;
	char path[64];
	uint64_t hash;
	int out;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* a small cap: a bomb stops early, and no run takes long */
	if (tp_input_open(path, 1u << 20, &out, &hash, &warn, &err) == 0)
		close(out);
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz_tp_input", MFD_CLOEXEC);
	if (fd >= 0) {
		if (!size || write(fd, data, size) == (ssize_t)size)
			open_through(fd);
		else
			close(fd);
	}
	int p[2];
	if (size > 65536 || pipe2(p, O_CLOEXEC) != 0)
		return 0;
	fcntl(p[1], F_SETPIPE_SZ, 65536);
	if (size && write(p[1], data, size) != (ssize_t)size) {
		close(p[0]);
		close(p[1]);
		return 0;
	}
	close(p[1]); /* the reader sees the end after the bytes */
	open_through(p[0]);
	return 0;
}
