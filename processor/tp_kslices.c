/*
 * tp_kslices.c - ftrace events that make slices of their own, as
 * Perfetto's FtraceParser makes them:
 *
 *   kprobe_event     on the thread's track: KPROBE_TYPE_BEGIN opens a
 *                    slice named after the probe, END closes it,
 *                    INSTANT is a slice of no duration
 *   block_io_start / block_io_done
 *                    a "block_io" slice per request on the track of its
 *                    device (type block_io, dimension block_device; a
 *                    counter-kind track in Perfetto, slices all the same),
 *                    with the request's sector as arg
 *   funcgraph_entry / funcgraph_exit
 *                    a slice per traced kernel function, named by the
 *                    interned kernel symbol (else its address in hex), on
 *                    the thread's "Funcgraph" track; the idle task (pid 0)
 *                    runs on every cpu at once, so its functions go on a
 *                    track per cpu ("swapper<cpu> -funcgraph")
 *   signal_generate / signal_deliver
 *                    a slice of no duration on the track of the thread
 *                    the signal is for (generate: its pid field; deliver:
 *                    the event's thread), with the signal as signal.sig
 *   workqueue_execute_start / workqueue_execute_end
 *                    a "workqueue" slice on the worker thread's track,
 *                    named like funcgraph's, with the cpu as arg
 *   hrtimer_expire_entry / hrtimer_expire_exit
 *                    an "hrtimer" slice on the cpu's track (type
 *                    cpu_hrtimer, "Hrtimer Cpu N"), named by the timer's
 *                    function like funcgraph's
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_kslices.h"
#include "tp_procs.h"
#include "tp_seq.h"
#include "tp_slices.h"
#include "tp_tracks.h"

/* The last varint field num of a payload, 0 if absent. */
static uint64_t varint_field(const uint8_t *data, size_t len, uint32_t num)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t v = 0;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == num && f.wt == PB_WT_VARINT)
			v = f.val;
	return v;
}

/* The last string field num of a payload, "" if absent. */
static tp_str string_field(struct tp_ctx *ctx, const uint8_t *data,
			   size_t len, uint32_t num)
{
	struct pb_reader r;
	struct pb_field f;
	tp_str v = tp_intern(ctx->pool, "", 0);

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == num && f.wt == PB_WT_LEN)
			v = tp_intern(ctx->pool, (const char *)f.data, f.len);
	return v;
}

/* ---- kprobes ---------------------------------------------------------- */

static void kprobe(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		   int64_t pid, const uint8_t *data, size_t len)
{
	tp_str name = string_field(ctx, data, len, KP_NAME);
	uint64_t type = varint_field(data, len, KP_TYPE);
	uint32_t track = tp_track_thread(ctx, tp_thread_get(ctx, machine, pid));

	if (type == KPROBE_TYPE_BEGIN)
		tp_slice_begin(ctx, track, ts, 0, name, -1);
	else if (type == KPROBE_TYPE_END)
		tp_slice_end(ctx, track, ts, 0, name, -1);
	else if (type == KPROBE_TYPE_INSTANT)
		tp_slice_complete(ctx, track, ts, 0, 0, name, -1);
}

/* ---- block I/O -------------------------------------------------------- */

static uint32_t block_track(struct tp_ctx *ctx, uint32_t machine,
			    uint64_t dev)
{
	struct tp_track_spec s;
	struct tp_args_builder b;
	tp_str k = tp_s(ctx, "block_device");

	tp_track_spec_init(&s, machine);
	s.type = tp_s(ctx, "block_io");
	s.event_type = tp_s(ctx, "counter");
	tp_args_builder_init(&b);
	/* a uint dimension, stored as an int as Perfetto does */
	tp_args_add_int(&b, k, k, (int64_t)dev);
	s.dimension_arg_set_id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return tp_track_intern(ctx, &s);
}

static int64_t sector_args(struct tp_ctx *ctx, uint64_t sector)
{
	struct tp_args_builder b;
	tp_str k = tp_s(ctx, "sector");
	int64_t id;

	tp_args_builder_init(&b);
	tp_args_add_uint(&b, k, k, sector);
	id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return id;
}

static void block_io(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     bool start, const uint8_t *data, size_t len)
{
	uint64_t dev = varint_field(data, len,
				    start ? BIO_START_DEV : BIO_DONE_DEV);
	uint64_t sector = varint_field(data, len,
				       start ? BIO_START_SECTOR
					     : BIO_DONE_SECTOR);
	uint32_t track = block_track(ctx, machine, dev);
	tp_str name = tp_s(ctx, "block_io");

	if (start)
		tp_slice_begin(ctx, track, ts, 0, name,
			       sector_args(ctx, sector));
	else if (tp_slice_top(ctx, track) >= 0) /* args only for a slice */
		tp_slice_end(ctx, track, ts, 0, name,
			     sector_args(ctx, sector));
}

/* ---- function graph --------------------------------------------------- */

tp_str tp_kernel_symbol(struct tp_ctx *ctx, uint32_t gen, uint64_t iid)
{
	/* a missing iid is counted by the lookup */
	return tp_interned_str(ctx, gen, ID_KERNEL_SYMBOLS, iid,
			       INTERNED_STRING_STR);
}

/* A kernel function's name: its interned symbol, else its address as
 * printf's %#x writes it (0x before any value but 0). */
static tp_str symbol_or_address(struct tp_ctx *ctx, uint32_t gen,
				uint64_t addr)
{
	tp_str name = tp_kernel_symbol(ctx, gen, addr);
	char buf[32];

	if (name)
		return name;
	snprintf(buf, sizeof buf, "%#" PRIx64, addr);
	return tp_s(ctx, buf);
}

