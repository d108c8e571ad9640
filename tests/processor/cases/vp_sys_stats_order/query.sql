SELECT c.id, c.ts, t.id AS track_id, t.name, c.value
FROM counter c JOIN counter_track t ON c.track_id = t.id
ORDER BY c.id;
