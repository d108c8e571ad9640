SELECT t.id, t.name, t.type, t.machine_id FROM track t ORDER BY t.id;
SELECT s.ts, s.dur, s.name, s.track_id FROM slice s ORDER BY s.id;
