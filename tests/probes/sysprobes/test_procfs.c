/*
 * test_procfs.c - unit tests of the /proc and /sys text parsers
 * (probes/procfs_parse.h) on fixed samples, real-looking and
 * malformed, and of the polling thread's stop (procfs_poll.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs_parse.h"
#include "procfs_poll.h"

#define S(lit) (lit), (sizeof(lit) - 1)

/* ---- /proc/PID/status -------------------------------------------------- */

static const char status_sample[] =
	"Name:\tbash\n"
	"Umask:\t0022\n"
	"State:\tS (sleeping)\n"
	"Tgid:\t4242\n"
	"Ngid:\t0\n"
	"Pid:\t4242\n"
	"PPid:\t4100\n"
	"TracerPid:\t0\n"
	"Uid:\t1000\t1000\t1000\t1000\n"
	"Gid:\t1000\t1000\t1000\t1000\n"
	"FDSize:\t256\n"
	"Groups:\t4 24 27 1000 \n"
	"NStgid:\t4242\n"
	"NSpid:\t4242\n"
	"VmPeak:\t   12000 kB\n"
	"VmSize:\t   11916 kB\n"
	"VmLck:\t       4 kB\n"
	"VmPin:\t       0 kB\n"
	"VmHWM:\t    5400 kB\n"
	"VmRSS:\t    5312 kB\n"
	"RssAnon:\t    1820 kB\n"
	"RssFile:\t    3492 kB\n"
	"RssShmem:\t       0 kB\n"
	"VmData:\t    2044 kB\n"
	"VmSwap:\t      16 kB\n"
	"Threads:\t1\n"
	"voluntary_ctxt_switches:\t170\n";

static void test_status_full(void **state)
{
	struct procfs_status st;
	(void)state;
	int n = procfs_parse_status(S(status_sample), &st);
	assert_int_equal(n, 12);
	assert_string_equal(st.name, "bash");
	assert_true(st.has_tgid && st.has_ppid && st.has_uid);
	assert_int_equal(st.tgid, 4242);
	assert_int_equal(st.ppid, 4100);
	assert_int_equal(st.uid, 1000);
	assert_int_equal(st.mem_present, (1u << PROCFS_MEM_COUNT) - 1);
	assert_int_equal(st.mem_kb[PROCFS_VM_SIZE], 11916);
	assert_int_equal(st.mem_kb[PROCFS_VM_RSS], 5312);
	assert_int_equal(st.mem_kb[PROCFS_RSS_ANON], 1820);
	assert_int_equal(st.mem_kb[PROCFS_RSS_FILE], 3492);
	assert_int_equal(st.mem_kb[PROCFS_RSS_SHMEM], 0);
	assert_int_equal(st.mem_kb[PROCFS_VM_SWAP], 16);
	assert_int_equal(st.mem_kb[PROCFS_VM_LOCKED], 4);
	assert_int_equal(st.mem_kb[PROCFS_VM_HWM], 5400);
}

/* A kernel thread: no Vm* lines at all. */
static void test_status_kthread(void **state)
{
	static const char k[] = "Name:\tkworker/0:1-events\nState:\tI (idle)\n"
				"Tgid:\t15\nPid:\t15\nPPid:\t2\nUid:\t0\t0\t0\t0\n"
				"Threads:\t1\n";
	struct procfs_status st;
	(void)state;
	procfs_parse_status(S(k), &st);
	assert_string_equal(st.name, "kworker/0:1-events");
	assert_int_equal(st.ppid, 2);
	assert_int_equal(st.mem_present, 0);
}

