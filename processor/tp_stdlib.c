/*
 * tp_stdlib.c - `INCLUDE PERFETTO MODULE name;` and the modules of
 * Perfetto's standard library that vperfetto_tp has.
 *
 * Every module is one entry of `modules` below: its name (Perfetto's), the
 * modules it needs, the SQL that creates its tables and views (written for
 * SQLite against vperfetto_tp's tables, with Perfetto's table, column and
 * function names), and an optional C function that registers its SQL
 * functions.  Perfetto's PERFETTO TABLEs are plain tables here, filled when
 * the module is included; its PERFETTO VIEWs are views; its functions are
 * C functions.  Of the macros, those that queries use most are expanded
 * by tp_stdlib_expand() (cast_int!, cast_double!, cast_string!,
 * counter_leading_intervals!, intervals_overlap_count! and _by_group!);
 * table functions are not available.
 *
 * Including a module runs its dependencies first, then its SQL, inside a
 * savepoint (a failure leaves nothing behind), and notes its name in
 * temp.__vp_included_module so that a second include does nothing.
 * `name.*` includes every module whose name starts with `name.`, `*`
 * every module.  The errors are Perfetto's: "INCLUDE: Package 'x' not
 * found" when no module starts with the package (the name's first part),
 * "INCLUDE: unknown module 'x'" when the package is there but the module
 * is not.
 *
 * The other Perfetto statements users paste are here too: CREATE [OR
 * REPLACE] PERFETTO TABLE and VIEW (a table filled now, a view; the
 * column list, if any, is not checked), PERFETTO FUNCTION returning a
 * value (its SELECT run per call with the arguments bound to their
 * $names), PERFETTO INDEX and DROP PERFETTO INDEX (accepted: they change
 * no result).  MACROs and functions returning a TABLE are refused.
 */
#include "tp_stdlib.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sqlite3.h>

#include "tp_spanjoin.h"

#define MODULE_NAME_MAX 128

/* A character of an SQL identifier. */
static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$' ||
	       (unsigned char)c >= 0x80;
}

/* ---- SQL functions of the modules -------------------------------------- */

/* sched_state_to_human_readable_string(short_name) */
static const char *state_name(const char *s)
{
	static const char *const names[][2] = {
	    {"Running", "Running"},
	    {"R", "Runnable"},
	    {"R+", "Runnable (Preempted)"},
	    {"S", "Sleeping"},
	    {"D", "Uninterruptible Sleep"},
	    {"T", "Stopped"},
	    {"t", "Traced"},
	    {"X", "Exit (Dead)"},
	    {"Z", "Exit (Zombie)"},
	    {"x", "Task Dead"},
	    {"I", "Idle"},
	    {"K", "Wakekill"},
	    {"W", "Waking"},
	    {"P", "Parked"},
	    {"N", "No Load"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i][0]))
			return names[i][1];
	return s; /* anything else (ETW's states too) is shown as it is */
}

static void state_to_string_fn(sqlite3_context *fn, int argc,
			       sqlite3_value **argv)
{
	(void)argc;
	if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
		sqlite3_result_null(fn);
		return;
	}
	const char *s = (const char *)sqlite3_value_text(argv[0]);
	sqlite3_result_text(fn, s ? state_name(s) : "", -1, SQLITE_TRANSIENT);
}

/* sched_state_io_to_human_readable_string(sched_state, io_wait): the name
 * ("" for NULL), then " (IO)" or " (non-IO)" when io_wait is 1 or 0. */
static void state_io_to_string_fn(sqlite3_context *fn, int argc,
				  sqlite3_value **argv)
{
	const char *name = "", *io = "";

	(void)argc;
	if (sqlite3_value_type(argv[0]) != SQLITE_NULL) {
		const char *s = (const char *)sqlite3_value_text(argv[0]);
		name = s ? state_name(s) : "";
	}
	if (sqlite3_value_numeric_type(argv[1]) == SQLITE_INTEGER ||
	    sqlite3_value_numeric_type(argv[1]) == SQLITE_FLOAT) {
		double d = sqlite3_value_double(argv[1]);
		io = d == 1 ? " (IO)" : d == 0 ? " (non-IO)" : "";
	}
	char *r = sqlite3_mprintf("%s%s", name, io);
	if (!r) {
		sqlite3_result_error_nomem(fn);
		return;
	}
	sqlite3_result_text(fn, r, -1, sqlite3_free);
}

static int sched_states_init(sqlite3 *db)
{
	int rc =
	    sqlite3_create_function(db, "sched_state_to_human_readable_string",
				    1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
				    state_to_string_fn, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(
		    db, "sched_state_io_to_human_readable_string", 2,
		    SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
		    state_io_to_string_fn, NULL, NULL);
	return rc;
}

/* time_from_*(x) multiply, time_to_*(x) divide, by the user data: SQL's
 * arithmetic (integers stay integers, reals stay reals, NULL is NULL). */
static void time_convert(sqlite3_context *fn, sqlite3_value *v, bool mul)
{
	int64_t k = (int64_t)(intptr_t)sqlite3_user_data(fn);

	switch (sqlite3_value_numeric_type(v)) {
	case SQLITE_INTEGER: {
		int64_t x = sqlite3_value_int64(v), r;
		if (!mul)
			sqlite3_result_int64(fn, x / k);
		else if (__builtin_mul_overflow(x, k, &r))
			sqlite3_result_double(fn, (double)x * (double)k);
		else
			sqlite3_result_int64(fn, r);
		break;
	}
	case SQLITE_FLOAT: {
		double x = sqlite3_value_double(v);
		sqlite3_result_double(fn, mul ? x * (double)k : x / (double)k);
		break;
	}
	case SQLITE_NULL:
		sqlite3_result_null(fn);
		break;
	default: /* text that is not a number: 0, as SQL's arithmetic */
		sqlite3_result_int64(fn, 0);
		break;
	}
}

static void time_from_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	(void)argc;
	time_convert(fn, argv[0], true);
}

static void time_to_fn(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	(void)argc;
	time_convert(fn, argv[0], false);
}

