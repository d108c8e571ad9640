select name, idx, severity, source, value from stats where value != 0 order by name, idx;
