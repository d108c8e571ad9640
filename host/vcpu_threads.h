/*
 * vcpu_threads.h - which host thread runs which vCPU of a VM, and the
 * vperfetto/vcpu_map TrackEvent packets that carry it into the host trace.
 *
 * Two sources:
 *  - the VMM's thread names under /proc/PID/task/TID/comm: QEMU names its
 *    vCPU threads "CPU n/KVM" or "CPU n/TCG" (with -name debug-threads=on,
 *    which libvirt always gives), crosvm "crosvm_vcpuN";
 *  - QEMU's monitor: QMP query-cpus-fast over the QMP socket, whose
 *    "thread-id" is the vCPU thread's tid (any QEMU, named threads or not).
 *
 * The event (on a global track "vcpu_map VM pid N" of the host clock
 * producer's sequence): an INSTANT, category "vperfetto", name "vcpu_map",
 * debug annotations vm (string, when known), vmm_pid, vcpu, host_tid (int)
 * and source ("qmp" or "thread_name").  vperfetto_tp reads them into its
 * vcpu table; each holds for its vCPU from its timestamp until the next.
 */
#ifndef HOST_VCPU_THREADS_H
#define HOST_VCPU_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "vp_error.h"

#define VCPU_THREADS_MAX 512

struct vcpu_thread {
	int vcpu;
	int tid;
};

/* The vCPU index in a vCPU thread's name, or -1. */
int vcpu_index_from_name(const char *name);

/* vCPU threads of process pid from the thread names under proc_root
 * (normally "/proc"), sorted by vcpu.  Returns how many (0: none named so),
 * or -1 with err set when the process cannot be read. */
int vcpu_threads_from_names(const char *proc_root, int pid,
			    struct vcpu_thread *out, size_t max,
			    struct vp_error *err);

/* The vCPUs in a QMP query-cpus-fast reply (the text of the message that
 * holds "return"), sorted by vcpu.  Returns how many, or -1 when the text
 * is not such a reply. */
int vcpu_threads_parse_qmp(const char *json, size_t len,
			   struct vcpu_thread *out, size_t max);

/* Asks QEMU's QMP socket at path (capabilities negotiation, then
 * query-cpus-fast), waiting at most timeout_ms in all.  Returns how many
 * vCPUs, or -1 with err set. */
int vcpu_threads_from_qmp(const char *path, int timeout_ms,
			  struct vcpu_thread *out, size_t max,
			  struct vp_error *err);

/* The process (thread group) a thread belongs to, from
 * proc_root/TID/status; -1 if unknown. */
int vcpu_thread_tgid(const char *proc_root, int tid);

/* The track the vcpu_map events of VMM pid go on. */
uint64_t vcpu_map_track_uuid(int pid);
/* Appends a TracePacket body: that track's TrackDescriptor at ts_ns. */
void vcpu_map_encode_track(struct pb_buf *b, int pid, uint64_t ts_ns);
/* Appends a TracePacket body: one vcpu_map event at ts_ns (vm may be
 * NULL). */
void vcpu_map_encode_event(struct pb_buf *b, const char *vm, int vmm_pid,
			   const struct vcpu_thread *t, const char *source,
			   uint64_t ts_ns);

#endif
