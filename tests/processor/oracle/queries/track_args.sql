select t.id, a.key, a.display_value from track t join args a on a.arg_set_id = t.dimension_arg_set_id order by t.id, a.key;
