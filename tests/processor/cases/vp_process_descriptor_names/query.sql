SELECT pid, name, cmdline, start_ts FROM process ORDER BY pid;
SELECT tid, name FROM thread ORDER BY tid;
SELECT name, value FROM stats
WHERE value <> 0 AND name NOT LIKE '%duration_ns' AND name <> 'clock_sync_cache_miss'
ORDER BY name;
