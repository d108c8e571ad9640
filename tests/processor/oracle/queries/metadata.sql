-- Every entry, in row order, with its scope (machine_id, trace_id).
select id, name, key_type, int_value, str_value, machine_id, trace_id from metadata order by id;
