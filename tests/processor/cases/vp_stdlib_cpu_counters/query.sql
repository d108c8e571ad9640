-- linux.cpu.frequency and linux.cpu.idle, counter_leading_intervals! and
-- the cast macros, and the documentation's sched x frequency span join.
INCLUDE PERFETTO MODULE linux.cpu.frequency;
INCLUDE PERFETTO MODULE linux.cpu.idle;
SELECT id, track_id, ts, dur, freq, ucpu, cpu FROM cpu_frequency_counters
ORDER BY cpu, ts;
SELECT id, track_id, ts, dur, idle, cpu FROM cpu_idle_counters
ORDER BY cpu, ts;
SELECT * FROM counter_leading_intervals!((
  SELECT c.* FROM counter AS c
  JOIN cpu_counter_track AS t ON t.id = c.track_id AND t.name = 'cpuidle'
));
SELECT cast_int!(2.7) AS i, cast_double!(3) AS d, cast_string!(4) AS s;
CREATE PERFETTO VIEW sp_sched AS
SELECT ts, dur, cpu, utid FROM sched WHERE dur > 0;
CREATE VIRTUAL TABLE sched_freq
USING SPAN_JOIN(sp_sched PARTITIONED cpu, cpu_frequency_counters PARTITIONED cpu);
SELECT * FROM sched_freq;
