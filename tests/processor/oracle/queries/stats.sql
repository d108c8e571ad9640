select key, name, idx, severity, source, value, machine_id from stats where value != 0 and name not like '%_duration_ns' and name != 'clock_sync_cache_miss' order by key, machine_id, idx;
