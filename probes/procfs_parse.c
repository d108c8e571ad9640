/*
 * procfs_parse.c - bounded parsers of /proc and /sys text (see
 * procfs_parse.h), and the file reader the probes share.
 *
 * The parsers walk [buf, buf + len) with explicit bounds: lines end at
 * '\n' or at the end of the buffer, fields are separated by blanks, and a
 * number is a run of decimal digits (hex after "0x" where cpuinfo uses it)
 * that must fit in 64 bits.  Anything else makes the parser skip the line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfs_parse.h"

/* buf + len, defined for a NULL buf (the parsers take (NULL, 0) and
 * return nothing found; NULL + 0 is undefined in C). */
static inline const char *text_end(const char *buf, size_t len)
{
	return buf ? buf + len : buf;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- scanning helpers ------------------------------------------------- */

/* The next line of [*pos, end): sets [*ls, *le) without the '\n' and
 * advances *pos past it.  False at the end of the buffer. */
static bool next_line(const char **pos, const char *end, const char **ls,
		      const char **le)
{
	const char *p = *pos;
	if (p >= end)
		return false;
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	*ls = p;
	*le = nl ? nl : end;
	*pos = nl ? nl + 1 : end;
	return true;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && is_blank(*p))
		p++;
	return p;
}

/* [p, end) without leading and trailing blanks. */
static void trim(const char **p, const char **end)
{
	*p = skip_blanks(*p, *end);
	while (*end > *p && is_blank((*end)[-1]))
		(*end)--;
}

/* The next blank-separated token of [*pos, end); false if none. */
static bool next_token(const char **pos, const char *end, const char **ts,
		       size_t *tn)
{
	const char *p = skip_blanks(*pos, end);
	if (p >= end)
		return false;
	const char *q = p;
	while (q < end && !is_blank(*q))
		q++;
	*ts = p;
	*tn = (size_t)(q - p);
	*pos = q;
	return true;
}

/* A whole token [s, s + n) as an unsigned number: decimal, or hex after
 * "0x" when hex_ok.  False on anything else or overflow. */
static bool token_u64(const char *s, size_t n, bool hex_ok, uint64_t *out)
{
	unsigned base = 10;
	if (hex_ok && n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		n -= 2;
	}
	if (n == 0)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned d;
		char c = s[i];
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return false;
		if (v > (UINT64_MAX - d) / base)
			return false;
		v = v * base + d;
	}
	*out = v;
	return true;
}

