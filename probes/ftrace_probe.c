/*
 * ftrace_probe.c - the linux.ftrace data source: kernel ftrace events read
 * from tracefs' per-cpu raw ring buffers, as Perfetto's traced_probes
 * writes them.
 *
 * FtraceConfig (DataSourceConfig field 100):
 *   ftrace_events           "group/name", "group/ *" or a bare "name"
 *   buffer_size_kb          per-cpu ring buffer (default 2048)
 *   drain_period_ms         how often the buffers are read (default 100)
 *   compact_sched.enabled   sched_switch / sched_waking in CompactSched
 *   disable_generic_events  events without a typed message are dropped
 *   instance_name           record into this tracefs instance
 *   atrace_*                no Android here: ignored with a warning
 *
 * At start the instance's tracefs instance is set up (ftrace_tracefs.h:
 * "boot" trace clock, so every timestamp is CLOCK_BOOTTIME ns), the
 * events are enabled, an FtraceStats START_OF_TRACE packet is written and
 * a drain thread starts.  Every drain_period_ms, on flush, and once more
 * at stop, the thread reads each cpu's trace_pipe_raw page by page
 * (libtracefs' tracefs_cpu_read), walks the pages (ftrace_page.h) and
 * encodes the records (ftrace_encode.h) into FtraceEventBundle packets,
 * one or more per cpu and drain.  At stop tracing is turned off, the last
 * pages are read, FtraceStats END_OF_TRACE is written and tracefs is put
 * back as it was.
 *
 * If tracefs cannot be found, mounted or written, a one-line warning says
 * why and the instance records nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <traceevent/event-parse.h>
#include <tracefs/tracefs.h>

#include "ftrace_encode.h"
#include "ftrace_events.h"
#include "ftrace_page.h"
#include "ftrace_tracefs.h"
#include "pb_wire.h"
#include "probes.h"
#include "vp_error.h"
#include "vperfetto/vperfetto.h"
#include "vp_log.h"
#include "vp_alloc.h"

#define TAG "linux.ftrace: "

#define DEFAULT_BUFFER_KB 2048u
#define MAX_BUFFER_KB (64u * 1024u)
#define DEFAULT_DRAIN_MS 100u
#define MIN_DRAIN_MS 1u
#define MAX_DRAIN_MS 60000u
/* A bundle is cut when its encoding passes this many bytes. */
#define BUNDLE_CUT_BYTES (48u * 1024u)
/* How long on_flush waits for the drain thread. */
#define FLUSH_WAIT_MS 2000

struct ft_config {
	char **events;
	unsigned n_events;
	unsigned buffer_kb;
	unsigned drain_ms;
	bool compact;     /* compact_sched.enabled as the config set it */
	bool compact_set; /* ... if it did: unset means on, as in Perfetto */
	bool disable_generic;
	bool atrace;
	char *instance_name;
};

struct ft_cpu {
	struct tracefs_cpu *tcpu;
	uint64_t prev_end_ts; /* last event of the previous bundle */
};

struct ft_inst {
	struct ft_inst *next;
	struct vp_ds_instance *inst;
	struct ft_config cfg;
	bool active; /* tracefs is set up; else the instance writes nothing */
	struct ft_tracefs fs;
	struct tep_handle *tep;
	struct ftrace_page_layout layout;
	struct ft_table table;
	int ncpu;
	struct ft_cpu *cpus;
	uint8_t *page;
	size_t page_size;
	/* The drain thread's; on_stop uses them after joining it. */
	struct ft_bundle bundle;
	struct pb_buf pkt;
	uint32_t error_mask; /* FtraceParseStatus values seen */
	char **unknown;      /* FtraceStats.unknown_ftrace_events */
	unsigned n_unknown;
	char **failed;       /* FtraceStats.failed_ftrace_events */
	unsigned n_failed;
	/* The drain thread. */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* wakes the thread */
	pthread_cond_t done_cv; /* a flush is done */
	bool stop;
	uint64_t flush_req, flush_done;
};

