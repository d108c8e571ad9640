/*
 * kvm_tsc.h - the counter relation KVM gives each vcpu of a VM, read from
 * KVM's debugfs, and the vperfetto/kvm_tsc TrackEvent packets that carry
 * it into the host trace (clock-sync.md).
 *
 * KVM makes a directory per VM, <debugfs>/kvm/<pid>-<vm fd>/, with one
 * vcpuN/ directory per vcpu holding tsc-offset (signed decimal) and, where
 * the CPU scales the TSC, tsc-scaling-ratio and
 * tsc-scaling-ratio-frac-bits:
 *     guest_tsc = (host_tsc * ratio >> frac_bits) + offset
 * The debugfs mount point is /sys/kernel/debug unless told otherwise
 * (tests point it at a fake tree with the same layout).
 */
#ifndef HOST_KVM_TSC_H
#define HOST_KVM_TSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb_wire.h"
#include "vp_error.h"

#define KVM_TSC_DEFAULT_DEBUGFS "/sys/kernel/debug"

/* One vcpu's reading. */
struct kvm_vcpu_tsc {
	int vm_pid;
	int vm_fd;  /* the <fd> of the VM's directory name */
	int vcpu;
	int64_t tsc_offset;
	bool has_scaling; /* both scaling files were there */
	uint64_t tsc_scaling_ratio;
	uint64_t tsc_scaling_frac_bits;
};

/* Why a VM could not be read (kvm_tsc_read_vm's negative returns). */
enum kvm_tsc_err {
	KVM_TSC_NO_DEBUGFS = -1, /* no <debugfs>/kvm directory */
	KVM_TSC_NO_ACCESS = -2,  /* permission denied */
	KVM_TSC_NO_VM = -3,      /* no directory of that pid */
	KVM_TSC_BAD_FILE = -4,   /* a file did not parse, or a read error */
};

/* Reads every vcpu of every KVM VM directory of `pid` (a process may own
 * several VM fds).  On success returns the number of readings stored in
 * *out (malloc'ed, sorted by vm_fd then vcpu; free() it), which may be 0
 * for a VM without vcpus yet.  On failure returns an enum kvm_tsc_err with
 * a message naming the path in err. */
int kvm_tsc_read_vm(const char *debugfs, int pid, struct kvm_vcpu_tsc **out,
		    struct vp_error *err);

/* Remembers the last reading of each (vm_pid, vm_fd, vcpu) so that only
 * new and changed values are written. */
struct kvm_tsc_tracker {
	struct kvm_vcpu_tsc *v;
	size_t n, cap;
};

void kvm_tsc_tracker_init(struct kvm_tsc_tracker *t);
void kvm_tsc_tracker_free(struct kvm_tsc_tracker *t);
/* Forgets everything: the next readings all count as new. */
void kvm_tsc_tracker_reset(struct kvm_tsc_tracker *t);
/* True if r is new or differs from the last reading of its vcpu; the
 * reading is remembered either way. */
bool kvm_tsc_tracker_changed(struct kvm_tsc_tracker *t,
			     const struct kvm_vcpu_tsc *r);

/* The uuid of the track the kvm_tsc events of VM `pid` go on. */
uint64_t kvm_tsc_track_uuid(int pid);
/* Appends a TracePacket body: the TrackDescriptor of that track (a
 * global track named "kvm_tsc VM pid N"), at ts_ns (CLOCK_BOOTTIME). */
void kvm_tsc_encode_track(struct pb_buf *b, int pid, uint64_t ts_ns,
			  uint32_t seq_flags);
/* Appends a TracePacket body: the vperfetto/kvm_tsc INSTANT event of one
 * reading at ts_ns (CLOCK_BOOTTIME). */
void kvm_tsc_encode_event(struct pb_buf *b, const struct kvm_vcpu_tsc *r,
			  uint64_t ts_ns, uint32_t seq_flags);

#endif
