SELECT s.ts, s.dur, s.name, s.depth, t.name AS track,
  EXTRACT_ARG(t.dimension_arg_set_id, 'block_device') AS dev,
  EXTRACT_ARG(t.dimension_arg_set_id, 'cpu') AS cpu,
  EXTRACT_ARG(s.arg_set_id, 'sector') AS sector
FROM slice s JOIN track t ON s.track_id = t.id ORDER BY s.ts;
SELECT name, type FROM track
WHERE type GLOB '*funcgraph' OR type = 'block_io' ORDER BY id;
SELECT tt.name, th.tid FROM thread_track tt JOIN thread th USING (utid)
ORDER BY tt.id;
SELECT ts, name, EXTRACT_ARG(arg_set_id, 'func') AS func
FROM ftrace_event WHERE name GLOB 'funcgraph*' ORDER BY id;
