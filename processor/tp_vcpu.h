/*
 * tp_vcpu.h - the host side of each guest CPU (tp_vcpu.c): which host
 * thread runs it (the vcpu table), what that thread was doing on the host
 * (vcpu_state) and what that meant for each guest thread
 * (guest_thread_host_state).
 */
#ifndef VP_TP_VCPU_H
#define VP_TP_VCPU_H

#include <stddef.h>
#include <stdint.h>

struct tp_ctx;

/* Which VM runs which guest machine, when the caller knows (the merge):
 * VMM pid vmm_pid[i] on machine table id machine[i]; a pid of 0 stands for
 * the only VM of the trace, -k for the k-th VM in the order their vCPUs
 * were first recorded.  Without it the trace decides (tp_vcpu.c). */
#define TP_VCPU_MAX_ASSIGN 16
struct tp_vcpu_assign {
	size_t n;
	int64_t vmm_pid[TP_VCPU_MAX_ASSIGN];
	int64_t machine[TP_VCPU_MAX_ASSIGN];
};

/* Fills vcpu, vcpu_state and guest_thread_host_state from the parsed
 * tables; the loader calls it once, after every module finished. */
void tp_vcpu_build(struct tp_ctx *ctx, const struct tp_vcpu_assign *assign);

/* The vCPU index a VMM gives its vCPU thread in the thread's name, or -1:
 * "CPU 3/KVM", "CPU 3/TCG" (QEMU), "crosvm_vcpu3", "crosvm_vcpu 3". */
int64_t tp_vcpu_index_from_name(const char *name);

#endif
