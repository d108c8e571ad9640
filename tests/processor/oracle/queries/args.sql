select arg_set_id, flat_key, key, int_value, string_value, real_value, value_type from args order by arg_set_id, key;
