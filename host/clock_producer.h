/*
 * clock_producer.h - the vperfetto.clock_sync data source of the host.
 *
 * Each started instance gets a thread of its own that writes, at start,
 * every period and at stop, a ClockSnapshot with exactly two clocks: the
 * session's system clock (BOOTTIME, or MONOTONIC) and clock 64, the cpu
 * counter (rdtsc / cntvct_el0), neither incremental nor scaled, taken as
 * the narrowest of a few (counter, clock, counter) sandwiches.  The
 * packet's timestamp is the clock's value.  The same thread polls KVM's
 * debugfs for the VMs it was told about and writes vperfetto/kvm_tsc
 * events at start and whenever a vcpu's values change (see kvm_tsc.h),
 * and looks up which host thread runs each vCPU of the VMs it maps, about
 * once a second, writing vperfetto/vcpu_map events at start and whenever
 * one changes (see vcpu_threads.h).
 *
 * Options come from the command line, overridden per session by
 * DataSourceConfig.legacy_config (see clock_config.h).
 */
#ifndef HOST_CLOCK_PRODUCER_H
#define HOST_CLOCK_PRODUCER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock_config.h"
#include "vp_error.h"

#define CLOCK_PRODUCER_DS_NAME "vperfetto.clock_sync"

/* A VM whose vCPU threads to record as vperfetto/vcpu_map events
 * (vcpu_threads.h): by QMP when qmp is set, else by its thread names. */
struct vcpu_source {
	int vmm_pid;    /* 0: from the threads QMP names */
	const char *vm; /* the VM's name, or NULL */
	const char *qmp; /* QEMU's QMP socket, or NULL */
};

struct clock_producer_opts {
	struct host_clock_opts defaults;
	const char *kvm_debugfs; /* NULL: /sys/kernel/debug */
	const int *vm_pids;      /* VMs whose KVM counter relation to write */
	size_t n_vm_pids;
	const struct vcpu_source *vcpu_srcs; /* VMs whose vCPU threads to map */
	size_t n_vcpu_srcs;
	const char *proc_root; /* NULL: /proc */
};

struct clock_producer_stats {
	uint64_t sessions;    /* instances started */
	uint64_t snapshots;   /* ClockSnapshot packets written */
	uint64_t kvm_records; /* kvm_tsc events written */
	uint64_t vcpu_maps;   /* vcpu_map events written */
	uint64_t dropped;     /* packets the SDK could not take */
};

struct clock_producer;

/* Registers the data source (vp_init() must have run).  The options are
 * copied. */
int clock_producer_new(const struct clock_producer_opts *o,
		       struct clock_producer **out, struct vp_error *err);
void clock_producer_get_stats(struct clock_producer *p,
			      struct clock_producer_stats *out);
/* After vp_shutdown() (the SDK keeps the data source until then). */
void clock_producer_free(struct clock_producer *p);

#endif
