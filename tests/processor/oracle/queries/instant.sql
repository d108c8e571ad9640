select ts, track_id, name, arg_set_id is not null as has_args from instant order by ts, track_id;