static void test_status_malformed(void **state)
{
	/* Bad numbers, an overflow, a line without ':', no final newline,
	 * an over-long name (truncated), a truncated last line. */
	static const char bad[] =
		"Name:\taaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
		"Tgid:\tx12\n"
		"PPid:\t99999999999999999999999\n"
		"Uid:\n"
		"garbage line\n"
		":\t\n"
		"VmSize:\t18446744073709551616 kB\n"
		"VmRSS:\t 77 kB\n"
		"VmSwap:";
	struct procfs_status st;
	(void)state;
	procfs_parse_status(S(bad), &st);
	assert_true(st.has_name);
	assert_int_equal(strlen(st.name), PROCFS_NAME_MAX - 1);
	assert_false(st.has_tgid);
	assert_false(st.has_ppid);
	assert_false(st.has_uid);
	assert_int_equal(st.mem_present, 1u << PROCFS_VM_RSS);
	assert_int_equal(st.mem_kb[PROCFS_VM_RSS], 77);
	/* Empty and NULL input. */
	assert_int_equal(procfs_parse_status("", 0, &st), 0);
	assert_int_equal(procfs_parse_status(NULL, 0, &st), 0);
}

/* The parser must stop at len even when the bytes go on. */
static void test_status_bounded(void **state)
{
	static const char two[] = "VmRSS:\t12 kB\nVmSize:\t99 kB\n";
	struct procfs_status st;
	(void)state;
	procfs_parse_status(two, 6, &st); /* "VmRSS:" */
	assert_int_equal(st.mem_present, 0);
	procfs_parse_status(two, 8, &st); /* "VmRSS:\t1" */
	assert_int_equal(st.mem_present, 1u << PROCFS_VM_RSS);
	assert_int_equal(st.mem_kb[PROCFS_VM_RSS], 1);
	procfs_parse_status(two, 10, &st); /* "VmRSS:\t12 " */
	assert_int_equal(st.mem_present, 1u << PROCFS_VM_RSS);
	assert_int_equal(st.mem_kb[PROCFS_VM_RSS], 12);
}

/* ---- cmdline ------------------------------------------------------------ */

static int split(const char *buf, size_t len, char out[][32], int max)
{
	size_t pos = 0, n;
	const char *a;
	int i = 0;
	while (i < max && procfs_cmdline_next(buf, len, &pos, &a, &n)) {
		snprintf(out[i], 32, "%.*s", (int)n, a);
		i++;
	}
	return i;
}

static void test_cmdline(void **state)
{
	char a[8][32];
	(void)state;
	assert_int_equal(split(S("/bin/bash\0-c\0echo hi\0"), a, 8), 3);
	assert_string_equal(a[0], "/bin/bash");
	assert_string_equal(a[1], "-c");
	assert_string_equal(a[2], "echo hi");
	/* An empty argument in the middle is kept. */
	assert_int_equal(split(S("prog\0\0x\0"), a, 8), 3);
	assert_string_equal(a[1], "");
	/* Rewritten by the process: no NUL at all. */
	assert_int_equal(split(S("sshd: user@pts/0"), a, 8), 1);
	assert_string_equal(a[0], "sshd: user@pts/0");
	/* Empty (kernel thread). */
	assert_int_equal(split("", 0, a, 8), 0);
	assert_int_equal(split(NULL, 0, a, 8), 0);
}

/* ---- meminfo / vmstat ----------------------------------------------------- */

struct kv_log {
	uint32_t key[256];
	uint64_t val[256];
	int n;
};

static void kv_rec(void *ctx, uint32_t key, uint64_t value)
{
	struct kv_log *l = ctx;
	if (l->n < 256) {
		l->key[l->n] = key;
		l->val[l->n] = value;
		l->n++;
	}
}

static const char meminfo_sample[] =
	"MemTotal:       16310672 kB\n"
	"MemFree:         8201312 kB\n"
	"MemAvailable:   12000100 kB\n"
	"Buffers:          301220 kB\n"
	"Cached:          3660480 kB\n"
	"SwapCached:            0 kB\n"
	"Active(anon):     400000 kB\n"
	"Inactive(file):  2000000 kB\n"
	"Committed_AS:    5000000 kB\n"
	"HugePages_Total:       0\n"
	"Hugepagesize:       2048 kB\n"
	"DirectMap4k:      300000 kB\n";

