select slice_out, slice_in, arg_set_id is not null as has_args from flow order by slice_out, slice_in;