static struct {
	pthread_mutex_t mu;
	struct ft_inst *list;
	const char *tracefs_dir;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- config ------------------------------------------------------------ */

/* Whether sched_switch / sched_waking go into CompactSched.  As
 * traced_probes decides: on unless the config turns it off, or does not
 * record sched_switch (compact sched_waking takes its pids from the
 * switches).  Whether the kernel's event formats allow it is checked per
 * event (ft_event_from_tep). */
static bool compact_wanted(const struct ft_config *c)
{
	bool wants_switch = false;

	if (c->compact_set && !c->compact)
		return false;
	for (unsigned i = 0; i < c->n_events && !wants_switch; i++)
		wants_switch = ft_pattern_matches(c->events[i], "sched",
						  "sched_switch");
	return wants_switch;
}

static void config_free(struct ft_config *c)
{
	for (unsigned i = 0; i < c->n_events; i++)
		free(c->events[i]);
	free(c->events);
	free(c->instance_name);
	memset(c, 0, sizeof *c);
}

static int add_event(struct ft_config *c, const uint8_t *s, size_t n)
{
	c->events = vp_xreallocarray(c->events, c->n_events + 1,
				     sizeof(*c->events));
	c->events[c->n_events++] = vp_xstrndup((const char *)s, n);
	return 0;
}

static int parse_ftrace_config(struct ft_config *c, const uint8_t *p,
			       size_t len)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		switch (f.num) {
		case FC_FTRACE_EVENTS:
			if (f.wt == PB_WT_LEN &&
			    add_event(c, f.data, f.len) != 0)
				return -1;
			break;
		case FC_ATRACE_CATEGORIES:
		case FC_ATRACE_APPS:
		case FC_ATRACE_CATEGORIES_PREFER_SDK:
			c->atrace = true;
			break;
		case FC_BUFFER_SIZE_KB:
			if (f.wt == PB_WT_VARINT)
				c->buffer_kb = f.val > MAX_BUFFER_KB
						       ? MAX_BUFFER_KB
						       : (unsigned)f.val;
			break;
		case FC_DRAIN_PERIOD_MS:
			if (f.wt == PB_WT_VARINT)
				c->drain_ms = f.val > MAX_DRAIN_MS
						      ? MAX_DRAIN_MS
						      : (unsigned)f.val;
			break;
		case FC_COMPACT_SCHED:
			if (f.wt == PB_WT_LEN) {
				struct pb_reader cr;
				struct pb_field cf;
				pb_reader_init(&cr, f.data, f.len);
				while (pb_next(&cr, &cf))
					if (cf.num == CSC_ENABLED &&
					    cf.wt == PB_WT_VARINT)
					{
						c->compact = cf.val != 0;
						c->compact_set = true;
					}
			}
			break;
		case FC_DISABLE_GENERIC_EVENTS:
			if (f.wt == PB_WT_VARINT)
				c->disable_generic = f.val != 0;
			break;
		case FC_INSTANCE_NAME:
			if (f.wt == PB_WT_LEN) {
				free(c->instance_name);
				c->instance_name =
					strndup((const char *)f.data, f.len);
				if (!c->instance_name)
					return -1;
			}
			break;
		default:
			break;
		}
	}
	return r.err == PB_OK ? 0 : -1;
}

/* Reads the FtraceConfig out of a DataSourceConfig. */
static int parse_config(struct ft_config *c, const uint8_t *cfg, size_t len,
			struct vp_error *err)
{
	struct pb_reader r;
	struct pb_field f;

	memset(c, 0, sizeof *c);
	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f))
		if (f.num == DSC_FTRACE_CONFIG && f.wt == PB_WT_LEN &&
		    parse_ftrace_config(c, f.data, f.len) != 0)
			return vp_errorf(err, "malformed ftrace_config");
	if (r.err != PB_OK)
		return vp_errorf(err, "malformed DataSourceConfig: %s",
				 pb_err_str(r.err));
	if (!c->buffer_kb)
		c->buffer_kb = DEFAULT_BUFFER_KB;
	if (!c->drain_ms)
		c->drain_ms = DEFAULT_DRAIN_MS;
	if (c->drain_ms < MIN_DRAIN_MS)
		c->drain_ms = MIN_DRAIN_MS;
	c->compact = compact_wanted(c);
	if (c->instance_name &&
	    !ft_tracefs_valid_name(c->instance_name, false))
		return vp_errorf(err, "instance_name '%s' is not a valid "
				 "tracefs instance name", c->instance_name);
	return 0;
}

/* ---- the tracefs side ---------------------------------------------------- */

static int push_name(char ***list, unsigned *n, const char *s)
{
	*list = vp_xreallocarray(*list, (size_t)*n + 1, sizeof(**list));
	(*list)[(*n)++] = vp_xstrdup(s);
	return 0;
}

