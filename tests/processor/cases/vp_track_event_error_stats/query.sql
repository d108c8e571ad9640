SELECT ts, name FROM slice ORDER BY ts;
SELECT c.ts, t.name, c.value FROM counter c JOIN track t ON c.track_id = t.id
ORDER BY c.ts;
SELECT name, idx, severity, source, value FROM stats
WHERE value <> 0 AND name NOT LIKE '%duration_ns' AND name <> 'clock_sync_cache_miss'
ORDER BY name, idx;
