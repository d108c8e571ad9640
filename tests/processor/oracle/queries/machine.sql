select id, raw_id from machine order by id;
