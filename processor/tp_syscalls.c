/*
 * tp_syscalls.c - raw_syscalls sys_enter / sys_exit as slices on the
 * thread's track, as Perfetto's SyscallTracker makes them.
 *
 * A syscall's name comes from its number and the machine's architecture
 * (system_info utsname.machine, read at tokenize time, so it names every
 * event of the trace); a number the table has no name for, or any number
 * when the architecture is unknown, is sys_N.  sys_enter begins a slice
 * with the arguments as args[i], sys_exit ends the open one of that name
 * with its return value as ret.  rt_sigreturn never returns: an instant.
 * A sys_write open when the thread prints an atrace marker is ended there,
 * so the marker's slice (which the write produced) nests properly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_ctx.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_stats.h"
#include "tp_syscalls.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

enum arch { ARCH_UNKNOWN, ARCH_ARM64, ARCH_X86_64, ARCH_X86 };

struct tp_syscalls {
	uint8_t *arch; /* per machine */
	uint32_t narch;
	uint8_t *in_write; /* per utid: a sys_write slice is open */
	uint32_t nwrite;
	struct tp_args_builder b;
};

struct tp_syscalls *tp_syscalls_new(void)
{
	struct tp_syscalls *s = vp_xcalloc(1, sizeof *s);

	tp_args_builder_init(&s->b);
	return s;
}

void tp_syscalls_free(struct tp_syscalls *s)
{
	if (!s)
		return;
	free(s->arch);
	free(s->in_write);
	tp_args_builder_free(&s->b);
	free(s);
}

static bool is(const char *s, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(s, want, len) == 0;
}

void tp_syscalls_set_arch(struct tp_ctx *ctx, uint32_t machine,
			  const char *m, size_t len)
{
	struct tp_syscalls *s = ctx->syscalls;
	enum arch a = ARCH_UNKNOWN;

	if (is(m, len, "aarch64"))
		a = ARCH_ARM64;
	else if (is(m, len, "x86_64"))
		a = ARCH_X86_64;
	else if (is(m, len, "i686"))
		a = ARCH_X86;
	/* armv7l / armv8l (32-bit arm) have no table here yet. */
	if (a == ARCH_UNKNOWN)
		return;
	if (machine >= s->narch) {
		s->arch = vp_xrealloc(s->arch, machine + 1);
		memset(s->arch + s->narch, 0, machine + 1 - s->narch);
		s->narch = machine + 1;
	}
	s->arch[machine] = (uint8_t)a;
}

/* The slice name of syscall nr, 0 when it gets no slice. */
static tp_str syscall_name(struct tp_ctx *ctx, uint32_t machine, uint64_t nr)
{
	struct tp_syscalls *s = ctx->syscalls;
	const char *const *t = NULL;
	unsigned n = 0;
	char buf[32];

	if (nr >= TP_MAX_SYSCALLS)
		return 0;
	switch (machine < s->narch ? s->arch[machine] : ARCH_UNKNOWN) {
	case ARCH_ARM64:
		t = tp_syscalls_arm64;
		n = tp_syscalls_arm64_len;
		break;
	case ARCH_X86_64:
		t = tp_syscalls_x86_64;
		n = tp_syscalls_x86_64_len;
		break;
	case ARCH_X86:
		t = tp_syscalls_x86;
		n = tp_syscalls_x86_len;
		break;
	default:
		break;
	}
	if (nr < n && t[nr])
		return tp_s(ctx, t[nr]);
	snprintf(buf, sizeof buf, "sys_%u", (unsigned)nr);
	return tp_s(ctx, buf);
}

static uint8_t *write_flag(struct tp_syscalls *s, uint32_t utid)
{
	if (utid >= s->nwrite) {
		uint32_t n = s->nwrite ? s->nwrite : 64;
		while (n <= utid)
			n *= 2;
		s->in_write = vp_xrealloc(s->in_write, n);
		memset(s->in_write + s->nwrite, 0, n - s->nwrite);
		s->nwrite = n;
	}
	return &s->in_write[utid];
}

void tp_syscall_enter(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t tid, const uint8_t *data, size_t len)
{
	struct tp_syscalls *s = ctx->syscalls;
	struct pb_reader r;
	struct pb_field f;
	uint64_t nr = 0;
	unsigned i = 0;
	tp_str flat = tp_s(ctx, "args");

	tp_args_builder_reset(&s->b);
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == SYSE_ID && f.wt == PB_WT_VARINT) {
			nr = (uint32_t)f.val;
		} else if (f.num == SYSE_ARGS) {
			struct pb_packed_iter it;
			uint64_t v;
			char key[32];
			if (f.wt == PB_WT_VARINT) {
				snprintf(key, sizeof key, "args[%u]", i++);
				tp_args_add_uint(&s->b, flat, tp_s(ctx, key),
						 f.val);
				continue;
			}
			if (f.wt != PB_WT_LEN)
				continue;
			pb_packed_init(&it, f.data, f.len);
			while (pb_packed_next(&it, &v)) {
				snprintf(key, sizeof key, "args[%u]", i++);
				tp_args_add_uint(&s->b, flat, tp_s(ctx, key),
						 v);
			}
		}
	}
	uint32_t utid = tp_thread_get(ctx, machine, tid);
	tp_str name = syscall_name(ctx, machine, nr);
	if (!name)
		return;
	uint32_t track = tp_track_thread(ctx, utid);
	int64_t args = tp_args_commit(ctx, &s->b);
	if (name == tp_s(ctx, "sys_rt_sigreturn")) {
		tp_slice_complete(ctx, track, ts, 0, 0, name, args);
		return;
	}
	tp_slice_begin(ctx, track, ts, 0, name, args);
	if (name == tp_s(ctx, "sys_write"))
		*write_flag(s, utid) = 1;
}

void tp_syscall_exit(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t tid, const uint8_t *data, size_t len)
{
	struct tp_syscalls *s = ctx->syscalls;
	struct pb_reader r;
	struct pb_field f;
	uint64_t nr = 0;

	tp_args_builder_reset(&s->b);
	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f)) {
		if (f.num == SYSX_ID && f.wt == PB_WT_VARINT) {
			nr = (uint32_t)f.val;
		} else if (f.num == SYSX_RET && f.wt == PB_WT_VARINT) {
			tp_str k = tp_s(ctx, "ret");
			tp_args_add_int(&s->b, k, k, (int64_t)f.val);
		}
	}
	uint32_t utid = tp_thread_get(ctx, machine, tid);
	tp_str name = syscall_name(ctx, machine, nr);
	if (!name)
		return;
	if (name == tp_s(ctx, "sys_write")) {
		/* No open write: it began before the trace, or a print
		 * ended it already. */
		uint8_t *w = write_flag(s, utid);
		if (!*w)
			return;
		*w = 0;
	}
	uint32_t track = tp_track_thread(ctx, utid);
	/* The return value is an arg of the slice it ends: none without. */
	tp_slice_end(ctx, track, ts, 0, name,
		     tp_slice_top(ctx, track) < 0 ? -1
						  : tp_args_commit(ctx, &s->b));
}

void tp_syscall_print(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t tid)
{
	struct tp_syscalls *s = ctx->syscalls;
	uint32_t utid;

	if (!tp_thread_find(ctx, machine, tid, &utid))
		return;
	uint8_t *w = write_flag(s, utid);
	if (!*w)
		return;
	*w = 0;
	tp_stat_inc(ctx, "truncated_sys_write_duration");
	tp_slice_end(ctx, tp_track_thread(ctx, utid), ts, 0,
		     tp_s(ctx, "sys_write"), -1);
}
