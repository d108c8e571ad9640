INCLUDE PERFETTO MODULE sched.thread_level_parallelism;

SELECT * FROM sched_active_cpu_count;