/* Does the kernel know an event the pattern selects? */
static bool tep_has(struct tep_handle *tep, const char *pattern)
{
	struct tep_event **all = tep_list_events(tep, TEP_EVENT_SORT_ID);
	for (size_t i = 0; all && all[i]; i++)
		if (ft_pattern_matches(pattern,
				       all[i]->system ? all[i]->system : "",
				       all[i]->name ? all[i]->name : ""))
			return true;
	return false;
}

/* The event system of a bare event name, or NULL. */
static const char *tep_system_of(struct tep_handle *tep, const char *name)
{
	struct tep_event **all = tep_list_events(tep, TEP_EVENT_SORT_ID);
	for (size_t i = 0; all && all[i]; i++)
		if (all[i]->name && !strcmp(all[i]->name, name))
			return all[i]->system;
	return NULL;
}

/* Enables one config entry; an unknown or refused one is listed for
 * FtraceStats. */
static void enable_pattern(struct ft_inst *fi, const char *pattern)
{
	char sys[256];
	const char *name;
	const char *slash = strchr(pattern, '/');

	if (!tep_has(fi->tep, pattern)) {
		push_name(&fi->unknown, &fi->n_unknown, pattern);
		return;
	}
	if (slash) {
		snprintf(sys, sizeof sys, "%.*s", (int)(slash - pattern),
			 pattern);
		name = strcmp(slash + 1, "*") ? slash + 1 : NULL;
	} else {
		const char *s = tep_system_of(fi->tep, pattern);
		snprintf(sys, sizeof sys, "%s", s ? s : "");
		name = pattern;
	}
	/* The ftrace group (print, ...) is always recorded and has no
	 * enable file. */
	if (!strcmp(sys, "ftrace"))
		return;
	if (ft_tracefs_enable(&fi->fs, sys, name) != 0)
		push_name(&fi->failed, &fi->n_failed, pattern);
}

/* A pattern must be "sys/name", "sys/ *" or "name" of safe characters. */
static bool valid_pattern(const char *p)
{
	const char *slash = strchr(p, '/');
	if (!slash)
		return ft_tracefs_valid_name(p, false);
	char sys[256];
	if ((size_t)(slash - p) >= sizeof sys)
		return false;
	snprintf(sys, sizeof sys, "%.*s", (int)(slash - p), p);
	if (!ft_tracefs_valid_name(sys, false))
		return false;
	return !strcmp(slash + 1, "*") ||
	       ft_tracefs_valid_name(slash + 1, false);
}

/* The whole of a (small) tracefs file, NUL-terminated; NULL on error. */
static char *read_text(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t cap = 8192, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
		if (cap - n - 1 == 0) {
			char *nb = cap < (1u << 20) ? realloc(buf, cap * 2)
						    : NULL;
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf) {
		buf[n] = 0;
		*len = n;
	}
	return buf;
}

/* Parses events/<sys>/<name>/format into tep (once). */
static void load_event(struct tep_handle *tep, const char *dir,
		       const char *sys, const char *name)
{
	char path[4096];
	size_t len;

	if (tep_find_event_by_name(tep, sys, name))
		return;
	snprintf(path, sizeof path, "%s/events/%s/%s/format", dir, sys, name);
	char *text = read_text(path, &len);
	if (!text)
		return;
	tep_parse_event(tep, text, len, sys);
	free(text);
}

/* Every event of events/<sys>/. */
static void load_system(struct tep_handle *tep, const char *dir,
			const char *sys)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/events/%s", dir, sys);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (ft_tracefs_valid_name(de->d_name, false) &&
		    strcmp(de->d_name, "enable") && strcmp(de->d_name, "filter"))
			load_event(tep, dir, sys, de->d_name);
	closedir(d);
}

/* A bare event name: its format in whichever system has it. */
static void load_bare(struct tep_handle *tep, const char *dir,
		      const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/events", dir);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char fmt[4096 + 512];
		if (!ft_tracefs_valid_name(de->d_name, false))
			continue;
		snprintf(fmt, sizeof fmt, "%s/%s/%s/format", path, de->d_name,
			 name);
		if (access(fmt, R_OK) == 0)
			load_event(tep, dir, de->d_name, name);
	}
	closedir(d);
}

/* Parses the page header and the formats of just the events the config
 * selects (libtracefs' loaders also read kallsyms, which takes most of a
 * second). */
