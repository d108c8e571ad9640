SELECT ts, dur, state FROM thread_state ORDER BY ts;
SELECT count(*) AS n FROM thread WHERE tid = 77;
SELECT name FROM ftrace_event ORDER BY ts;