static void test_meminfo(void **state)
{
	struct kv_log l = { .n = 0 };
	(void)state;
	assert_int_equal(procfs_parse_meminfo(S(meminfo_sample), kv_rec, &l),
			 9);
	assert_int_equal(l.key[0], 1); /* MEMINFO_MEM_TOTAL */
	assert_int_equal(l.val[0], 16310672);
	assert_int_equal(l.key[1], 2); /* MEM_FREE */
	assert_int_equal(l.key[6], 9); /* ACTIVE_ANON */
	assert_int_equal(l.val[6], 400000);
	assert_int_equal(l.key[7], 12); /* INACTIVE_FILE */
	assert_int_equal(l.key[8], 28); /* COMMITED_AS */
	assert_string_equal(sys_stats_meminfo_proc_name(23), "SReclaimable");
	assert_null(sys_stats_meminfo_proc_name(0));
	assert_null(sys_stats_meminfo_proc_name(34)); /* MEM_GPU: Android */
	assert_null(sys_stats_meminfo_proc_name(1000));
	/* The processor's names for the same values, as Perfetto v58's. */
	assert_string_equal(sys_stats_meminfo_counter_name(23),
			    "SReclaimable");
	assert_string_equal(sys_stats_meminfo_counter_name(0),
			    "MemUnspecified");
	assert_string_equal(sys_stats_meminfo_counter_name(34), "Gpu");
	assert_null(sys_stats_meminfo_counter_name(39));
	/* A key with a NUL inside is not a prefix match. */
	assert_int_equal(sys_stats_meminfo_key("Slab\0xyz", 8), 0);
	assert_int_equal(sys_stats_meminfo_key("Slab", 4), 22);
}

static void test_meminfo_malformed(void **state)
{
	static const char bad[] = "MemTotal kB\nMemFree:\nMemAvailable: -5 kB\n"
				  "Buffers: 12x kB\n:::\n\n\nCached:  7";
	struct kv_log l = { .n = 0 };
	(void)state;
	assert_int_equal(procfs_parse_meminfo(S(bad), kv_rec, &l), 1);
	assert_int_equal(l.key[0], 5); /* Cached, without newline */
	assert_int_equal(l.val[0], 7);
}

static void test_vmstat(void **state)
{
	static const char vm[] = "nr_free_pages 2050328\n"
				 "nr_zone_inactive_anon 1200\n"
				 "nr_bogus_future_counter 3\n"
				 "pgfault 98765432\n"
				 "workingset_restore_file 4\n"
				 "pgmajfault\n"
				 "oom_kill 18446744073709551615\n";
	struct kv_log l = { .n = 0 };
	(void)state;
	assert_int_equal(procfs_parse_vmstat(S(vm), kv_rec, &l), 5);
	assert_int_equal(l.key[0], 1);
	assert_int_equal(l.val[0], 2050328);
	assert_int_equal(l.key[1], 111); /* NR_ZONE_INACTIVE_ANON */
	assert_int_equal(l.key[2], 49);  /* PGFAULT */
	assert_int_equal(l.key[3], 188); /* WORKINGSET_RESTORE_FILE */
	assert_int_equal(l.key[4], 115); /* OOM_KILL */
	assert_true(l.val[4] == UINT64_MAX);
	assert_string_equal(sys_stats_vmstat_proc_name(30),
			    "workingset_refault");
	assert_string_equal(sys_stats_vmstat_counter_name(30),
			    "workingset_refault");
	assert_null(sys_stats_vmstat_proc_name(0));
	assert_string_equal(sys_stats_vmstat_counter_name(0),
			    "VmstatUnspecified");
	assert_null(sys_stats_vmstat_counter_name(189));
}

/* ---- /proc/stat ------------------------------------------------------------- */

struct stat_log {
	int ncpu;
	uint32_t cpu[8];
	uint64_t ticks[8][PROCFS_CPU_TIMES];
	uint64_t irq_total, softirq_total, forks;
	int nirq, nsoft;
	uint32_t irq_num[64];
	uint64_t irq_count[64];
};