static struct tep_handle *load_formats(struct ft_inst *fi)
{
	const char *dir = fi->fs.dir;
	char path[4096];
	size_t len;

	struct tep_handle *tep = tep_alloc();
	if (!tep)
		return NULL;
	snprintf(path, sizeof path, "%s/events/header_page", dir);
	char *hp = read_text(path, &len);
	if (!hp || tep_parse_header_page(tep, hp, len, (int)sizeof(long)) != 0) {
		free(hp);
		tep_free(tep);
		return NULL;
	}
	free(hp);
	for (unsigned i = 0; i < fi->cfg.n_events; i++) {
		const char *e = fi->cfg.events[i];
		const char *slash = strchr(e, '/');
		if (!valid_pattern(e))
			continue;
		if (!slash) {
			load_bare(tep, dir, e);
			continue;
		}
		char sys[256];
		snprintf(sys, sizeof sys, "%.*s", (int)(slash - e), e);
		if (!strcmp(slash + 1, "*"))
			load_system(tep, dir, sys);
		else
			load_event(tep, dir, sys, slash + 1);
	}
	return tep;
}

/* Opens each cpu's raw buffer; 0, or -1 with err set. */
static int open_cpus(struct ft_inst *fi, struct vp_error *err)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);
	if (n < 1)
		n = 1;
	fi->ncpu = (int)n;
	fi->cpus = calloc((size_t)n, sizeof *fi->cpus);
	if (!fi->cpus)
		return vp_errorf(err, "out of memory");
	int opened = 0;
	for (int c = 0; c < fi->ncpu; c++) {
		fi->cpus[c].tcpu = tracefs_cpu_open(fi->fs.ti, c, true);
		if (!fi->cpus[c].tcpu)
			continue; /* offline cpu */
		opened++;
		int sz = tracefs_cpu_read_size(fi->cpus[c].tcpu);
		if (sz > 0 && (size_t)sz > fi->page_size)
			fi->page_size = (size_t)sz;
	}
	if (!opened)
		return vp_errorf(err, "cannot open any per_cpu/cpuN/"
				 "trace_pipe_raw of %s/instances/%s: %s",
				 fi->fs.dir, fi->fs.name, strerror(errno));
	if (!fi->page_size)
		fi->page_size = (size_t)getpagesize();
	fi->page = malloc(fi->page_size);
	return fi->page ? 0 : vp_errorf(err, "out of memory");
}

static void close_cpus(struct ft_inst *fi)
{
	for (int c = 0; fi->cpus && c < fi->ncpu; c++)
		if (fi->cpus[c].tcpu)
			tracefs_cpu_close(fi->cpus[c].tcpu);
	free(fi->cpus);
	fi->cpus = NULL;
	free(fi->page);
	fi->page = NULL;
}

/* Does the table translate ftrace/print? */
static bool records_print(const struct ft_inst *fi)
{
	const struct ft_table *t = &fi->table;
	for (uint32_t i = 0; t->by_id && i <= t->max_id; i++)
		if (t->by_id[i] && t->by_id[i]->proto_id == FE_PRINT)
			return true;
	return false;
}

/* Sets up tracefs for fi; 0, or -1 with err set and everything undone. */
static int setup_tracefs(struct ft_inst *fi, struct vp_error *err)
{
	char *dir = ft_tracefs_find(g.tracefs_dir, err);
	if (!dir)
		return -1;
	ft_tracefs_cleanup_stale(dir);
	int r = ft_tracefs_open(&fi->fs, dir, fi->cfg.instance_name,
				fi->cfg.buffer_kb, err);
	free(dir);
	if (r != 0)
		return -1;
	fi->tep = load_formats(fi);
	if (!fi->tep) {
		vp_errorf(err, "cannot read the event formats under %s/events",
			  fi->fs.dir);
		goto fail;
	}
	int commit = tep_get_header_page_size(fi->tep);
	fi->layout.commit_size = commit == 4 || commit == 8
					 ? (unsigned)commit
					 : (unsigned)sizeof(long);
	for (unsigned i = 0; i < fi->cfg.n_events; i++) {
		if (!valid_pattern(fi->cfg.events[i]))
			push_name(&fi->unknown, &fi->n_unknown,
				  fi->cfg.events[i]);
		else
			enable_pattern(fi, fi->cfg.events[i]);
	}
	ft_table_build(&fi->table, fi->tep, fi->cfg.events, fi->cfg.n_events,
		       fi->cfg.disable_generic, fi->cfg.compact);
	if (records_print(fi) && ft_tracefs_copy_markers(&fi->fs) != 0)
		vp_log_info(TAG "writes to the top-level trace_marker are "
				"not copied into %s (no options/"
				"copy_trace_marker); ftrace/print sees only "
				"that instance's trace_marker\n", fi->fs.name);
	if (open_cpus(fi, err) != 0)
		goto fail;
	return 0;
fail:
	close_cpus(fi);
	ft_table_free(&fi->table);
	if (fi->tep)
		tep_free(fi->tep);
	fi->tep = NULL;
	ft_tracefs_close(&fi->fs);
	return -1;
}

