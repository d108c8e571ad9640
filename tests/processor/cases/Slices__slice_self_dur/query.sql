INCLUDE PERFETTO MODULE slices.self_dur;

SELECT
  s.name,
  sd.self_dur
FROM slice_self_dur sd
JOIN slice s ON s.id = sd.id
ORDER BY s.name;
