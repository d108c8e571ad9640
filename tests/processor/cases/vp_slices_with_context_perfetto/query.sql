INCLUDE PERFETTO MODULE slices.with_context;

SELECT name, ts, dur, depth, thread_name, tid, process_name, pid
FROM thread_slice;

SELECT name, ts, dur, depth, process_name, pid
FROM process_slice;

SELECT name, ts, dur, depth, thread_name, tid, process_name, pid
FROM thread_or_process_slice
ORDER BY ts;