static uint32_t funcgraph_track(struct tp_ctx *ctx, uint32_t machine,
				uint32_t cpu, int64_t pid)
{
	struct tp_track_spec s;
	struct tp_args_builder b;
	char name[64];
	tp_str k = tp_s(ctx, "cpu");

	tp_track_spec_init(&s, machine);
	tp_args_builder_init(&b);
	if (pid != 0) {
		uint32_t utid = tp_thread_get(ctx, machine, pid);
		s.type = tp_s(ctx, "thread_funcgraph");
		s.name = tp_s(ctx, "Funcgraph");
		s.utid = utid;
		k = tp_s(ctx, "utid");
		tp_args_add_int(&b, k, k, utid);
	} else {
		snprintf(name, sizeof name, "swapper%u -funcgraph", cpu);
		s.type = tp_s(ctx, "cpu_funcgraph");
		s.name = tp_s(ctx, name);
		tp_args_add_int(&b, k, k, cpu);
	}
	s.dimension_arg_set_id = tp_args_commit(ctx, &b);
	tp_args_builder_free(&b);
	return tp_track_intern(ctx, &s);
}

static void funcgraph(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
		      uint32_t machine, int64_t pid, uint32_t gen, bool entry,
		      const uint8_t *data, size_t len)
{
	uint64_t fn = varint_field(data, len, entry ? FGE_FUNC : FGX_FUNC);
	tp_str name = symbol_or_address(ctx, gen, fn);
	uint32_t track = funcgraph_track(ctx, machine, cpu, pid);
	if (entry)
		tp_slice_begin(ctx, track, ts, 0, name, -1);
	else
		tp_slice_end(ctx, track, ts, 0, name, -1);
}

/* ---- signals and work items -------------------------------------------- */

static void signal_event(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			 int64_t pid, bool generate, const uint8_t *data,
			 size_t len)
{
	int32_t sig = (int32_t)varint_field(data, len,
					     generate ? SIGG_SIG : SIGD_SIG);
	if (generate) /* the pid the signal goes to, not the sender's */
		pid = (int32_t)varint_field(data, len, SIGG_PID);
	uint32_t track = tp_track_thread(ctx, tp_thread_get(ctx, machine, pid));
	tp_slice_complete(ctx, track, ts, 0, 0,
			  tp_s(ctx, generate ? "signal_generate"
					     : "signal_deliver"),
			  tp_args_one_int(ctx, "signal.sig", sig));
}

static void workqueue(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
		      uint32_t machine, int64_t pid, uint32_t gen, bool start,
		      const uint8_t *data, size_t len)
{
	uint32_t track = tp_track_thread(ctx, tp_thread_get(ctx, machine, pid));
	tp_str cat = tp_s(ctx, "workqueue");

	if (!start) {
		tp_slice_end(ctx, track, ts, cat, 0, -1);
		return;
	}
	uint64_t fn = varint_field(data, len, WQES_FUNCTION);
	tp_str name = symbol_or_address(ctx, gen, fn);
	tp_slice_begin(ctx, track, ts, cat, name,
		       tp_args_one_int(ctx, "cpu", cpu));
}

/* ---- high-resolution timers ------------------------------------------- */

static uint32_t hrtimer_track(struct tp_ctx *ctx, uint32_t machine,
			      uint32_t cpu)
{
	char name[64];

	snprintf(name, sizeof name, "Hrtimer Cpu %u", cpu);
	return tp_track_cpu_slices(ctx, machine, "cpu_hrtimer", name, cpu);
}

static void hrtimer(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
		    uint32_t machine, uint32_t gen, bool entry,
		    const uint8_t *data, size_t len)
{
	uint32_t track = hrtimer_track(ctx, machine, cpu);
	tp_str cat = tp_s(ctx, "hrtimer");

	if (!entry) {
		tp_slice_end(ctx, track, ts, cat, 0, -1);
		return;
	}
	uint64_t fn = varint_field(data, len, HTEE_FUNCTION);
	tp_slice_begin(ctx, track, ts, cat, symbol_or_address(ctx, gen, fn),
		       -1);
}

bool tp_kslice_parse(struct tp_ctx *ctx, int64_t ts, uint32_t cpu,
		     uint32_t machine, int64_t pid, uint32_t gen, uint32_t id,
		     const uint8_t *data, size_t len)
{
	switch (id) {
	case FE_KPROBE_EVENT:
		kprobe(ctx, ts, machine, pid, data, len);
		return true;
	case FE_BLOCK_IO_START:
	case FE_BLOCK_IO_DONE:
		block_io(ctx, ts, machine, id == FE_BLOCK_IO_START, data, len);
		return true;
	case FE_FUNCGRAPH_ENTRY:
	case FE_FUNCGRAPH_EXIT:
		funcgraph(ctx, ts, cpu, machine, pid, gen,
			  id == FE_FUNCGRAPH_ENTRY, data, len);
		return true;
	case FE_SIGNAL_GENERATE:
	case FE_SIGNAL_DELIVER:
		signal_event(ctx, ts, machine, pid, id == FE_SIGNAL_GENERATE,
			     data, len);
		return true;
	case FE_WORKQUEUE_EXECUTE_START:
	case FE_WORKQUEUE_EXECUTE_END:
		workqueue(ctx, ts, cpu, machine, pid, gen,
			  id == FE_WORKQUEUE_EXECUTE_START, data, len);
		return true;
	case FE_HRTIMER_EXPIRE_ENTRY:
	case FE_HRTIMER_EXPIRE_EXIT:
		hrtimer(ctx, ts, cpu, machine, gen,
			id == FE_HRTIMER_EXPIRE_ENTRY, data, len);
		return true;
	default:
		return false;
	}
}