static void s_cpu(void *ctx, uint32_t cpu, const uint64_t t[PROCFS_CPU_TIMES])
{
	struct stat_log *l = ctx;
	if (l->ncpu < 8) {
		l->cpu[l->ncpu] = cpu;
		memcpy(l->ticks[l->ncpu], t, sizeof(l->ticks[0]));
	}
	l->ncpu++;
}

static void s_total(void *ctx, bool soft, uint64_t total)
{
	struct stat_log *l = ctx;
	if (soft)
		l->softirq_total = total;
	else
		l->irq_total = total;
}

static void s_irq(void *ctx, bool soft, uint32_t num, uint64_t count)
{
	struct stat_log *l = ctx;
	if (soft) {
		l->nsoft++;
		return;
	}
	if (l->nirq < 64) {
		l->irq_num[l->nirq] = num;
		l->irq_count[l->nirq] = count;
	}
	l->nirq++;
}

static void s_forks(void *ctx, uint64_t forks)
{
	((struct stat_log *)ctx)->forks = forks;
}

static const char stat_sample[] =
	"cpu  10132153 290696 3084719 46828483 16683 0 25195 0 0 0\n"
	"cpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0\n"
	"cpu1 1335 1 2 3 4 5 6 7 0 0\n"
	"cpu2 5 6\n"
	"intr 1462898 0 9 0 0 0 0 3 0 2 0\n"
	"ctxt 19346434\n"
	"btime 1700000000\n"
	"processes 52437\n"
	"procs_running 2\n"
	"procs_blocked 0\n"
	"softirq 5057579 250191 1481983 1647 211099 186066 0 1191 1374125 0 1551277\n";

static void test_stat(void **state)
{
	struct stat_log l;
	struct procfs_stat_sink sink = { &l, s_cpu, s_total, s_irq, s_forks };
	(void)state;
	memset(&l, 0, sizeof(l));
	assert_int_equal(procfs_parse_stat(S(stat_sample), &sink), 6);
	assert_int_equal(l.ncpu, 3); /* the "cpu" total line is not a cpu */
	assert_int_equal(l.cpu[0], 0);
	assert_int_equal(l.ticks[0][0], 1393280);
	assert_int_equal(l.ticks[0][3], 13343292);
	assert_int_equal(l.cpu[1], 1);
	assert_int_equal(l.ticks[1][7], 7); /* steal */
	assert_int_equal(l.cpu[2], 2);
	assert_int_equal(l.ticks[2][1], 6);
	assert_int_equal(l.ticks[2][2], 0); /* missing columns are 0 */
	assert_int_equal(l.irq_total, 1462898);
	assert_int_equal(l.nirq, 10);
	assert_int_equal(l.irq_num[2], 2);
	assert_int_equal(l.irq_count[2], 0);
	assert_int_equal(l.irq_count[6], 3);
	assert_int_equal(l.softirq_total, 5057579);
	assert_int_equal(l.nsoft, 10);
	assert_int_equal(l.forks, 52437);
}

static void test_stat_malformed(void **state)
{
	static const char bad[] = "cpu\ncpux 1 2\ncpu3 1 x 3\ncpu99999999999 1\n"
				  "intr\nintr x\nprocesses\nsoftirq 5 a 6\n"
				  "cpu4 1 2 3 4 5 6 7 8 9 10 11 12";
	struct stat_log l;
	struct procfs_stat_sink sink = { &l, s_cpu, s_total, s_irq, s_forks };
	(void)state;
	memset(&l, 0, sizeof(l));
	assert_int_equal(procfs_parse_stat(S(bad), &sink), 2);
	assert_int_equal(l.ncpu, 1);
	assert_int_equal(l.cpu[0], 4);
	assert_int_equal(l.ticks[0][7], 8);
	assert_int_equal(l.softirq_total, 5);
	assert_int_equal(l.nsoft, 0); /* stops at the bad number */
	/* All callbacks NULL. */
	struct procfs_stat_sink none = { 0 };
	assert_int_equal(procfs_parse_stat(S(stat_sample), &none), 6);
}

