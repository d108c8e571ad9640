SELECT p.upid, p.pid, p.name, p.cmdline, parent.pid AS parent_pid, p.uid,
  p.android_appid, p.android_user_id, p.end_ts,
  EXTRACT_ARG(p.arg_set_id, 'is_kthread') AS is_kthread
FROM process p LEFT JOIN process parent ON p.parent_upid = parent.upid
ORDER BY p.upid;
SELECT t.utid, t.tid, t.name, p.pid, t.is_main_thread
FROM thread t LEFT JOIN process p USING (upid) ORDER BY t.utid;
SELECT name, value FROM stats
WHERE name = 'process_tracker_parent_pid_changed';
