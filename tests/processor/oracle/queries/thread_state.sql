select ts, dur, cpu, utid, state, io_wait, blocked_function, waker_utid, ucpu from thread_state order by ts, utid, id;