/* ---- cpuinfo ------------------------------------------------------------- */

struct cpu_log {
	int n;
	uint32_t index[8];
	char name[8][64];
	bool arm[8];
	uint32_t impl[8], part[8], rev[8], arch[8];
};

static void c_rec(void *ctx, const struct procfs_cpu *c)
{
	struct cpu_log *l = ctx;
	if (l->n < 8) {
		l->index[l->n] = c->index;
		snprintf(l->name[l->n], 64, "%.*s", (int)c->name_len, c->name);
		l->arm[l->n] = c->has_arm_id;
		l->impl[l->n] = c->arm_implementer;
		l->part[l->n] = c->arm_part;
		l->rev[l->n] = c->arm_revision;
		l->arch[l->n] = c->arm_architecture;
	}
	l->n++;
}

static const char cpuinfo_x86[] =
	"processor\t: 0\n"
	"vendor_id\t: GenuineIntel\n"
	"cpu family\t: 6\n"
	"model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
	"flags\t\t: fpu vme de pse: tsc\n"
	"\n"
	"processor\t: 1\n"
	"vendor_id\t: GenuineIntel\n"
	"model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
	"\n";

/* An old 32/64-bit ARM kernel: "Processor" once, then blocks, and the
 * last block without a trailing blank line. */
static const char cpuinfo_arm[] =
	"Processor\t: AArch64 Processor rev 4 (aarch64)\n"
	"processor\t: 0\n"
	"BogoMIPS\t: 38.40\n"
	"CPU implementer\t: 0x41\n"
	"CPU architecture: 8\n"
	"CPU variant\t: 0x0\n"
	"CPU part\t: 0xd03\n"
	"CPU revision\t: 4\n"
	"\n"
	"processor\t: 1\n"
	"CPU implementer\t: 0x41\n"
	"CPU architecture: AArch64\n"
	"CPU part\t: 0xd09\n"
	"CPU revision\t: 2\n";

static void test_cpuinfo(void **state)
{
	struct cpu_log l;
	(void)state;
	memset(&l, 0, sizeof(l));
	assert_int_equal(procfs_parse_cpuinfo(S(cpuinfo_x86), c_rec, &l), 2);
	assert_int_equal(l.index[1], 1);
	assert_string_equal(l.name[0], "Intel(R) Xeon(R) CPU @ 2.20GHz");
	assert_false(l.arm[0]);

	memset(&l, 0, sizeof(l));
	assert_int_equal(procfs_parse_cpuinfo(S(cpuinfo_arm), c_rec, &l), 2);
	assert_string_equal(l.name[0], "AArch64 Processor rev 4 (aarch64)");
	assert_string_equal(l.name[1], "AArch64 Processor rev 4 (aarch64)");
	assert_true(l.arm[0]);
	assert_int_equal(l.impl[0], 0x41);
	assert_int_equal(l.arch[0], 8);
	assert_int_equal(l.part[0], 0xd03);
	assert_int_equal(l.rev[0], 4);
	assert_int_equal(l.part[1], 0xd09);
	assert_int_equal(l.arch[1], 0); /* "AArch64": not a number */
}

static void test_cpuinfo_malformed(void **state)
{
	static const char bad[] = "model name: before any block\n"
				  "processor : x\nmodel name: orphan\n\n"
				  "processor : 3\nmodel name:\n"
				  "CPU part : 0x\n"
				  "processor : 99999999999\n";
	struct cpu_log l;
	(void)state;
	memset(&l, 0, sizeof(l));
	assert_int_equal(procfs_parse_cpuinfo(S(bad), c_rec, &l), 1);
	assert_int_equal(l.index[0], 3);
	assert_string_equal(l.name[0], "unknown");
	assert_false(l.arm[0]);
	assert_int_equal(procfs_parse_cpuinfo("", 0, c_rec, &l), 0);
}

