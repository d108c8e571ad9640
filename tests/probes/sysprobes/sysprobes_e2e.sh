#!/usr/bin/env bash
# sysprobes_e2e.sh - linux.process_stats, linux.sys_stats and
# linux.system_info end to end: vtraced on temporary sockets, vtraced_probes
# as its producer, a ~2 s recording by vperfetto, and checks of what the
# trace processor (vperfetto_tp) imports from it.
#
# Usage: sysprobes_e2e.sh VTRACED VTRACED_PROBES VPERFETTO VPERFETTO_TP
#
# Two recordings:
#   poll   proc_stats_poll_ms 200 only (no initial scan): the processes
#          come from the polls' "not seen before" process trees; meminfo,
#          vmstat and stat every 200 ms; system_info (the service's own
#          SystemInfo disabled, so the one checked is the probe's)
#   scan   scan_all_processes_on_start with record_thread_names, a
#          meminfo_counters filter and stat_counters limited to cpu times
# Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 4 ]; then
	echo "usage: $0 VTRACED VTRACED_PROBES VPERFETTO VPERFETTO_TP" >&2
	exit 2
fi
vtraced=$1
probes=$2
consumer=$3
tp=$4
# shellcheck source=SCRIPTDIR/../../lib/e2e_lib.sh
. "$(dirname "$0")/../../lib/e2e_lib.sh"
E2E_VTRACED=$vtraced
E2E_TP=$tp
e2e_init sysprobes
tmp=$E2E_DIR

# record NAME CONFIG_BODY: starts vtraced and vtraced_probes, records with
# the config, stops both; the trace is $tmp/NAME/trace.pftrace.
record() {
	local name=$1 body=$2 dir=$tmp/$1
	mkdir -p "$dir"
	start_vtraced "$dir" || fail "$name: vtraced did not start"
	local vt=$VTRACED_PID
	timeout 120 "$probes" --producer-socket "$dir/p.sock" -v \
		>"$dir/probes.log" 2>&1 &
	local pr=$!
	e2e_track "$pr"
	# Wait until the probes registered their data sources.
	for _ in $(seq 100); do
		grep -q "serving" "$dir/probes.log" 2>/dev/null && break
		sleep 0.05
	done
	sleep 0.5
	printf '%s\n' "$body" >"$dir/config.txt"
	if ! timeout 60 "$consumer" --consumer-socket "$dir/c.sock" \
		-c "$dir/config.txt" --txt -o "$dir/trace.pftrace" \
		>"$dir/consumer.log" 2>&1; then
		fail "$name: the consumer failed: $(cat "$dir/consumer.log")"
	fi
	kill -INT "$pr" 2>/dev/null
	if wait "$pr"; then
		pass "$name: vtraced_probes stopped cleanly"
	else
		fail "$name: vtraced_probes exited badly: $(tail -5 "$dir/probes.log")"
	fi
	e2e_stop "$vt"
	if [ ! -s "$dir/trace.pftrace" ]; then
		fail "$name: no trace written"
		return 1
	fi
	return 0
}

mypid=$$
mycmd=$(tr '\0' ' ' </proc/$mypid/cmdline | sed 's/ $//')
release=$(uname -r)
memtotal_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
ncpu=$(grep -c '^cpu[0-9]' /proc/stat)

