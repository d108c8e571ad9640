select id, name, type, unit, machine_id from counter_track order by id;