/* ---- single values ------------------------------------------------------ */

static void u32_rec(void *ctx, uint32_t v)
{
	struct kv_log *l = ctx;
	kv_rec(l, 0, v);
}

static void test_values(void **state)
{
	uint64_t u;
	int64_t i;
	struct kv_log l = { .n = 0 };
	(void)state;
	assert_true(procfs_parse_u64(S("2200000\n"), &u));
	assert_int_equal(u, 2200000);
	assert_false(procfs_parse_u64(S("22 00\n"), &u));
	assert_false(procfs_parse_u64(S("\n"), &u));
	assert_false(procfs_parse_u64(S("-1\n"), &u));
	assert_true(procfs_parse_i64(S("-1000\n"), &i));
	assert_int_equal(i, -1000);
	assert_true(procfs_parse_i64(S("0"), &i));
	assert_true(procfs_parse_i64(S("-9223372036854775808"), &i));
	assert_true(i == INT64_MIN);
	assert_false(procfs_parse_i64(S("9223372036854775808"), &i));
	assert_int_equal(procfs_parse_u32_list(S("300000 576000 x 4294967296 "
						 "1804800 \n"), u32_rec, &l), 3);
	assert_int_equal(l.val[2], 1804800);
}

static void test_read_file(void **state)
{
	char path[] = "/tmp/test_procfs.XXXXXX";
	struct procfs_buf b = { 0 };
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	char big[10000];
	memset(big, 'a', sizeof(big));
	assert_int_equal(write(fd, big, sizeof(big)), (ssize_t)sizeof(big));
	close(fd);
	assert_int_equal(procfs_read_file(path, &b, 1 << 20), 0);
	assert_int_equal(b.len, sizeof(big));
	assert_int_equal(b.data[b.len], '\0');
	assert_int_equal(procfs_read_file(path, &b, 100), 0); /* truncated */
	assert_int_equal(b.len, 100);
	unlink(path);
	assert_int_equal(procfs_read_file(path, &b, 100), -1);
	assert_int_equal(procfs_read_file("/proc/self/status", &b, 1 << 16), 0);
	struct procfs_status st;
	procfs_parse_status(b.data, b.len, &st);
	assert_int_equal(st.tgid, getpid());
	assert_true(st.mem_present >> PROCFS_VM_RSS & 1);
	procfs_buf_free(&b);
}

/* ---- the polling thread ------------------------------------------------- */

struct loop_state {
	int polls;
};

static void loop_fn(void *arg, struct procfs_poller *p)
{
	struct loop_state *s = arg;
	uint64_t next = procfs_mono_ns();
	do {
		s->polls++;
		next += 10 * 1000000ull;
	} while (procfs_poll_sleep_until(p, next));
}

static void test_poller_stop(void **state)
{
	struct loop_state s = { 0 };
	(void)state;
	struct procfs_poller *p = procfs_poll_start("test", loop_fn, &s);
	assert_non_null(p);
	usleep(100 * 1000);
	assert_int_equal(procfs_poll_stop(p, 5000), 0);
	/* Joined: the count no longer moves. */
	int polls = s.polls;
	assert_true(polls >= 2);
	usleep(30 * 1000);
	assert_int_equal(s.polls, polls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_full),
		cmocka_unit_test(test_status_kthread),
		cmocka_unit_test(test_status_malformed),
		cmocka_unit_test(test_status_bounded),
		cmocka_unit_test(test_cmdline),
		cmocka_unit_test(test_meminfo),
		cmocka_unit_test(test_meminfo_malformed),
		cmocka_unit_test(test_vmstat),
		cmocka_unit_test(test_stat),
		cmocka_unit_test(test_stat_malformed),
		cmocka_unit_test(test_cpuinfo),
		cmocka_unit_test(test_cpuinfo_malformed),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_read_file),
		cmocka_unit_test(test_poller_stop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
