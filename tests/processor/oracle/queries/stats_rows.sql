-- Which single stats are listed, and for which machines, zero or not.
select machine_id, count(*) as n, sum(key) as keys from stats where idx is null group by machine_id order by machine_id;
