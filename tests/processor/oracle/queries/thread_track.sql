select id, name, utid from thread_track order by id;
