select ts, track_id, name, arg_set_id from instant order by ts, track_id;
