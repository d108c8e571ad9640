SELECT clock_id, clock_name, clock_value FROM clock_snapshot ORDER BY clock_id;
SELECT str_value FROM metadata WHERE name = 'trace_config_pbtxt';
