SELECT pid, name, cmdline, length(cmdline) AS len FROM process WHERE pid = 5;
SELECT ts, dur, name, length(name) AS len FROM slice ORDER BY ts;
SELECT f.ts, a.display_value, length(a.display_value) AS len
FROM ftrace_event f JOIN args a USING (arg_set_id)
WHERE a.key = 'buf' ORDER BY f.ts;
