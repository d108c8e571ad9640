select l.id, l.ts, t.tid, l.prio, l.tag, l.msg, m.raw_id as machine from android_logs l left join thread t using (utid) left join machine m on t.machine_id = m.id order by l.id;
