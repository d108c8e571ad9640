select id, ts, dur, cpu, utid, end_state, priority, ucpu from sched order by id;
