SELECT s.ts, s.dur, s.name, t.name AS track, t.type,
  EXTRACT_ARG(t.dimension_arg_set_id, 'track_compressor_idx') AS idx,
  p.pid, th.tid AS utid_tid, EXTRACT_ARG(s.arg_set_id, 'cookie') AS cookie
FROM slice s
JOIN track t ON s.track_id = t.id
LEFT JOIN process_track pt ON pt.id = t.id
LEFT JOIN process p ON p.upid = pt.upid
LEFT JOIN thread th ON th.utid = EXTRACT_ARG(s.arg_set_id, 'utid')
ORDER BY s.ts;
