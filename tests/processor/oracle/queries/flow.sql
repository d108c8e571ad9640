select slice_out, slice_in, arg_set_id from flow order by slice_out, slice_in;
