CREATE TABLE t1(
  ts BIGINT,
  dur BIGINT,
  part BIGINT,
  a BIGINT,
  PRIMARY KEY (part, ts)
) WITHOUT ROWID;

CREATE TABLE t2(
  ts BIGINT,
  dur BIGINT,
  b BIGINT,
  PRIMARY KEY (ts)
) WITHOUT ROWID;

-- Add some rows to t1.
INSERT INTO t1(ts, dur, part, a)
VALUES
(100, 400, 1, 10),
(500, 100, 1, 11),
(500, 50, 2, 12),
(600, 100, 3, 13);

-- Add some rows to t2.
INSERT INTO t2(ts, dur, b)
VALUES
(50, 100, 14),
(550, 50, 15),
(600, 50, 16),
(900, 500, 17);

CREATE VIRTUAL TABLE sp USING span_outer_join(t1 PARTITIONED part, t2);

SELECT * FROM sp;
