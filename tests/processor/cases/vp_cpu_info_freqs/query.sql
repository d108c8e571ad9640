SELECT id, ucpu, cpu, cluster_id, processor, capacity, machine_id,
  EXTRACT_ARG(arg_set_id, 'cpu_features.mte') AS mte,
  EXTRACT_ARG(arg_set_id, 'cpu_features.mte3') AS mte3,
  EXTRACT_ARG(arg_set_id, 'cpu_features.raw_bitmap') AS raw_bitmap,
  EXTRACT_ARG(arg_set_id, 'arm_cpu_part') AS part,
  EXTRACT_ARG(arg_set_id, 'arm_cpu_implementer') AS implementer
FROM cpu ORDER BY cpu;
SELECT * FROM cpu_available_frequencies ORDER BY id;
SELECT cpu, GROUP_CONCAT(freq) AS freqs FROM cpu_available_frequencies
GROUP BY cpu ORDER BY cpu;
SELECT name, value FROM stats WHERE name = 'cpu_info_unknown_cpu_features';
