select id, ts, track_id, value from counter order by id;
