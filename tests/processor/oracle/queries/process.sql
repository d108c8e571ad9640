select upid, pid, name, parent_upid, uid, machine_id from process order by upid;
