SELECT to_realtime(0) AS r0, to_realtime(1000) AS r1000,
  to_realtime(1500) AS r1500, to_realtime(1950) AS r1950,
  to_realtime(5000) AS r5000, to_monotonic(1500) AS m1500,
  to_realtime(NULL) AS rnull;
SELECT abs_time_str(1500) AS abs, to_timecode(3723004005006) AS tc;
SELECT extract_metadata('system_machine') AS arch,
  extract_metadata('trace_type') AS type,
  extract_metadata_for_machine(0, 'system_release') AS rel,
  extract_metadata_for_machine(1, 'system_release') AS rel1,
  extract_metadata('no_such_key') AS none;
