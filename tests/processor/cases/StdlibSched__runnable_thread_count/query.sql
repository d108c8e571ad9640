INCLUDE PERFETTO MODULE sched.thread_level_parallelism;
SELECT * FROM sched_runnable_thread_count;
