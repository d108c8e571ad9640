#!/usr/bin/env bash
# make_seeds.sh - (re)makes the seed corpora in tests/fuzz/seeds/<target>/,
# one directory per libFuzzer target, which ./run.sh fuzz starts from.
#
#   tests/fuzz/make_seeds.sh BUILD BUILD_FUZZ [SECONDS]
#
# BUILD is a normal build (for the trace generators), BUILD_FUZZ one made
# with -Dfuzz=true.  Each target gets hand-made inputs of its format (small
# traces, a config, /proc text, a domain XML, service scripts), is run for
# SECONDS (default 20) from them, and what it found is merged (-merge=1,
# which keeps the smallest inputs that cover the same code) into its seed
# directory.  Inputs are at most 64 KiB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$1
fuzz=$2
secs=${3:-20}
seeds=$here/seeds
work=$(mktemp -d "${TMPDIR:-/tmp}/make_seeds.XXXXXX")
trap 'rm -rf "$work"' EXIT

mk() { mkdir -p "$work/$1"; }

# ---- hand-made inputs -------------------------------------------------------
mk trace
"$build/tests/vperfetto_tracegen" --host "$work/trace/host.pb" \
  --guest "$work/trace/guest.pb" --seed 3 --duration-s 1 --events 20 \
  --exchanges 3 >/dev/null
for t in fuzz_pb_wire fuzz_trace_reader fuzz_tp_load fuzz_rewrite fuzz_sync_skim \
    fuzz_trace_model; do
  mk $t
  cp "$work/trace/host.pb" "$work/trace/guest.pb" "$work/$t/"
done
# fuzz_tp_load also starts from the processor's own small cases of ftrace
# and system data, and from its logcat case.
for c in vp_ftrace_kinds vp_sys_stats_order vp_android_logs; do
  cp "$repo/tests/processor/cases/$c/trace.pb" "$work/fuzz_tp_load/$c.pb"
done
# fuzz_rewrite: a logcat packet with ids remapped and times moved (the
# options byte 2: --no-machine-id).
python3 - "$repo/tests/lib" "$work/fuzz_rewrite/android_log" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from pb_walk import f_len, f_var, vint
ev1 = (f_var(2, 700) + f_var(3, 701) + f_var(5, 1700000000000000000) +
       f_len(6, b'tag') + f_var(7, 4) + f_len(8, b'msg'))
ev2 = (f_var(2, 700) + f_var(3, 702) + f_var(5, 1700000000000000001) +
       f_len(9, f_len(1, b'k') + f_var(2, 5)))
pkt = f_var(8, 1000) + f_var(10, 3) + f_len(
    39, f_len(1, ev1) + f_len(1, ev2) + f_len(2, f_var(1, 10)))
open(sys.argv[2], 'wb').write(bytes([2]) + vint(len(pkt)) + pkt)
PY
# fuzz_rewrite: onto MONOTONIC with BOOTTIME moved onto the output's (the
# options byte 5: --clock monotonic): a snapshot of both clocks, then an
# ftrace bundle with an event and compact_sched.
python3 - "$repo/tests/lib" "$work/fuzz_rewrite/monotonic_boot" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from pb_walk import f_len, f_var, vint
snap = (f_len(1, f_var(1, 6) + f_var(2, 5000000000)) +
        f_len(1, f_var(1, 3) + f_var(2, 4000000000)) +
        f_len(1, f_var(1, 1) + f_var(2, 1700000000000000000)))
p1 = f_var(8, 5000000000) + f_var(10, 1) + f_len(6, snap)
ev = f_var(1, 5000001000) + f_var(2, 42)
cs = f_len(1, bytes([10, 20, 30])) + f_len(7, bytes([5, 6]))
p2 = f_var(10, 1) + f_len(1, f_var(1, 0) + f_len(2, ev) + f_len(4, cs) +
                            f_var(7, 5000000500))
