SELECT id, to_ftrace(id) AS line FROM ftrace_event ORDER BY id;
