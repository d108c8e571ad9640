-- Perfetto's module names are case-insensitive keywords, may carry
-- comments, and a second include of a module does nothing.
include perfetto module slices.with_context;
INCLUDE /* again */ PERFETTO
  MODULE slices.with_context ;
INCLUDE PERFETTO MODULE slices.self_dur;
SELECT * FROM thread_slice ORDER BY id;
SELECT * FROM process_slice ORDER BY id;
SELECT id, name, track_name, thread_name, utid, tid, process_name, upid, pid
FROM thread_or_process_slice ORDER BY id;
SELECT * FROM slice_self_dur ORDER BY id;
