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
