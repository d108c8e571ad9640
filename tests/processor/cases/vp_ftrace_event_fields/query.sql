SELECT id, to_ftrace(id) AS line FROM ftrace_event ORDER BY id;
SELECT f.id, a.key, a.int_value, a.string_value, a.value_type
FROM ftrace_event f JOIN args a USING (arg_set_id) ORDER BY f.id, a.id;
