SELECT ts, name, depth, thread_ts FROM slice ORDER BY ts, name;
SELECT name, idx, severity, source, value FROM stats
WHERE value <> 0 AND name NOT LIKE '%duration_ns' AND name <> 'clock_sync_cache_miss'
ORDER BY name, idx;
