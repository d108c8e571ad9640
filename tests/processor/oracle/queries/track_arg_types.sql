-- The kinds of the tracks' dimension and source args (int, uint, string
-- ...), by track type; Perfetto's long descriptions of its own tracks are
-- prose of its own and left out.
select 'dim' as arg, t.type, a.key, a.value_type, count(*) as n
from track t join args a on a.arg_set_id = t.dimension_arg_set_id
group by 1, 2, 3, 4
union all
select 'source', t.type, a.key, a.value_type, count(*)
from track t join args a on a.arg_set_id = t.source_arg_set_id
where a.key != 'description'
group by 1, 2, 3, 4
order by 1, 2, 3, 4;