static bool token_i64(const char *s, size_t n, int64_t *out)
{
	bool neg = n > 0 && s[0] == '-';
	if (n > 0 && (s[0] == '-' || s[0] == '+')) {
		s++;
		n--;
	}
	uint64_t v;
	if (!token_u64(s, n, false, &v))
		return false;
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

/* The first token after *pos as a number. */
static bool next_u64(const char **pos, const char *end, uint64_t *out)
{
	const char *t;
	size_t n;
	return next_token(pos, end, &t, &n) && token_u64(t, n, false, out);
}

/* Splits "key: value" at the first ':' into trimmed key and value. */
static bool split_colon(const char *ls, const char *le, const char **ks,
			const char **ke, const char **vs, const char **ve)
{
	const char *c = memchr(ls, ':', (size_t)(le - ls));
	if (!c)
		return false;
	*ks = ls;
	*ke = c;
	trim(ks, ke);
	*vs = c + 1;
	*ve = le;
	trim(vs, ve);
	return *ke > *ks;
}

static bool key_is(const char *ks, const char *ke, const char *want)
{
	size_t n = strlen(want);
	return (size_t)(ke - ks) == n && memcmp(ks, want, n) == 0;
}

/* ---- /proc/PID/status ------------------------------------------------- */

static const char *const status_mem_keys[PROCFS_MEM_COUNT] = {
	[PROCFS_VM_SIZE] = "VmSize",     [PROCFS_VM_RSS] = "VmRSS",
	[PROCFS_RSS_ANON] = "RssAnon",   [PROCFS_RSS_FILE] = "RssFile",
	[PROCFS_RSS_SHMEM] = "RssShmem", [PROCFS_VM_SWAP] = "VmSwap",
	[PROCFS_VM_LOCKED] = "VmLck",    [PROCFS_VM_HWM] = "VmHWM",
};

/* A pid-like value: a whole token that fits an int32. */
static bool value_i32(const char *vs, const char *ve, int32_t *out)
{
	const char *t;
	size_t n;
	int64_t v;
	if (!next_token(&vs, ve, &t, &n) || !token_i64(t, n, &v) ||
	    v < INT32_MIN || v > INT32_MAX)
		return false;
	*out = (int32_t)v;
	return true;
}

static bool status_line(struct procfs_status *st, const char *ks,
			const char *ke, const char *vs, const char *ve)
{
	if (key_is(ks, ke, "Name")) {
		size_t n = (size_t)(ve - vs);
		if (n >= sizeof(st->name))
			n = sizeof(st->name) - 1;
		memcpy(st->name, vs, n);
		st->name[n] = '\0';
		st->has_name = true;
		return true;
	}
	if (key_is(ks, ke, "Tgid"))
		return (st->has_tgid = value_i32(vs, ve, &st->tgid));
	if (key_is(ks, ke, "PPid"))
		return (st->has_ppid = value_i32(vs, ve, &st->ppid));
	if (key_is(ks, ke, "Uid")) {
		uint64_t v;
		if (!next_u64(&vs, ve, &v) || v > UINT32_MAX)
			return false;
		st->uid = (uint32_t)v;
		return (st->has_uid = true);
	}
	for (unsigned i = 0; i < PROCFS_MEM_COUNT; i++) {
		if (!key_is(ks, ke, status_mem_keys[i]))
			continue;
		uint64_t v;
		if (!next_u64(&vs, ve, &v))
			return false;
		st->mem_kb[i] = v;
		st->mem_present |= 1u << i;
		return true;
	}
	return false;
}

int procfs_parse_status(const char *buf, size_t len, struct procfs_status *st)
{
	const char *pos = buf, *end = text_end(buf, len), *ls, *le;
	int found = 0;

	memset(st, 0, sizeof(*st));
	if (!buf)
		return 0;
	while (next_line(&pos, end, &ls, &le)) {
		const char *ks, *ke, *vs, *ve;
		if (split_colon(ls, le, &ks, &ke, &vs, &ve) &&
		    status_line(st, ks, ke, vs, ve))
			found++;
	}
	return found;
}

/* ---- /proc/PID/cmdline ------------------------------------------------ */

bool procfs_cmdline_next(const char *buf, size_t len, size_t *pos,
			 const char **arg, size_t *arg_len)
{
	size_t p = *pos;
	if (!buf || p >= len)
		return false;
	const char *nul = memchr(buf + p, '\0', len - p);
	size_t e = nul ? (size_t)(nul - buf) : len;
	*arg = buf + p;
	*arg_len = e - p;
	*pos = nul ? e + 1 : len;
	return true;
}

/* ---- /proc/meminfo and /proc/vmstat ----------------------------------- */

int procfs_parse_meminfo(const char *buf, size_t len, procfs_kv_fn fn,
			 void *ctx)
{
	const char *pos = buf, *end = text_end(buf, len), *ls, *le;
	int n = 0;

	if (!buf)
		return 0;
	while (next_line(&pos, end, &ls, &le)) {
		const char *ks, *ke, *vs, *ve;
		uint64_t v;
		if (!split_colon(ls, le, &ks, &ke, &vs, &ve))
			continue;
		uint32_t key = sys_stats_meminfo_key(ks, (size_t)(ke - ks));
		if (!key || !next_u64(&vs, ve, &v))
			continue;
		fn(ctx, key, v);
		n++;
	}
	return n;
}

int procfs_parse_vmstat(const char *buf, size_t len, procfs_kv_fn fn,
			void *ctx)
{
	const char *pos = buf, *end = text_end(buf, len), *ls, *le;
	int n = 0;

	if (!buf)
		return 0;
	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tn;
		uint64_t v;
		if (!next_token(&ls, le, &t, &tn))
			continue;
		uint32_t key = sys_stats_vmstat_key(t, tn);
		if (!key || !next_u64(&ls, le, &v))
			continue;
		fn(ctx, key, v);
		n++;
	}
	return n;
}

