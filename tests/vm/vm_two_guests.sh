#!/usr/bin/env bash
# vm_two_guests.sh - two test guests recorded at once: vperfetto_record
# with two --qemu-chardev gives one merged trace with three machines (the
# host and one per guest), a sync report per guest (exchanges, zero
# causality violations), both guest traces beside it, and the vCPU tables
# and tracks for both guests, each with the host threads its QEMU monitor
# names (QMP query-cpus-fast).  Guest 1 has two vCPUs, guest 2 one.
# Where Perfetto's trace processor is built, the merged trace gives its
# rows for every oracle query.
#
# Usage: vm_two_guests.sh BUILD_ROOT VM_IMAGES_DIR
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
PDECODE=$(cd "$(dirname "$0")/.." && pwd)/check_protoc_decode.sh
. "$(dirname "$0")/vm_lib.sh"
vm_require_qemu
vm_once_more_if_unanswered "$0" "$@"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vm_two_guests.XXXXXX")
# vperfetto_record keeps a failed run's logs under $TMPDIR: in $tmp, so
# that they go with it
export TMPDIR=$tmp
qemu_pids=()
cleanup() {
	for p in "${qemu_pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${qemu_pids[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$p" 2>/dev/null
	done
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

# QMP query-cpus-fast: "cpu:tid" words.
qmp_vcpus() {
	python3 - "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
def reply():
    while True:
        m = json.loads(f.readline())
        if "return" in m or "error" in m:
            return m
json.loads(f.readline())
f.write('{"execute": "qmp_capabilities"}\r\n'); f.flush(); reply()
f.write('{"execute": "query-cpus-fast"}\r\n'); f.flush()
print(" ".join("%d:%d" % (c["cpu-index"], c["thread-id"]) for c in reply()["return"]))
PY
}

vm_image "$tmp"
echo "# $VM_IMAGE_NOTE"
smp=(2 1)
for i in 1 2; do
	vm_boot_qemu "$tmp/ch$i" "$tmp/console$i.log" --smp "${smp[$((i - 1))]}" \
		--append "vperfetto.workload=1 vperfetto.shell=0 vperfetto.ctl_log=1"
	check "QEMU $i started (pid ${VM_QEMU_PID:-none})" test -n "$VM_QEMU_PID"
	[ -n "$VM_QEMU_PID" ] || { cat "$tmp/ch$i/run_qemu.log"; exit 1; }
	qemu_pids+=("$VM_QEMU_PID")
done
for i in 1 2; do
	ready=no
	vm_wait_ready "$tmp/console$i.log" && ready=yes
	check "guest $i booted ($(vm_ready_uptime "$tmp/console$i.log"))" test $ready = yes
	[ $ready = yes ] || { tail -n 30 "$tmp/console$i.log"; exit 1; }
done
want1=$(qmp_vcpus "$tmp/ch1/qmp.sock")
want2=$(qmp_vcpus "$tmp/ch2/qmp.sock")
check "QMP names guest 1's vCPU threads ($want1)" test "$(wc -w <<<"$want1")" -eq 2
check "QMP names guest 2's vCPU thread ($want2)" test "$(wc -w <<<"$want2")" -eq 1

mkdir -p "$tmp/rec"
m=$tmp/rec/merged.pb
start=$SECONDS
"$RECORD" --qemu-chardev "$tmp/ch1" --qemu-chardev "$tmp/ch2" -t 8s -v \
	-o "$m" >"$tmp/rec.log" 2>&1
rc=$?
check "vperfetto_record with two guests (exit $rc, $((SECONDS - start)) s)" test $rc -eq 0
if [ $rc -ne 0 ]; then
	cat "$tmp/rec.log"
	for i in 1 2; do # what each guest's control daemon saw
		echo "# guest $i's console (guest_ctl: its control daemon):"
		tail -n 25 "$tmp/console$i.log" | sed 's/^/#   /'
	done
	exit 1
fi
sed 's/^/# /' "$tmp/rec.log" | grep -E "guest|merged|exchanges" | head -n 20
check "both guests' traces kept" test -s "$tmp/rec/merged.guest1.pb" -a \
	-s "$tmp/rec/merged.guest2.pb"

got=$(q "$m" "select count(*) r from machine")
check "three machines in the merged trace ($got)" test "$got" = 3
rep=$tmp/rec/merged.report.json
check "a sync report per guest, each with exchanges and no causality violation" \
	python3 -c "
import json, sys
r = json.load(open('$rep'))
g = r['guests']
ok = len(g) == 2 and all(x['exchanges']['count'] >= 20 and
                         x['exchanges']['causality_violations'] == 0 for x in g)
print('   ', [(x['exchanges']['count'], x['exchanges']['causality_violations']) for x in g])
sys.exit(0 if ok else 1)"
for i in 1 2; do
	want=want$i
	got=$(q "$m" "select group_concat(v.cpu || ':' || v.tid, ' ') r from
		(select * from vcpu order by cpu) v join machine mm
		on v.machine_id = mm.id where mm.raw_id = $i")
	check "guest $i: the vcpu table's threads are QMP's ($got)" test "$got" = "${!want}"
	got=$(q "$m" "select count(*) r from vcpu_state s join machine mm
		on s.machine_id = mm.id where mm.raw_id = $i and s.state != 'unknown'")
	check "guest $i: vcpu_state has known states ($got rows)" test "${got:-0}" -gt 0
	got=$(q "$m" "select count(*) r from guest_thread_host_summary g
		join machine mm on g.machine_id = mm.id where mm.raw_id = $i")
	check "guest $i: guest_thread_host_summary has its threads ($got)" test "${got:-0}" -gt 0
	got=$(q "$m" "select count(distinct t.id) r from track t join machine mm
		on t.machine_id = mm.id where mm.raw_id = $i and t.name like 'vCPU % host state'")
	check "guest $i: a host-state track per vCPU ($got)" test "$got" = "$(wc -w <<<"${!want}")"
done
got=$(q "$m" "select sum(running_dur) - sum(host_running_dur + preempted_dur
	+ blocked_dur + exit_dur + unknown_dur) r from guest_thread_host_summary")
check "every guest running ns has a host state ($got ns left over)" test "$got" = 0
if [ -n "${PERFETTO_TRACE_PROTO:-}" ] && [ -r "$PERFETTO_TRACE_PROTO" ]; then
	mkdir -p "$tmp/pp"
	cp "$PERFETTO_TRACE_PROTO" "$tmp/pp/perfetto_trace.proto"
	check "decodes with Perfetto's perfetto_trace.proto, no unknown fields" \
		env VP_PROTO_DIR="$tmp/pp" bash "$PDECODE" "$m"
else
	echo "# note: PERFETTO_TRACE_PROTO not set: not decoded with Perfetto's schema"
fi

# The three-machine recording in Perfetto's own trace processor, where it
# is built (as vm_record does for one guest).
. "$(dirname "$0")/../lib/oracle_check.sh"
oracle_check "$B" "$tmp/oracle.log" "vm_two_guests_merged=$m"

echo "vm_two_guests: $failures failed"
[ $failures -eq 0 ]
