SELECT name, idx, severity, source, value FROM stats WHERE name = 'ftrace_setup_errors';
