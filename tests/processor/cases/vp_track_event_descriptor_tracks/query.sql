SELECT t.id, t.name, t.type, t.parent_id, c.unit
FROM track t LEFT JOIN counter_track c USING (id) ORDER BY t.id;
SELECT t.id, a.key, a.display_value
FROM track t JOIN args a ON a.arg_set_id = t.source_arg_set_id
ORDER BY t.id, a.id;
SELECT c.ts, t.name, c.value
FROM counter c JOIN track t ON t.id = c.track_id ORDER BY c.ts, t.name;
SELECT pid, EXTRACT_ARG(arg_set_id, 'process_sort_index_hint') AS hint
FROM process WHERE pid = 10;
SELECT tid, EXTRACT_ARG(arg_set_id, 'thread_sort_index_hint') AS hint
FROM thread WHERE tid = 11;
SELECT s.name, s.track_id, t.name AS track, t.type, t.parent_id,
  EXTRACT_ARG(t.dimension_arg_set_id, 'track_compressor_idx') AS lane,
  EXTRACT_ARG(t.dimension_arg_set_id, 'merge_key_value') AS merge_key,
  EXTRACT_ARG(t.source_arg_set_id, 'trace_id') AS uuid
FROM slice s JOIN track t ON t.id = s.track_id
WHERE s.ts >= 1000 ORDER BY s.ts;
