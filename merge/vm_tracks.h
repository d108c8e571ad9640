/*
 * vm_tracks.h - vperfetto_merge --vm-tracks: for every guest CPU, a track
 * on the guest's machine whose slices are the host-side state of its vCPU
 * (running, preempted, blocked, exit, unknown), so a viewer shows host
 * preemption right beside the guest's own CPU tracks.
 *
 * The states are vperfetto_tp's vcpu_state table, computed from the host
 * trace alone (its sched data and vcpu_map records, tp_vcpu.h).  Guest i
 * is the VM of --guest-vm-pid i when given, else the i-th VM the host
 * trace recorded vCPUs of.
 *
 * What is written uses only Perfetto's schema: per guest, one sequence of
 * its own (machine_id: the guest's) holding a TrackDescriptor per guest CPU
 * ("vCPU N host state", uuid derived from machine and CPU), a
 * vperfetto/vm_machine instant on the first (annotation vmm_pid: which VM
 * this machine is, for vperfetto_tp) and a SLICE_BEGIN / SLICE_END pair
 * per state, named after the state, with debug annotations host_tid and,
 * while on a host CPU, host_cpu.
 */
#ifndef VP_VM_TRACKS_H
#define VP_VM_TRACKS_H

#include "merge.h"

/* A merge_extra_fn: ctx is unused.  Guests whose VM is not found get a
 * warning in the result, not a failure. */
int vm_tracks_write(void *ctx, const struct merge_opts *o,
		    struct merge_result *res, uint32_t seq_base,
		    struct trace_writer *w, struct vp_error *err);

#endif
