SELECT a.flat_key, a.key, a.display_value
FROM slice s JOIN args a USING (arg_set_id) ORDER BY a.key;
