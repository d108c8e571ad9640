#!/usr/bin/env bash
# perfetto_host_merge.sh - a host trace that Perfetto's own programs
# recorded, merged with a guest trace of ours.
#
# Host: Perfetto's traced and traced_probes (ftrace sched events, process
# stats), with our vperfetto_host_clock as one more producer of traced,
# recorded by Perfetto's perfetto client.  Guest: vtraced,
# vtraced_probes (process stats) and vperfetto_guest_agent exchanging
# with the host clock over a UNIX socket, recorded by our consumer.  Both
# run on this machine, so they share one counter.  The merge must:
#   - find the exchanges and no causality violation, with an offset
#     interval that holds 0 (the true offset here);
#   - put the guest's events and processes on machine 1 and leave
#     Perfetto's host data (sched from ftrace, processes) on the host;
#   - give a trace that Perfetto's trace_processor_shell (where built)
#     reads as vperfetto_tp does: every oracle query equal, two
#     machines, no stats error of our making.
#
#   perfetto_host_merge.sh BUILD_DIR
#
# Perfetto's programs come from PERFETTO_BIN (default
# ~/.cache/perfetto-real/bin, from ../shared/perfetto/build.sh); without
# them the test prints why and exits 77.  Without root or tracefs the
# host records no ftrace and the sched check is skipped with the reason.
set -u
B=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/e2e_lib.sh"
e2e_need_perfetto traced traced_probes perfetto
E2E_VTRACED=$B/service/vtraced
E2E_TP=$B/processor/vperfetto_tp
PROBES=$B/probes/vtraced_probes
CONSUMER=$B/consumer/vperfetto
HOSTCLK=$B/host/vperfetto_host_clock
AGENT=$B/guest/vperfetto_guest_agent
MERGE=$B/merge/vperfetto_merge
e2e_init perfetto_host_merge
D=$E2E_DIR
T=60 # seconds any one command may take

ftrace_ok=
e2e_ftrace_usable && ftrace_ok=1
ftrace_why=$E2E_FTRACE_WHY

# ---- the host: Perfetto's daemons, our clock producer -----------------------

mkdir -p "$D/host" "$D/guest"
export PERFETTO_PRODUCER_SOCK_NAME=$D/host/p.sock
export PERFETTO_CONSUMER_SOCK_NAME=$D/host/c.sock
LD_LIBRARY_PATH=$PB "$PB/traced" >"$D/host/traced.log" 2>&1 &
e2e_track $!
wait_for_socket "$D/host/c.sock" && wait_for_socket "$D/host/p.sock" ||
	{ fail "traced did not start"; cat "$D/host/traced.log"; exit 1; }
LD_LIBRARY_PATH=$PB "$PB/traced_probes" >"$D/host/probes.log" 2>&1 &
e2e_track $!
"$HOSTCLK" --producer-socket "$D/host/p.sock" --no-vsock \
	--sync-unix "$D/sync.sock" -v >"$D/hostclock.log" 2>&1 &
HOSTCLK_PID=$!
e2e_track $HOSTCLK_PID
wait_for_socket "$D/sync.sock" ||
	{ fail "the sync endpoint did not start"; cat "$D/hostclock.log"; exit 1; }

ftrace_cfg=
[ -n "$ftrace_ok" ] && ftrace_cfg='
data_sources { config { name: "linux.ftrace" target_buffer: 1
  ftrace_config { ftrace_events: "sched/sched_switch"
    ftrace_events: "sched/sched_waking" ftrace_events: "task/task_newtask"
    ftrace_events: "sched/sched_process_exit" buffer_size_kb: 2048 } } }'
cat >"$D/host.cfg" <<CFG
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
buffers { size_kb: 32768 fill_policy: RING_BUFFER }
data_sources { config { name: "vperfetto.clock_sync" } }
data_sources { config { name: "linux.process_stats"
  process_stats_config { scan_all_processes_on_start: true } } }
$ftrace_cfg
duration_ms: 6000
CFG

# ---- the guest: our stack ----------------------------------------------------

unset PERFETTO_PRODUCER_SOCK_NAME PERFETTO_CONSUMER_SOCK_NAME
start_vtraced "$D/guest" ||
	{ fail "vtraced did not start"; cat "$D/guest/vtraced.log"; exit 1; }
"$PROBES" --producer-socket "$D/guest/p.sock" >"$D/guest/probes.log" 2>&1 &
e2e_track $!
"$AGENT" --producer-socket "$D/guest/p.sock" --host "unix:$D/sync.sock" \
	-v >"$D/agent.log" 2>&1 &
