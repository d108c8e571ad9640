select id, ts, cpu, utid, name from ftrace_event order by id;
