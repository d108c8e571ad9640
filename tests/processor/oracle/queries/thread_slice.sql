include perfetto module slices.with_context;
select id, ts, dur, name, utid, tid, thread_name, upid, pid from thread_slice order by id;