static void teardown_tracefs(struct ft_inst *fi)
{
	close_cpus(fi);
	ft_tracefs_close(&fi->fs);
	ft_table_free(&fi->table);
	if (fi->tep)
		tep_free(fi->tep);
	fi->tep = NULL;
}

/* ---- packets ------------------------------------------------------------- */

static void put_cpu_stats(struct pb_buf *b, int cpu,
			  const struct ft_cpu_stats *s)
{
	size_t m = pb_begin_nested(b, FS_CPU_STATS);
	pb_put_varint(b, FCS_CPU, (uint64_t)cpu);
	pb_put_varint(b, FCS_ENTRIES, s->entries);
	pb_put_varint(b, FCS_OVERRUN, s->overrun);
	pb_put_varint(b, FCS_COMMIT_OVERRUN, s->commit_overrun);
	pb_put_varint(b, FCS_BYTES_READ, s->bytes);
	if (s->has_oldest)
		pb_put_double(b, FCS_OLDEST_EVENT_TS, s->oldest_event_ts);
	if (s->has_now)
		pb_put_double(b, FCS_NOW_TS, s->now_ts);
	pb_put_varint(b, FCS_DROPPED_EVENTS, s->dropped_events);
	pb_put_varint(b, FCS_READ_EVENTS, s->read_events);
	pb_end_nested(b, m);
}

/* One FtraceStats packet (from the calling thread). */
static void write_stats(struct ft_inst *fi, int phase)
{
	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_varint(&b, TP_TIMESTAMP, vp_now_ns());
	size_t m = pb_begin_nested(&b, TP_FTRACE_STATS);
	pb_put_varint(&b, FS_PHASE, (uint64_t)phase);
	for (int c = 0; c < fi->ncpu; c++) {
		if (!fi->cpus[c].tcpu)
			continue;
		char *text = ft_tracefs_cpu_stats(&fi->fs, c);
		struct ft_cpu_stats s;
		if (text && ft_parse_cpu_stats(text, &s) > 0)
			put_cpu_stats(&b, c, &s);
		free(text);
	}
	for (unsigned i = 0; i < fi->n_unknown; i++)
		pb_put_string(&b, FS_UNKNOWN_FTRACE_EVENTS, fi->unknown[i]);
	for (unsigned i = 0; i < fi->n_failed; i++)
		pb_put_string(&b, FS_FAILED_FTRACE_EVENTS, fi->failed[i]);
	if (phase == FS_PHASE_END_OF_TRACE)
		for (unsigned s = 0; s < 32; s++)
			if (fi->error_mask & (1u << s))
				pb_put_varint(&b, FS_FTRACE_PARSE_ERRORS, s);
	pb_end_nested(&b, m);
	vp_ds_write_packet(fi->inst, b.data, b.len);
	pb_buf_free(&b);
}

/* Writes the cpu's pending bundle (if it holds anything). */
static void emit_bundle(struct ft_inst *fi, int cpu)
{
	struct ft_bundle *b = &fi->bundle;
	if (!b->n_events && !b->errors.len && !b->lost_events)
		return;
	ft_bundle_packet(b, (uint32_t)cpu, fi->cpus[cpu].prev_end_ts,
			 &fi->pkt);
	vp_ds_write_packet(fi->inst, fi->pkt.data, fi->pkt.len);
	if (b->n_events)
		fi->cpus[cpu].prev_end_ts = b->last_ts;
	ft_bundle_reset(b);
}

static int on_record(void *ctx, uint64_t ts, const uint8_t *data, size_t len)
{
	struct ft_inst *fi = ctx;
	if (ft_encode_record(&fi->table, &fi->bundle, ts, data, len) ==
	    FT_ENC_INVALID) {
		ft_bundle_add_error(&fi->bundle, ts,
				    FTRACE_STATUS_INVALID_EVENT);
		fi->error_mask |= 1u << FTRACE_STATUS_INVALID_EVENT;
	}
	return 0;
}

