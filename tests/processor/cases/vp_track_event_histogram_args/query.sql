SELECT s.ts, a.key, a.display_value
FROM slice s JOIN args a USING (arg_set_id) ORDER BY s.ts, a.id;
SELECT a.key, a.display_value FROM args a
WHERE a.arg_set_id IN (SELECT arg_set_id FROM args WHERE key = 'event.category')
ORDER BY a.arg_set_id, a.id;
SELECT name, value FROM stats WHERE name = 'track_event_parser_errors';