/* ---- /proc/stat ------------------------------------------------------- */

static bool stat_cpu(const struct procfs_stat_sink *s, const char *t,
		     size_t tn, const char *p, const char *le)
{
	uint64_t cpu, ticks[PROCFS_CPU_TIMES] = { 0 };
	if (tn <= 3 || !token_u64(t + 3, tn - 3, false, &cpu) ||
	    cpu > UINT32_MAX)
		return false;
	for (unsigned i = 0; i < PROCFS_CPU_TIMES; i++) {
		const char *vt;
		size_t vn;
		if (!next_token(&p, le, &vt, &vn))
			break;
		if (!token_u64(vt, vn, false, &ticks[i]))
			return false;
	}
	if (s->cpu)
		s->cpu(s->ctx, (uint32_t)cpu, ticks);
	return true;
}

static bool stat_irqs(const struct procfs_stat_sink *s, bool soft,
		      const char *p, const char *le)
{
	uint64_t v;
	if (!next_u64(&p, le, &v))
		return false;
	if (s->irq_total)
		s->irq_total(s->ctx, soft, v);
	for (uint32_t i = 0; i < UINT32_MAX && next_u64(&p, le, &v); i++)
		if (s->irq)
			s->irq(s->ctx, soft, i, v);
	return true;
}

int procfs_parse_stat(const char *buf, size_t len,
		      const struct procfs_stat_sink *sink)
{
	const char *pos = buf, *end = text_end(buf, len), *ls, *le;
	int n = 0;

	if (!buf)
		return 0;
	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tn;
		uint64_t v;
		bool ok = false;
		if (!next_token(&ls, le, &t, &tn))
			continue;
		if (tn > 3 && memcmp(t, "cpu", 3) == 0)
			ok = stat_cpu(sink, t, tn, ls, le);
		else if (tn == 4 && memcmp(t, "intr", 4) == 0)
			ok = stat_irqs(sink, false, ls, le);
		else if (tn == 7 && memcmp(t, "softirq", 7) == 0)
			ok = stat_irqs(sink, true, ls, le);
		else if (tn == 9 && memcmp(t, "processes", 9) == 0 &&
			 next_u64(&ls, le, &v)) {
			if (sink->forks)
				sink->forks(sink->ctx, v);
			ok = true;
		}
		n += ok;
	}
	return n;
}

/* ---- /proc/cpuinfo ---------------------------------------------------- */

static void cpu_emit(struct procfs_cpu *c, bool *open, const char *dflt,
		     size_t dflt_len,
		     void (*fn)(void *ctx, const struct procfs_cpu *cpu),
		     void *ctx, int *count)
{
	if (!*open)
		return;
	if (!c->name) {
		c->name = dflt;
		c->name_len = dflt_len;
	}
	fn(ctx, c);
	(*count)++;
	*open = false;
}

/* Sets one ArmCpuIdentifier field from a "CPU xxx" line. */
static void cpu_arm_field(struct procfs_cpu *c, const char *ks,
			  const char *ke, const char *vs, const char *ve)
{
	static const char *const keys[] = {
		"CPU implementer", "CPU architecture", "CPU variant",
		"CPU part", "CPU revision",
	};
	uint32_t *dst[] = {
		&c->arm_implementer, &c->arm_architecture, &c->arm_variant,
		&c->arm_part, &c->arm_revision,
	};
	for (unsigned i = 0; i < NELEM(keys); i++) {
		uint64_t v;
		if (!key_is(ks, ke, keys[i]))
			continue;
		if (token_u64(vs, (size_t)(ve - vs), true, &v) &&
		    v <= UINT32_MAX) {
			*dst[i] = (uint32_t)v;
			c->has_arm_id = true;
		}
		return;
	}
}

