-- Span joins of small tables made here, and of the trace's sched rows.
CREATE TABLE a(ts INT, dur INT, p INT, x TEXT);
INSERT INTO a VALUES (0, 10, 1, 'a0'), (20, 10, 1, 'a1'), (5, 10, 2, 'a2');
CREATE TABLE b(ts INT, dur INT, p INT, y TEXT);
INSERT INTO b VALUES (5, 10, 1, 'b0'), (25, 100, 1, 'b1'), (0, 3, 3, 'b2');
CREATE TABLE c(ts INT, dur INT, z INT);
-- c1 starts where a1 ends: they do not meet
INSERT INTO c VALUES (8, 15, 7), (30, 5, 8);

CREATE VIRTUAL TABLE j_inner USING SPAN_JOIN(a PARTITIONED p, b PARTITIONED p);
SELECT * FROM j_inner;
CREATE VIRTUAL TABLE j_left USING span_left_join(a partitioned p, b partitioned p);
SELECT * FROM j_left;
CREATE VIRTUAL TABLE j_outer USING SPAN_OUTER_JOIN(a PARTITIONED p, b PARTITIONED p);
SELECT * FROM j_outer;
-- one side partitioned: the other meets every partition
CREATE VIRTUAL TABLE j_mixed USING SPAN_JOIN(a PARTITIONED p, c);
SELECT * FROM j_mixed;
CREATE VIRTUAL TABLE j_mixed_left USING SPAN_LEFT_JOIN(a PARTITIONED p, c);
SELECT * FROM j_mixed_left;

-- no partitions; a side without dur has spans of 0; dur -1 shows through
CREATE TABLE d(ts INT, dur INT, name TEXT);
INSERT INTO d VALUES (100, 50, 'd0'), (200, -1, 'd1');
CREATE TABLE e(ts INT, v INT);
INSERT INTO e VALUES (120, 1), (200, 2), (260, 3);
CREATE VIRTUAL TABLE j_points USING SPAN_JOIN(d, e);
SELECT * FROM j_points;
CREATE TABLE f(ts INT, dur INT, fx TEXT);
INSERT INTO f VALUES (0, 10, 'f0');
CREATE TABLE g(ts INT, dur INT, gx TEXT);
INSERT INTO g VALUES (5, 10, 'g0');
CREATE VIRTUAL TABLE j_outer_none USING SPAN_OUTER_JOIN(f, g);
SELECT * FROM j_outer_none;

-- the documentation's example: scheduling slices with the cpu frequency
CREATE VIEW sp_sched AS SELECT ts, dur, cpu, utid FROM sched WHERE dur != -1;
CREATE TABLE sp_frequency(ts INT, dur INT, cpu INT, freq INT);
INSERT INTO sp_frequency VALUES (0, 2500, 0, 1000), (2500, 10000, 0, 2000);
CREATE VIRTUAL TABLE sched_with_frequency
USING SPAN_JOIN(sp_sched PARTITIONED cpu, sp_frequency PARTITIONED cpu);
SELECT ts, dur, cpu, utid, freq FROM sched_with_frequency;
SELECT utid, sum(dur * freq) AS cycles_x1e9 FROM sched_with_frequency
GROUP BY utid ORDER BY utid;
