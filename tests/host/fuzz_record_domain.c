/*
 * fuzz_record_domain.c - libFuzzer target for vperfetto_record's domain
 * XML scanner: any bytes, not NUL-terminated (the input is copied into a
 * buffer of exactly its size), must be read within bounds and give
 * NUL-terminated paths.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record_domain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	struct record_guest_addr a;
	struct vp_error err = {{0}};

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (record_domain_parse_xml(copy, size, &a, &err) == 0) {
		if (strnlen(a.control, sizeof(a.control)) == sizeof(a.control) ||
		    strnlen(a.sync, sizeof(a.sync)) == sizeof(a.sync))
			abort();
	} else if (!err.msg[0]) {
		abort();
	}
	free(copy);
	return 0;
}