static int time_conversion_init(sqlite3 *db)
{
	static const struct {
		const char *unit;
		int64_t ns;
	} units[] = {
	    {"ns", 1},
	    {"us", 1000},
	    {"ms", 1000000},
	    {"s", 1000000000},
	    {"min", INT64_C(60) * 1000000000},
	    {"hours", INT64_C(3600) * 1000000000},
	    {"days", INT64_C(86400) * 1000000000},
	};
	char name[32];
	int rc = SQLITE_OK;

	for (size_t i = 0;
	     rc == SQLITE_OK && i < sizeof(units) / sizeof(units[0]); i++) {
		void *k = (void *)(intptr_t)units[i].ns;
		snprintf(name, sizeof(name), "time_from_%s", units[i].unit);
		rc = sqlite3_create_function(db, name, 1,
					     SQLITE_UTF8 | SQLITE_DETERMINISTIC,
					     k, time_from_fn, NULL, NULL);
		if (rc != SQLITE_OK)
			break;
		snprintf(name, sizeof(name), "time_to_%s", units[i].unit);
		rc = sqlite3_create_function(db, name, 1,
					     SQLITE_UTF8 | SQLITE_DETERMINISTIC,
					     k, time_to_fn, NULL, NULL);
	}
	return rc;
}

/* ---- the modules ------------------------------------------------------- */

struct tp_module {
	const char *name;
	const char *deps[4];
	int (*init)(sqlite3 *db); /* registers SQL functions; may be NULL */
	const char *sql;
};

