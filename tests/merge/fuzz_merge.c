/*
 * fuzz_merge.c - libFuzzer target: the whole merge.  The input is split in
 * two (host, guest) at a point given by its first two bytes; both halves
 * are written to files and merged with --allow-unsynced so that traces
 * without sync data still reach the rewriter.  Any status is fine; crashes,
 * leaks, undefined behaviour and an output left behind on failure are not.
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
	unsigned threads = 1 + (data[0] >> 7);   /* both code paths */
	data += 2;
	size -= 2;

	char host[96], guest[96], out[96];
	snprintf(host, sizeof(host), "%s/host.pb", dir);
	snprintf(guest, sizeof(guest), "%s/guest.pb", dir);
	snprintf(out, sizeof(out), "%s/out.pb", dir);
	put(host, data, split);
	put(guest, data + split, size - split);
	unlink(out);

	struct merge_opts o;
	memset(&o, 0, sizeof(o));
	o.host = host;
	o.guests[0] = guest;
	o.n_guests = 1;
	o.out = out;
	o.allow_unsynced = true;
	o.threads = threads;
	struct merge_result res;
	struct vp_error err;
	int status = merge_run(&o, &res, &err);
	struct stat st;
	bool exists = stat(out, &st) == 0;
	if ((status == MERGE_OK) != exists)
		__builtin_trap(); /* output exactly when the merge succeeded */
	merge_result_free(&res);
	return 0;
}
