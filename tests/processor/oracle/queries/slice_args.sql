-- Args by their owner: arg_set_id values themselves are numbered in
-- creation order, which differs (see known_diffs.txt).
select s.id, a.flat_key, a.key, a.int_value, a.string_value, a.real_value, a.value_type
from slice s join args a using (arg_set_id) order by s.id, a.key;