static const struct tp_module modules[] = {
    /* Every thread with its process (NULLs when it has none). */
    {"std.thread.with_context",
     {NULL},
     NULL,
     "CREATE TABLE _thread_with_process AS"
     " SELECT t.utid, t.tid, t.name AS thread_name, t.is_main_thread,"
     "  p.upid, p.pid, p.name AS process_name"
     " FROM thread AS t LEFT JOIN process AS p ON p.upid = t.upid"
     " ORDER BY t.utid;"},

    /* Slices of thread tracks and of process tracks, with who they
     * belong to. */
    {"slices.with_context",
     {"std.thread.with_context"},
     NULL,
     "CREATE VIEW thread_slice AS"
     " SELECT s.id, s.ts, s.dur, s.category, s.name, s.track_id,"
     "  tt.name AS track_name, tp.thread_name, tp.utid, tp.tid,"
     "  tp.is_main_thread, tp.process_name, tp.upid, tp.pid, s.depth,"
     "  s.parent_id, s.arg_set_id, s.thread_ts, s.thread_dur"
     " FROM slice AS s"
     " JOIN thread_track AS tt ON tt.id = s.track_id"
     " JOIN _thread_with_process AS tp ON tp.utid = tt.utid;\n"
     "CREATE VIEW process_slice AS"
     " SELECT s.id, s.ts, s.dur, s.category, s.name, s.track_id,"
     "  pt.name AS track_name, p.name AS process_name, p.upid, p.pid,"
     "  s.depth, s.parent_id, s.arg_set_id, s.thread_ts, s.thread_dur"
     " FROM slice AS s"
     " JOIN process_track AS pt ON pt.id = s.track_id"
     " JOIN process AS p ON p.upid = pt.upid;\n"
     "CREATE VIEW thread_or_process_slice AS"
     " SELECT id, ts, dur, category, name, track_id, track_name,"
     "  thread_name, utid, tid, process_name, upid, pid, depth,"
     "  parent_id, arg_set_id"
     " FROM thread_slice"
     " UNION ALL"
     " SELECT id, ts, dur, category, name, track_id, track_name,"
     "  NULL, NULL, NULL, process_name, upid, pid, depth, parent_id,"
     "  arg_set_id"
     " FROM process_slice;"},

    /* A slice's duration less its children's. */
    {"slices.self_dur",
     {NULL},
     NULL,
     "CREATE TABLE _slice_children_dur AS"
     " SELECT parent_id AS id, sum(dur) AS child_dur_sum FROM slice"
     " WHERE parent_id IS NOT NULL GROUP BY parent_id ORDER BY parent_id;\n"
     "CREATE TABLE slice_self_dur AS"
     " SELECT s.id, s.dur - ifnull(c.child_dur_sum, 0) AS self_dur"
     " FROM slice AS s LEFT JOIN _slice_children_dur AS c ON c.id = s.id"
     " ORDER BY s.id;"},

    /* Scheduling slices with their thread and process. */
    {"sched.with_context",
     {"std.thread.with_context"},
     NULL,
     "CREATE VIEW sched_with_thread_process AS"
     " SELECT s.id, s.ts, s.dur, s.utid, tp.upid, tp.thread_name,"
     "  tp.process_name, s.cpu, s.end_state, s.priority"
     " FROM sched AS s JOIN _thread_with_process AS tp"
     " ON tp.utid = s.utid;"},

    /* Names of scheduling states (functions only). */
    {"sched.states", {NULL}, sched_states_init, ""},

    /* Time each thread spent in each state, and as percentages. */
    {"sched.time_in_state",
     {NULL},
     NULL,
     "CREATE TABLE sched_time_in_state_for_thread AS"
     " WITH per_state AS ("
     "  SELECT utid, state, sum(dur) AS time_in_state FROM thread_state"
     "  GROUP BY utid, state),"
     " per_thread AS ("
     "  SELECT utid, sum(dur) AS total FROM thread_state GROUP BY utid)"
     " SELECT s.utid, t.total AS total_runtime, s.state, s.time_in_state,"
     "  (s.time_in_state * 100) / t.total AS percentage_in_state"
     " FROM per_state AS s JOIN per_thread AS t ON t.utid = s.utid"
     " ORDER BY s.utid, s.state;\n"
     "CREATE TABLE sched_percentage_of_time_in_state AS"
     " SELECT utid,"
     "  max(iif(state = 'Running', percentage_in_state, NULL)) AS running,"
     "  max(iif(state = 'R', percentage_in_state, NULL)) AS runnable,"
     "  max(iif(state = 'R+', percentage_in_state, NULL))"
     "   AS runnable_preempted,"
     "  max(iif(state = 'S', percentage_in_state, NULL)) AS sleeping,"
     "  max(iif(state = 'D', percentage_in_state, NULL))"
     "   AS uninterruptible_sleep,"
     "  sum(iif(state IN ('T', 't', 'X', 'Z', 'x', 'I', 'K', 'W', 'P',"
     "   'N'), time_in_state, NULL)) * 100 / total_runtime AS other"
     " FROM sched_time_in_state_for_thread GROUP BY utid ORDER BY utid;"},

    /* For each Running thread state, the thread's latest runnable
     * state before it, and the latest one with a waker outside an
     * interrupt. */
    {"sched.runnable",
     {NULL},
     NULL,
     "CREATE TABLE sched_previous_runnable_on_thread AS"
     " SELECT id, prev_runnable_id, prev_wakeup_runnable_id FROM ("
     "  SELECT id, state,"
     "   max(id) FILTER (WHERE state <> 'Running') OVER w"
     "    AS prev_runnable_id,"
     "   max(id) FILTER (WHERE waker_utid IS NOT NULL"
     "    AND (irq_context IS NULL OR irq_context <> 1)) OVER w"
     "    AS prev_wakeup_runnable_id"
     "  FROM thread_state WHERE state GLOB 'R*' AND dur <> -1"
     "  WINDOW w AS (PARTITION BY utid ORDER BY id))"
     " WHERE state = 'Running' ORDER BY id;"},

    /* How long each Running thread state waited runnable before. */
    {"sched.latency",
     {"sched.runnable"},
     NULL,
     "CREATE VIEW _sched_with_thread_state_join AS"
     " SELECT ts.id AS thread_state_id, s.id AS sched_id"
     " FROM sched AS s JOIN thread_state AS ts"
     " ON ts.utid = s.utid AND ts.ts = s.ts AND ts.dur = s.dur;\n"
     "CREATE TABLE sched_latency_for_running_interval AS"
     " SELECT r.id AS thread_state_id, j.sched_id, prev.utid,"
     "  r.prev_runnable_id AS runnable_latency_id,"
     "  prev.dur AS latency_dur"
     " FROM sched_previous_runnable_on_thread AS r"
     " JOIN thread_state AS prev ON prev.id = r.prev_runnable_id"
     " JOIN _sched_with_thread_state_join AS j"
     "  ON j.thread_state_id = r.id"
     " ORDER BY r.id;"},

    /* Kernel threads: kthreadd (pid 2) and its children. */
    {"linux.threads",
     {NULL},
     NULL,
     "CREATE TABLE linux_kernel_threads AS"
     " WITH kthreadd AS ("
     "  SELECT upid, pid, name, machine_id FROM process WHERE pid = 2),"
     " kprocs AS ("
     "  SELECT upid, pid, name, machine_id FROM kthreadd"
     "  UNION"
     "  SELECT p.upid, p.pid, p.name, p.machine_id FROM process AS p"
     "  JOIN kthreadd AS k ON p.parent_upid = k.upid)"
     " SELECT p.upid, t.utid, p.pid, t.tid, p.name AS process_name,"
     "  t.name AS thread_name, p.machine_id"
     " FROM kprocs AS p JOIN thread AS t ON t.upid = p.upid"
     " ORDER BY t.utid;"},

    /* counter_leading_intervals!(counters): a macro, expanded by
     * tp_stdlib_expand(). */
    {"counters.intervals", {NULL}, NULL, ""},

    /* Each cpufreq / cpuidle counter value with how long it held: to
     * the next value on its track, the last one to the end of the
     * trace. */
    {"linux.cpu.frequency",
     {"counters.intervals"},
     NULL,
     "CREATE TABLE cpu_frequency_counters AS"
     " SELECT iv.id, iv.track_id, iv.ts, iv.dur,"
     "  CAST(iv.value AS INT) AS freq, cpu.ucpu, t.cpu"
     " FROM counter_leading_intervals!((SELECT c.* FROM counter AS c"
     "  JOIN cpu_counter_track AS t ON t.id = c.track_id"
     "  AND t.name = 'cpufreq')) AS iv"
     " JOIN cpu_counter_track AS t ON t.id = iv.track_id"
     " JOIN cpu ON t.machine_id IS cpu.machine_id AND t.cpu = cpu.cpu"
     " ORDER BY iv.track_id, iv.ts;"},
    {"linux.cpu.idle",
     {"counters.intervals"},
     NULL,
     "CREATE TABLE cpu_idle_counters AS"
     " SELECT iv.id, iv.track_id, iv.ts, iv.dur,"
     "  CAST(iif(iv.value = 4294967295, -1, iv.value) AS INT) AS idle,"
     "  t.cpu"
     " FROM counter_leading_intervals!((SELECT c.* FROM counter AS c"
     "  JOIN cpu_counter_track AS t ON t.id = c.track_id"
     "  AND t.name = 'cpuidle')) AS iv"
     " JOIN cpu_counter_track AS t ON t.id = iv.track_id"
     " ORDER BY iv.track_id, iv.ts;"},

    /* Every process counter value with how long it held: to the next
     * value on its track, the last one to the end of the process (or of
     * the trace) plus 1. */
    {"linux.memory.general",
     {NULL},
     NULL,
     "CREATE VIEW _all_counters_per_process AS"
     " SELECT c.ts,"
     "  lead(c.ts, 1, (SELECT ifnull(p.end_ts, trace_end()) FROM process AS p"
     "   WHERE p.upid = t.upid) + 1)"
     "  OVER (PARTITION BY c.track_id ORDER BY c.ts) - c.ts AS dur,"
     "  t.upid, c.value, c.track_id, t.name"
     " FROM counter AS c JOIN process_counter_track AS t ON t.id = c.track_id"
     " WHERE t.upid IS NOT NULL;"},

    /* A process's anon, file and shmem RSS and swap over time: the four
     * counters joined into intervals where none of them changes. */
    {"linux.memory.process",
     {"linux.memory.general"},
     NULL,
     "CREATE VIEW _anon_rss AS SELECT ts, dur, upid, value AS anon_rss_val"
     " FROM _all_counters_per_process WHERE name = 'mem.rss.anon';\n"
     "CREATE VIEW _file_rss AS SELECT ts, dur, upid, value AS file_rss_val"
     " FROM _all_counters_per_process WHERE name = 'mem.rss.file';\n"
     "CREATE VIEW _shmem_rss AS"
     " SELECT ts, dur, upid, value AS shmem_rss_val"
     " FROM _all_counters_per_process WHERE name = 'mem.rss.shmem';\n"
     "CREATE VIEW _swap AS SELECT ts, dur, upid, value AS swap_val"
     " FROM _all_counters_per_process WHERE name = 'mem.swap';\n"
     "CREATE VIRTUAL TABLE _anon_swap_sj USING SPAN_OUTER_JOIN("
     " _anon_rss PARTITIONED upid, _swap PARTITIONED upid);\n"
     "CREATE VIRTUAL TABLE _anon_swap_file_sj USING SPAN_OUTER_JOIN("
     " _anon_swap_sj PARTITIONED upid, _file_rss PARTITIONED upid);\n"
     "CREATE VIRTUAL TABLE _rss_swap_sj USING SPAN_OUTER_JOIN("
     " _anon_swap_file_sj PARTITIONED upid,"
     " _shmem_rss PARTITIONED upid);\n"
     "CREATE TABLE _memory_rss_and_swap_per_process_table AS"
     " SELECT ts, dur, upid, cast_int!(anon_rss_val) AS anon_rss,"
     "  cast_int!(file_rss_val) AS file_rss,"
     "  cast_int!(shmem_rss_val) AS shmem_rss, cast_int!(swap_val) AS swap"
     " FROM _rss_swap_sj;\n"
     "CREATE VIEW memory_rss_and_swap_per_process AS"
     " SELECT m.ts, m.dur, m.upid, p.pid, p.name AS process_name,"
     "  m.anon_rss, m.file_rss, m.shmem_rss,"
     "  m.file_rss + m.anon_rss + ifnull(m.shmem_rss, 0) AS rss, m.swap,"
     "  m.anon_rss + ifnull(m.swap, 0) AS anon_rss_and_swap,"
     "  m.anon_rss + m.file_rss + ifnull(m.shmem_rss, 0) + ifnull(m.swap, 0)"
     "   AS rss_and_swap"
     " FROM _memory_rss_and_swap_per_process_table AS m"
     " JOIN process AS p ON p.upid = m.upid;"},

    /* intervals_overlap_count!() and _by_group!(): macros. */
    {"intervals.overlap", {NULL}, NULL, ""},

    /* How many threads are runnable, in D, and how many cpus run a
     * task other than idle, from each time that changes. */
    {"sched.thread_level_parallelism",
     {"intervals.overlap"},
     NULL,
     "CREATE TABLE sched_runnable_thread_count AS"
     " WITH runnable AS (SELECT ts, dur FROM thread_state"
     "  WHERE state = 'R')"
     " SELECT ts, value AS runnable_thread_count"
     " FROM intervals_overlap_count!(runnable, ts, dur) ORDER BY ts;\n"
     "CREATE TABLE sched_uninterruptible_sleep_thread_count AS"
     " WITH sleeping AS (SELECT ts, dur FROM thread_state"
     "  WHERE state = 'D')"
     " SELECT ts, value AS uninterruptible_sleep_thread_count"
     " FROM intervals_overlap_count!(sleeping, ts, dur) ORDER BY ts;\n"
     "CREATE TABLE sched_active_cpu_count AS"
     " WITH tasks AS (SELECT ts, dur FROM sched"
     "  WHERE utid NOT IN (SELECT utid FROM thread WHERE is_idle))"
     " SELECT ts, value AS active_cpu_count"
     " FROM intervals_overlap_count!(tasks, ts, dur) ORDER BY ts;"},

    /* Conversions between nanoseconds and other units (functions). */
    {"time.conversion", {NULL}, time_conversion_init, ""},
};