body = b''.join(vint(len(p)) + p for p in (p1, p2))
open(sys.argv[2], 'wb').write(bytes([5]) + body)
PY
# fuzz_tp_input: a trace's head as it is, gzip'd, gzip'd and cut, and two
# gzip members one after the other.
mk fuzz_tp_input
head -c 6000 "$work/trace/guest.pb" >"$work/fuzz_tp_input/plain"
gzip -c "$work/fuzz_tp_input/plain" >"$work/fuzz_tp_input/gzip"
head -c 1500 "$work/fuzz_tp_input/gzip" >"$work/fuzz_tp_input/gzip_cut"
cat "$work/fuzz_tp_input/gzip" "$work/fuzz_tp_input/gzip" \
  >"$work/fuzz_tp_input/gzip_two_members"
# fuzz_merge: two bytes (big-endian length of the host half), host, guest.
# A second pair whose guest clock bends (its rate changes by 20 ppm): the
# fit's knots (merge/clock_bend.c).
mk fuzz_merge
"$build/tests/vperfetto_tracegen" --host "$work/trace/bent_host.pb" \
  --guest "$work/trace/bent_guest.pb" --seed 5 --duration-s 4 --events 10 \
  --exchanges 3 --drift-change-ppm 20 >/dev/null
for pair in "" bent_; do
python3 - "$work/trace/${pair}host.pb" "$work/trace/${pair}guest.pb" \
  "$work/fuzz_merge/${pair}pair" <<'PY'
import sys
h = open(sys.argv[1], 'rb').read()
g = open(sys.argv[2], 'rb').read()
n = min(len(h), 0xffff)
open(sys.argv[3], 'wb').write(bytes([n >> 8, n & 0xff]) + h[:n] + g)
PY
done
mk fuzz_textproto
cat >"$work/fuzz_textproto/config.pbtxt" <<'EOF'
buffers { size_kb: 1024 fill_policy: RING_BUFFER }
buffers { size_kb: 256 fill_policy: DISCARD }
data_sources {
  config { name: "linux.ftrace" target_buffer: 1
    ftrace_config { ftrace_events: "sched/sched_switch" buffer_size_kb: 64 } }
  producer_name_filter: "vtraced_probes"
}
data_sources { config { name: "track_event" } }
duration_ms: 10000
write_into_file: true
file_write_period_ms: 1000
incremental_state_config { clear_period_ms: 500 }
unique_session_name: "a \"quoted\" \x41 name"
EOF
mk fuzz_procfs
for f in /proc/self/status /proc/self/stat /proc/stat /proc/meminfo \
         /proc/vmstat /proc/self/cmdline; do
  [ -r "$f" ] && head -c 16384 "$f" >"$work/fuzz_procfs/$(echo "$f" | tr / _)" || true
done
mk fuzz_record_domain
cat >"$work/fuzz_record_domain/domain.xml" <<'EOF'
<domain type='qemu' id='4'>
  <name>vp-test</name>
  <devices>
    <channel type='unix'>
      <source mode='bind' path='/run/vp/a&amp;b/control.sock'/>
      <target type='virtio' name='org.vperfetto.control'/>
    </channel>
    <channel type="unix">
      <source mode="bind" path="/run/vp/sync.sock"/>
      <target type="virtio" name="org.vperfetto.sync"/>
    </channel>
    <vsock model='virtio'><cid auto='yes' address='7'/></vsock>
  </devices>
</domain>
EOF
mk fuzz_vcpu_qmp
cp "$here/seeds/fuzz_vcpu_qmp/"* "$work/fuzz_vcpu_qmp/" 2>/dev/null || true
mk fuzz_host_config
printf 'period_ms=100\nclock=monotonic\n' >"$work/fuzz_host_config/legacy"
mk fuzz_service
python3 - "$repo/tests/service/fuzz_service_seeds/gen_seeds.py" \
  "$work/fuzz_service" <<'PY'
