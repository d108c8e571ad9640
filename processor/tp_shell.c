/*
 * tp_shell.c - the interactive SQL shell of vperfetto_tp.
 *
 * Reads lines with libedit (history in $HOME/.vperfetto_tp_history), joins
 * them until sqlite3_complete() says a statement ends, runs it and prints
 * the results as an aligned table (or CSV after `.mode csv`).  Lines
 * starting with a dot at the start of a statement are commands (.help).
 * Ctrl-C interrupts the running statement or drops the one being typed;
 * Ctrl-D quits.
 *
 * The SIGINT handler is the one place with file-scope state: a signal
 * handler cannot be given a pointer, so it sees the connection of the
 * running statement and a cancel flag through two statics.
 */
#include "tp_shell.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <editline/readline.h>
#include <sqlite3.h>

#include "tp_query.h"
#include "tp_schema.h"
#include "tp_stdlib.h"
#include "vp_alloc.h"

#define HISTORY_FILE ".vperfetto_tp_history"
#define HISTORY_MAX 2000
#define TABLE_SAMPLE_ROWS 1000 /* rows that decide column widths */
#define TABLE_MAX_WIDTH 64

static sqlite3 *volatile running_db;      /* set while a statement runs */
static volatile sig_atomic_t cancel_input; /* Ctrl-C at the prompt */

struct shell {
	sqlite3 *db;
	const char *trace_path;
	bool csv;
	char *history_path;
	char *pending; /* statement being typed */
	size_t pending_len, pending_cap;
};

static void on_sigint(int sig)
{
	sqlite3 *db = running_db;

	(void)sig;
	if (db)
		sqlite3_interrupt(db);
	else
		cancel_input = 1;
}

/* ---- small helpers ----------------------------------------------------- */

static void pending_append(struct shell *sh, const char *s)
{
	size_t n = strlen(s);

	if (sh->pending_len + n + 2 > sh->pending_cap) {
		size_t cap = sh->pending_cap ? sh->pending_cap : 256;
		while (cap < sh->pending_len + n + 2)
			cap *= 2;
		char *p = vp_xrealloc(sh->pending, cap);
		sh->pending = p;
		sh->pending_cap = cap;
	}
	memcpy(sh->pending + sh->pending_len, s, n);
	sh->pending_len += n;
	sh->pending[sh->pending_len++] = '\n';
	sh->pending[sh->pending_len] = '\0';
}