# ---- poll ------------------------------------------------------------------
if record poll "$(cat <<CFG
buffers { size_kb: 16384 fill_policy: DISCARD }
builtin_data_sources { disable_system_info: true }
data_sources {
  config {
    name: "linux.process_stats"
    process_stats_config { proc_stats_poll_ms: 200 }
  }
}
data_sources {
  config {
    name: "linux.sys_stats"
    sys_stats_config {
      meminfo_period_ms: 200
      vmstat_period_ms: 200
      stat_period_ms: 200
    }
  }
}
data_sources { config { name: "linux.system_info" } }
duration_ms: 2000
CFG
)"; then
	t=$tmp/poll/trace.pftrace
	expect "poll: this shell's process with its cmdline" "$t" \
		"select cmdline from process where pid = $mypid" "$mycmd"
	expect "poll: this shell's parent" "$t" \
		"select p.pid from process c join process p on c.parent_upid = p.upid where c.pid = $mypid" \
		"$(awk '/^PPid:/ {print $2}' /proc/$mypid/status)"
	expect_ge "poll: rss samples of this shell" "$t" \
		"select count(*) from counter c join process_counter_track t on c.track_id = t.id join process p using(upid) where p.pid = $mypid and t.name = 'mem.rss'" 3
	expect_ge "poll: processes with several mem.virt samples" "$t" \
		"select count(*) from (select t.id from counter c join process_counter_track t on c.track_id = t.id where t.name = 'mem.virt' group by t.id having count(*) >= 3)" 1
	expect_ge "poll: oom_score_adj counters" "$t" \
		"select count(*) from process_counter_track where name = 'oom_score_adj'" 1
	expect "poll: MemTotal equals /proc/meminfo's MemTotal" "$t" \
		"select distinct cast(value / 1024 as int) from counter c join counter_track t on c.track_id = t.id where t.name = 'MemTotal'" \
		"$memtotal_kb"
	expect_ge "poll: MemTotal sampled more than once" "$t" \
		"select count(*) from counter c join counter_track t on c.track_id = t.id where t.name = 'MemTotal'" 3
	expect_ge "poll: vmstat counters" "$t" \
		"select count(*) from counter_track where name = 'nr_free_pages'" 1
	expect "poll: cpu.times.user_ns for every cpu" "$t" \
		"select count(distinct t.id) from counter_track t where t.name = 'cpu.times.user_ns'" \
		"$ncpu"
	expect_ge "poll: idle time samples" "$t" \
		"select count(*) from counter c join counter_track t on c.track_id = t.id where t.name = 'cpu.times.idle_ns'" $((ncpu * 3))
	expect_ge "poll: num_forks samples" "$t" \
		"select count(*) from counter c join counter_track t on c.track_id = t.id where t.name = 'num_forks'" 3
	expect "poll: system_release equals uname -r" "$t" \
		"select str_value from metadata where name = 'system_release'" \
		"$release"
	expect "poll: system_name" "$t" \
		"select str_value from metadata where name = 'system_name'" \
		"$(uname -s)"
	expect "poll: cpu table from cpu_info" "$t" \
		"select count(*) from cpu" "$(grep -c '^processor' /proc/cpuinfo)"
fi

# ---- scan ------------------------------------------------------------------
# A thread with a known name in a child process: the scan must list it
# (python3 names it; without python3 that check is skipped).
have_py=0
command -v python3 >/dev/null && have_py=1
child=0
if [ $have_py = 1 ]; then
python3 - <<'PY' &
import threading, time, ctypes
libc = ctypes.CDLL(None)
def run():
    libc.prctl(15, b"sysprobe_thr", 0, 0, 0)  # PR_SET_NAME
    time.sleep(30)
threading.Thread(target=run, daemon=True).start()
time.sleep(30)
PY
child=$!
e2e_track "$child"
# Python starts slowly on a busy machine: wait (20 s at most) until the
# thread has its name, or the scan may run before it exists.
for _ in $(seq 200); do
	grep -qx sysprobe_thr /proc/"$child"/task/*/comm 2>/dev/null && break
	sleep 0.1
done
fi
if record scan "$(cat <<CFG
buffers { size_kb: 16384 fill_policy: DISCARD }
data_sources {
  config {
    name: "linux.process_stats"
    process_stats_config {
      scan_all_processes_on_start: true
      record_thread_names: true
    }
  }
}
data_sources {
  config {
    name: "linux.sys_stats"
    sys_stats_config {
      meminfo_period_ms: 200
      meminfo_counters: MEMINFO_MEM_FREE
      stat_period_ms: 200
      stat_counters: STAT_CPU_TIMES
    }
  }
}
duration_ms: 1500
CFG
)"; then
	t=$tmp/scan/trace.pftrace
	expect "scan: this shell's process" "$t" \
		"select cmdline from process where pid = $mypid" "$mycmd"
	if [ $have_py = 1 ]; then
		expect "scan: the named thread of the child" "$t" \
			"select count(*) from thread t join process p using(upid) where p.pid = $child and t.name = 'sysprobe_thr'" 1
	else
		echo "SKIP scan: the named thread (no python3)"
	fi
	expect "scan: pid 1" "$t" "select count(*) from process where pid = 1" 1
	expect "scan: no memory counters without polling" "$t" \
		"select count(*) from process_counter_track where name like 'mem.%'" 0
	expect_ge "scan: MemFree sampled" "$t" \
		"select count(*) from counter c join counter_track t on c.track_id = t.id where t.name = 'MemFree'" 2
	expect "scan: the meminfo filter" "$t" \
		"select count(*) from counter_track where name = 'MemTotal'" 0
	expect "scan: the stat filter (no forks)" "$t" \
		"select count(*) from counter_track where name = 'num_forks'" 0
	expect_ge "scan: cpu times" "$t" \
		"select count(*) from counter_track where name = 'cpu.times.system_mode_ns'" 1
fi
[ "$child" != 0 ] && kill "$child" 2>/dev/null

e2e_finish sysprobes