int procfs_parse_cpuinfo(const char *buf, size_t len,
			 void (*fn)(void *ctx, const struct procfs_cpu *cpu),
			 void *ctx)
{
	const char *pos, *end = text_end(buf, len), *ls, *le;
	const char *ks, *ke, *vs, *ve;
	const char *dflt = "unknown";
	size_t dflt_len = 7;
	struct procfs_cpu c;
	bool open = false;
	int count = 0;

	if (!buf)
		return 0;
	/* The file-wide "Processor" name first: it may precede the blocks. */
	for (pos = buf; next_line(&pos, end, &ls, &le);) {
		if (split_colon(ls, le, &ks, &ke, &vs, &ve) &&
		    key_is(ks, ke, "Processor") && ve > vs) {
			dflt = vs;
			dflt_len = (size_t)(ve - vs);
			break;
		}
	}
	memset(&c, 0, sizeof(c));
	for (pos = buf; next_line(&pos, end, &ls, &le);) {
		const char *s = ls, *e = le;
		trim(&s, &e);
		if (s == e) {
			cpu_emit(&c, &open, dflt, dflt_len, fn, ctx, &count);
			continue;
		}
		if (!split_colon(ls, le, &ks, &ke, &vs, &ve))
			continue;
		if (key_is(ks, ke, "processor")) {
			uint64_t idx;
			cpu_emit(&c, &open, dflt, dflt_len, fn, ctx, &count);
			if (!token_u64(vs, (size_t)(ve - vs), false, &idx) ||
			    idx > UINT32_MAX)
				continue;
			memset(&c, 0, sizeof(c));
			c.index = (uint32_t)idx;
			open = true;
		} else if (!open) {
			continue;
		} else if (key_is(ks, ke, "model name") && ve > vs) {
			c.name = vs;
			c.name_len = (size_t)(ve - vs);
		} else if (ke - ks > 4 && memcmp(ks, "CPU ", 4) == 0) {
			cpu_arm_field(&c, ks, ke, vs, ve);
		}
	}
	cpu_emit(&c, &open, dflt, dflt_len, fn, ctx, &count);
	return count;
}

/* ---- single values ---------------------------------------------------- */

bool procfs_parse_u64(const char *buf, size_t len, uint64_t *out)
{
	const char *p = buf, *e = text_end(buf, len);
	if (!buf)
		return false;
	trim(&p, &e);
	while (e > p && e[-1] == '\n') {
		e--;
		trim(&p, &e);
	}
	return token_u64(p, (size_t)(e - p), false, out);
}

bool procfs_parse_i64(const char *buf, size_t len, int64_t *out)
{
	const char *p = buf, *e = text_end(buf, len);
	if (!buf)
		return false;
	trim(&p, &e);
	while (e > p && e[-1] == '\n') {
		e--;
		trim(&p, &e);
	}
	return token_i64(p, (size_t)(e - p), out);
}

int procfs_parse_u32_list(const char *buf, size_t len,
			  void (*fn)(void *ctx, uint32_t v), void *ctx)
{
	const char *pos = buf, *end = text_end(buf, len), *ls, *le;
	int n = 0;

	if (!buf)
		return 0;
	while (next_line(&pos, end, &ls, &le)) {
		const char *t;
		size_t tn;
		uint64_t v;
		while (next_token(&ls, le, &t, &tn)) {
			if (!token_u64(t, tn, false, &v) || v > UINT32_MAX)
				continue;
			fn(ctx, (uint32_t)v);
			n++;
		}
	}
	return n;
}

/* ---- reading files ---------------------------------------------------- */

void procfs_buf_free(struct procfs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int procfs_read_file(const char *path, struct procfs_buf *b, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	b->len = 0;
	for (;;) {
		if (b->len == max)
			break; /* truncated at the limit */
		if (b->cap - b->len < 1024 || !b->data) {
			size_t ncap = b->cap ? b->cap * 2 : 4096;
			if (ncap > max + 1)
				ncap = max + 1;
			char *n = realloc(b->data, ncap);
			if (!n) {
				close(fd);
				errno = ENOMEM;
				return -1;
			}
			b->data = n;
			b->cap = ncap;
		}
		size_t room = b->cap - 1 - b->len;
		if (room > max - b->len)
			room = max - b->len;
		ssize_t r = read(fd, b->data + b->len, room);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		b->len += (size_t)r;
	}
	b->data[b->len] = '\0';
	close(fd);
	return 0;
}
