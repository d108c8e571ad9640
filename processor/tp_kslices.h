/*
 * tp_kslices.h - ftrace events that make slices of their own: kprobes
 * (kprobe_event), block I/O requests (block_io_start / block_io_done) and
 * the function graph tracer (funcgraph_entry / funcgraph_exit), as
 * Perfetto's FtraceParser makes them.
 */
#ifndef VP_TP_KSLICES_H
#define VP_TP_KSLICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

/* One event (id: its FtraceEvent field, data: the payload, pid: the
 * thread that wrote it, gen: its packet's interning generation); false
 * if id is none of the events above. */
bool tp_kslice_parse(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
		     uint32_t machine, int64_t pid, uint32_t gen, uint32_t id,
		     const uint8_t *data, size_t len);

/* The kernel symbol interned as iid in generation gen, or 0 when the
 * trace has none: counted in interned_data_tokenizer_errors, as Perfetto
 * counts every lookup of an interned message that fails. */
tp_str tp_kernel_symbol(struct tp_ctx *ctx, uint32_t gen, uint64_t iid);

#endif
