select l.id, l.ts, t.tid, p.pid, l.prio, l.tag, l.msg
from android_logs l
left join thread t using (utid)
left join process p using (upid)
order by l.id
