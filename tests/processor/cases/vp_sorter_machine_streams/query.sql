SELECT id, ts, cpu, name FROM ftrace_event ORDER BY id;
SELECT s.id, s.ts, s.name FROM slice s ORDER BY s.id;
