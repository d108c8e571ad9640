INCLUDE PERFETTO MODULE time.conversion;

WITH data(unit, time) AS (
  VALUES
    ('ns', time_to_ns(cast_int!(1e14))),
    ('us', time_to_us(cast_int!(1e14))),
    ('ms', time_to_ms(cast_int!(1e14))),
    ('s', time_to_s(cast_int!(1e14))),
    ('min', time_to_min(cast_int!(1e14))),
    ('h', time_to_hours(cast_int!(1e14))),
    ('days', time_to_days(cast_int!(1e14)))
)
SELECT * FROM data
