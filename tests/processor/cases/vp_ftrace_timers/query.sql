SELECT t.name AS track, t.type, count(*) AS n, max(s.depth) AS max_depth,
  sum(s.dur = -1) AS open, min(s.name) AS first_name, max(s.name) AS last_name,
  s.category
FROM slice s JOIN track t ON s.track_id = t.id GROUP BY t.id;
SELECT name, value FROM stats WHERE name = 'slice_max_depth_exceeded';
SELECT name, count(*) AS n FROM ftrace_event GROUP BY name ORDER BY name;
SELECT e.name, a.key, a.display_value FROM ftrace_event e JOIN args a USING (arg_set_id)
WHERE e.name NOT LIKE 'hrtimer_expire%' ORDER BY e.id, a.key;
