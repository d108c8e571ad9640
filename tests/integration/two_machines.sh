#!/usr/bin/env bash
# two_machines.sh - "two machines on one machine": the whole host/guest
# pipeline with both sides on this machine.
#
# A "host" and a "guest" tracing stack, each a vtraced on sockets of its
# own with vtraced_probes beside it; vperfetto_host_clock writes clock
# snapshots into the host and serves sync exchanges on a UNIX socket;
# vperfetto_guest_agent writes cros/guest_clock_sync into the guest and
# exchanges with the host endpoint.  A workload runs (processes, an SDK
# program in the guest); the vperfetto consumer records host.pb and
# guest.pb, vperfetto_merge merges them, and vperfetto_tp checks:
#   - guest events are on a machine of their own;
#   - every exchange is causal on the merged axis: the host read its
#     counter (placed on host BOOTTIME through the host's own clock
#     snapshots, independently of the merge) no later than the guest
#     recorded the exchange, and not long before;
#   - the merge's report: zero causality violations, its bound printed;
#   - sched slices from ftrace on both machines (skipped, with the reason,
#     where tracefs cannot be used).
# Both sides share one counter here, so the offset the merge finds from
# the exchanges must be near 0.
#
# usage: two_machines.sh BUILD_DIR
set -uo pipefail
B=$(cd "$1" && pwd)
VTRACED=$B/service/vtraced
PROBES=$B/probes/vtraced_probes
CONSUMER=$B/consumer/vperfetto
HOSTCLK=$B/host/vperfetto_host_clock
AGENT=$B/guest/vperfetto_guest_agent
EXAMPLE=$B/tests/sdk/sdk_example
MERGE=$B/merge/vperfetto_merge
TP=$B/processor/vperfetto_tp

# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$VTRACED
E2E_TP=$TP
e2e_init vp-two
D=$E2E_DIR

# Can ftrace be used here?  (root, tracefs mounted or mountable)
FTRACE=yes
e2e_ftrace_usable || FTRACE=$E2E_FTRACE_WHY

# side NAME: vtraced and vtraced_probes for one "machine"
side() {
  local n=$1
  mkdir -p "$D/$n"
  start_vtraced "$D/$n" ||
    { fail "$n: vtraced did not start"; cat "$D/$n/vtraced.log"; exit 1; }
  "$PROBES" --producer-socket "$D/$n/p.sock" -v \
    >"$D/$n/probes.log" 2>&1 &
  e2e_track $!
}

# Both "machines" trace the same kernel, so each side's ftrace sees all of
# it: ftrace gets a ring buffer of its own (buffer 1) that cannot overwrite
# the clock sync and track events (buffer 0), as a real config would.
ftrace_cfg() {
  [ "$FTRACE" = yes ] || return 0
  cat <<CFG
data_sources {
  config {
    name: "linux.ftrace"
    target_buffer: 1
    ftrace_config {
      ftrace_events: "sched/sched_switch"
      ftrace_events: "sched/sched_waking"
      ftrace_events: "task/task_newtask"
      ftrace_events: "sched/sched_process_exit"
      buffer_size_kb: 2048
    }
  }
}
CFG
}

side host
side guest

cat >"$D/host.cfg" <<CFG
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
buffers { size_kb: 32768 fill_policy: RING_BUFFER }
data_sources { config { name: "vperfetto.clock_sync" } }
data_sources {
  config {
    name: "linux.process_stats"
    process_stats_config { scan_all_processes_on_start: true }
  }
}
$(ftrace_cfg)
duration_ms: 60000
CFG
cat >"$D/guest.cfg" <<CFG
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
buffers { size_kb: 32768 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "track_event"
    track_event_config { enabled_categories: "cros" enabled_categories: "example" }
  }
}
data_sources {
  config {
    name: "linux.process_stats"
    process_stats_config { scan_all_processes_on_start: true }
  }
}
$(ftrace_cfg)
duration_ms: 60000
CFG

"$HOSTCLK" --producer-socket "$D/host/p.sock" --no-vsock \
  --sync-unix "$D/sync.sock" -v >"$D/hostclock.log" 2>&1 &
HOSTCLK_PID=$!
e2e_track $HOSTCLK_PID
wait_for_socket "$D/sync.sock" || { fail "the sync endpoint did not start"; cat "$D/hostclock.log"; exit 1; }

"$AGENT" --producer-socket "$D/guest/p.sock" --host "unix:$D/sync.sock" \
  -v >"$D/agent.log" 2>&1 &
AGENT_PID=$!
e2e_track $AGENT_PID
sleep 0.5

for n in host guest; do
  "$CONSUMER" --consumer-socket "$D/$n/c.sock" -c "$D/$n.cfg" --txt \
    -o "$D/$n.pb" >"$D/$n.consumer.log" 2>&1 &
  eval "${n}_consumer=$!"
done
sleep 1

# The workload: an SDK program on the guest (it traces once the session
# enables its category, then waits for the session to stop), processes
# coming and going.
"$EXAMPLE" system "$D/guest/p.sock" 30 >"$D/example.log" 2>&1 &
EX_PID=$!
for i in $(seq 40); do
  sh -c 'i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done' &
  sleep 0.1
done
sleep 0.5

for n in host guest; do
  eval "pid=\$${n}_consumer"
  stop_consumer "$pid"
  rc=$?
  check "$n trace recorded (exit $rc)" test $rc -eq 0 -a -s "$D/$n.pb"
  [ $rc -eq 0 ] || cat "$D/$n.consumer.log"
