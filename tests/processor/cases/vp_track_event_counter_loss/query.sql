SELECT ts, value FROM counter ORDER BY ts;
