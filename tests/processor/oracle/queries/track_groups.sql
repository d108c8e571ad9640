-- Which tracks a trace processor made as interchangeable lanes of one set
-- (merged track event tracks, async slices), numbered in order.
select id, type, track_group_id from track where track_group_id is not null order by id;