/* Reads what the cpu's buffer holds, at most max_pages pages (0: until
 * it is empty). */
static void drain_cpu(struct ft_inst *fi, int cpu, size_t max_pages)
{
	struct tracefs_cpu *tcpu = fi->cpus[cpu].tcpu;
	for (size_t n = 0; !max_pages || n < max_pages; n++) {
		int got = tracefs_cpu_read(tcpu, fi->page, true);
		if (got <= 0) {
			if (got < 0 && errno != EAGAIN && errno != EINTR &&
			    errno != EWOULDBLOCK) {
				ft_bundle_add_error(
					&fi->bundle, fi->cpus[cpu].prev_end_ts,
					FTRACE_STATUS_UNEXPECTED_READ_ERROR);
				fi->error_mask |=
					1u << FTRACE_STATUS_UNEXPECTED_READ_ERROR;
			}
			break;
		}
		struct ftrace_page_info info;
		enum ftrace_parse_status st = ftrace_page_parse(
			&fi->layout, fi->page, (size_t)got, on_record, fi,
			&info);
		if (info.missed_events)
			fi->bundle.lost_events = true;
		if (st != FTRACE_STATUS_OK) {
			ft_bundle_add_error(&fi->bundle, info.last_ts, st);
			fi->error_mask |= 1u << st;
		}
		if (ft_bundle_size(&fi->bundle) > BUNDLE_CUT_BYTES ||
		    fi->bundle.n_intern > FT_INTERN_MAX - 64)
			emit_bundle(fi, cpu);
	}
	emit_bundle(fi, cpu);
}

static void drain_all(struct ft_inst *fi, bool until_empty)
{
	/* A round reads at most about a buffer's worth per cpu, so one busy
	 * cpu cannot starve the others or the flush. */
	size_t max_pages = until_empty ? 0
		: (size_t)fi->cfg.buffer_kb * 1024 / fi->page_size + 2;
	for (int c = 0; c < fi->ncpu; c++)
		if (fi->cpus[c].tcpu)
			drain_cpu(fi, c, max_pages);
	vp_ds_flush(fi->inst);
}

/* ---- the drain thread -------------------------------------------------------- */

static void deadline_after(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void *drain_thread(void *arg)
{
	struct ft_inst *fi = arg;
	struct timespec dl;

	pthread_mutex_lock(&fi->mu);
	deadline_after(&dl, fi->cfg.drain_ms);
	while (!fi->stop) {
		if (fi->flush_req == fi->flush_done &&
		    pthread_cond_timedwait(&fi->cv, &fi->mu, &dl) != ETIMEDOUT)
			continue; /* woken: look at stop / flush again */
		uint64_t want = fi->flush_req;
		pthread_mutex_unlock(&fi->mu);
		drain_all(fi, false);
		pthread_mutex_lock(&fi->mu);
		fi->flush_done = want;
		pthread_cond_broadcast(&fi->done_cv);
		deadline_after(&dl, fi->cfg.drain_ms);
	}
	pthread_mutex_unlock(&fi->mu);
	/* Tracing is off now: read what is left. */
	drain_all(fi, true);
	return NULL;
}

static int start_thread(struct ft_inst *fi)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fi->cv, &ca);
	pthread_cond_init(&fi->done_cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&fi->mu, NULL);
	if (pthread_create(&fi->thread, NULL, drain_thread, fi) != 0)
		return -1;
	fi->thread_started = true;
	return 0;
}

/* ---- the data source ----------------------------------------------------- */

static void inst_free(struct ft_inst *fi)
{
	config_free(&fi->cfg);
	ft_bundle_free(&fi->bundle);
	pb_buf_free(&fi->pkt);
	for (unsigned i = 0; i < fi->n_unknown; i++)
		free(fi->unknown[i]);
	free(fi->unknown);
	for (unsigned i = 0; i < fi->n_failed; i++)
		free(fi->failed[i]);
	free(fi->failed);
	if (fi->thread_started) {
		pthread_cond_destroy(&fi->cv);
		pthread_cond_destroy(&fi->done_cv);
		pthread_mutex_destroy(&fi->mu);
	}
	free(fi);
}

