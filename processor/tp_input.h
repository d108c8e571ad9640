/*
 * tp_input.h - the trace file as the loader reads it: a regular file as
 * it is, anything else (a pipe, /dev/stdin, a gzip'd trace) first copied
 * into a file of its own.
 *
 * The loader reads at file offsets, so it needs a regular file.  Perfetto's
 * trace_processor_shell also reads a trace from a FIFO and from a gzip
 * file; so does this: a stream is copied, and a gzip stream inflated, into
 * an unlinked temporary file under $TMPDIR (else /tmp), which goes away
 * with its descriptor.
 */
#ifndef VP_TP_INPUT_H
#define VP_TP_INPUT_H

#include <stdint.h>

#include "vp_error.h"

/* Opens path for the loader: a descriptor of a regular file holding the
 * trace (inflated), in *fd.  max_inflate caps what a gzip trace may
 * inflate to (0: no cap).  A gzip stream that ends early or goes bad
 * keeps what it gave before, and warning->msg says so; else it is "".
 * *head_hash is a 64-bit FNV-1a hash of the input's first
 * TP_INPUT_HEAD_BYTES as given (before any inflating).  Returns 0, or -1
 * with err naming path. */
#define TP_INPUT_HEAD_BYTES 4096
int tp_input_open(const char *path, uint64_t max_inflate, int *fd,
		  uint64_t *head_hash, struct vp_error *warning,
		  struct vp_error *err);

#endif
