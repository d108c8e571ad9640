select id, ts, dur, track_id, category, name, depth, parent_id, arg_set_id from slice order by id;
