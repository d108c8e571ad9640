SELECT id, cpu, machine_id FROM cpu ORDER BY id;
SELECT ts, dur, cpu, ucpu FROM sched ORDER BY ts;
SELECT s.id, s.ts, s.dur, s.cpu, t.tid, s.state, w.tid AS waker_tid,
       s.waker_id
FROM thread_state s JOIN thread t USING (utid)
LEFT JOIN thread w ON w.utid = s.waker_utid
ORDER BY s.id;
