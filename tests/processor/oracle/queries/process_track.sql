select id, name, upid from process_track order by id;
