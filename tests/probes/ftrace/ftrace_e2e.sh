#!/usr/bin/env bash
# ftrace_e2e.sh - linux.ftrace end to end: vtraced on temporary sockets,
# vtraced_probes, a ~2 s recording with vperfetto while a workload spawns
# processes and writes to trace_marker, then checks with vperfetto_tp and
# a comparison of the tracefs state before and after.
#
# Usage: ftrace_e2e.sh VTRACED VTRACED_PROBES VPERFETTO VPERFETTO_TP MODE PROTOS
#   MODE  plain      sched_switch / sched_waking as typed FtraceEvents
#         compact    compact_sched left unset: on, as in traced_probes
#         notracefs  vtraced_probes --tracefs pointing at a plain
#                    directory: a one-line warning, no ftrace data, no
#                    crash
#         instance   instance_name of an existing tracefs instance with
#                    settings of its own: they must come back
#   PROTOS  the protos/ directory, for protoc --decode of the trace
#
# Needs root and a usable tracefs; otherwise prints "SKIP: <reason>" and
# exits 77.  Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 6 ]; then
	echo "usage: $0 VTRACED VTRACED_PROBES VPERFETTO VPERFETTO_TP MODE" \
		"PROTOS" >&2
	exit 2
fi
vtraced=$1
probes=$2
consumer=$3
tp=$4
mode=$5
protos=$6

skip() {
	echo "SKIP: $1"
	exit 77
}

[ "$(id -u)" = 0 ] || skip "not root: tracefs needs root"
tracefs=
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	if [ -e "$d/trace_clock" ]; then
		tracefs=$d
		break
	fi
