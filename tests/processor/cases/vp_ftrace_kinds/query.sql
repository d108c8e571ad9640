SELECT 'row' AS kind, e.ts, e.name, a.key, a.display_value
FROM ftrace_event e LEFT JOIN args a USING (arg_set_id)
UNION ALL
SELECT 'slice', s.ts, s.name || ' ' || ifnull(s.category, '-') || ' dur ' || s.dur
       || ' tid ' || t.tid, a.key, a.display_value
FROM slice s JOIN thread_track tt ON s.track_id = tt.id
JOIN thread t USING (utid) LEFT JOIN args a ON a.arg_set_id = s.arg_set_id
UNION ALL
SELECT 'counter ' || c.id, c.ts, t.name, NULL, c.value
FROM counter c JOIN counter_track t ON c.track_id = t.id
UNION ALL
SELECT 'stat', NULL, name, NULL, value FROM stats
WHERE value <> 0 AND name NOT LIKE '%duration_ns' AND name <> 'clock_sync_cache_miss'
ORDER BY 1, 2, 3, 4;
