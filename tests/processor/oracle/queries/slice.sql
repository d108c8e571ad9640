select id, ts, dur, track_id, category, name, depth, parent_id, arg_set_id is not null as has_args from slice order by id;
