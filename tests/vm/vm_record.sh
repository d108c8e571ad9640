#!/usr/bin/env bash
# vm_record.sh - a real guest kernel in QEMU (TCG where KVM cannot run a
# guest), traced on both sides by vperfetto_record and merged:
#   1. failure paths that need no guest: a guest that never answers the
#      control channel (exit 3, the host trace kept, no merged output), a
#      host session that cannot start (exit 2), bad command lines (exit 1);
#   2. the test guest boots with a workload; vperfetto_record
#      --qemu-chardev records 10 s over virtio-serial, merges, and
#      vperfetto_tp checks the merged trace: the guest's sched slices and
#      track events on the guest machine, at least 50 sync exchanges with
#      zero causality violations (the merge's count, and an independent
#      SQL check through the host's own clock snapshots), the p50/p99
#      bound printed;
#   3. the guest dies mid-trace (QEMU killed): exit 3 within seconds, the
#      host trace kept, no merged output.
#
# Usage: vm_record.sh BUILD_ROOT VM_IMAGES_DIR
# Exits 0, 1 on a failed check, 77 ("SKIP: reason") without QEMU or the
# guest's Debian packages.
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 BUILD_ROOT VM_IMAGES_DIR" >&2
	exit 2
fi
B=$(cd "$1" && pwd)
V=$(cd "$2" && pwd)
RECORD=$B/host/vperfetto_record
TP=$B/processor/vperfetto_tp
. "$(dirname "$0")/vm_lib.sh"
vm_require_qemu
vm_once_more_if_unanswered "$0" "$@"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vm_record.XXXXXX")
# vperfetto_record keeps a failed run's logs under $TMPDIR: in $tmp, so
# that they go with it
export TMPDIR=$tmp
qemu_pid=""
pids=()
stop_qemu() {
	[ -n "$qemu_pid" ] || return 0
	kill "$qemu_pid" 2>/dev/null
	for _ in $(seq 50); do
		kill -0 "$qemu_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$qemu_pid" 2>/dev/null
	qemu_pid=""
}
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	stop_qemu
	wait 2>/dev/null
	[ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() {
	echo "FAIL $1"
	failures=$((failures + 1))
}
pass() { echo "PASS $1"; }
check() { # check NAME COMMAND...
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
q() { timeout 120 "$TP" --quiet "$1" -Q "$2" 2>>"$tmp/tp.log" | tail -n +2 | tr -d '"'; }

# --- the image, and QEMU booting it while the guest-less cases run -----------
vm_image "$tmp"
echo "# $VM_IMAGE_NOTE"
ch=$tmp/ch
vm_boot_qemu "$ch" "$tmp/console.log" --append \
	"vperfetto.workload=1 vperfetto.ctl_log=1"
qemu_pid=$VM_QEMU_PID
check "QEMU started (pid ${qemu_pid:-none})" test -n "$qemu_pid"
[ -n "$qemu_pid" ] || { cat "$ch/run_qemu.log"; exit 1; }

# --- 1. no guest needed --------------------------------------------------------
# A control channel that accepts and never answers.
python3 - "$tmp/silent.sock" >/dev/null 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(4)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
PY
pids+=($!)
for _ in $(seq 100); do [ -S "$tmp/silent.sock" ] && break; sleep 0.05; done
mkdir -p "$tmp/silent"
start=$SECONDS
"$RECORD" --qemu-chardev "$tmp/silent.sock" --guest-timeout 3 -t 2s \
	-o "$tmp/silent/merged.pb" >"$tmp/silent.log" 2>&1
rc=$?
check "silent guest: exit 3 (got $rc) within 30 s" test $rc -eq 3 -a $((SECONDS - start)) -lt 60
check "silent guest: the message says the guest did not answer" \
	grep -q "guest session: .*HELLO" "$tmp/silent.log"
check "silent guest: the host trace is kept" test -s "$tmp/silent/merged.host.pb"
check "silent guest: no merged output" test ! -e "$tmp/silent/merged.pb"
n=$(q "$tmp/silent/merged.host.pb" "select count(*) from clock_snapshot where clock_id = 64")
check "silent guest: the host trace has its clock snapshots ($n)" test "${n:-0}" -gt 0

# A host session that cannot start: a vtraced that fails.
mkdir -p "$tmp/bin"
for p in vtraced_probes vperfetto_host_clock vperfetto; do
	ln -s "$(find "$B" -name "$p" -type f -perm -u+x | head -n 1)" "$tmp/bin/$p"
done
printf '#!/bin/sh\necho "vtraced: cannot listen: simulated failure" >&2\nexit 1\n' >"$tmp/bin/vtraced"
chmod +x "$tmp/bin/vtraced"
VPERFETTO_BIN_DIR=$tmp/bin "$RECORD" --qemu-chardev "$tmp/silent.sock" -t 1s \
	-o "$tmp/nohost.pb" >"$tmp/nohost.log" 2>&1
rc=$?
check "host session fails: exit 2 (got $rc)" test $rc -eq 2
check "host session fails: vtraced's message is shown" \
	grep -q "simulated failure" "$tmp/nohost.log"
check "host session fails: no output" test ! -e "$tmp/nohost.pb"
check "host session fails: its logs are kept under \$TMPDIR" \
	grep -q "logs in $tmp/vperfetto_record\." "$tmp/nohost.log"

for args in "-o $tmp/x.pb" "--guest-vsock 5 --qmp q.sock -o $tmp/x.pb" \
	"--qemu-chardev $tmp/silent.sock" "--qemu-chardev $tmp/silent.sock -t 0 -o $tmp/x.pb" \
	"--guest-vsock 1 -o $tmp/x.pb"; do
	# shellcheck disable=SC2086
	"$RECORD" $args >"$tmp/usage.log" 2>&1
	rc=$?
	check "usage error exits 1: $args (got $rc)" test $rc -eq 1
done
"$RECORD" --qemu-chardev "$tmp/nonexistent.sock" -t 1s -o "$tmp/x.pb" >"$tmp/nosock.log" 2>&1
rc=$?
check "a control path that is not a socket: exit 3 (got $rc)" test $rc -eq 3
check "a control path that is not a socket: named in the message" \
	grep -q "nonexistent.sock: not a socket" "$tmp/nosock.log"

# --- 2. the real guest -----------------------------------------------------------
ready=no
vm_wait_ready "$tmp/console.log" && ready=yes
check "the guest booted ($(vm_ready_uptime "$tmp/console.log"))" test $ready = yes
[ $ready = yes ] || { tail -n 30 "$tmp/console.log"; exit 1; }

mkdir -p "$tmp/rec"
start=$SECONDS
"$RECORD" --qemu-chardev "$ch" -t 10s -v -o "$tmp/rec/merged.pb" >"$tmp/rec.log" 2>&1
rc=$?
check "vperfetto_record --qemu-chardev -t 10s (exit $rc, $((SECONDS - start)) s)" test $rc -eq 0
[ $rc -eq 0 ] || { cat "$tmp/rec.log"; tail -n 25 "$tmp/console.log"; }
sed 's/^/# /' "$tmp/rec.log" | grep -v "^# vperfetto_record: info: starting"
M=$tmp/rec/merged.pb
for f in merged.pb merged.host.pb merged.guest.pb merged.report.json; do
	check "$f written" test -s "$tmp/rec/$f"
done

report() { # report EXPR: a value of the first guest in the merge report
	python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))["guests"][0]
print(eval(sys.argv[2], {}, {"g": g}))' "$tmp/rec/merged.report.json" "$1" 2>/dev/null
}
nex=$(report 'g["exchanges"]["count"]')
check "at least 50 sync exchanges over virtio-serial ($nex)" test "${nex:-0}" -ge 50
n=$(report 'g["exchanges"]["causality_violations"]')
check "zero causality violations in the merge report ($n)" test "$n" = 0
echo "# sync bound: p50 $(report 'g["error_bound_ns"]["p50"]') ns, p99 $(report 'g["error_bound_ns"]["p99"]') ns;" \
	"offset $(report 'g["counter_map"]["offset"]') from $(report 'g["counter_map"]["source"]');" \
	"exchange round trip p50 $(report 'g["exchanges"]["round_trip_ns"]["p50"]') ns"

