select id, ts, prio, log_source, tag, msg, arg_set_id from logs order by id;