import runpy, sys
# gen_seeds.py writes next to itself: point it at the work directory.
src = open(sys.argv[1]).read().replace(
    "HERE = os.path.dirname(os.path.abspath(__file__))", "HERE = %r" % sys.argv[2])
exec(compile(src, sys.argv[1], "exec"), {"__name__": "__main__"})
PY
mk fuzz_host_sync
python3 - "$work/fuzz_host_sync" <<'PY'
import struct, sys, os
d = sys.argv[1]
# A request frame as sync_proto.c encodes it, taken from a real encoder
# would be better; the fuzzer finds the magic from these bytes quickly.
open(os.path.join(d, "reads"), "wb").write(
    bytes([16]) + b"\0" * 16 + bytes([0xc5]) + bytes([0x80 | 8, 0]) +
    b"\xab" * 2048 + bytes([0xff]))
PY
mk fuzz_trace_filter
python3 - "$work/fuzz_trace_filter" <<'PY'
import os, struct, sys
d = sys.argv[1]
def varint(v):
    o = b""
    while True:
        b, v = v & 0x7f, v >> 7
        if not v:
            return o + bytes([b])
        o += bytes([b | 0x80])
def seed(name, flags, words, pkt, overlay=()):
    bc = b"".join(varint(w) for w in words) + b"".join(varint(w) for w in overlay)
    open(os.path.join(d, name), "wb").write(
        bytes([flags]) + struct.pack("<H", len(bc)) + bc + pkt)
# Trace.packet -> 1; TracePacket: 8, 10, 11 -> 2, a string 12, a range
# 100..300; message 2: field 1.  Flags bit 0: the target adds checksums.
words = [1 << 3 | 3, 1, 0, 8 << 3 | 1, 10 << 3 | 1, 11 << 3 | 3, 2,
         12 << 3 | 4, 100 << 3 | 2, 200, 0, 1 << 3 | 1, 0]
pkt = (b"\x40\x90\x4e" + b"\x51" + b"\x11" * 8 + b"\x5a\x04\x08\x05\x10\x06" +
       b"\x62\x03abc" + b"\xa0\x06\x01" + b"\xa2\x38\x02hi")
seed("packet", 1, words, pkt)
seed("overlay", 3, words, pkt, [1, 9 << 3 | 1, 0, 1, 12 << 3 | 5, 3])
seed("recursive", 1, [1 << 3 | 3, 1, 0, 1 << 3 | 3, 1, 0],
     b"\x0a\x04\x0a\x02\x0a\x00")
seed("broken", 1, words, b"\x5a\x09\x08")
PY

# ---- run, then merge into the checked-in seeds -------------------------------
for exe in "$fuzz"/tests/*/fuzz_* "$fuzz"/tests/*/*/fuzz_*; do
  [ -f "$exe" ] && [ -x "$exe" ] || continue
  t=$(basename "$exe")
  mk "$t"
  mkdir -p "$seeds/$t" "$work/run-$t"
  cp "$work/$t"/* "$work/run-$t/" 2>/dev/null || true
  "$exe" -max_total_time="$secs" -max_len=65536 -print_final_stats=0 \
    "$work/run-$t" "$seeds/$t" >"$work/$t.log" 2>&1 ||
    { echo "$t: crashed while making seeds"; tail -20 "$work/$t.log"; }
  mkdir -p "$work/merged-$t"
  "$exe" -merge=1 -max_len=65536 "$work/merged-$t" "$seeds/$t" \
    "$work/run-$t" >>"$work/$t.log" 2>&1
  rm -rf "${seeds:?}/$t"
  mkdir -p "$seeds/$t"
  cp "$work/merged-$t"/* "$seeds/$t/"
  echo "$t: $(ls "$seeds/$t" | wc -l) seeds, $(du -sk "$seeds/$t" | cut -f1) KiB"
done
