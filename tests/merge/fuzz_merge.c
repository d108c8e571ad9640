/*
 * fuzz_merge.c - libFuzzer target: the whole merge.  The input is split in
 * two (host, guest) at a point given by its first two bytes; both halves
 * are written to files and merged with --allow-unsynced so that traces
 * without sync data still reach the rewriter.  Any status is fine; crashes,
 * leaks, undefined behaviour and an output left behind on failure are not,
 * and neither is a difference between one thread and three (status,
 * message or a byte of the output) or an internal error.  Fuzz builds
 * shrink the merge's windows (meson.build), so packets of a few KiB take
 * the path of large packets.
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "merge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void put(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		abort();
	if (n && fwrite(p, 1, n, f) != n)
		abort();
	fclose(f);
}

/* Merges host and guest into out on `threads` threads: the status, with
 * the output read back into *bytes (NULL when there is none) and the
 * message into msg. */
static int merge_once(const char *host, const char *guest, const char *out,
		      unsigned threads, uint8_t **bytes, size_t *n,
		      char *msg, size_t msg_size)
{
	struct merge_opts o;
	struct merge_result res;
	struct vp_error err;

	unlink(out);
	memset(&o, 0, sizeof(o));
	o.host = host;
	o.guests[0] = guest;
	o.n_guests = 1;
	o.out = out;
	o.allow_unsynced = true;
	o.threads = threads;
	err.msg[0] = '\0';
	int status = merge_run(&o, &res, &err);
	merge_result_free(&res);
	snprintf(msg, msg_size, "%s", status == MERGE_OK ? "" : err.msg);
	*bytes = NULL;
	*n = 0;
	FILE *f = fopen(out, "rb");
	if ((status == MERGE_OK) != (f != NULL))
		__builtin_trap(); /* output exactly when the merge succeeded */
	if (!f)
		return status;
	size_t cap = 0;
	for (;;) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 4096;
			*bytes = realloc(*bytes, cap);
			if (!*bytes)
				abort();
		}
		size_t got = fread(*bytes + *n, 1, cap - *n, f);
		*n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0]) {
		/* tmpfs when there is one: the merge fsyncs its output */
		snprintf(dir, sizeof(dir), "%s/vp_fuzz_merge.XXXXXX",
			 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(dir))
			abort();
	}
	if (size < 2)
		return 0;
	size_t split = ((size_t)data[0] << 8 | data[1]) % (size - 1);
	data += 2;
	size -= 2;

	char host[96], guest[96], out[96];
	snprintf(host, sizeof(host), "%s/host.pb", dir);
	snprintf(guest, sizeof(guest), "%s/guest.pb", dir);
	snprintf(out, sizeof(out), "%s/out.pb", dir);
	put(host, data, split);
	put(guest, data + split, size - split);

	/* One thread and three (the threaded path, packets shared out by
	 * sequence): the same status, message and bytes. */
	uint8_t *b1, *b3;
	size_t n1, n3;
	char m1[VP_ERROR_MAX], m3[VP_ERROR_MAX];
	int s1 = merge_once(host, guest, out, 1, &b1, &n1, m1, sizeof(m1));
	int s3 = merge_once(host, guest, out, 3, &b3, &n3, m3, sizeof(m3));
	if (strstr(m1, "internal error") || strstr(m3, "internal error") ||
	    s1 != s3 || strcmp(m1, m3) != 0 || n1 != n3 ||
	    (n1 && memcmp(b1, b3, n1) != 0)) {
		fprintf(stderr, "1 thread: %d %s (%zu bytes); 3 threads: %d %s "
			"(%zu bytes)\n", s1, m1, n1, s3, m3, n3);
		__builtin_trap();
	}
	free(b1);
	free(b3);
	unlink(out);
	return 0;
}
