INCLUDE PERFETTO MODULE intervals.overlap;

WITH data(ts, dur) AS (
  VALUES
    (10, 40),
    (20, 10),
    (25, 10),
    (60, 10),
    (70, 20),
    (80, -1)
)
SELECT *
FROM intervals_overlap_count!(data, ts, dur)
