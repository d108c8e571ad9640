SELECT t.name, t.type, s.ts, s.dur, s.value,
  EXTRACT_ARG(s.arg_set_id, 'consumer_uid') AS uid
FROM state s JOIN state_track t ON t.id = s.track_id ORDER BY t.name, s.ts;
SELECT name, value FROM stats
WHERE name = 'concurrent_session_event_unknown_state';
