SELECT s.ts, s.dur, s.name, s.depth,
  EXTRACT_ARG(s.arg_set_id, 'args[0]') AS arg0,
  EXTRACT_ARG(s.arg_set_id, 'args[1]') AS arg1,
  EXTRACT_ARG(s.arg_set_id, 'ret') AS ret
FROM slice s ORDER BY s.ts;
SELECT name, value FROM stats WHERE name = 'truncated_sys_write_duration';