AGENT_PID=$!
e2e_track $AGENT_PID
cat >"$D/guest.cfg" <<'CFG'
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event"
  track_event_config { enabled_categories: "cros" } } }
data_sources { config { name: "linux.process_stats"
  process_stats_config { scan_all_processes_on_start: true } } }
duration_ms: 6000
CFG
sleep 0.5

# ---- record both, each with its own side's client -----------------------------

PERFETTO_CONSUMER_SOCK_NAME=$D/host/c.sock timeout $T "$PB/perfetto" --txt \
	-c "$D/host.cfg" -o "$D/host.pb" >"$D/host.consumer.log" 2>&1 &
HC=$!
timeout $T "$CONSUMER" --consumer-socket "$D/guest/c.sock" --txt \
	-c "$D/guest.cfg" -o "$D/guest.pb" >"$D/guest.consumer.log" 2>&1 &
GC=$!
for i in $(seq 20); do # processes coming and going on "both machines"
	sh -c 'i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done' &
	sleep 0.2
done
wait $HC
rc=$?
check "Perfetto's client recorded the host (exit $rc)" test $rc = 0 -a -s "$D/host.pb"
[ $rc = 0 ] || cat "$D/host.consumer.log"
wait $GC
rc=$?
check "our consumer recorded the guest (exit $rc)" test $rc = 0 -a -s "$D/guest.pb"
[ $rc = 0 ] || cat "$D/guest.consumer.log"
kill -INT "$AGENT_PID" "$HOSTCLK_PID" 2>/dev/null
wait "$AGENT_PID" "$HOSTCLK_PID" 2>/dev/null
n=$(query_rows "$D/host.pb" "select count(*) from clock_snapshot where clock_id = 64")
check "our clock producer's snapshots are in traced's trace ($n)" test "${n:-0}" -ge 5

# ---- merge ---------------------------------------------------------------------

M=$D/merged.pb
"$MERGE" "$D/host.pb" "$D/guest.pb" -o "$M" --report "$D/report.json" \
	2>"$D/merge.log"
rc=$?
check "vperfetto_merge (exit $rc)" test $rc = 0
[ $rc = 0 ] || { cat "$D/merge.log"; e2e_finish perfetto_host_merge; }
sed 's/^/# /' "$D/merge.log"

report() { # report EXPR: a value of the guest in the merge report
	e2e_guest_report "$D/report.json" "$1"
}
n=$(report 'g["exchanges"]["count"]')
check "the merge used the exchanges ($n)" test "${n:-0}" -ge 5
n=$(report 'g["exchanges"]["causality_violations"]')
check "zero causality violations ($n)" test "$n" = 0
n=$(report 'int(g["counter_map"]["offset_interval"][0] <= 0 <= g["counter_map"]["offset_interval"][1])')
check "the offset interval holds 0 ($(report 'g["counter_map"]["offset_interval"]'))" test "$n" = 1

n=$(query_rows "$M" "select count(*) from slice s join track t on s.track_id = t.id
	where s.name = 'guest_clock_sync_exchange' and t.machine_id != 0")
check "the guest's exchanges are on the guest machine ($n)" test "${n:-0}" -ge 5
n=$(query_rows "$M" "select count(*) from slice s join track t on s.track_id = t.id
	where s.name like 'guest_clock_sync%' and t.machine_id = 0")
check "no guest event on the host machine ($n)" test "$n" = 0
n=$(query_rows "$M" "select count(*) from process where machine_id != 0")
check "the guest's processes are on the guest machine ($n)" test "${n:-0}" -gt 0
n=$(query_rows "$M" "select count(*) from process where machine_id = 0")
check "traced_probes' processes stay on the host ($n)" test "${n:-0}" -gt 0
if [ -n "$ftrace_ok" ]; then
	n=$(query_rows "$M" "select count(*) from sched s join cpu c using (ucpu)
		where c.machine_id = 0")
	check "traced_probes' sched slices stay on the host ($n)" test "${n:-0}" -gt 0
else
	echo "SKIP: host sched check: $ftrace_why"
fi

# ---- Perfetto's own processor -----------------------------------------------------

. "$HERE/../lib/oracle_check.sh"
oracle_check "$B" "$D/oracle.log" "perfetto_host=$D/host.pb" \
	"merged_perfetto_host=$M"

e2e_finish perfetto_host_merge
