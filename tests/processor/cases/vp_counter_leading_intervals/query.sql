INCLUDE PERFETTO MODULE counters.intervals;

  WITH data(id, ts, value, track_id) AS (
    VALUES
    (0, 0, 10, 1),
    (1, 0, 10, 2),
    (2, 10, 10, 1),
    (3, 10, 20, 2),
    (4, 20, 30, 1)
  )
  SELECT * FROM counter_leading_intervals!(data);

  WITH data(id, ts, value, track_id) AS (
    VALUES
    (1, 10, 10, 1),
    (2, 20, 11, 1),
    (3, 30, 11, 1),
    (4, 40, 11, 1),
    (5, 50, 11, 1),
    (6, 60, 12, 1)
  )
  SELECT * FROM counter_leading_intervals!(data);

  -- a run at the end of its track: its first two rows only
  WITH data(id, ts, value, track_id) AS (
    VALUES
    (20, 0, 7, 3),
    (21, 5, 7, 3),
    (22, 10, 7, 3),
    (23, 15, 7, 3)
  )
  SELECT * FROM counter_leading_intervals!(data);
