SELECT s.ts, s.name, a.key, a.int_value, a.string_value, a.value_type
FROM slice s JOIN args a USING (arg_set_id)
WHERE a.key NOT LIKE 'legacy_event.%'
ORDER BY s.ts, a.key;
SELECT name, idx, severity, source, value FROM stats
WHERE value <> 0 AND name NOT LIKE '%duration_ns' AND name <> 'clock_sync_cache_miss'
ORDER BY name, idx;