#define NMODULES (sizeof(modules) / sizeof(modules[0]))

static const struct tp_module *find_module(const char *name)
{
	for (size_t i = 0; i < NMODULES; i++)
		if (!strcmp(modules[i].name, name))
			return &modules[i];
	return NULL;
}

/* Whether any module is in the package of name (its first part). */
static bool package_known(const char *name)
{
	size_t n = strcspn(name, ".");

	for (size_t i = 0; i < NMODULES; i++)
		if (!strncmp(modules[i].name, name, n) &&
		    (modules[i].name[n] == '.' || modules[i].name[n] == '\0'))
			return true;
	return false;
}

/* ---- including --------------------------------------------------------- */

static int exec_msg(sqlite3 *db, const char *sql, char *msg, size_t msgsz)
{
	char *e = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &e);

	if (rc != SQLITE_OK)
		snprintf(msg, msgsz, "%s", e ? e : sqlite3_errmsg(db));
	sqlite3_free(e);
	return rc;
}

static int is_included(sqlite3 *db, const char *name, bool *yes)
{
	sqlite3_stmt *stmt;
	int rc = sqlite3_prepare_v2(db,
				    "SELECT 1 FROM temp.__vp_included_module"
				    " WHERE name = ?1",
				    -1, &stmt, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	*yes = rc == SQLITE_ROW;
	sqlite3_finalize(stmt);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int mark_included(sqlite3 *db, const char *name)
{
	sqlite3_stmt *stmt;
	int rc = sqlite3_prepare_v2(db,
				    "INSERT INTO temp.__vp_included_module"
				    " VALUES (?1)",
				    -1, &stmt, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	sqlite3_finalize(stmt);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Includes m after its dependencies, unless it already is. */
static int include_one(sqlite3 *db, const struct tp_module *m, char *msg,
		       size_t msgsz)
{
	bool done;
	int rc;

	if (is_included(db, m->name, &done) != SQLITE_OK) {
		snprintf(msg, msgsz, "%s", sqlite3_errmsg(db));
		return -1;
	}
	if (done)
		return 0;
	for (size_t i = 0;
	     i < sizeof(m->deps) / sizeof(m->deps[0]) && m->deps[i]; i++) {
		const struct tp_module *d = find_module(m->deps[i]);
		if (!d) { /* a mistake in the table above */
			snprintf(msg, msgsz, "INCLUDE: unknown module '%s'",
				 m->deps[i]);
			return -1;
		}
		if (include_one(db, d, msg, msgsz) != 0)
			return -1;
	}
	if (m->init && (rc = m->init(db)) != SQLITE_OK) {
		snprintf(msg, msgsz, "INCLUDE: module '%s': %s", m->name,
			 sqlite3_errstr(rc));
		return -1;
	}
	char *sql = tp_stdlib_expand(m->sql);
	rc = exec_msg(db, sql ? sql : m->sql, msg, msgsz);
	sqlite3_free(sql);
	if (rc != SQLITE_OK) {
		char inner[256];
		snprintf(inner, sizeof(inner), "%s", msg);
		snprintf(msg, msgsz, "INCLUDE: module '%s': %s", m->name,
			 inner);
		return -1;
	}
	if (mark_included(db, m->name) != SQLITE_OK) {
		snprintf(msg, msgsz, "%s", sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

/* Includes key (a module, or a prefix ending in '*'); in a savepoint, so a
 * failure leaves nothing half made. */
static int include_key(sqlite3 *db, const char *key, char *msg, size_t msgsz)
{
	size_t len = strlen(key);
	bool wildcard = len && key[len - 1] == '*';
	int rc = 0;

	if (strcmp(key, "*") != 0 && !package_known(key)) {
		snprintf(msg, msgsz, "INCLUDE: Package '%s' not found", key);
		return -1;
	}
	if (!wildcard && !find_module(key)) {
		snprintf(msg, msgsz, "INCLUDE: unknown module '%s'", key);
		return -1;
	}
	if (exec_msg(db,
		     "CREATE TEMP TABLE IF NOT EXISTS __vp_included_module"
		     "(name TEXT PRIMARY KEY);"
		     "SAVEPOINT __vp_include;",
		     msg, msgsz) != SQLITE_OK)
		return -1;
	for (size_t i = 0; i < NMODULES && rc == 0; i++) {
		if (wildcard ? !strncmp(modules[i].name, key, len - 1)
			     : !strcmp(modules[i].name, key))
			rc = include_one(db, &modules[i], msg, msgsz);
	}
	if (rc != 0)
		sqlite3_exec(db, "ROLLBACK TO __vp_include", NULL, NULL, NULL);
	sqlite3_exec(db, "RELEASE __vp_include", NULL, NULL, NULL);
	return rc;
}

/* ---- macros ------------------------------------------------------------ */

#define MACRO_MAX_ARGS 4

/* Perfetto's macros that queries use; $1 .. $4 in the expansion are the
 * arguments. */
static const struct {
	const char *name;
	int nargs;
	const char *expansion;
} macros[] = {
    {"cast_int", 1, "CAST($1 AS INT)"},
    {"cast_double", 1, "CAST($1 AS REAL)"},
    {"cast_string", 1, "CAST($1 AS TEXT)"},
    /* counters.intervals: the values of a counter-like table (id, ts,
     * track_id, value), per track in ts order, with how long each held
     * (to the track's next row, the last to the end of the trace), the
     * next value and the change from the previous row.  As Perfetto, a
     * run of equal values keeps its first two rows and, when a different
     * value follows (and it is not at ts 0), its last. */
    {"counter_leading_intervals", 1,
     "(WITH __vp_o AS (SELECT id, ts, track_id, value,"
     " row_number() OVER __vp_w AS rn, lag(value) OVER __vp_w AS pv,"
     " lead(id) OVER __vp_w IS NOT NULL AS more"
     " FROM $1 AS __vp_c"
     " WINDOW __vp_w AS (PARTITION BY track_id ORDER BY ts)),"
     " __vp_r AS (SELECT *, sum(iif(pv = value, 0, 1)) OVER"
     " (PARTITION BY track_id ORDER BY rn) AS run FROM __vp_o),"
     " __vp_k AS (SELECT *, row_number() OVER"
     " (PARTITION BY track_id, run ORDER BY rn) AS pos,"
     " count(*) OVER (PARTITION BY track_id, run) AS len FROM __vp_r)"
     " SELECT id, ts,"
     " lead(ts, 1, trace_end()) OVER __vp_w2 - ts AS dur, track_id,"
     " CAST(value AS REAL) AS value,"
     " CAST(lead(value) OVER __vp_w2 AS REAL) AS next_value,"
     " CAST(value - lag(value) OVER __vp_w2 AS REAL) AS delta_value"
     " FROM __vp_k WHERE pos <= 2 OR (pos = len AND more AND ts != 0)"
     " WINDOW __vp_w2 AS (PARTITION BY track_id ORDER BY rn))"},
    /* intervals.overlap: intervals_overlap_count!(table, ts, dur), how
     * many intervals are open from each time one starts or ends (an
     * interval of dur -1 never ends); _by_group!(..., group) the same
     * per value of a column */
    {"intervals_overlap_count", 3,
     "(WITH __vp_ev AS ("
     "SELECT $2 AS ts, 1 AS delta FROM $1"
     " UNION ALL SELECT $2 + $3 AS ts, -1 AS delta FROM $1"
     " WHERE $3 != -1),"
     " __vp_m AS (SELECT ts, sum(delta) AS delta FROM __vp_ev GROUP BY ts)"
     " SELECT ts, sum(delta) OVER (ORDER BY ts"
     " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS value"
     " FROM __vp_m ORDER BY ts)"},
    {"intervals_overlap_count_by_group", 4,
     "(WITH __vp_ev AS ("
     "SELECT $2 AS ts, 1 AS delta, $4 AS group_name FROM $1"
     " UNION ALL SELECT $2 + $3 AS ts, -1 AS delta, $4 AS group_name"
     " FROM $1 WHERE $3 != -1),"
     " __vp_m AS (SELECT ts, sum(delta) AS delta, group_name"
     " FROM __vp_ev GROUP BY ts, group_name)"
     " SELECT ts, sum(delta) OVER (PARTITION BY group_name ORDER BY ts"
     " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS value,"
     " group_name FROM __vp_m ORDER BY ts)"},
};

/* Past a quoted string or identifier, or a comment, starting at p; p when
 * there is none. */
static const char *skip_quoted(const char *p)
{
	char close = *p == '[' ? ']' : *p;
	const char *e;

	if (*p == '\'' || *p == '"' || *p == '`' || *p == '[') {
		e = strchr(p + 1, close);
		return e ? e + 1 : p + strlen(p);
	}
	if (p[0] == '-' && p[1] == '-') {
		e = strchr(p, '\n');
		return e ? e : p + strlen(p);
	}
	if (p[0] == '/' && p[1] == '*') {
		e = strstr(p + 2, "*/");
		return e ? e + 2 : p + strlen(p);
	}
	return p;
}

/* p at '(': the matching ')', or NULL. */
static const char *matching_paren(const char *p)
{
	int depth = 0;

	while (*p) {
		const char *q = skip_quoted(p);
		if (q != p) {
			p = q;
			continue;
		}
		if (*p == '(')
			depth++;
		else if (*p == ')' && --depth == 0)
			return p;
		p++;
	}
	return NULL;
}

/* Splits the arguments of a macro, from p to close (its ')'), at the
 * commas outside parentheses: argument i is arg[i] up to arg[i + 1] - 1.
 * Returns how many there are; more than MACRO_MAX_ARGS gives -1. */
static int split_args(const char *p, const char *close, const char **arg)
{
	int n = 0, depth = 0;

	arg[n++] = p;
	while (p < close) {
		const char *q = skip_quoted(p);
		if (q != p) {
			p = q;
			continue;
		}
		if (*p == '(') {
			depth++;
		} else if (*p == ')') {
			depth--;
		} else if (*p == ',' && depth == 0) {
			if (n == MACRO_MAX_ARGS)
				return -1;
			arg[n++] = p + 1;
		}
		p++;
	}
	arg[n] = close + 1;
	return n;
}

/* Appends sql[0, n) to out with its macros expanded; returns whether any
 * was. */
static bool expand_into(sqlite3_str *out, const char *sql, size_t n)
{
	const char *p = sql, *end = sql + n;
	bool any = false;

	while (p < end) {
		const char *q = skip_quoted(p);
		if (q != p) {
			sqlite3_str_append(out, p, (int)(q - p));
			p = q;
			continue;
		}
		if (!ident_char(*p) || (p > sql && ident_char(p[-1]))) {
			sqlite3_str_appendchar(out, 1, *p++);
			continue;
		}
		q = p;
		while (q < end && ident_char(*q))
			q++;
		size_t k = 0, nm = sizeof(macros) / sizeof(macros[0]);
		while (k < nm &&
		       (strlen(macros[k].name) != (size_t)(q - p) ||
			strncasecmp(macros[k].name, p, (size_t)(q - p)) != 0))
			k++;
		const char *close = q + 1 < end && q[0] == '!' && q[1] == '('
					? matching_paren(q + 1)
					: NULL;
		if (k == nm || !close || close >= end) {
			sqlite3_str_append(out, p, (int)(q - p));
			p = q;
			continue;
		}
		/* the expansion, with the (expanded) arguments for $1 .. */
		const char *arg[MACRO_MAX_ARGS + 1];
		int nargs = split_args(q + 2, close, arg);
		if (nargs != macros[k].nargs) { /* SQLite will complain */
			sqlite3_str_append(out, p, (int)(q - p));
			p = q;
			continue;
		}
		for (const char *t = macros[k].expansion; *t; t++) {
			int i = t[0] == '$' ? t[1] - '1' : -1;
			if (i >= 0 && i < nargs) {
				expand_into(out, arg[i],
					    (size_t)(arg[i + 1] - 1 - arg[i]));
				t++;
			} else {
				sqlite3_str_appendchar(out, 1, *t);
			}
		}
		any = true;
		p = close + 1;
	}
	return any;
}

char *tp_stdlib_expand(const char *sql)
{
	sqlite3_str *out;
	char *r;

	if (!strchr(sql, '!'))
		return NULL;
	out = sqlite3_str_new(NULL);
	if (!expand_into(out, sql, strlen(sql))) {
		sqlite3_free(sqlite3_str_finish(out));
		return NULL;
	}
	r = sqlite3_str_finish(out);
	if (!r)
		abort();
	return r;
}

/* ---- the statement ----------------------------------------------------- */

/* Skips whitespace and SQL comments. */
static const char *skip_blank(const char *p)
{
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (p[0] == '-' && p[1] == '-') {
			while (*p && *p != '\n')
				p++;
		} else if (p[0] == '/' && p[1] == '*') {
			const char *e = strstr(p + 2, "*/");
			p = e ? e + 2 : p + strlen(p);
		} else {
			return p;
		}
	}
}

/* Matches keyword kw (any case) as a whole word at p. */
static const char *keyword(const char *p, const char *kw)
{
	size_t n = strlen(kw);

	if (strncasecmp(p, kw, n) != 0 || ident_char(p[n]))
		return NULL;
	return p + n;
}

/* INCLUDE PERFETTO MODULE name; p is past INCLUDE. */
static int include_statement(sqlite3 *db, const char *p, const char **tail,
			     char *msg, size_t msgsz)
{
	char key[MODULE_NAME_MAX];
	size_t klen = 0;

	p = keyword(skip_blank(p), "PERFETTO");
	if (p)
		p = keyword(skip_blank(p), "MODULE");
	if (!p) {
		snprintf(msg, msgsz,
			 "INCLUDE: expected INCLUDE PERFETTO "
			 "MODULE name");
		return -1;
	}
	/* name: parts separated by dots, each an identifier or '*'; no
	 * blanks inside (Perfetto would look the blanks up too) */
	p = skip_blank(p);
	for (;;) {
		const char *s = p;
		size_t n;

		if (*p == '*')
			p++;
		else
			while (ident_char(*p))
				p++;
		n = (size_t)(p - s);
		if (n == 0 || klen + n + 2 > sizeof(key)) {
			snprintf(msg, msgsz, "INCLUDE: %s",
				 n ? "module name too long"
				   : "expected a module name");
			return -1;
		}
		memcpy(key + klen, s, n);
		klen += n;
		if (*p != '.')
			break;
		key[klen++] = '.';
		p++;
	}
	key[klen] = '\0';
	p = skip_blank(p);
	if (*p == ';')
		p++;
	else if (*p) {
		snprintf(msg, msgsz,
			 "INCLUDE: unexpected '%.20s' after the module name "
			 "'%s'",
			 p, key);
		return -1;
	}
	*tail = p;
	return include_key(db, key, msg, msgsz) == 0 ? 1 : -1;
}

/* ---- CREATE PERFETTO TABLE, VIEW, FUNCTION, INDEX ---------------------- */

/* Past the identifier at p (after blanks); NULL when there is none.  *s
 * and *n give the identifier. */
static const char *ident(const char *p, const char **s, size_t *n)
{
	p = skip_blank(p);
	*s = p;
	while (ident_char(*p))
		p++;
	*n = (size_t)(p - *s);
	return *n ? p : NULL;
}

/* p at '(': past the matching ')', quotes and comments skipped; NULL if
 * it does not close. */
static const char *skip_parens(const char *p)
{
	int depth = 0;

	while (*p) {
		const char *q = skip_blank(p);
		if (q != p) {
			p = q;
			continue;
		}
		if (*p == '\'' || *p == '"' || *p == '`') {
			const char *e = strchr(p + 1, *p);
			if (!e)
				return NULL;
			p = e + 1;
			continue;
		}
		if (*p == '(')
			depth++;
		else if (*p == ')' && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/* The type of an existing table or view named name, "" when none. */
static void object_type(sqlite3 *db, const char *name, size_t n, char *type,
			size_t typesz)
{
	sqlite3_stmt *stmt;

	type[0] = '\0';
	if (sqlite3_prepare_v2(db,
			       "SELECT type FROM sqlite_schema WHERE name = ?1"
			       " AND type IN ('table', 'view')",
			       -1, &stmt, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_text(stmt, 1, name, (int)n, SQLITE_STATIC);
	if (sqlite3_step(stmt) == SQLITE_ROW)
		snprintf(type, typesz, "%s",
			 (const char *)sqlite3_column_text(stmt, 0));
	sqlite3_finalize(stmt);
}

/* CREATE [OR REPLACE] PERFETTO TABLE|VIEW name [(schema)] AS select: a
 * plain table (filled now) or view; the schema is not checked.  p is at
 * the name. */
static int create_table_view(sqlite3 *db, const char *p, bool view,
			     bool replace, const char **tail, char *msg,
			     size_t msgsz)
{
	const char *name, *body, *t2 = NULL;
	sqlite3_stmt *stmt = NULL;
	char old[16], *sql;
	size_t n, prefix;
	int rc;

	p = ident(p, &name, &n);
	if (!p) {
		snprintf(msg, msgsz, "CREATE PERFETTO %s: expected a name",
			 view ? "VIEW" : "TABLE");
		return -1;
	}
	p = skip_blank(p);
	if (*p == '(' && !(p = skip_parens(p))) {
		snprintf(msg, msgsz, "CREATE PERFETTO %s: unclosed schema",
			 view ? "VIEW" : "TABLE");
		return -1;
	}
	body = keyword(skip_blank(p), "AS");
	if (!body) {
		snprintf(msg, msgsz, "CREATE PERFETTO %s %.*s: expected AS",
			 view ? "VIEW" : "TABLE", (int)n, name);
		return -1;
	}
	sql = sqlite3_mprintf("CREATE %s \"%.*w\" AS ", view ? "VIEW" : "TABLE",
			      (int)n, name);
	if (!sql)
		return -1;
	prefix = strlen(sql);
	sql = sqlite3_mprintf("%z%s", sql, body);
	if (!sql)
		return -1;
	sqlite3_exec(db, "SAVEPOINT __vp_create", NULL, NULL, NULL);
	object_type(db, name, n, old, sizeof(old));
	rc = SQLITE_OK;
	if (replace && old[0]) {
		char *drop =
		    sqlite3_mprintf("DROP %s \"%.*w\"", old, (int)n, name);
		rc = exec_msg(db, drop, msg, msgsz);
		sqlite3_free(drop);
	}
	if (rc == SQLITE_OK) {
		rc = sqlite3_prepare_v2(db, sql, -1, &stmt, &t2);
		if (rc == SQLITE_OK && stmt) {
			rc = sqlite3_step(stmt);
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		}
		if (rc != SQLITE_OK)
			snprintf(msg, msgsz, "%s", sqlite3_errmsg(db));
		sqlite3_finalize(stmt);
	}
	if (rc != SQLITE_OK)
		sqlite3_exec(db, "ROLLBACK TO __vp_create", NULL, NULL, NULL);
	sqlite3_exec(db, "RELEASE __vp_create", NULL, NULL, NULL);
	if (rc == SQLITE_OK && t2)
		*tail = body + (t2 - (sql + prefix));
	sqlite3_free(sql);
	return rc == SQLITE_OK ? 1 : -1;
}

/* A function made by CREATE PERFETTO FUNCTION: SQL run with the
 * arguments bound to its $names.  Each call prepares it anew: a statement
 * kept between calls would keep the connection from closing (SQLite
 * frees the function, which would finalize it, only once the connection
 * has no statement left). */
struct sql_fn {
	char *sql;
	int nargs;
	char **args; /* "$name" */
};

static void sql_fn_free(void *p)
{
	struct sql_fn *f = p;

	for (int i = 0; i < f->nargs; i++)
		sqlite3_free(f->args[i]);
	sqlite3_free(f->args);
	sqlite3_free(f->sql);
	sqlite3_free(f);
}

static void sql_fn_call(sqlite3_context *fn, int argc, sqlite3_value **argv)
{
	struct sql_fn *f = sqlite3_user_data(fn);
	sqlite3 *db = sqlite3_context_db_handle(fn);
	sqlite3_stmt *stmt;
	int rc;

	if (sqlite3_prepare_v2(db, f->sql, -1, &stmt, NULL) != SQLITE_OK ||
	    !stmt) {
		sqlite3_result_error(fn, stmt ? sqlite3_errmsg(db) : "no body",
				     -1);
		return;
	}
	for (int i = 0; i < argc && i < f->nargs; i++) {
		int idx = sqlite3_bind_parameter_index(stmt, f->args[i]);
		if (idx > 0)
			sqlite3_bind_value(stmt, idx, argv[i]);
	}
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		sqlite3_result_value(fn, sqlite3_column_value(stmt, 0));
	else if (rc == SQLITE_DONE)
		sqlite3_result_null(fn);
	else
		sqlite3_result_error(fn, sqlite3_errmsg(db), -1);
	sqlite3_finalize(stmt);
}

/* Past the end of the statement starting at p: after its ';', or at the
 * end of the text. */
static const char *statement_end(const char *p)
{
	for (const char *q = strchr(p, ';'); q; q = strchr(q + 1, ';')) {
		char *s = sqlite3_mprintf("%.*s", (int)(q + 1 - p), p);
		int done = s ? sqlite3_complete(s) : 1;
		sqlite3_free(s);
		if (done)
			return q + 1;
	}
	return p + strlen(p);
}

/* CREATE [OR REPLACE] PERFETTO FUNCTION name(arg TYPE, ...) RETURNS TYPE
 * AS select: a scalar function.  p is at the name. */
static int create_function(sqlite3 *db, const char *p, const char **tail,
			   char *msg, size_t msgsz)
{
	const char *name, *s, *body, *end = NULL;
	struct sql_fn *f;
	sqlite3_stmt *stmt = NULL;
	char fname[MODULE_NAME_MAX];
	size_t n, len;
	int rc;

	p = ident(p, &name, &n);
	if (!p || n >= sizeof(fname) || *(p = skip_blank(p)) != '(') {
		snprintf(msg, msgsz,
			 "CREATE PERFETTO FUNCTION: expected "
			 "name(arguments)");
		return -1;
	}
	snprintf(fname, sizeof(fname), "%.*s", (int)n, name);
	f = sqlite3_malloc(sizeof(*f));
	if (!f)
		return -1;
	memset(f, 0, sizeof(*f));
	/* the arguments: name TYPE, ... */
	p++;
	for (;;) {
		if (*(p = skip_blank(p)) == ')') {
			p++;
			break;
		}
		if (!(p = ident(p, &s, &len))) {
			snprintf(msg, msgsz,
				 "CREATE PERFETTO FUNCTION %s: "
				 "bad argument list",
				 fname);
			goto fail;
		}
		char **args = sqlite3_realloc64(
		    f->args, (size_t)(f->nargs + 1) * sizeof(*args));
		if (!args)
			goto fail;
		f->args = args;
		f->args[f->nargs++] = sqlite3_mprintf("$%.*s", (int)len, s);
		/* the type, perhaps with arguments: JOINID(thread.id) */
		while (*p && *p != ',' && *p != ')') {
			if (*p == '(') {
				if (!(p = skip_parens(p)))
					break;
			} else {
				p++;
			}
		}
		if (!p || !*p) {
			snprintf(msg, msgsz,
				 "CREATE PERFETTO FUNCTION %s: "
				 "bad argument list",
				 fname);
			goto fail;
		}
		if (*p == ',')
			p++;
	}
	p = keyword(skip_blank(p), "RETURNS");
	if (!p) {
		snprintf(msg, msgsz,
			 "CREATE PERFETTO FUNCTION %s: expected "
			 "RETURNS",
			 fname);
		goto fail;
	}
	if (keyword(skip_blank(p), "TABLE")) {
		snprintf(msg, msgsz,
			 "CREATE PERFETTO FUNCTION %s: functions "
			 "returning a table are not supported by "
			 "vperfetto_tp",
			 fname);
		goto fail;
	}
	if (!(p = ident(p, &s, &len))) {
		snprintf(msg, msgsz,
			 "CREATE PERFETTO FUNCTION %s: expected "
			 "the return type",
			 fname);
		goto fail;
	}
	p = skip_blank(p);
	if (*p == '(' && !(p = skip_parens(p)))
		p = "";
	body = keyword(skip_blank(p), "AS");
	if (!body) {
		snprintf(msg, msgsz, "CREATE PERFETTO FUNCTION %s: expected AS",
			 fname);
		goto fail;
	}
	/* registered before its body is compiled, so that it may call
	 * itself */
	end = statement_end(body);
	f->sql = sqlite3_mprintf("%.*s", (int)(end - body), body);
	if (!f->sql)
		goto fail;
	rc = sqlite3_create_function_v2(db, fname, f->nargs, SQLITE_UTF8, f,
					sql_fn_call, NULL, NULL, sql_fn_free);
	if (rc != SQLITE_OK) { /* the destructor has freed f */
		snprintf(msg, msgsz, "CREATE PERFETTO FUNCTION %s: %s", fname,
			 sqlite3_errmsg(db));
		return -1;
	}
	rc = sqlite3_prepare_v2(db, f->sql, -1, &stmt, NULL);
	sqlite3_finalize(stmt);
	if (rc != SQLITE_OK || !stmt) {
		snprintf(msg, msgsz, "CREATE PERFETTO FUNCTION %s: %s", fname,
			 rc != SQLITE_OK ? sqlite3_errmsg(db) : "no body");
		return -1;
	}
	*tail = end;
	return 1;
fail:
	sql_fn_free(f);
	return -1;
}

/* CREATE PERFETTO ...; p is past CREATE.  0 when it is not ours. */
static int create_statement(sqlite3 *db, const char *p, const char **tail,
			    char *msg, size_t msgsz)
{
	const char *q;
	bool replace = false;

	if ((q = keyword(skip_blank(p), "OR"))) {
		q = keyword(skip_blank(q), "REPLACE");
		if (!q)
			return 0;
		replace = true;
		p = q;
	}
	p = keyword(skip_blank(p), "PERFETTO");
	if (!p)
		return 0;
	*tail = p + strlen(p);
	if ((q = keyword(skip_blank(p), "TABLE")))
		return create_table_view(db, q, false, replace, tail, msg,
					 msgsz);
	if ((q = keyword(skip_blank(p), "VIEW")))
		return create_table_view(db, q, true, replace, tail, msg,
					 msgsz);
	if ((q = keyword(skip_blank(p), "FUNCTION")))
		return create_function(db, q, tail, msg, msgsz);
	if ((q = keyword(skip_blank(p), "INDEX"))) {
		/* an index only makes Perfetto faster: accepted, nothing
		 * done */
		q = q + strcspn(q, ";");
		*tail = *q ? q + 1 : q;
		return 1;
	}
	snprintf(msg, msgsz,
		 "CREATE PERFETTO: only TABLE, VIEW, FUNCTION "
		 "and INDEX are supported by vperfetto_tp");
	return -1;
}

int tp_stdlib_statement(struct sqlite3 *db, const char *sql, const char **tail,
			char *msg, size_t msgsz)
{
	const char *p = skip_blank(sql), *q;

	if ((q = keyword(p, "INCLUDE"))) {
		/* From here on the statement is ours: SQLite has no
		 * INCLUDE. */
		*tail = q + strlen(q);
		return include_statement(db, q, tail, msg, msgsz);
	}
	if ((q = keyword(p, "CREATE")))
		return create_statement(db, q, tail, msg, msgsz);
	if ((q = keyword(p, "DROP")) &&
	    (q = keyword(skip_blank(q), "PERFETTO")) &&
	    keyword(skip_blank(q), "INDEX")) {
		q = q + strcspn(q, ";");
		*tail = *q ? q + 1 : q;
		return 1;
	}
	return 0;
}

int tp_stdlib_register(struct sqlite3 *db)
{
	return tp_spanjoin_register(db);
}