done
if [ -z "$tracefs" ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null ||
		skip "tracefs is not mounted and cannot be mounted"
	tracefs=/sys/kernel/tracing
fi
[ -w "$tracefs/instances" ] || skip "$tracefs/instances is not writable"
grep -q boot "$tracefs/trace_clock" || skip "no boot trace clock"
[ -d "$tracefs/events/sched/sched_switch" ] || skip "no sched events"

# shellcheck source=SCRIPTDIR/../../lib/e2e_lib.sh
. "$(dirname "$0")/../../lib/e2e_lib.sh"
E2E_VTRACED=$vtraced
E2E_TP=$tp
e2e_init ftrace_e2e
e2e_tracefs_lock
tmp=$E2E_DIR
E2E_CLEANUP_HOOKS+=(remove_instance)

# The tracefs state that must come back unchanged (and that of the
# instance named by instance_name).
inst=vperfetto_e2e_$$
snapshot() {
	local f
	for f in tracing_on trace_clock current_tracer set_event \
		buffer_size_kb; do
		echo "== $f"
		cat "$tracefs/$f"
	done
	# Private instances of other vtraced_probes running meanwhile come
	# and go, and so do the named instances of this test's other modes
	# running in parallel (vperfetto_e2e_PID); ours is checked on its own
	# below.
	echo "== instances"
	ls "$tracefs/instances" | grep -v '^vtraced_probes\.' |
		grep -v '^vperfetto_e2e_[0-9]*$'
	if [ "$mode" = instance ]; then
		for f in tracing_on trace_clock set_event buffer_size_kb; do
			echo "== $inst/$f"
			cat "$tracefs/instances/$inst/$f"
		done
	fi
}

instance_cfg=""
marker_file=$tracefs/trace_marker
if [ "$mode" = instance ]; then
	mkdir "$tracefs/instances/$inst" || skip "cannot create an instance"
	echo local >"$tracefs/instances/$inst/trace_clock"
	echo 1410 >"$tracefs/instances/$inst/buffer_size_kb"
	echo sched:sched_wakeup >"$tracefs/instances/$inst/set_event"
	echo 1 >"$tracefs/instances/$inst/tracing_on"
	instance_cfg="instance_name: \"$inst\""
	marker_file=$tracefs/instances/$inst/trace_marker
fi
remove_instance() {
	[ "$mode" = instance ] && rmdir "$tracefs/instances/$inst" 2>/dev/null
	return 0
}

snapshot >"$tmp/before.txt"
# A private instance left by a vtraced_probes that died: removed at start.
stale=""
if [ "$mode" = plain ]; then
	stale=$tracefs/instances/vtraced_probes.4194304.0
	mkdir "$stale" || stale=""
fi

start_vtraced "$tmp" || fail "$mode: vtraced did not start"
probe_args=()
if [ "$mode" = notracefs ]; then
	mkdir -p "$tmp/notracefs"
	probe_args=(--tracefs "$tmp/notracefs")
fi
timeout 120 "$probes" --producer-socket "$tmp/p.sock" -v "${probe_args[@]}" \
	>"$tmp/probes.log" 2>&1 &
probes_pid=$!
e2e_track "$probes_pid"
sleep 1

# compact_sched left unset is on, as in traced_probes (sched_switch is
# recorded); the other modes turn it off to see the typed events.
compact="compact_sched { enabled: false }"
if [ "$mode" = compact ]; then
	compact=""
fi
cat >"$tmp/config.txt" <<CFG
buffers { size_kb: 16384 fill_policy: DISCARD }
data_sources {
  config {
    name: "linux.ftrace"
    ftrace_config {
      ftrace_events: "sched/sched_switch"
      ftrace_events: "sched/sched_waking"
      ftrace_events: "task/task_newtask"
      ftrace_events: "sched/sched_process_exit"
      ftrace_events: "ftrace/print"
      ftrace_events: "no_such_group/no_such_event"
      buffer_size_kb: 1024
      drain_period_ms: 100
      $compact
      $instance_cfg
    }
  }
}
duration_ms: 2500
CFG

marker="vperfetto-ftrace-e2e-$$-$RANDOM"
# BOOTTIME window of the recording, from /proc/uptime (seconds).
uptime_ns() {
	local u s f
	read -r u _ </proc/uptime
	s=${u%.*}
	f=${u#*.}000000000
	echo $((s * 1000000000 + 10#${f:0:9}))
}
t0=$(uptime_ns)
timeout 90 "$consumer" --consumer-socket "$tmp/c.sock" \
	-c "$tmp/config.txt" --txt -o "$tmp/trace.pb" \
	>"$tmp/consumer.log" 2>&1 &
cons=$!
e2e_track "$cons"
# The workload: processes that come and go, and marker writes.
sleep 0.7
for i in $(seq 20); do
	/bin/true
	sh -c 'sleep 0.01' &
	echo "$marker $i" >"$marker_file"
	sleep 0.03
done
wait "$!" 2>/dev/null
if wait "$cons"; then
	pass "$mode: the consumer finished"
else
	fail "$mode: the consumer failed: $(cat "$tmp/consumer.log")"
fi
t1=$(uptime_ns)

kill -INT "$probes_pid"
wait "$probes_pid"
rc=$?
if [ "$rc" = 0 ]; then
	pass "$mode: vtraced_probes exited cleanly"
else
	fail "$mode: vtraced_probes exited with $rc: $(cat "$tmp/probes.log")"
fi

snapshot >"$tmp/after.txt"
if ls "$tracefs/instances" | grep -q "^vtraced_probes\.$probes_pid\."; then
	fail "$mode: the private instance of vtraced_probes is still there"
else
	pass "$mode: no private instance left"
fi
if [ -n "$stale" ]; then
	if [ -d "$stale" ]; then
		rmdir "$stale"
		fail "$mode: the stale private instance was not removed"
	else
		pass "$mode: the stale private instance was removed"
	fi
fi
if diff -u "$tmp/before.txt" "$tmp/after.txt"; then
	pass "$mode: tracefs state unchanged"
else
	fail "$mode: tracefs state changed"
fi

t=$tmp/trace.pb
if [ ! -s "$t" ]; then
	fail "$mode: no trace written"
	cat "$tmp/probes.log"
	exit 1
fi

# protoc decodes the whole trace with our protos.
if protoc --decode=perfetto.protos.Trace -I "$protos" \
	"$protos/perfetto/trace/trace.proto" <"$t" >"$tmp/trace.txt" \
	2>"$tmp/protoc.err"; then
	pass "$mode: protoc decodes the trace"
else
	fail "$mode: protoc: $(head -3 "$tmp/protoc.err")"
fi

if [ "$mode" = notracefs ]; then
	if grep -q "linux.ftrace: .*recording nothing" "$tmp/probes.log"; then
		pass "notracefs: one-line warning"
	else
		fail "notracefs: no warning in: $(cat "$tmp/probes.log")"
	fi
	if grep -q "ftrace_events {\|ftrace_stats {" "$tmp/trace.txt"; then
		fail "notracefs: ftrace packets written"
	else
		pass "notracefs: no ftrace packets"
	fi
	e2e_finish "ftrace_e2e $mode"
fi

grep -q 'unknown_ftrace_events: "no_such_group/no_such_event"' \
	"$tmp/trace.txt" && pass "$mode: unknown event reported" ||
	fail "$mode: the unknown event is not in ftrace_stats"
if grep -q failed_ftrace_events "$tmp/trace.txt"; then
	fail "$mode: events failed to enable:" \
		"$(grep failed_ftrace_events "$tmp/trace.txt" | sort -u)"
else
	pass "$mode: every known event enabled"
fi
if grep -q "phase: START_OF_TRACE" "$tmp/trace.txt" &&
	grep -q "phase: END_OF_TRACE" "$tmp/trace.txt"; then
	pass "$mode: ftrace_stats START_OF_TRACE and END_OF_TRACE"
else
	fail "$mode: ftrace_stats phases missing"
fi
if [ "$mode" = compact ]; then
	grep -q "compact_sched {" "$tmp/trace.txt" &&
		grep -q "switch_timestamp:" "$tmp/trace.txt" &&
		pass "compact: CompactSched bundles" ||
		fail "compact: no CompactSched in the bundles"
	if grep -q "sched_switch {" "$tmp/trace.txt"; then
		fail "compact: typed sched_switch events next to compact_sched"
	else
		pass "compact: no typed sched_switch"
	fi
else
	grep -q "sched_switch {" "$tmp/trace.txt" &&
		pass "$mode: typed sched_switch events" ||
		fail "$mode: no typed sched_switch with compact_sched off"
	# traced_probes writes common_flags only inside CompactSched.
	if grep -qE "^ *common_flags:" "$tmp/trace.txt"; then
		fail "$mode: FtraceEvent.common_flags written"
	else
		pass "$mode: no FtraceEvent.common_flags"
	fi
fi

n=$(query_rows "$t" "select count(*) from sched where dur > 0")
if [ "${n:-0}" -gt 20 ] 2>/dev/null; then
	pass "$mode: $n sched slices"
else
	fail "$mode: sched slices: '$n'"
	cat "$tmp/probes.log"
fi

# Durations: positive, none longer than the recording (plus slack).
bad=$(query_rows "$t" "select count(*) from sched where dur < -1 or dur > 10000000000")
[ "$bad" = 0 ] && pass "$mode: slice durations sane" ||
	fail "$mode: $bad slices with bad durations"

# Timestamps inside the BOOTTIME window of the recording (1 s slack).
range=$(query_rows "$t" "select min(ts) || ' ' || max(ts + dur) from sched where dur > 0")
read -r lo hi <<<"$range"
slack=1000000000
if [ -n "${lo:-}" ] && [ "$lo" -ge $((t0 - slack)) ] &&
	[ "$hi" -le $((t1 + slack)) ]; then
	pass "$mode: sched timestamps within the recording ($t0..$t1)"
else
	fail "$mode: sched range '$range' outside $t0..$t1"
fi

m=$(query_rows "$t" "select count(*) from ftrace_event e join args a using (arg_set_id) where e.name = 'print' and a.string_value like '$marker%'")
if [ "${m:-0}" -ge 1 ] 2>/dev/null; then
	pass "$mode: $m print events with the marker"
else
	fail "$mode: no print event with the marker ('$m')"
fi

nt=$(query_rows "$t" "select count(*) from ftrace_event where name = 'task_newtask'")
[ "${nt:-0}" -ge 20 ] 2>/dev/null && pass "$mode: $nt task_newtask events" ||
	fail "$mode: task_newtask events: '$nt'"

ne=$(query_rows "$t" "select count(*) from ftrace_event where name = 'sched_process_exit'")
[ "${ne:-0}" -ge 20 ] 2>/dev/null && pass "$mode: $ne sched_process_exit events" ||
	fail "$mode: sched_process_exit events: '$ne'"

nw=$(query_rows "$t" "select count(*) from ftrace_event where name = 'sched_waking'")
[ "${nw:-0}" -ge 1 ] 2>/dev/null && pass "$mode: $nw sched_waking events" ||
	fail "$mode: sched_waking events: '$nw'"

st=$(query_rows "$t" "select count(*) from stats where name = 'ftrace_cpu_entries_begin'")
se=$(query_rows "$t" "select count(*) from stats where name = 'ftrace_cpu_entries_end'")
if [ "${st:-0}" -ge 1 ] && [ "${se:-0}" -ge 1 ] 2>/dev/null; then
	pass "$mode: ftrace_stats at start and end"
else
	fail "$mode: ftrace_stats begin '$st' end '$se'"
fi

ts=$(query_rows "$t" "select count(*) from thread_state")
[ "${ts:-0}" -ge 1 ] 2>/dev/null && pass "$mode: $ts thread states" ||
	fail "$mode: thread_state rows: '$ts'"

e2e_finish "ftrace_e2e $mode"