static struct ft_inst *inst_take(struct vp_ds_instance *inst, bool remove)
{
	pthread_mutex_lock(&g.mu);
	struct ft_inst **pp = &g.list, *fi = NULL;
	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->inst == inst) {
			fi = *pp;
			if (remove)
				*pp = fi->next;
			break;
		}
	}
	pthread_mutex_unlock(&g.mu);
	return fi;
}

static void on_start(void *ctx, struct vp_ds_instance *inst,
		     const uint8_t *config, size_t len)
{
	struct vp_error err = { { 0 } };
	uint64_t setup_ns = 0;
	(void)ctx;

	struct ft_inst *fi = calloc(1, sizeof *fi);
	if (!fi) {
		vp_log_warn(TAG "out of memory\n");
		return;
	}
	fi->inst = inst;
	ft_bundle_init(&fi->bundle, false);
	pb_buf_init(&fi->pkt);
	if (parse_config(&fi->cfg, config, len, &err) != 0) {
		vp_log_warn(TAG "bad config: %s; recording nothing\n",
			err.msg);
	} else {
		fi->bundle.compact_enabled = fi->cfg.compact;
		if (fi->cfg.atrace)
			vp_log_warn(TAG "atrace categories and apps are "
					"Android-only; ignored\n");
		setup_ns = vp_now_ns();
		if (setup_tracefs(fi, &err) != 0)
			vp_log_warn(TAG "%s; recording nothing\n", err.msg);
		else
			fi->active = true;
	}
	if (fi->active) {
		uint64_t start = vp_now_ns();
		for (int c = 0; c < fi->ncpu; c++)
			fi->cpus[c].prev_end_ts = start;
		if (ft_tracefs_tracing(&fi->fs, true) != 0 ||
		    start_thread(fi) != 0) {
			vp_log_warn(TAG "cannot start tracing in %s/"
					"instances/%s: %s; recording nothing\n",
				fi->fs.dir, fi->fs.name, strerror(errno));
			teardown_tracefs(fi);
			fi->active = false;
		} else {
			write_stats(fi, FS_PHASE_START_OF_TRACE);
			vp_ds_flush(inst);
			vp_log_info(TAG "recording %u event "
						"patterns into %s/instances/%s "
						"(set up in %llu ms)\n",
					fi->cfg.n_events, fi->fs.dir,
					fi->fs.name,
					(unsigned long long)(start - setup_ns) /
						1000000ull);
		}
	}
	pthread_mutex_lock(&g.mu);
	fi->next = g.list;
	g.list = fi;
	pthread_mutex_unlock(&g.mu);
}

static void on_stop(void *ctx, struct vp_ds_instance *inst)
{
	(void)ctx;
	struct ft_inst *fi = inst_take(inst, true);
	if (!fi)
		return;
	if (fi->active) {
		ft_tracefs_tracing(&fi->fs, false);
		pthread_mutex_lock(&fi->mu);
		fi->stop = true;
		pthread_cond_broadcast(&fi->cv);
		pthread_mutex_unlock(&fi->mu);
		pthread_join(fi->thread, NULL);
		write_stats(fi, FS_PHASE_END_OF_TRACE);
		teardown_tracefs(fi);
	}
	inst_free(fi);
}

static void on_flush(void *ctx, struct vp_ds_instance *inst)
{
	(void)ctx;
	/* The instance stays listed until on_stop, which runs on this same
	 * (producer) thread, so fi cannot go away meanwhile. */
	struct ft_inst *fi = inst_take(inst, false);
	if (!fi || !fi->active)
		return;
	struct timespec dl;
	deadline_after(&dl, FLUSH_WAIT_MS);
	pthread_mutex_lock(&fi->mu);
	uint64_t want = ++fi->flush_req;
	pthread_cond_broadcast(&fi->cv);
	while (fi->flush_done < want && !fi->stop)
		if (pthread_cond_timedwait(&fi->done_cv, &fi->mu, &dl) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&fi->mu);
}

int ftrace_probe_register(const struct probes_options *opt)
{
	g.tracefs_dir = opt ? opt->tracefs_dir : NULL;
	struct vp_data_source_desc d = {
		.name = "linux.ftrace",
		.on_start = on_start,
		.on_stop = on_stop,
		.on_flush = on_flush,
	};
	if (!vp_data_source_register(&d)) {
		vp_log_warn(TAG "cannot register the data source\n");
		return -1;
	}
	return 0;
}
