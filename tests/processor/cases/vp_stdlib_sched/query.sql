-- sched.* includes every sched module; linux.threads and time.conversion
-- one by one.
INCLUDE PERFETTO MODULE sched.*;
INCLUDE PERFETTO MODULE linux.threads;
INCLUDE PERFETTO MODULE time.conversion;
SELECT * FROM sched_with_thread_process ORDER BY id;
SELECT * FROM sched_time_in_state_for_thread ORDER BY utid, state;
SELECT * FROM sched_percentage_of_time_in_state ORDER BY utid;
SELECT * FROM sched_previous_runnable_on_thread ORDER BY id;
SELECT * FROM sched_latency_for_running_interval ORDER BY thread_state_id;
SELECT id, sched_state_to_human_readable_string(state) AS name,
       sched_state_io_to_human_readable_string(state, io_wait) AS io_name
FROM thread_state ORDER BY id;
SELECT sched_state_io_to_human_readable_string('D', 1) AS io,
       sched_state_io_to_human_readable_string('D', 0) AS non_io,
       sched_state_to_human_readable_string('Q') AS other,
       sched_state_to_human_readable_string(NULL) AS null_state;
SELECT * FROM linux_kernel_threads ORDER BY utid;
SELECT time_to_ms(12345678) AS ms, time_from_us(3) AS ns,
       time_to_s(-1500000000) AS s, time_from_ms(1.5) AS real_ns,
       time_to_us(NULL) AS null_us, time_from_days(1) AS day;
SELECT * FROM sched_runnable_thread_count ORDER BY ts;
SELECT * FROM sched_uninterruptible_sleep_thread_count ORDER BY ts;
SELECT * FROM sched_active_cpu_count ORDER BY ts;
SELECT * FROM intervals_overlap_count_by_group!(thread_state, ts, dur, utid)
ORDER BY group_name, ts;
