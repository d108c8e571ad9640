SELECT s.name, l.layout_depth
FROM experimental_slice_layout((
  SELECT group_concat(id, ',') FROM track WHERE name IN ('A', 'B')
)) l JOIN slice s USING (id)
ORDER BY l.id;