n=$(q "$M" "select count(*) from sched s join cpu c using (ucpu) where c.machine_id = 1")
check "guest sched slices on the guest machine ($n)" test "${n:-0}" -gt 100
n=$(q "$M" "select count(*) from sched s join cpu c using (ucpu) where c.machine_id = 0")
check "host sched slices on the host ($n)" test "${n:-0}" -gt 100
n=$(q "$M" "select count(*) from slice s join track t on s.track_id = t.id
     where t.machine_id = 1 and s.name = 'outer'")
check "the guest workload's track events on the guest machine ($n)" test "${n:-0}" -gt 0
n=$(q "$M" "select count(*) from slice s join track t on s.track_id = t.id
     where t.machine_id = 1 and s.name = 'guest_clock_sync'")
check "guest_clock_sync events on the guest machine ($n)" test "${n:-0}" -ge 50
n=$(q "$M" "select release from machine where id = 1")
check "the guest machine runs Debian's kernel ($n)" test -n "$n" -a "$n" != "$(uname -r)"

# Causality through the host's own snapshots: the host read its counter
# (host_cputime) before the guest recorded the exchange.
CAUSAL="
  with hs as (
    select c.clock_value as cyc, b.clock_value as boot
    from clock_snapshot c join clock_snapshot b using (snapshot_id)
    where c.clock_id = 64 and b.clock_id = 6 and c.machine_id = 0),
  rate as (select (max(boot) - min(boot)) * 1.0 / (max(cyc) - min(cyc)) as k from hs),
  ex as (
    select s.ts, extract_arg(s.arg_set_id, 'debug.host_cputime') as hc
    from slice s join track t on s.track_id = t.id
    where s.name = 'guest_clock_sync_exchange' and t.machine_id = 1),
  placed as (
    select ex.ts, (select boot + (ex.hc - cyc) * (select k from rate)
                   from hs where cyc <= ex.hc order by cyc desc limit 1) as host_ts
    from ex)"
n=$(q "$M" "$CAUSAL select count(*) from placed where host_ts is not null")
v=$(q "$M" "$CAUSAL select count(*) from placed where host_ts is not null and ts < host_ts")
check "every exchange causal on the merged axis, checked in SQL ($v of $n)" \
	test "${n:-0}" -ge 50 -a "$v" = 0

# --- 3. the guest dies mid-trace --------------------------------------------------
mkdir -p "$tmp/dies"
"$RECORD" --qemu-chardev "$ch" -t 60s -v -o "$tmp/dies/merged.pb" >"$tmp/dies.log" 2>&1 &
rec=$!
for _ in $(seq 60); do
	grep -q "guest: session started" "$tmp/dies.log" && break
	sleep 0.5
done
sleep 2
start=$SECONDS
stop_qemu
wait "$rec"
rc=$?
check "guest killed mid-trace: exit 3 (got $rc) within 40 s ($((SECONDS - start)) s)" \
	test $rc -eq 3 -a $((SECONDS - start)) -lt 40
check "guest killed mid-trace: the message names the guest" grep -q "guest session:" "$tmp/dies.log"
check "guest killed mid-trace: the host trace is kept" test -s "$tmp/dies/merged.host.pb"
check "guest killed mid-trace: no merged output, no half guest trace" \
	test ! -e "$tmp/dies/merged.pb" -a ! -e "$tmp/dies/merged.guest.pb"

# The merged recording in Perfetto's own trace processor, where it is
# built: every table of the oracle queries equal, the host and the guest
# machines there, no stats error of our making.
. "$(dirname "$0")/../lib/oracle_check.sh"
oracle_check "$B" "$tmp/oracle.log" "vm_record_merged=$tmp/rec/merged.pb"

echo "vm_record: $failures failed"
exit $((failures > 0))
