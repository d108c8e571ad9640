select id, name, type, machine_id from track order by id;
