select name, idx, severity, source, value from stats where value != 0 and name not like '%_duration_ns' and name != 'clock_sync_cache_miss' order by name, idx;
