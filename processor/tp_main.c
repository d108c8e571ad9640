/*
 * tp_main.c - the vperfetto_tp command line, modelled on Perfetto's
 * trace_processor_shell: load a trace, then run queries (-Q, -q), print a
 * summary, export a database (-e), or start the interactive shell.
 *
 * Exit status: 0 on success, 1 when the trace cannot be read or a query
 * fails, 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "out_file.h"
#include "tp_load.h"
#include "tp_query.h"
#include "tp_shell.h"
#include "tp_stats.h"
#include "vp_version.h"
#include "vp_log.h"
#include "vp_alloc.h"

#define PROG "vperfetto_tp"

/* One -Q or -q, in command-line order. */
struct query {
	bool is_file;
	const char *arg; /* the SQL, or the file name */
	char *sql;       /* file contents, once read */
};

struct options {
	struct query *queries;
	size_t nqueries;
	const char *export_path;
	const char *trace_path;
	bool summary;
	bool quiet;
	bool interactive;
	uint64_t max_inflate; /* bytes; 0: the default */
	bool full_sort;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options] TRACE\n"
		"\n"
		"Loads a Perfetto trace into SQLite tables with Perfetto's names and\n"
		"runs trace processor queries on it.\n"
		"\n"
		"options:\n"
		"  -Q, --query-string SQL   run SQL, print the results as CSV\n"
		"  -q, --query-file FILE    run the SQL in FILE ('-': stdin), print the\n"
		"                           results as CSV\n"
		"  -e, --export FILE        write every table and view to an SQLite\n"
		"                           database FILE (after any queries)\n"
		"      --summary            print row counts per table and the stats\n"
		"                           that are not zero\n"
		"  -i, --interactive        start the shell even with other actions\n"
		"      --quiet              no progress bar, no warnings about the trace\n"
		"      --max-inflate SIZE   what the trace's compressed_packets may\n"
		"                           inflate to in all, bytes or with K/M/G\n"
		"                           (default 2G); more stops the load (exit 1)\n"
		"      --full-sort          sort the whole trace at its end instead of\n"
		"                           window by window at buffer reads\n"
		"  -v, --version            print the version and exit\n"
		"  -h, --help               print this help and exit\n"
		"\n"
		"Without -Q, -q, -e or --summary, starts an interactive SQL shell\n"
		"(or, when stdin is not a terminal, runs the SQL read from stdin).\n");
}

static void add_query(struct options *o, bool is_file, const char *arg)
{
	struct query *q = vp_xrealloc(o->queries, (o->nqueries + 1) * sizeof(*q));
	o->queries = q;
	q[o->nqueries++] = (struct query){.is_file = is_file, .arg = arg};
}

enum { OPT_SUMMARY = 1000, OPT_QUIET, OPT_MAX_INFLATED, OPT_FULL_SORT };

/* A size in bytes, or with a K, M or G suffix (as vperfetto_merge's
 * --max-inflate); not 0. */
static bool parse_size(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	char *end;
	if (!(*s >= '0' && *s <= '9'))
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (*end || !v || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* Fills o from argv; returns -1 after printing usage on bad usage, 1 when
 * the program is done (help, version), 0 to go on. */
static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'v'},
		{"query-string", required_argument, NULL, 'Q'},
		{"query-file", required_argument, NULL, 'q'},
		{"export", required_argument, NULL, 'e'},
		{"interactive", no_argument, NULL, 'i'},
		{"summary", no_argument, NULL, OPT_SUMMARY},
		{"quiet", no_argument, NULL, OPT_QUIET},
		{"max-inflate", required_argument, NULL, OPT_MAX_INFLATED},
		{"full-sort", no_argument, NULL, OPT_FULL_SORT},
		{NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "hviQ:q:e:", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 1;
		case 'v':
			printf(PROG " %s\n", VP_VERSION);
			return 1;
		case 'Q':
			add_query(o, false, optarg);
			break;
		case 'q':
			add_query(o, true, optarg);
			break;
		case 'e':
			o->export_path = optarg;
			break;
		case 'i':
			o->interactive = true;
			break;
		case OPT_SUMMARY:
			o->summary = true;
			break;
		case OPT_QUIET:
			o->quiet = true;
			break;
		case OPT_FULL_SORT:
			o->full_sort = true;
			break;
		case OPT_MAX_INFLATED:
			if (!parse_size(optarg, &o->max_inflate)) {
				fprintf(stderr, PROG ": bad --max-inflate '%s' "
						"(bytes, or with K, M or G)\n",
					optarg);
				return -1;
			}
			break;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, PROG ": %s\n",
			optind >= argc ? "no trace file given"
				       : "only one trace file may be given");
		usage(stderr);
		return -1;
	}
	o->trace_path = argv[optind];
	return 0;
}

