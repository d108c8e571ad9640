/*
 * vcpu_gen.c - writes the vcpu scenario of vcpu_scenario.h as two trace
 * files to append to a generated host and guest trace (a Trace is a
 * sequence of packets, so `cat` joins them): the host's packets
 * (processes, vcpu_map, sched, kvm) at HOST_BASE + SCALE * t and the
 * guest's sched packets at GUEST_BASE + SCALE * t.  For
 * tests/e2e/vm_tracks_e2e.sh.
 *
 *   vperfetto_vcpu_gen HOST_BASE GUEST_BASE SCALE HOST_OUT GUEST_OUT
 */
#include <stdio.h>
#include <stdlib.h>

#include "vcpu_scenario.h"

static int write_file(const char *path, const struct pb_buf *b)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f)) {
		perror(path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct trace host, guest;

	if (argc != 6) {
		fprintf(stderr, "usage: vperfetto_vcpu_gen HOST_BASE "
				"GUEST_BASE SCALE HOST_OUT GUEST_OUT\n");
		return 2;
	}
	int64_t hb = strtoll(argv[1], NULL, 10);
	int64_t gb = strtoll(argv[2], NULL, 10);
	int64_t scale = strtoll(argv[3], NULL, 10);
	trace_init(&host);
	trace_init(&guest);
	/* Sequence ids far from the generator's own. */
	host.seq_base = guest.seq_base = 1000;
	scenario(&host, SC_HOST | SC_MAPS | SC_KVM, hb, scale, 0);
	scenario(&guest, SC_GUEST, gb, scale, 0);
	int rc = write_file(argv[4], &host.out) ||
		 write_file(argv[5], &guest.out);
	trace_free(&host);
	trace_free(&guest);
	return rc ? 1 : 0;
}