done
wait "$EX_PID"
rc=$?
check "the SDK program traced in the guest and saw the session stop (exit $rc)" \
  test $rc -eq 0
[ $rc -eq 0 ] || cat "$D/example.log"
kill -INT "$AGENT_PID" "$HOSTCLK_PID"
wait "$AGENT_PID" "$HOSTCLK_PID" 2>/dev/null
echo "# agent: $(tail -n 1 "$D/agent.log")"
echo "# host clock: $(tail -n 1 "$D/hostclock.log")"

# --- merge -------------------------------------------------------------------
"$MERGE" "$D/host.pb" "$D/guest.pb" -o "$D/merged.pb" --report "$D/report.json" \
  2>"$D/merge.log"
rc=$?
check "vperfetto_merge host.pb guest.pb (exit $rc)" test $rc -eq 0
[ $rc -eq 0 ] || { cat "$D/merge.log"; exit 1; }
sed 's/^/# /' "$D/merge.log"

report() { # report EXPR: a value of the guest in the merge report
  e2e_guest_report "$D/report.json" "$1"
}
nex=$(report 'g["exchanges"]["count"]')
check "the merge used the exchanges ($nex)" test "${nex:-0}" -ge 20
n=$(report 'g["exchanges"]["causality_violations"]')
check "zero causality violations in the merge report ($n)" test "$n" = 0
src=$(report 'g["counter_map"]["source"]')
check "the counter offset came from the exchanges ($src)" test "$src" = exchanges
# One machine, one counter: the offset interval must hold 0.
n=$(report 'int(g["counter_map"]["offset_interval"][0] <= 0 <= g["counter_map"]["offset_interval"][1])')
check "the offset interval holds 0, the true offset ($(report 'g["counter_map"]["offset_interval"]'))" test "$n" = 1
echo "# sync report: error bound p50 $(report 'g["error_bound_ns"]["p50"]') ns," \
  "p99 $(report 'g["error_bound_ns"]["p99"]') ns;" \
  "exchange round trip p50 $(report 'g["exchanges"]["round_trip_ns"]["p50"]') ns"

M=$D/merged.pb
# --- machines ----------------------------------------------------------------
n=$(query_rows "$M" "select count(*) from slice s join track t on s.track_id = t.id
     where s.name = 'guest_clock_sync' and t.machine_id != 0")
check "guest_clock_sync events on the guest machine ($n)" test "${n:-0}" -ge 30
n=$(query_rows "$M" "select count(*) from slice s join track t on s.track_id = t.id
     where s.name = 'outer' and t.machine_id != 0")
check "the guest SDK program's slices on the guest machine ($n)" test "${n:-0}" -gt 0
n=$(query_rows "$M" "select count(*) from slice s join track t on s.track_id = t.id
     where t.machine_id = 0 and s.name in ('guest_clock_sync', 'outer')")
check "no guest event on the host machine ($n)" test "$n" = 0

# --- causality, independently of the merge's own check ------------------------
# Host samples (counter, BOOTTIME) from the host's clock snapshots; each
# exchange's host counter placed on host BOOTTIME by the nearest sample
# before it and the mean rate; the guest recorded the exchange after the
# reply came, so host time <= merged guest time, and within 100 ms.
CAUSAL="
  with hs as (
    select c.clock_value as cyc, b.clock_value as boot
    from clock_snapshot c join clock_snapshot b using (snapshot_id)
    where c.clock_id = 64 and b.clock_id = 6 and c.machine_id = 0),
  rate as (
    select (max(boot) - min(boot)) * 1.0 / (max(cyc) - min(cyc)) as ns_per_cyc
    from hs),
  ex as (
    select s.ts, extract_arg(s.arg_set_id, 'debug.host_cputime') as hc
    from slice s join track t on s.track_id = t.id
    where s.name = 'guest_clock_sync_exchange' and t.machine_id != 0),
  placed as (
    select ex.ts, (select boot + (ex.hc - cyc) * (select ns_per_cyc from rate)
                   from hs where cyc <= ex.hc order by cyc desc limit 1) as host_ts
    from ex)"
n=$(query_rows "$M" "$CAUSAL select count(*) from placed where host_ts is not null")
check "exchanges on the merged axis ($n)" test "${n:-0}" -ge 20
n=$(query_rows "$M" "$CAUSAL select count(*) from placed
     where host_ts is not null and (ts < host_ts or ts - host_ts > 100e6)")
check "every exchange causal on the merged axis (violations: $n)" test "$n" = 0
echo "# exchange lag guest record - host receipt (ns): $(query_rows "$M" "$CAUSAL
  select 'min ' || cast(min(ts - host_ts) as int) || ' mean ' ||
  cast(avg(ts - host_ts) as int) || ' max ' || cast(max(ts - host_ts) as int)
  as lag from placed where host_ts is not null")"

# --- ftrace --------------------------------------------------------------------
if [ "$FTRACE" = yes ]; then
  n=$(query_rows "$M" "select count(*) from sched s join cpu c using (ucpu) where c.machine_id = 0")
  check "host sched slices from ftrace ($n)" test "${n:-0}" -gt 0
  n=$(query_rows "$M" "select count(*) from sched s join cpu c using (ucpu) where c.machine_id != 0")
  check "guest sched slices from ftrace ($n)" test "${n:-0}" -gt 0
else
  echo "SKIP: ftrace checks: $FTRACE"
fi
n=$(query_rows "$M" "select count(*) from process where machine_id != 0")
check "guest processes from linux.process_stats ($n)" test "${n:-0}" -gt 0

e2e_finish two_machines
