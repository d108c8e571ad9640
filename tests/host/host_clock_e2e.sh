#!/usr/bin/env bash
# host_clock_e2e.sh - vperfetto_host_clock end to end: vtraced on temporary
# sockets, vperfetto_host_clock with a UNIX sync endpoint and a fake KVM
# debugfs tree, two recordings with vperfetto (the defaults, then a
# legacy_config override), sync clients doing exchanges meanwhile, and
# checks of the traces with vperfetto_tp and vperfetto_merge.
#
# Usage: host_clock_e2e.sh HOST_CLOCK VTRACED VPERFETTO VPERFETTO_TP \
#            SYNC_CLIENT VPERFETTO_MERGE VPERFETTO_TRACEGEN
# Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 7 ]; then
	echo "usage: $0 HOST_CLOCK VTRACED VPERFETTO VPERFETTO_TP" \
		"SYNC_CLIENT VPERFETTO_MERGE VPERFETTO_TRACEGEN" >&2
	exit 2
fi
host_clock=$1
vtraced=$2
consumer=$3
tp=$4
client=$5
merge=$6
tracegen=$7
case "$(uname -m)" in
x86_64 | aarch64) ;;
*)
	echo "SKIP: no cpu counter shared with guests on $(uname -m)"
	exit 77
	;;
esac
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$vtraced
E2E_TP=$tp
e2e_init host_clock_e2e
tmp=$E2E_DIR

# Bad command lines: usage and exit status 1.
for bad in "--bogus" "--period-ms 0" "--clock tsc" "--vm-pid x" \
	"--no-vsock --sync-vsock-port 5" "extra"; do
	# shellcheck disable=SC2086
	timeout 10 "$host_clock" $bad >"$tmp/bad.log" 2>&1
	rc=$?
	if [ $rc = 1 ] && grep -q "^usage:" "$tmp/bad.log"; then
		pass "bad command line '$bad': usage, exit 1"
	else
		fail "bad command line '$bad': exit $rc: $(cat "$tmp/bad.log")"
	fi
done

# A fake KVM debugfs: VM pid 31337 (fd 12) with two vcpus.
vm=31337
dbg=$tmp/debugfs
for v in 0 1; do
	d=$dbg/kvm/$vm-12/vcpu$v
	mkdir -p "$d"
	echo "-98765432$v" >"$d/tsc-offset"
	echo 281474976710656 >"$d/tsc-scaling-ratio"
	echo 48 >"$d/tsc-scaling-ratio-frac-bits"
done

start_vtraced "$tmp" || fail "vtraced did not start"
# VM 31338 does not exist: one warning, tracing goes on.  The domain
# "test" of libvirt's test driver has no QEMU process: a warning too.
timeout 120 "$host_clock" --producer-socket "$tmp/p.sock" --no-vsock \
	--sync-unix "$tmp/sync.sock" --kvm-debugfs "$dbg" \
	--vm-pid $vm --vm-pid 31338 --domain test \
	--libvirt-uri test:///default -v >"$tmp/host_clock.log" 2>&1 &
hc=$!
e2e_track $hc
wait_for_socket "$tmp/sync.sock"
# Time for the producer to connect and register its data source.
sleep 1

# record NAME DURATION_MS [LEGACY_CONFIG]
record() {
	local legacy=""
	[ -n "${3:-}" ] && legacy="legacy_config: \"$3\""
	cat >"$tmp/$1.txt" <<CFG
buffers { size_kb: 4096 fill_policy: RING_BUFFER }
data_sources { config { name: "vperfetto.clock_sync" $legacy } }
duration_ms: $2
CFG
	timeout 60 "$consumer" --consumer-socket "$tmp/c.sock" \
		-c "$tmp/$1.txt" --txt -o "$tmp/$1.pb" >"$tmp/$1.log" 2>&1
}

# Recording 1: the defaults (BOOTTIME, 100 ms), exchanges meanwhile, and
# a vcpu's offset changes half way.
record host 2000 &
rec=$!
sleep 0.3
"$client" "$tmp/sync.sock" 500 >"$tmp/client1.log" 2>&1 &
c1=$!
"$client" "$tmp/sync.sock" 200 --garbage >"$tmp/client2.log" 2>&1 &
c2=$!
sleep 0.7
echo -5555 >"$dbg/kvm/$vm-12/vcpu1/tsc-offset"
if wait "$c1"; then
	pass "500 exchanges, host counter within each [send, recv]: $(cat "$tmp/client1.log")"
else
	fail "sync client: $(cat "$tmp/client1.log")"
fi
if wait "$c2"; then
	pass "200 exchanges after garbage: $(cat "$tmp/client2.log")"
