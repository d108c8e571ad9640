/*
 * fuzz_vcpu_qmp.c - libFuzzer target for the QMP query-cpus-fast reply
 * parser of vcpu_threads.c: whatever QEMU's monitor socket sends, the
 * parser stays inside the buffer, returns -1 or at most `max` vCPUs, each
 * with a non-negative index and a positive thread id, sorted by index.
 */
#include <stdint.h>
#include <stdlib.h>

#include "vcpu_threads.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vcpu_thread t[8];
	int n = vcpu_threads_parse_qmp((const char *)data, size, t, 8);

	if (n < -1 || n > 8)
		abort();
	for (int i = 0; i < n; i++) {
		if (t[i].vcpu < 0 || t[i].tid <= 0)
			abort();
		if (i && t[i - 1].vcpu > t[i].vcpu)
			abort();
	}
	return 0;
}
