SELECT s.ts, s.dur, s.name, th.tid, th.upid
FROM slice s JOIN thread_track tt ON s.track_id = tt.id
JOIN thread th USING (utid) ORDER BY s.ts;
SELECT t.name, t.type, a.key, a.display_value
FROM counter_track t JOIN args a ON a.arg_set_id = t.dimension_arg_set_id
ORDER BY t.name, a.key;
SELECT c.ts, t.name, c.value, EXTRACT_ARG(c.arg_set_id, 'utid') AS utid
FROM counter c JOIN counter_track t ON c.track_id = t.id ORDER BY c.ts;
SELECT utid, tid, upid FROM thread ORDER BY utid;
SELECT upid, pid FROM process ORDER BY upid;
SELECT f.ts, a.display_value FROM ftrace_event f JOIN args a USING (arg_set_id)
WHERE a.key = 'buf' AND f.ts >= 22 ORDER BY f.ts;