static void pending_reset(struct shell *sh)
{
	sh->pending_len = 0;
	if (sh->pending)
		sh->pending[0] = '\0';
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static char *read_whole_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		return NULL;
	do {
		if (cap - len < 4096) {
			cap = cap ? 2 * cap : 65536;
			buf = vp_xrealloc(buf, cap);
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

/* ---- aligned table output ---------------------------------------------- */

/* The text of a cell as the table shows it (malloc'd). */
static char *cell_text(sqlite3_stmt *stmt, int c)
{
	char *s = NULL;

	switch (sqlite3_column_type(stmt, c)) {
	case SQLITE_NULL:
		s = strdup("[NULL]");
		break;
	case SQLITE_INTEGER:
		if (asprintf(&s, "%lld", sqlite3_column_int64(stmt, c)) < 0)
			s = NULL;
		break;
	case SQLITE_FLOAT:
		if (asprintf(&s, "%f", sqlite3_column_double(stmt, c)) < 0)
			s = NULL;
		break;
	case SQLITE_BLOB:
		s = strdup("<raw bytes>");
		break;
	default:
		s = vp_xstrdup((const char *)sqlite3_column_text(stmt, c));
		break;
	}
	return s;
}

static void print_row(char **cells, const int *width, int ncols)
{
	for (int c = 0; c < ncols; c++) {
		if (c)
			fputs("  ", stdout);
		if (c == ncols - 1)
			fputs(cells[c], stdout);
		else
			printf("%-*s", width[c], cells[c]);
	}
	putchar('\n');
}

struct table_out {
	int ncols;
	int *width;
	char **cells; /* sampled rows, ncols per row */
	size_t nrows;
};

static void table_sample_row(struct table_out *t, sqlite3_stmt *stmt)
{
	char **cells = vp_xrealloc(t->cells, (t->nrows + 1) * (size_t)t->ncols *
						 sizeof(*cells));
	t->cells = cells;
	for (int c = 0; c < t->ncols; c++) {
		char *s = cell_text(stmt, c);
		int len = (int)strlen(s);
		if (len > t->width[c])
			t->width[c] = len < TABLE_MAX_WIDTH ? len : TABLE_MAX_WIDTH;
		cells[t->nrows * (size_t)t->ncols + (size_t)c] = s;
	}
	t->nrows++;
}

static void table_flush(struct table_out *t, sqlite3_stmt *stmt)
{
	char **header = vp_xmalloc((size_t)t->ncols * sizeof(*header));

	for (int c = 0; c < t->ncols; c++)
		header[c] = (char *)sqlite3_column_name(stmt, c);
	print_row(header, t->width, t->ncols);
	for (int c = 0; c < t->ncols; c++) {
		if (c)
			fputs("  ", stdout);
		for (int i = 0; i < t->width[c]; i++)
			putchar('-');
	}
	putchar('\n');
	for (size_t r = 0; r < t->nrows; r++) {
		char **row = t->cells + r * (size_t)t->ncols;
		print_row(row, t->width, t->ncols);
		for (int c = 0; c < t->ncols; c++)
			free(row[c]);
	}
	free(header);
}

/* Steps stmt to the end and prints its rows as an aligned table; the first
 * TABLE_SAMPLE_ROWS rows set the column widths. */
static int run_table(sqlite3_stmt *stmt, uint64_t *rows)
{
	struct table_out t = {.ncols = sqlite3_column_count(stmt)};
	bool flushed = false;
	int rc;

	t.width = vp_xcalloc((size_t)(t.ncols ? t.ncols : 1), sizeof(*t.width));
	for (int c = 0; c < t.ncols; c++) {
		const char *name = sqlite3_column_name(stmt, c);
		t.width[c] = name ? (int)strlen(name) : 0;
	}
	*rows = 0;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		(*rows)++;
		if (t.ncols == 0)
			continue;
		if (!flushed && t.nrows < TABLE_SAMPLE_ROWS) {
			table_sample_row(&t, stmt);
			continue;
		}
		if (!flushed) {
			table_flush(&t, stmt);
			flushed = true;
		}
		char **row = vp_xmalloc((size_t)t.ncols * sizeof(*row));
		for (int c = 0; c < t.ncols; c++)
			row[c] = cell_text(stmt, c);
		print_row(row, t.width, t.ncols);
		for (int c = 0; c < t.ncols; c++)
			free(row[c]);
		free(row);
	}
	if (t.ncols > 0 && !flushed && rc == SQLITE_DONE) {
		table_flush(&t, stmt);
	} else if (!flushed) { /* an error: show nothing of a partial set */
		for (size_t i = 0; i < t.nrows * (size_t)t.ncols; i++)
			free(t.cells[i]);
	}
	free(t.cells);
	free(t.width);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ---- running SQL ------------------------------------------------------- */

static void report_error(sqlite3 *db, int rc)
{
	if (rc == SQLITE_INTERRUPT)
		fprintf(stderr, "Interrupted.\n");
	else
		fprintf(stderr, "Error: %s\n", sqlite3_errmsg(db));
}

static void run_sql_table(struct shell *sh, const char *text)
{
	char *expanded = tp_stdlib_expand(text); /* Perfetto's macros */
	const char *p = expanded ? expanded : text;

	while (*p) {
		sqlite3_stmt *stmt = NULL;
		const char *tail = NULL;
		double t0 = now_ms();
		uint64_t rows = 0;
		char msg[512];
		int rc = tp_stdlib_statement(sh->db, p, &tail, msg, sizeof(msg));

		if (rc < 0) {
			fprintf(stderr, "Error: %s\n", msg);
			break;
		}
		if (rc > 0) { /* a Perfetto statement (INCLUDE ...): no rows */
			p = tail;
			continue;
		}
		rc = sqlite3_prepare_v2(sh->db, p, -1, &stmt, &tail);
		if (rc != SQLITE_OK) {
			report_error(sh->db, rc);
			break;
		}
		if (!stmt)
			break;
		int ncols = sqlite3_column_count(stmt);
		rc = run_table(stmt, &rows);
		sqlite3_finalize(stmt);
		if (rc != SQLITE_OK) {
			report_error(sh->db, rc);
			break;
		}
		if (ncols > 0)
			printf("\n(%llu row%s, %.1f ms)\n",
			       (unsigned long long)rows, rows == 1 ? "" : "s",
			       now_ms() - t0);
		p = tail;
	}
	sqlite3_free(expanded);
}

static void run_sql(struct shell *sh, const char *sql)
{
	struct vp_error err = {{0}};

	running_db = sh->db;
	if (sh->csv) {
		if (tp_query_run(sh->db, sql, stdout, &err) != 0)
			fprintf(stderr, "Error: %s\n", err.msg);
	} else {
		run_sql_table(sh, sql);
	}
	running_db = NULL;
	fflush(stdout);
}

/* ---- dot commands ------------------------------------------------------ */

/* Calls fn for every table and view name (trace tables first). */
static void visit_names(sqlite3 *db, void (*fn)(void *, const char *),
			void *arg)
{
	const char *sql =
		"WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 "
		"FROM i WHERE n < 1000) "
		"SELECT name FROM (SELECT __vp_table_name(n) AS name FROM i) "
		"WHERE name IS NOT NULL "
		"UNION SELECT name FROM sqlite_schema "
		"WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' "
		"ORDER BY name";
	sqlite3_stmt *stmt;

	if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
		report_error(db, SQLITE_ERROR);
		return;
	}
	while (sqlite3_step(stmt) == SQLITE_ROW)
		fn(arg, (const char *)sqlite3_column_text(stmt, 0));
	sqlite3_finalize(stmt);
}

static void print_name(void *arg, const char *name)
{
	(void)arg;
	puts(name);
}

/* Prints the CREATE statement of name: from sqlite_schema for views and
 * user tables, else built from the columns of the trace table. */
static void print_schema(void *arg, const char *name)
{
	sqlite3 *db = arg;
	sqlite3_stmt *stmt;
	bool found = false;

	if (sqlite3_prepare_v2(db,
			       "SELECT sql FROM sqlite_schema WHERE name = ?1",
			       -1, &stmt, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0)) {
		printf("%s;\n", (const char *)sqlite3_column_text(stmt, 0));
		found = true;
	}
	sqlite3_finalize(stmt);
	if (found)
		return;
	if (sqlite3_prepare_v2(db,
			       "SELECT name, type FROM pragma_table_info(?1)",
			       -1, &stmt, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	while (sqlite3_step(stmt) == SQLITE_ROW) {
		const char *type = (const char *)sqlite3_column_text(stmt, 1);
		if (!found)
			printf("CREATE TABLE %s(\n  ", name);
		else
			printf(",\n  ");
		printf("%s", (const char *)sqlite3_column_text(stmt, 0));
		if (type && *type)
			printf(" %s", type);
		found = true;
	}
	sqlite3_finalize(stmt);
	if (found)
		printf("\n);\n");
	else
		fprintf(stderr, "Error: no such table: %s\n", name);
}

static void dot_help(void)
{
	puts(".tables              list the tables and views\n"
	     ".schema [TABLE]      show the CREATE statement of TABLE (or all)\n"
	     ".mode table|csv      print results aligned (default) or as CSV\n"
	     ".read FILE           run the SQL in FILE\n"
	     ".dump FILE           export every table and view to an SQLite "
	     "file\n"
	     ".help                this help\n"
	     ".quit, .exit         leave (as does Ctrl-D)\n"
	     "SQL statements end with ';'.  Ctrl-C interrupts a query.\n"
	     "INCLUDE PERFETTO MODULE name; creates a module of Perfetto's "
	     "stdlib\n(the modules are listed in vperfetto_tp(1)).");
}

/* Splits the command line in place: argv[0] is the command. */
static int split_args(char *line, char **argv, int max)
{
	int argc = 0;
	char *p = line;

	while (argc < max) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		char quote = (*p == '"' || *p == '\'') ? *p++ : 0;
		argv[argc++] = p;
		while (*p && (quote ? *p != quote : (*p != ' ' && *p != '\t')))
			p++;
		if (*p)
			*p++ = '\0';
	}
	return argc;
}

/* Runs a dot command; returns false to quit. */
static bool dot_command(struct shell *sh, char *line)
{
	char *argv[4];
	int argc = split_args(line, argv, 4);
	struct vp_error err = {{0}};

	if (argc == 0)
		return true;
	const char *cmd = argv[0];
	if (!strcmp(cmd, ".quit") || !strcmp(cmd, ".exit") ||
	    !strcmp(cmd, ".q"))
		return false;
	if (!strcmp(cmd, ".help")) {
		dot_help();
	} else if (!strcmp(cmd, ".tables")) {
		visit_names(sh->db, print_name, NULL);
	} else if (!strcmp(cmd, ".schema")) {
		if (argc > 1)
			print_schema(sh->db, argv[1]);
		else
			visit_names(sh->db, print_schema, sh->db);
	} else if (!strcmp(cmd, ".mode")) {
		if (argc > 1 && !strcmp(argv[1], "csv"))
			sh->csv = true;
		else if (argc > 1 && (!strcmp(argv[1], "table") ||
				      !strcmp(argv[1], "column")))
			sh->csv = false;
		else
			printf("current mode: %s (use .mode table|csv)\n",
			       sh->csv ? "csv" : "table");
	} else if (!strcmp(cmd, ".read")) {
		char *sql = argc > 1 ? read_whole_file(argv[1]) : NULL;
		if (argc < 2)
			fprintf(stderr, "usage: .read FILE\n");
		else if (!sql)
			fprintf(stderr, "Error: cannot read %s: %s\n", argv[1],
				strerror(errno));
		else
			run_sql(sh, sql);
		free(sql);
	} else if (!strcmp(cmd, ".dump")) {
		if (argc < 2) {
			fprintf(stderr, "usage: .dump FILE\n");
		} else {
			running_db = sh->db;
			if (tp_query_export(sh->db, argv[1], &sh->trace_path, 1,
					    &err) != 0)
				fprintf(stderr, "Error: %s\n", err.msg);
			else
				printf("exported to %s\n", argv[1]);
			running_db = NULL;
		}
	} else {
		fprintf(stderr, "Error: unknown command %s (try .help)\n", cmd);
	}
	return true;
}

/* ---- the loop ---------------------------------------------------------- */

/* Adds text to the history as one line. */
static void remember(const char *text)
{
	char *h = vp_xstrdup(text);
	size_t n;

	for (char *p = h; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	n = strlen(h);
	while (n && h[n - 1] == ' ')
		h[--n] = '\0';
	if (n)
		add_history(h);
	free(h);
}

static bool blank(const char *s)
{
	return s[strspn(s, " \t\r\n")] == '\0';
}

/* Handles one line; returns false to quit. */
static bool shell_line(struct shell *sh, char *line)
{
	if (sh->pending_len == 0) {
		char *p = line + strspn(line, " \t");
		if (*p == '.') {
			remember(p);
			return dot_command(sh, p);
		}
		if (blank(line))
			return true;
	}
	pending_append(sh, line);
	if (sqlite3_complete(sh->pending)) {
		remember(sh->pending);
		run_sql(sh, sh->pending);
		pending_reset(sh);
	}
	return true;
}

static void shell_history_open(struct shell *sh)
{
	const char *home = getenv("HOME");

	using_history();
	stifle_history(HISTORY_MAX);
	if (!home || !*home)
		return;
	if (asprintf(&sh->history_path, "%s/%s", home, HISTORY_FILE) < 0) {
		sh->history_path = NULL;
		return;
	}
	read_history(sh->history_path);
}

int tp_shell_run(struct sqlite3 *db, const char *trace_path)
{
	struct shell sh = {.db = db, .trace_path = trace_path};
	struct sigaction sa = {0}, old_sa;
	bool go = true;

	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_sa);
	shell_history_open(&sh);
	printf("vperfetto_tp shell: enter SQL ending with ';', .help for "
	       "commands, Ctrl-D to quit.\n");
	while (go) {
		char *line;

		cancel_input = 0;
		line = readline(sh.pending_len ? "...> " : "> ");
		if (cancel_input) { /* Ctrl-C at the prompt drops the input */
			free(line);
			if (sh.pending_len)
				pending_reset(&sh);
			putchar('\n');
			continue;
		}
		if (!line) { /* Ctrl-D */
			putchar('\n');
			break;
		}
		go = shell_line(&sh, line);
		free(line);
	}
	if (sh.history_path)
		write_history(sh.history_path);
	sigaction(SIGINT, &old_sa, NULL);
	free(sh.history_path);
	free(sh.pending);
	return 0;
}
