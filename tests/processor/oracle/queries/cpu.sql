select id, ucpu, cpu, cluster_id, machine_id from cpu order by id;
