SELECT id, raw_id, label_index FROM machine;
SELECT pid, machine_id FROM process WHERE pid IN (0, 20) ORDER BY upid;
