/*
 * vp_alloc.c - allocations that stop the program on out-of-memory (see
 * vp_alloc.h for when that is the right policy and when it is not).
 */
#include "vp_alloc.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void vp_oom(size_t n)
{
	/* stdio may need memory itself; a fixed message does not. */
	char msg[96];
	int len = snprintf(msg, sizeof(msg), "%s: out of memory (%zu bytes)\n",
			   program_invocation_short_name, n);
	if (len > 0)
		fwrite(msg, 1, (size_t)len < sizeof(msg) ? (size_t)len
							: sizeof(msg) - 1,
		       stderr);
	abort();
}

void *vp_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		vp_oom(n);
	return p;
}

void *vp_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		vp_oom(n * size);
	return p;
}

void *vp_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		vp_oom(n);
	return q;
}

void *vp_xreallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		vp_oom(SIZE_MAX);
	return vp_xrealloc(p, n * size);
}

void *vp_xaligned_alloc(size_t align, size_t size)
{
	size_t n = size ? size : 1;
	if (n > SIZE_MAX - (align - 1))
		vp_oom(SIZE_MAX);
	n = (n + align - 1) & ~(align - 1);
	void *p = aligned_alloc(align, n);
	if (!p)
		vp_oom(n);
	return p;
}

char *vp_xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = vp_xmalloc(n);
	memcpy(d, s, n);
	return d;
}

char *vp_xstrndup(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	char *d = vp_xmalloc(n + 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* The capacity vp_grow and vp_xgrow move to: doubling from *cap (16 at
 * first) until need fits.  0 when that overflows size_t bytes. */
static size_t grown_cap(size_t cap, size_t need, size_t size)
{
	size_t n = cap ? cap : 16;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return 0;
		n *= 2;
	}
	if (size && n > SIZE_MAX / size)
		return 0;
	return n;
}

void vp_xgrow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return;
	size_t n = grown_cap(*cap, need, size);
	if (!n)
		vp_oom(SIZE_MAX);
	*p = vp_xrealloc(*p, n * size);
	*cap = n;
}

int vp_grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = grown_cap(*cap, need, size);
	if (!n)
		return -1;
	size_t bytes = n * size;
	void *q = realloc(*p, bytes ? bytes : 1);
	if (!q)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

void vp_alloc_give_back_freed(void)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
#endif
}
