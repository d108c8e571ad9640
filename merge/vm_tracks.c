/*
 * vm_tracks.c - the vCPUs' host-state tracks of vperfetto_merge
 * --vm-tracks (see vm_tracks.h): the host trace is loaded with
 * vperfetto_tp's loader, which computes the vcpu_state rows; each becomes a
 * slice on a track of the guest machine.
 */
#include "vm_tracks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "pb_wire.h"
#include "perfetto_fields.h"
#include "tp_ctx.h"
#include "tp_load.h"
#include "tp_vcpu.h"
#include "trace_io.h"

/* "vmtrack" in ASCII in the high bits: clear of the SDK's uuids and of the
 * guests' (whose uuids the merge leaves as they are under machine_id). */
#define VM_TRACK_UUID_BASE 0x766d747261636b00ull

static uint64_t track_uuid(int64_t machine, int64_t cpu)
{
	return VM_TRACK_UUID_BASE ^ ((uint64_t)machine << 40) ^
	       ((uint64_t)cpu & 0xffffffffull) << 4;
}

static void add_warning(struct merge_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void add_warning(struct merge_result *res, const char *fmt, ...)
{
	va_list ap;

	if (res->n_warnings == MERGE_MAX_WARNINGS) {
		res->n_warnings_dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(res->warnings[res->n_warnings++],
		  sizeof(res->warnings[0]), fmt, ap);
	va_end(ap);
}

struct out {
	struct trace_writer *w;
	struct pb_buf b;
	uint32_t seq;
	int64_t machine;
	int status;
	struct vp_error *err;
};

/* Ends the packet in o->b (sequence, machine) and writes it. */
static void put_packet(struct out *o)
{
	pb_put_varint(&o->b, TP_TRUSTED_PACKET_SEQUENCE_ID, o->seq);
	pb_put_varint(&o->b, TP_MACHINE_ID, (uint64_t)o->machine);
	if (o->status == MERGE_OK &&
	    trace_writer_packet(o->w, o->b.data, o->b.len, o->err) < 0)
		o->status = MERGE_IO_ERROR;
	pb_buf_reset(&o->b);
}

static void put_int(struct pb_buf *b, const char *name, int64_t v)
{
	size_t a = pb_begin_nested(b, TE_DEBUG_ANNOTATIONS);
	pb_put_string(b, DA_NAME, name);
	pb_put_varint(b, DA_INT_VALUE, (uint64_t)v);
	pb_end_nested(b, a);
}

static void describe(struct out *o, int64_t cpu, int64_t ts)
{
	char name[64];

	snprintf(name, sizeof(name), "vCPU %lld host state", (long long)cpu);
	pb_put_varint(&o->b, TP_TIMESTAMP, (uint64_t)ts);
	size_t td = pb_begin_nested(&o->b, TP_TRACK_DESCRIPTOR);
	pb_put_varint(&o->b, TD_UUID, track_uuid(o->machine, cpu));
	pb_put_string(&o->b, TD_NAME, name);
	pb_end_nested(&o->b, td);
	put_packet(o);
}

static void vm_machine(struct out *o, int64_t cpu, int64_t ts, int64_t pid)
{
	pb_put_varint(&o->b, TP_TIMESTAMP, (uint64_t)ts);
	size_t te = pb_begin_nested(&o->b, TP_TRACK_EVENT);
	pb_put_varint(&o->b, TE_TYPE, TE_TYPE_INSTANT);
	pb_put_varint(&o->b, TE_TRACK_UUID, track_uuid(o->machine, cpu));
	pb_put_string(&o->b, TE_CATEGORIES, "vperfetto");
	pb_put_string(&o->b, TE_NAME, "vm_machine");
	put_int(&o->b, "vmm_pid", pid);
	pb_end_nested(&o->b, te);
	put_packet(o);
}

static void state_slice(struct out *o, int64_t cpu, int64_t ts, int64_t dur,
			const char *state, int64_t host_cpu, int64_t host_tid)
{
	pb_put_varint(&o->b, TP_TIMESTAMP, (uint64_t)ts);
	size_t te = pb_begin_nested(&o->b, TP_TRACK_EVENT);
	pb_put_varint(&o->b, TE_TYPE, TE_TYPE_SLICE_BEGIN);
	pb_put_varint(&o->b, TE_TRACK_UUID, track_uuid(o->machine, cpu));
	pb_put_string(&o->b, TE_CATEGORIES, "vperfetto");
	pb_put_string(&o->b, TE_NAME, state);
	if (host_tid > 0)
		put_int(&o->b, "host_tid", host_tid);
	if (host_cpu >= 0)
		put_int(&o->b, "host_cpu", host_cpu);
	pb_end_nested(&o->b, te);
	put_packet(o);

	pb_put_varint(&o->b, TP_TIMESTAMP, (uint64_t)(ts + dur));
	te = pb_begin_nested(&o->b, TP_TRACK_EVENT);
	pb_put_varint(&o->b, TE_TYPE, TE_TYPE_SLICE_END);
	pb_put_varint(&o->b, TE_TRACK_UUID, track_uuid(o->machine, cpu));
	pb_end_nested(&o->b, te);
	put_packet(o);
}

/* The VMM pid of the vcpu rows on machine, or 0. */
static int64_t machine_pid(struct tp_ctx *ctx, int64_t machine)
{
	struct tp_table *v = tp_tab(ctx, TP_T_VCPU);

	for (uint32_t r = 0; r < v->nrows; r++)
		if (tp_get_int(v, TP_VCPU_machine_id, r) == machine)
			return tp_get_int(v, TP_VCPU_vmm_pid, r);
	return 0;
}

/* The tracks of one guest machine from the vcpu_state rows. */
static int write_machine(struct tp_ctx *ctx, struct out *o)
{
	struct tp_table *s = tp_tab(ctx, TP_T_VCPU_STATE);
	struct tp_table *th = tp_tab(ctx, TP_T_THREAD);
	int64_t described[1024];
	size_t nd = 0;
	size_t rows = 0;

	for (uint32_t r = 0; r < s->nrows && o->status == MERGE_OK; r++) {
		if (tp_get_int(s, TP_VCPU_STATE_machine_id, r) != o->machine)
			continue;
		int64_t cpu = tp_get_int(s, TP_VCPU_STATE_cpu, r);
		int64_t ts = tp_get_int(s, TP_VCPU_STATE_ts, r);
		bool seen = false;
		for (size_t i = 0; i < nd; i++)
			seen |= described[i] == cpu;
		if (!seen && nd < sizeof(described) / sizeof(described[0])) {
			described[nd++] = cpu;
			describe(o, cpu, ts);
			if (nd == 1)
				vm_machine(o, cpu, ts, machine_pid(ctx,
								   o->machine));
		}
		int64_t tid = -1;
		if (!tp_is_null(s, TP_VCPU_STATE_host_utid, r)) {
			int64_t utid =
				tp_get_int(s, TP_VCPU_STATE_host_utid, r);
			if (utid >= 0 && utid < th->nrows)
				tid = tp_get_int(th, TP_THREAD_tid,
						 (uint32_t)utid);
		}
		state_slice(o, cpu, ts, tp_get_int(s, TP_VCPU_STATE_dur, r),
			    tp_str_get(ctx->pool,
				       tp_get_str(s, TP_VCPU_STATE_state, r)),
			    tp_is_null(s, TP_VCPU_STATE_host_cpu, r)
				    ? -1
				    : tp_get_int(s, TP_VCPU_STATE_host_cpu, r),
			    tid);
		rows++;
	}
	return rows ? 1 : 0;
}

int vm_tracks_write(void *ctx_unused, const struct merge_opts *o,
		    struct merge_result *res, uint32_t seq_base,
		    struct trace_writer *w, struct vp_error *err)
{
	struct tp_vcpu_assign a = {0};
	struct tp_load_opts lo = {.quiet = true, .vcpu_assign = &a,
				  .max_inflate = o->max_inflate};
	struct vp_error lerr;
	struct tp_ctx *ctx;
	struct out out = {.w = w, .status = MERGE_OK, .err = err};

	(void)ctx_unused;
	if (o->no_machine_id) {
		add_warning(res, "--vm-tracks: no tracks without machine ids "
				 "(--no-machine-id)");
		return MERGE_OK;
	}
	if (res->clock != BUILTIN_CLOCK_BOOTTIME) {
		add_warning(res, "--vm-tracks: the host's sched data are on "
				 "BOOTTIME, the output on another clock: no "
				 "vCPU tracks");
		return MERGE_OK;
	}
	if (seq_base > UINT32_MAX - MERGE_MAX_GUESTS - 1) {
		add_warning(res, "--vm-tracks: no sequence ids left");
		return MERGE_OK;
	}
	/* Guest i: the VM of --guest-vm-pid i, else the i-th VM recorded
	 * (the only one, for a single guest). */
	for (size_t i = 0; i < res->n_guests && i < TP_VCPU_MAX_ASSIGN; i++) {
		a.machine[i] = res->guests[i].machine_id;
		a.vmm_pid[i] = i < o->n_vm_pid ? o->vm_pid[i]
			       : res->n_guests == 1 ? 0
						    : -(int64_t)(i + 1);
		a.n++;
	}
	ctx = tp_ctx_new();
	if (!ctx)
		return vp_errorf(err, "out of memory"), MERGE_IO_ERROR;
	if (tp_load_file(ctx, o->host, &lo, &lerr) < 0) {
		tp_ctx_free(ctx);
		vp_errorf(err, "--vm-tracks: %s", lerr.msg);
		return MERGE_BAD_INPUT;
	}
	pb_buf_init(&out.b);
	for (size_t i = 0; i < a.n && out.status == MERGE_OK; i++) {
		out.seq = seq_base + 1 + (uint32_t)i;
		out.machine = a.machine[i];
		if (!write_machine(ctx, &out) && out.status == MERGE_OK)
			add_warning(res, "--vm-tracks: guest %s: no host "
				    "state of its vCPUs (no vCPU threads of "
				    "its VM%s, or no host sched data)",
				    res->guests[i].path,
				    i < o->n_vm_pid ? ""
						    : " (give --guest-vm-pid)");
	}
	pb_buf_free(&out.b);
	tp_ctx_free(ctx);
	return out.status;
}
