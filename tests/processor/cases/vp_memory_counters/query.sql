SELECT c.ts, t.name, t.type, p.pid, th.tid, c.value
FROM counter c
JOIN counter_track t ON c.track_id = t.id
LEFT JOIN process_counter_track pt ON pt.id = t.id
LEFT JOIN process p ON p.upid = pt.upid
LEFT JOIN thread_counter_track tt ON tt.id = t.id
LEFT JOIN thread th ON th.utid = tt.utid
ORDER BY c.ts, t.name;
SELECT s.ts, s.dur, s.name, t.name AS track,
  EXTRACT_ARG(t.dimension_arg_set_id, 'track_compressor_idx') AS idx
FROM slice s JOIN track t ON s.track_id = t.id ORDER BY s.ts;
SELECT value FROM stats WHERE name = 'rss_stat_unknown_thread_for_mm_id';
SELECT ts, name, unit, value FROM counters WHERE name GLOB 'mem.ion*'
ORDER BY ts, name;