/* Reads the whole of f into a NUL-terminated buffer; NULL on error. */
static char *read_stream(FILE *f)
{
	size_t len = 0, cap = 1 << 16;
	char *buf = vp_xmalloc(cap);

	for (;;) {
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (len + 1 < cap) {
			if (ferror(f)) {
				free(buf);
				return NULL;
			}
			if (feof(f))
				break;
			continue;
		}
		cap *= 2;
		buf = vp_xrealloc(buf, cap);
	}
	buf[len] = '\0';
	return buf;
}

static char *read_file(const char *path)
{
	if (!strcmp(path, "-")) /* stdin, as Perfetto's shell takes it */
		return read_stream(stdin);
	FILE *f = fopen(path, "rb");
	char *s;
	int e;

	if (!f)
		return NULL;
	s = read_stream(f);
	e = errno;
	fclose(f);
	errno = e;
	return s;
}

/* Reads every -q file up front, so a typo fails before a long load. */
static int read_query_files(struct options *o)
{
	for (size_t i = 0; i < o->nqueries; i++) {
		struct query *q = &o->queries[i];
		if (!q->is_file)
			continue;
		q->sql = read_file(q->arg);
		if (!q->sql) {
			fprintf(stderr, PROG ": cannot read query file %s: %s\n",
				q->arg, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Refuses what cannot be a trace before the loader sees it. */
static int check_trace_path(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) != 0) {
		fprintf(stderr, PROG ": cannot read trace file %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (S_ISDIR(sb.st_mode)) {
		fprintf(stderr, PROG ": cannot read trace file %s: %s\n", path,
			strerror(EISDIR));
		return -1;
	}
	return 0;
}

/* ---- --summary --------------------------------------------------------- */

static void print_stat(void *arg, const char *name, int64_t idx,
		       uint32_t machine, int64_t value, const char *severity)
{
	FILE *out = arg;
	char key[160];

	if (idx >= 0)
		snprintf(key, sizeof(key), "%s[%" PRId64 "]", name, idx);
	else
		snprintf(key, sizeof(key), "%s", name);
	fprintf(out, "  %-48s %14" PRId64 "  %s", key, value,
		severity ? severity : "");
	if (machine)
		fprintf(out, "  (machine %" PRIu32 ")", machine);
	putc('\n', out);
}

static void print_summary(struct tp_ctx *ctx, const char *path, FILE *out)
{
	fprintf(out, "trace: %s\n", path);
	fprintf(out, "size: %" PRIu64 " bytes, %" PRIu64 " packets\n",
		ctx->file_size, ctx->packets);
	/* The span of two int64 timestamps needs 64 unsigned bits (first_ts
	 * may be far below zero, last_ts far above). */
	if (ctx->have_ts)
		fprintf(out, "time: %" PRId64 " .. %" PRId64 " (%" PRIu64
			     " ns)\n",
			ctx->first_ts, ctx->last_ts,
			(uint64_t)ctx->last_ts - (uint64_t)ctx->first_ts);
	fprintf(out, "\ntables:\n");
	for (int i = 0; i < TP_T_COUNT; i++) {
		const struct tp_table *t = &ctx->tables[i];
		/* Perfetto's public name: slice, not __intrinsic_slice */
		if (t->name)
			fprintf(out, "  %-48s %14" PRIu32 "\n",
				strncmp(t->name, "__intrinsic_", 12) == 0
					? t->name + 12
					: t->name,
				t->nrows);
	}
	fprintf(out, "\nstats (not zero):\n");
	tp_stats_visit(ctx, print_stat, out);
	fflush(out);
}

/* ---- running ----------------------------------------------------------- */

/* need_sql: -Q and -q must hold a statement (stdin need not). */
static int run_sql(struct sqlite3 *db, const char *sql, bool need_sql)
{
	struct vp_error err = {{0}};

	if (tp_query_run_flags(db, sql, stdout,
			       need_sql ? TP_QUERY_NEED_SQL : 0, &err) != 0) {
		fflush(stdout);
		fprintf(stderr, PROG ": %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* What an output must not overwrite: the trace and the query files. */
static size_t list_inputs(const struct options *o, const char **v)
{
	size_t n = 0;
	v[n++] = o->trace_path;
	for (size_t i = 0; i < o->nqueries; i++)
		if (o->queries[i].is_file)
			v[n++] = o->queries[i].arg;
	return n;
}

static int run_actions(struct tp_ctx *ctx, struct sqlite3 *db,
		       const struct options *o, const char **inputs,
		       size_t n_inputs)
{
	struct vp_error err = {{0}};
	bool acted = false;

	if (o->summary) {
		print_summary(ctx, o->trace_path, stdout);
		acted = true;
	}
	for (size_t i = 0; i < o->nqueries; i++) {
		const struct query *q = &o->queries[i];
		if (i || o->summary)
			putchar('\n');
		if (run_sql(db, q->is_file ? q->sql : q->arg, true) != 0)
			return 1;
		acted = true;
	}
	if (o->export_path) {
		if (tp_query_export(db, o->export_path, inputs, n_inputs,
				    &err) != 0) {
			fprintf(stderr, PROG ": cannot export to %s: %s\n",
				o->export_path, err.msg);
			return 1;
		}
		acted = true;
	}
	if (o->interactive || !acted) {
		if (isatty(STDIN_FILENO))
			return tp_shell_run(db, o->trace_path);
		char *sql = read_stream(stdin);
		int rc = sql ? run_sql(db, sql, false) : -1;
		if (!sql)
			fprintf(stderr, PROG ": cannot read stdin\n");
		free(sql);
		return rc ? 1 : 0;
	}
	return 0;
}

static int load(struct tp_ctx *ctx, const struct options *o)
{
	struct tp_load_opts lo = {
		.progress = !o->quiet && isatty(STDERR_FILENO),
		.quiet = o->quiet,
		.max_inflate = o->max_inflate,
		.full_sort = o->full_sort,
	};
	struct vp_error err = {{0}};

	if (tp_load_file(ctx, o->trace_path, &lo, &err) != 0) {
		if (strstr(err.msg, o->trace_path))
			fprintf(stderr, PROG ": %s\n", err.msg);
		else
			fprintf(stderr, PROG ": cannot read trace file %s: %s\n",
				o->trace_path, err.msg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	vp_log_init("vperfetto_tp", VP_LOG_WARN);
	struct options o = {0};
	struct vp_error err = {{0}};
	struct tp_ctx *ctx = NULL;
	struct sqlite3 *db = NULL;
	const char **inputs = NULL;
	size_t n_inputs = 0;
	int rc = parse_args(argc, argv, &o);

	if (rc != 0) {
		free(o.queries);
		return rc < 0 ? 2 : 0;
	}
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	rc = 1;
	if (read_query_files(&o) != 0 || check_trace_path(o.trace_path) != 0)
		goto out;
	inputs = malloc((o.nqueries + 1) * sizeof(*inputs));
	if (!inputs)
		goto out;
	n_inputs = list_inputs(&o, inputs);
	/* Refused before the trace is loaded, and nothing is written. */
	if (vp_out_check_inputs("the export", o.export_path, inputs, n_inputs,
				&err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		goto out;
	}
	/* A signal removes the export being written and ends the run (the
	 * interactive shell takes SIGINT for itself while it runs). */
	vp_out_signals(false);
	ctx = tp_ctx_new();
	if (load(ctx, &o) != 0)
		goto out;
	db = tp_query_open(ctx, &err);
	if (!db) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		goto out;
	}
	rc = run_actions(ctx, db, &o, inputs, n_inputs);
	if (fflush(stdout) != 0) {
		fprintf(stderr, PROG ": writing the output: %s\n",
			strerror(errno));
		rc = 1;
	}
out:
	if (db)
		tp_query_close(db);
	if (ctx)
		tp_ctx_free(ctx);
	for (size_t i = 0; i < o.nqueries; i++)
		free(o.queries[i].sql);
	free(o.queries);
	free(inputs);
	return rc;
}
