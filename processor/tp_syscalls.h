/*
 * tp_syscalls.h - raw_syscalls sys_enter / sys_exit as slices on the
 * thread's track, named by the trace's architecture (system_info's
 * utsname machine), as Perfetto's SyscallTracker does.
 */
#ifndef VP_TP_SYSCALLS_H
#define VP_TP_SYSCALLS_H

#include <stddef.h>
#include <stdint.h>

struct tp_ctx;

/* Syscall numbers at or above this have no name and give no slice. */
#define TP_MAX_SYSCALLS 550

/* The generated tables (tp_syscall_table.c): a NULL entry has no name. */
extern const char *const tp_syscalls_arm64[];
extern const unsigned tp_syscalls_arm64_len;
extern const char *const tp_syscalls_x86_64[];
extern const unsigned tp_syscalls_x86_64_len;
extern const char *const tp_syscalls_x86[];
extern const unsigned tp_syscalls_x86_len;

struct tp_syscalls *tp_syscalls_new(void);
void tp_syscalls_free(struct tp_syscalls *s);

/* utsname.machine of a machine's system_info; an architecture with no
 * table leaves the one before (numbers alone, sys_N, if none). */
void tp_syscalls_set_arch(struct tp_ctx *ctx, uint32_t machine,
			  const char *uts_machine, size_t len);
/* A SysEnterFtraceEvent / SysExitFtraceEvent payload of thread tid. */
void tp_syscall_enter(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t tid, const uint8_t *data, size_t len);
void tp_syscall_exit(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t tid, const uint8_t *data, size_t len);
/* An atrace print of thread tid: ends its open sys_write slice there. */
void tp_syscall_print(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t tid);

#endif
