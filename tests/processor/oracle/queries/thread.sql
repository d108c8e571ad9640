select utid, tid, name, upid, is_main_thread, machine_id from thread order by utid;
