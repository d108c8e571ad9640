select name, idx, severity, source, value from stats where value != 0 and name not like '%_duration_ns' order by name, idx;
