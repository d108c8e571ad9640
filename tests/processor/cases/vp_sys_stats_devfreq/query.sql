SELECT t.name, t.type, a.key, a.display_value
FROM counter_track t JOIN args a ON a.arg_set_id = t.dimension_arg_set_id
ORDER BY t.name, a.key;
SELECT c.ts, t.name, c.value FROM counter c JOIN counter_track t ON c.track_id = t.id
ORDER BY c.ts, t.name;
