INCLUDE PERFETTO MODULE intervals.overlap;

WITH data(ts, dur, group_name) AS (
  VALUES
    (10, 40, "A"),
    (15, 30, "B"),
    (20, 10, "A"),
    (25, 10, "B"),
    (30, 10, "B"),
    (60, 10, "A"),
    (60, -1, "B"),
    (70, 20, "A"),
    (80, -1, "A")
)
SELECT *
FROM intervals_overlap_count_by_group!(data, ts, dur, group_name)
