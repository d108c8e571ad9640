SELECT ts, name FROM slice ORDER BY ts;
SELECT name, idx, severity, source, value FROM stats
WHERE value <> 0 AND name NOT LIKE '%duration_ns' AND name <> 'clock_sync_cache_miss'
ORDER BY name, idx;
