select id, name, cpu, machine_id from cpu_track order by id;
