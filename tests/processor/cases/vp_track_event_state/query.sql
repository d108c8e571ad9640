SELECT s.id, s.ts, s.dur, s.category, s.value, t.name AS track,
  t.type, tst.id IS NOT NULL AS on_thread
FROM state s JOIN track t ON t.id = s.track_id
LEFT JOIN thread_state_track tst ON tst.id = s.track_id
ORDER BY s.id;
SELECT s.id, a.key, a.display_value
FROM state s JOIN args a USING (arg_set_id) ORDER BY s.id, a.id;
SELECT name, value FROM stats WHERE name = 'track_event_parser_errors';
