SELECT 'machine' AS t, raw_id AS v, label_index AS machine_id FROM machine
UNION ALL
SELECT 'process', pid, machine_id FROM process WHERE pid IN (0, 10, 20)
UNION ALL
SELECT 'thread', tid, machine_id FROM thread WHERE tid IN (0, 11, 21)
ORDER BY t, machine_id, v;