else
	fail "sync client with garbage: $(cat "$tmp/client2.log")"
fi
if ! wait "$rec"; then
	fail "recording 1: $(cat "$tmp/host.log")"
fi

# Recording 2: a session overriding clock and period, with a bad key.
record mono 1000 "period_ms=50 clock=monotonic bogus=1" ||
	fail "recording 2: $(cat "$tmp/mono.log")"

kill -INT "$hc"
if wait "$hc"; then
	pass "vperfetto_host_clock stopped on SIGINT"
else
	fail "vperfetto_host_clock exit status on SIGINT"
fi
log=$tmp/host_clock.log
summary=$(grep "snapshots written" "$log")
if [[ "$summary" == *" 700 exchanges served"* ]]; then
	pass "summary: $summary"
else
	fail "summary line: '$summary' (log: $(cat "$log"))"
fi
n=$(grep -c "warning: kvm_tsc of VM pid 31338" "$log")
[ "$n" = 1 ] && pass "one warning for the missing VM" ||
	fail "missing VM warned $n times: $(cat "$log")"
grep -q 'warning: --domain test: .*no QEMU process' "$log" &&
	pass "libvirt test domain: no QEMU pid, said so" ||
	fail "no warning for --domain test: $(cat "$log")"
grep -q 'warning: session .*"bogus=1": unknown key' "$log" &&
	pass "bad legacy_config key named" ||
	fail "no warning naming bogus=1: $(cat "$log")"

t=$tmp/host.pb
if [ ! -s "$t" ]; then
	fail "no trace written"
	exit 1
fi
# Snapshots of ours: those with clock 64.
ours="select snapshot_id from clock_snapshot where clock_id = 64"
expect_range "recording 1: (BOOTTIME, counter) snapshots in 2 s" "$t" \
	"select count(*) from ($ours)" 12 40
expect "recording 1: each has exactly clocks 6 and 64" "$t" \
	"select count(*) from (select snapshot_id, count(*) n,
	   sum(clock_id = 6) b from clock_snapshot
	 where snapshot_id in ($ours) group by snapshot_id)
	 where n != 2 or b != 1" 0
expect_range "recording 1: mean snapshot spacing (ms)" "$t" \
	"select (max(ts) - min(ts)) / (count(*) - 1) / 1000000
	 from clock_snapshot where clock_id = 64" 80 160
expect "recording 1: counter rises with the clock" "$t" \
	"select count(*) from (select clock_value - lag(clock_value) over
	 (order by ts) d from clock_snapshot where clock_id = 64) where d <= 0" 0
expect "kvm_tsc instants: 2 vcpus at start, 1 change" "$t" \
	"select count(*) from slice where name = 'kvm_tsc' and dur = 0" 3
expect "kvm_tsc on its track" "$t" \
	"select count(*) from slice s join track t on s.track_id = t.id
	 where s.name = 'kvm_tsc' and t.name = 'kvm_tsc VM pid $vm'" 3
expect "kvm_tsc offsets as args" "$t" \
	"select group_concat(int_value, ' ') from (select a.int_value
	 from slice s join args a using (arg_set_id)
	 where s.name = 'kvm_tsc' and a.key = 'debug.tsc_offset'
	 order by s.ts, a.int_value)" "-987654321 -987654320 -5555"
expect "kvm_tsc ratio and frac bits" "$t" \
	"select count(*) from slice s join args a using (arg_set_id)
	 where s.name = 'kvm_tsc' and ((a.key = 'debug.tsc_scaling_ratio'
	 and a.int_value = 281474976710656) or
	 (a.key = 'debug.tsc_scaling_frac_bits' and a.int_value = 48))" 6
expect "kvm_tsc vm_pid" "$t" \
	"select count(*) from slice s join args a using (arg_set_id)
	 where s.name = 'kvm_tsc' and a.key = 'debug.vm_pid'
	 and a.int_value = $vm" 3

m=$tmp/mono.pb
expect_range "recording 2: (MONOTONIC, counter) snapshots every 50 ms" "$m" \
	"select count(*) from clock_snapshot where clock_id = 64" 10 40
expect "recording 2: paired with MONOTONIC only" "$m" \
	"select count(*) from (select snapshot_id, count(*) n,
	   sum(clock_id = 3) b from clock_snapshot where snapshot_id in
	 (select snapshot_id from clock_snapshot where clock_id = 64)
	 group by snapshot_id) where n != 2 or b != 1" 0

