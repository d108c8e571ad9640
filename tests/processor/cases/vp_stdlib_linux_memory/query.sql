INCLUDE PERFETTO MODULE linux.memory.process;
SELECT ts, dur, upid, value, name FROM _all_counters_per_process
ORDER BY name, ts;
SELECT * FROM memory_rss_and_swap_per_process ORDER BY upid, ts;
