SELECT ts, name FROM ftrace_event ORDER BY id;
SELECT ts, dur, utid FROM sched ORDER BY ts;
SELECT name, value FROM stats
WHERE name = 'ftrace_packet_before_tracing_start';
SELECT COUNT(*) AS slices FROM slice;
