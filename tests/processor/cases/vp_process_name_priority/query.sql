SELECT upid, pid, name FROM process ORDER BY upid;