# The merge takes the host trace: its samples and kvm_tsc records.
if "$tracegen" --host "$tmp/gen_host.pb" --guest "$tmp/guest.pb" \
	--duration-s 2 -q; then
	if "$merge" "$t" "$tmp/guest.pb" -o "$tmp/merged.pb" \
		--guest-vm-pid $vm --report "$tmp/report.json" \
		>"$tmp/merge.log" 2>&1; then
		pass "vperfetto_merge accepted the host trace"
	else
		fail "vperfetto_merge: $(cat "$tmp/merge.log")"
	fi
	host_json=$(grep '"host"' "$tmp/report.json")
	samples=$(sed -n 's/.*"samples": \([0-9]*\).*/\1/p' <<<"$host_json")
	kvm=$(sed -n 's/.*"kvm_tsc_records": \([0-9]*\).*/\1/p' \
		<<<"$host_json")
	if [ "${samples:-0}" -ge 12 ] && [ "${kvm:-0}" = 3 ]; then
		pass "merge found $samples host samples and $kvm kvm_tsc records"
	else
		fail "merge report: samples '$samples', kvm_tsc '$kvm': $host_json"
	fi
	# The offset changed during the trace: the merge takes the last.
	grep -q "counter offset -5555 (kvm_tsc)" "$tmp/merge.log" &&
		pass "merge took the counter offset from kvm_tsc" ||
		fail "merge did not use kvm_tsc: $(cat "$tmp/merge.log")"
else
	fail "vperfetto_tracegen failed"
fi

# vCPU threads by name: a fake VMM with threads named as QEMU names its
# vCPU threads; vCPU 1's thread is replaced half way through a recording,
# and the producer must say so with a new vcpu_map record.
python3 - "$tmp/vmm.tids" "$tmp/vmm.swap" <<'PY' >"$tmp/vmm.log" 2>&1 &
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None)
out, swap = sys.argv[1], sys.argv[2]
def vcpu(name, stop):
    libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
    with open(out, "a") as f:
        f.write("%s %d\n" % (name.split()[1].split("/")[0], threading.get_native_id()))
    stop.wait()
stops = [threading.Event() for _ in range(3)]
ts = [threading.Thread(target=vcpu, args=("CPU %d/KVM" % i, stops[i])) for i in (0, 1)]
for t in ts: t.start()
while not os.path.exists(swap): time.sleep(0.05)
stops[1].set(); ts[1].join()
t2 = threading.Thread(target=vcpu, args=("CPU 1/KVM", stops[2])); t2.start()
time.sleep(60)
PY
vmm=$!
e2e_track $vmm
for _ in $(seq 50); do
	[ "$(wc -l <"$tmp/vmm.tids" 2>/dev/null)" = 2 ] && break
	sleep 0.1
done
timeout 60 "$host_clock" --producer-socket "$tmp/p.sock" --no-vsock \
	--vm-pid $vmm --vm-name fakevm -v >"$tmp/host_clock2.log" 2>&1 &
hc2=$!
e2e_track $hc2
sleep 1
record vcpus 3500 &
rec=$!
sleep 1.5
touch "$tmp/vmm.swap"
wait "$rec" || fail "recording 3: $(cat "$tmp/vcpus.log")"
kill -INT "$hc2"
wait "$hc2"
kill "$vmm" 2>/dev/null
v=$tmp/vcpus.pb
want=$(sort -k1,1n -s "$tmp/vmm.tids" | awk '{ printf "%s%s:%s", (NR > 1 ? " " : ""), $1, $2 }')
expect "vcpu_map: each vCPU's threads in order, vCPU 1's replaced ($want)" "$v" \
	"select group_concat(vcpu || ':' || tid, ' ') from (select
	 EXTRACT_ARG(arg_set_id, 'debug.vcpu') vcpu,
	 EXTRACT_ARG(arg_set_id, 'debug.host_tid') tid from slice
	 where name = 'vcpu_map' order by vcpu, ts)" "$want"
expect "vcpu_map: the VM's name, pid and source" "$v" \
	"select count(*) from slice where name = 'vcpu_map' and
	 EXTRACT_ARG(arg_set_id, 'debug.vm') = 'fakevm' and
	 EXTRACT_ARG(arg_set_id, 'debug.vmm_pid') = $vmm and
	 EXTRACT_ARG(arg_set_id, 'debug.source') = 'thread_name'" 3
expect "vcpu_map on its track" "$v" \
	"select count(*) from slice s join track t on s.track_id = t.id
	 where s.name = 'vcpu_map' and t.name = 'vcpu_map VM pid $vmm'" 3
grep -q "3 vcpu_map records" "$tmp/host_clock2.log" &&
	pass "summary counts the vcpu_map records" ||
	fail "summary: $(grep 'snapshots written' "$tmp/host_clock2.log")"

e2e_finish host_clock_e2e
