/*
 * vp_alloc.h - the allocation policy of vperfetto's programs.
 *
 * The tools (vtraced, vtraced_probes, vperfetto, vperfetto_merge,
 * vperfetto_tp, the host and guest programs) stop on out-of-memory: every
 * input they read is bounded by documented limits, so running out of
 * memory means the machine is out of it, and there is nothing sane to
 * go on with.  These helpers print the program's name and the size asked
 * for, then abort(), so a core dump shows where.
 *
 * The SDK (libvperfetto), which lives inside other people's programs,
 * never calls these: its allocations fail with an error return and the
 * application goes on (sdk/).  Neither does the code under the SDK that
 * it links (the event loop, the IPC client and frame reader, pb_buf in
 * its soft mode): those grow arrays with vp_grow/VP_GROW, which return
 * -1 and leave the array as it was, and report the failure to their
 * caller.
 */
#ifndef VP_ALLOC_H
#define VP_ALLOC_H

#include <stddef.h>

void *vp_xmalloc(size_t n);
void *vp_xcalloc(size_t n, size_t size);
void *vp_xrealloc(void *p, size_t n);
/* realloc of an array of n elements of size bytes, overflow-checked. */
void *vp_xreallocarray(void *p, size_t n, size_t size);
/* size bytes aligned to align (a power of two), the size rounded up to a
 * multiple of it as aligned_alloc wants; freed with free(). */
void *vp_xaligned_alloc(size_t align, size_t size);
char *vp_xstrdup(const char *s);
/* At most max bytes of s, NUL-terminated. */
char *vp_xstrndup(const char *s, size_t max);

/* For a program held to a bound of memory (vperfetto_merge): blocks of
 * 128 KiB or more are mapped on their own and unmapped when freed, so
 * that what it frees goes back to the system.  glibc does so at first,
 * but raises that threshold to the size of the first such block freed,
 * after which freed buffers stay in its heaps, resident; a threshold set
 * by hand stays where it is.  Call before the threads start. */
void vp_alloc_give_back_freed(void);

/* Makes room for `need` elements in a growing array *p of *cap elements
 * (doubling, at least 16): the one way arrays grow in the tools. */
void vp_xgrow(void **p, size_t *cap, size_t need, size_t size);
#define VP_XGROW(arr, cap, need) \
	vp_xgrow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* As vp_xgrow, but fails instead of aborting: 0, or -1 with *p and *cap
 * unchanged (still valid, still owned by the caller).  For the SDK and the
 * layers it links, and for a daemon refusing what an untrusted peer asks. */
int vp_grow(void **p, size_t *cap, size_t need, size_t size);
#define VP_GROW(arr, cap, need) \
	vp_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* Prints "PROGRAM: out of memory (N bytes)" and aborts. */
_Noreturn void vp_oom(size_t n);

#endif
