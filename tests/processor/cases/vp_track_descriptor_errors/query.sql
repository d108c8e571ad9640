SELECT name, value FROM stats
WHERE name GLOB 'track_descriptor_*' OR name GLOB 'track_hierarchy_*'
  OR name GLOB 'track_event_track_hierarchy_*'
  OR name = 'track_event_parser_errors'
ORDER BY name;
SELECT COUNT(*) AS slices FROM slice;
