select f.id, a.key, a.display_value from ftrace_event f join args a using (arg_set_id) order by f.id, a.key;
