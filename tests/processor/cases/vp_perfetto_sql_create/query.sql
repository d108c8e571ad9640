-- Perfetto's CREATE PERFETTO TABLE / VIEW / FUNCTION / INDEX.
CREATE PERFETTO TABLE running(id LONG, dur DURATION) AS
SELECT id, dur FROM thread_state WHERE state = 'Running';
SELECT * FROM running ORDER BY id;
CREATE OR REPLACE PERFETTO TABLE running AS
SELECT count(*) AS n FROM thread_state WHERE state = 'Running';
CREATE PERFETTO INDEX running_n ON running(n);
SELECT * FROM running;
DROP PERFETTO INDEX running_n ON running;
CREATE PERFETTO VIEW named_thread AS
SELECT utid, name FROM thread WHERE name IS NOT NULL;
SELECT * FROM named_thread ORDER BY utid;
CREATE PERFETTO FUNCTION thread_name_of(u JOINID(thread.id))
RETURNS STRING AS
SELECT name FROM thread WHERE utid = $u;
SELECT id, thread_name_of(utid) AS thread FROM sched ORDER BY id;
CREATE PERFETTO FUNCTION scaled(x LONG, k DOUBLE) RETURNS DOUBLE AS
SELECT $x * $k;
SELECT scaled(3, 0.5) AS half, scaled(NULL, 2) AS none;
