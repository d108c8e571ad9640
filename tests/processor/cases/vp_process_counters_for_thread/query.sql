SELECT c.id, c.ts, c.track_id, t.name, t.type, c.value,
  EXTRACT_ARG(t.dimension_arg_set_id, 'upid') AS upid,
  EXTRACT_ARG(t.dimension_arg_set_id, 'utid') AS utid,
  EXTRACT_ARG(t.dimension_arg_set_id, 'process_memory_key') AS mem_key,
  EXTRACT_ARG(t.dimension_arg_set_id, 'mm_event_type') AS mm_type,
  EXTRACT_ARG(t.dimension_arg_set_id, 'mm_event_metric') AS mm_metric
FROM counter c JOIN track t ON c.track_id = t.id ORDER BY c.id;
SELECT name, value FROM stats WHERE name = 'mm_unknown_type';
