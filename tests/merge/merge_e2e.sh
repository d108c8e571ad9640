#!/usr/bin/env bash
# merge_e2e.sh - end-to-end merges of generated traces.
#
# usage: merge_e2e.sh TRACEGEN MERGE CHECK_TRUTH PROTO_CHECK PROTOC_DECODE_SH PROTO_DIR
#
# Each scenario generates a host and a guest trace with a known clock
# relation, merges them and checks every guest timestamp against the truth
# (check_truth), decodes the output with protobuf-c and with protoc (no
# unknown or misnumbered fields), and checks the bad-input contract: exit
# status, a message naming the file and byte offset, and no output.
set -uo pipefail
TG=$1 MERGE=$2 TRUTH=$3 PCHECK=$4 PDECODE=$5 PROTO_DIR=$6
W=$(mktemp -d /tmp/vp_e2e.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0

ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -f "$W/log" ] && sed 's/^/    /' "$W/log" | tail -30; }
# check NAME CMD...: the command must succeed
check() { local n=$1; shift; if "$@" >"$W/log" 2>&1; then ok "$n"; else bad "$n"; fi; }
# expect_exit NAME STATUS PATTERN CMD...: must exit STATUS, stderr matching PATTERN
expect_exit() {
  local n=$1 want=$2 pat=$3; shift 3
  "$@" >"$W/log" 2>&1; local got=$?
  if [ "$got" -eq "$want" ] && grep -Eq -- "$pat" "$W/log"; then ok "$n"
  else echo "    exit $got (want $want), pattern '$pat'"; bad "$n"; fi
}

gen() { # gen NAME ARGS...: host/guest/params under $W/NAME
  local n=$1; shift
  "$TG" --host "$W/$n.host.pb" --guest "$W/$n.guest.pb" --params-out "$W/$n.params" "$@" >/dev/null
}

merge_and_check() { # NAME TOLERANCE_NS MERGE_ARGS...
  local n=$1 tol=$2; shift 2
  check "$n: merge" "$MERGE" "$W/$n.host.pb" "$W/$n.guest.pb" -o "$W/$n.out.pb" \
        --report "$W/$n.json" "$@"
  check "$n: every guest timestamp within ${tol} ns of truth" \
        "$TRUTH" "$W/$n.params" "$W/$n.guest.pb" "$W/$n.out.pb" --machine 1 --tolerance-ns "$tol"
}

# 1. the counter offset from sync exchanges, drift, jitter, outliers
gen ex --seed 11 --duration-s 20 --drift-ppm 50 --jitter-ns 300 --outlier-every 40 --exchanges 100
merge_and_check ex 1000
check "ex: report names the exchanges as offset source" grep -q '"source": "exchanges"' "$W/ex.json"
check "ex: zero causality violations" grep -q '"causality_violations": 0' "$W/ex.json"
check "ex: outliers rejected" python3 -c "
import json,sys; r=json.load(open('$W/ex.json')); g=r['guests'][0]
sys.exit(0 if g['fit_boottime']['samples_rejected']>0 else 1)"
check "ex: host packets copied byte for byte" python3 -c "
h=open('$W/ex.host.pb','rb').read(); o=open('$W/ex.out.pb','rb').read()
import sys; sys.exit(0 if o.startswith(h) else 1)"
check "ex: merged output decodes with protobuf-c, no unknown fields" "$PCHECK" --allow 9000 "$W/ex.out.pb"
check "ex: merged output decodes with protoc, no unknown fields" \
      env VP_ALLOW_FIELDS=9000 VP_PROTO_DIR="$PROTO_DIR" bash "$PDECODE" "$W/ex.out.pb"
check "ex: the guest's unknown field 9000 survived" bash -c \
      "VP_PROTO_DIR='$PROTO_DIR' VP_ALLOW_FIELDS=9000 bash '$PDECODE' --print '$W/ex.out.pb' | grep -q '^ *9000: '"

# 2. the offset from the host's kvm_tsc record, no exchanges
gen kvm --seed 12 --duration-s 10 --drift-ppm -20 --kvm-tsc --exchanges 0
merge_and_check kvm 1000
check "kvm: offset source is kvm_tsc" grep -q '"source": "kvm_tsc"' "$W/kvm.json"

# 2b. the TSC offset changes mid-trace (a migration) and kvm_tsc records
# both values: each segment of the guest's fit gets the one in force then
gen tscstep --seed 14 --duration-s 10 --kvm-tsc --exchanges 0 --tsc-step 3000000000
merge_and_check tscstep 1000
check "tscstep: the report gives each guest segment its offset" python3 -c "
import json,sys; g=json.load(open('$W/tscstep.json'))['guests'][0]['counter_map']
s=g['segment_offsets_boottime']
sys.exit(0 if len(s)==2 and s[1]['offset']-s[0]['offset']==3000000000 else 1)"
gen tscback --seed 15 --duration-s 10 --kvm-tsc --exchanges 0 --tsc-step -7000000000 --step-at 0.3
merge_and_check tscback 1000
# ... back by far more than the trace is long (300 s of cycles): both
# recorded values then place the later segment within the first one's
# span, and the one that puts it among the host's samples must win; the
# error bound stays that of the fit on either side of the change
gen tscfar --seed 38 --duration-s 10 --kvm-tsc --tsc-step -900000000000 --step-at 0.5
merge_and_check tscfar 1000
check "tscfar: the error bound stays under 1 us" python3 -c "
import json,sys; g=json.load(open('$W/tscfar.json'))['guests'][0]
sys.exit(0 if g['error_bound_ns']['max'] < 1000 and
         g['exchanges']['causality_violations']==0 else 1)"
gen tscfwdfar --seed 38 --duration-s 10 --kvm-tsc --tsc-step 900000000000 --step-at 0.5
merge_and_check tscfwdfar 1000
check "tscfwdfar: the error bound at the change stays under 1 us" python3 -c "
import json,sys; g=json.load(open('$W/tscfwdfar.json'))['guests'][0]
sys.exit(0 if g['error_bound_ns']['max'] < 1000 else 1)"
# ... with no kvm_tsc record: the exchanges inside each segment give its own
gen tscex --seed 16 --duration-s 20 --exchanges 100 --tsc-step 3000000000
merge_and_check tscex 1000
check "tscex: each segment's offset from its exchanges, none contradicting" python3 -c "
import json,sys; g=json.load(open('$W/tscex.json'))['guests'][0]
s=g['counter_map']['segment_offsets_boottime']
sys.exit(0 if len(s)==2 and s[0]['source']=='exchanges' and
         abs(s[1]['offset']-s[0]['offset']-3000000000) < 1000 and
         g['exchanges']['causality_violations']==0 else 1)"

# ... no record, and exchanges before the step only (it is at 97 %): the
# offset after it is carried across the step, within the bound, and the
# merge says so
for c in "tscbefore 41 20 0.97" "tscnone 43 0 0.5"; do
	set -- $c
	gen "$1" --seed "$2" --duration-s 10 --exchanges "$3" --step-at "$4" \
	    --tsc-step 30000000
done
merge_and_check tscbefore 1500
check "tscbefore: one segment measured, the other carried by 30e6 cycles" \
      python3 -c "
import json,sys; g=json.load(open('$W/tscbefore.json'))['guests'][0]
s=g['counter_map']['segment_offsets_boottime']
sys.exit(0 if [x['source'] for x in s]==['exchanges','carried'] and
         abs(s[1]['offset']-s[0]['offset']-30000000) < 1000 and
         all(0 < x['error_bound_ns'] < 1500 for x in s) and
         g['error_bound_ns']['max'] < 1500 else 1)"
check "tscbefore: a warning names the carried step" \
      grep -q "steps by +[0-9]* cycles.*offset carried across" \
      "$W/tscbefore.json"
# With no exchange at all the default offset holds for the first segment
# and the second keeps its distance to it: only the default is wrong.
check "tscnone: merge" "$MERGE" "$W/tscnone.host.pb" "$W/tscnone.guest.pb" \
      -o "$W/tscnone.out.pb" --report "$W/tscnone.json"
check "tscnone: the default offset is carried too" python3 -c "
import json,sys; g=json.load(open('$W/tscnone.json'))['guests'][0]
s=g['counter_map']['segment_offsets_boottime']
sys.exit(0 if [x['source'] for x in s]==['default','carried'] and
         abs(s[1]['offset']-s[0]['offset']-30000000) < 1000 else 1)"

# 3. the offset from the command line
OFF=$(grep '^offset=' "$W/kvm.params" | cut -d= -f2)
check "cmdline: merge" "$MERGE" "$W/kvm.host.pb" "$W/kvm.guest.pb" -o "$W/cl.out.pb" \
      --guest-tsc-offset "$OFF" --report "$W/cl.json"
check "cmdline: within 1000 ns of truth" "$TRUTH" "$W/kvm.params" "$W/kvm.guest.pb" "$W/cl.out.pb" --machine 1 --tolerance-ns 1000
check "cmdline: offset source is cmdline" grep -q '"source": "cmdline"' "$W/cl.json"
expect_exit "cmdline: a wrong offset is flagged by the exchanges" 0 "contradict the chosen counter offset" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/cl2.out.pb" --guest-tsc-offset 12345

# 3b. the guest clock's rate changes by 3 ppm at 30 % of two minutes (NTP
# retuning it: 75 us off any one line), with jitter and outliers: one
# segment with bends, and the truth within 1 us everywhere
gen bend --seed 23 --duration-s 120 --exchanges 200 --drift-ppm -40 \
    --drift-change-ppm 3 --step-at 0.3 --jitter-ns 300 --outlier-every 40
merge_and_check bend 1000
check "bend: one guest segment, with knots, and a bound under 1 us" python3 -c "
import json,sys; g=json.load(open('$W/bend.json'))['guests'][0]
s=g['fit_boottime']['segments']
sys.exit(0 if len(s)==1 and s[0]['knots']>=3 and
         g['fit_boottime']['residual_max_ns'] < 1000 else 1)"

# ... and the host's BOOTTIME bends too (-4 ppm), at 60 % of a minute
gen hbend --seed 24 --duration-s 60 --exchanges 100 --host-drift-change-ppm -4 \
    --drift-change-ppm 2 --step-at 0.6 --jitter-ns 200 --outlier-every 30
merge_and_check hbend 1000
check "hbend: the host's fit bends, in one segment" python3 -c "
import json,sys; s=json.load(open('$W/hbend.json'))['host']['fit']['segments']
sys.exit(0 if len(s)==1 and s[0]['knots']>=3 else 1)"

# 3c. more sync samples and exchanges than the scan keeps (150k, 1 ms
# apart): an even spread of them, said in a warning, and the truth still
gen thin --seed 8 --duration-s 150 --sync-period-ms 1 --exchanges 150000 \
    --events 2000 --drift-change-ppm 1
merge_and_check thin 1000
check "thin: the report says samples were left out" \
      grep -q "left out, an even spread of them kept" "$W/thin.json"

# 4. the host clock steps (suspend): two segments
gen step --seed 13 --duration-s 20 --step-ns 30000000000 --exchanges 50
merge_and_check step 1000
check "step: host fit has two segments" python3 -c "
import json,sys; r=json.load(open('$W/step.json'))
sys.exit(0 if len(r['host']['fit']['segments'])==2 else 1)"

# 5. two guests against one host
gen g2 --seed 11 --duration-s 20 --drift-ppm -30 --offset -999999999 --exchanges 60
check "two guests: both generated on the same host clock model" bash -c \
      "diff <(grep -E '^(host_hz|c0|hb0)=' '$W/ex.params') <(grep -E '^(host_hz|c0|hb0)=' '$W/g2.params')"
check "two guests: merge" "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" "$W/g2.guest.pb" -o "$W/two.out.pb" --report "$W/two.json"
check "two guests: guest 1 within 1000 ns" "$TRUTH" "$W/ex.params" "$W/ex.guest.pb" "$W/two.out.pb" --machine 1 --tolerance-ns 1000
check "two guests: guest 2 within 1000 ns" "$TRUTH" "$W/g2.params" "$W/g2.guest.pb" "$W/two.out.pb" --machine 2 --tolerance-ns 1000

# 5b. a host trace that already has machines: the guest comes after them
cat > "$W/addmachine.py" <<'PY'
import sys
b = open(sys.argv[1], 'rb').read()
extra = b'\x0a\x05\x40\x07\x90\x06\x07'   # a packet: timestamp 7, machine_id 7
open(sys.argv[2], 'wb').write(b + extra)
PY
python3 "$W/addmachine.py" "$W/ex.host.pb" "$W/hm.pb"
check "host with machine 7: merge" "$MERGE" -q "$W/hm.pb" "$W/ex.guest.pb" -o "$W/hm.out.pb" --report "$W/hm.json"
check "host with machine 7: the guest is machine 8" grep -q '"machine_id": 8' "$W/hm.json"
check "host with machine 7: every guest timestamp within 1000 ns" \
      "$TRUTH" "$W/ex.params" "$W/ex.guest.pb" "$W/hm.out.pb" --machine 8 --tolerance-ns 1000

# 6. --no-machine-id
check "no-machine-id: merge" "$MERGE" -q "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/nm.out.pb" --no-machine-id
check "no-machine-id: no machine_id field in the output" bash -c \
      "VP_PROTO_DIR='$PROTO_DIR' VP_ALLOW_FIELDS=9000 bash '$PDECODE' --print '$W/nm.out.pb' | grep -vq 'machine_id' && ! VP_PROTO_DIR='$PROTO_DIR' VP_ALLOW_FIELDS=9000 bash '$PDECODE' --print '$W/nm.out.pb' | grep -q 'machine_id'"

# 6b. compressed_packets (zlib) in both traces: sync data found inside the
# host's (copied as is), guest packets inflated and rewritten
cat > "$W/compress.py" <<'PY'
import sys, zlib
def records(b):
    i = 0
    while i < len(b):
        assert b[i] == 0x0a
        n, s, i = 0, 0, i + 1
        while True:
            c = b[i]; i += 1; n |= (c & 0x7f) << s; s += 7
            if c < 0x80: break
        yield b[i - 1 - ((n.bit_length() + 6) // 7 or 1):i + n]
        i += n
def varint(n):
    out = bytearray()
    while True:
        if n < 0x80: out.append(n); return bytes(out)
        out.append(n & 0x7f | 0x80); n >>= 7
src, dst = sys.argv[1], sys.argv[2]
recs = list(records(open(src, 'rb').read()))
out = bytearray()
for k in range(0, len(recs), 50):
    z = zlib.compress(b''.join(recs[k:k + 50]))
    pkt = b'\x92\x03' + varint(len(z)) + z          # field 50, LEN
    out += b'\x0a' + varint(len(pkt)) + pkt
open(dst, 'wb').write(out)
PY
check "compressed: make compressed traces" bash -c \
      "python3 '$W/compress.py' '$W/ex.host.pb' '$W/zh.pb' && python3 '$W/compress.py' '$W/ex.guest.pb' '$W/zg.pb'"
check "compressed: merge" "$MERGE" "$W/zh.pb" "$W/zg.pb" -o "$W/z.out.pb" --report "$W/z.json"
# the guest's packets stay compressed in the output (compressed again
# after the rewrite): inflate them to check them against the truth
cat > "$W/inflate.py" <<'PY'
import sys, zlib
def fields(b):
    i = 0
    while i < len(b):
        t, s, j = 0, 0, i
        while True:
            c = b[i]; i += 1; t |= (c & 0x7f) << s; s += 7
            if c < 0x80: break
        if t & 7 == 0:
            while b[i] & 0x80: i += 1
            i += 1; yield t >> 3, None, b[j:i]
        elif t & 7 == 2:
            n, s = 0, 0
            while True:
                c = b[i]; i += 1; n |= (c & 0x7f) << s; s += 7
                if c < 0x80: break
            yield t >> 3, b[i:i + n], b[j:i + n]; i += n
        else:
            raise SystemExit('unexpected wire type')
out, nz = bytearray(), 0
for num, pkt, raw in fields(open(sys.argv[1], 'rb').read()):
    z = [d for n, d, _ in fields(pkt) if n == 50] if num == 1 else []
    if z:
        nz += 1; out += zlib.decompress(z[0])
    else:
        out += raw
open(sys.argv[2], 'wb').write(out)
print(nz)
PY
check "compressed: guest packets stay compressed in the output" bash -c \
      "n=\$(python3 '$W/inflate.py' '$W/z.out.pb' '$W/z.flat.pb') && [ \"\$n\" -gt 0 ]"
check "compressed: output about as large as the input" python3 -c "
import os,sys; i=os.path.getsize('$W/zh.pb')+os.path.getsize('$W/zg.pb')
sys.exit(0 if os.path.getsize('$W/z.out.pb') < 1.5*i else 1)"
check "compressed: every guest timestamp within 1000 ns of truth" \
      "$TRUTH" "$W/ex.params" "$W/ex.guest.pb" "$W/z.flat.pb" --machine 1 --tolerance-ns 1000
check "compressed: host sync samples found inside compressed_packets" python3 -c "
import json,sys; a=json.load(open('$W/z.json')); b=json.load(open('$W/ex.json'))
sys.exit(0 if a['host']['samples']==b['host']['samples']>0 else 1)"
printf '\x0a\x05\x92\x03\x02\x78\x9c' > "$W/zbad.pb"
expect_exit "compressed: corrupt zlib data: exit 2" 2 "zbad.pb: byte offset 2: corrupt compressed_packets" \
      "$MERGE" "$W/ex.host.pb" "$W/zbad.pb" -o "$W/bad.out.pb"
expect_exit "compressed: over --max-inflate: exit 2 naming file and offset" 2 \
      "zg.pb: byte offset [0-9]+: compressed_packets inflate to over 65536 bytes" \
      "$MERGE" "$W/zh.pb" "$W/zg.pb" -o "$W/cap.out.pb" --max-inflate 64K
check "compressed: over --max-inflate: no output" test ! -e "$W/cap.out.pb"
expect_exit "compressed: bad --max-inflate: exit 1" 1 "bad --max-inflate" \
      "$MERGE" "$W/zh.pb" "$W/zg.pb" -o "$W/cap.out.pb" --max-inflate 12X
# a compression bomb: 2.4 MB that inflate to 2.4 GB, over the default cap
python3 - "$W/ex.guest.pb" "$W/bomb.pb" <<'PY'
import sys, zlib
def varint(n):
    out = bytearray()
    while True:
        if n < 0x80: out.append(n); return bytes(out)
        out.append(n & 0x7f | 0x80); n >>= 7
inner = bytes(40 << 20)                     # 40 MB of zeros in field 900
pkt = varint(900 << 3 | 2) + varint(len(inner)) + inner
z = zlib.compress(b'\x0a' + varint(len(pkt)) + pkt, 9)
outer = b'\x92\x03' + varint(len(z)) + z
rec = b'\x0a' + varint(len(outer)) + outer
open(sys.argv[2], 'wb').write(open(sys.argv[1], 'rb').read() + rec * 60)
PY
expect_exit "compressed: a bomb over the default cap: exit 2 naming file and offset" 2 \
      "bomb.pb: byte offset [0-9]+: compressed_packets inflate to over 2147483648 bytes" \
      "$MERGE" "$W/ex.host.pb" "$W/bomb.pb" -o "$W/bomb.out.pb"
check "compressed: a bomb: no output" test ! -e "$W/bomb.out.pb"
rm -f "$W/bomb.pb"

# 6d. a timestamp far outside the clock model is counted, not silently
# clamped
python3 - "$W/ex.guest.pb" "$W/far.pb" <<'PY'
import sys
def varint(n):
    out = bytearray()
    while True:
        if n < 0x80: out.append(n); return bytes(out)
        out.append(n & 0x7f | 0x80); n >>= 7
pkt = b'\x40' + varint((1 << 64) - 1) + b'\x50' + varint(999)  # ts, seq 999
open(sys.argv[2], 'wb').write(open(sys.argv[1], 'rb').read() +
                              b'\x0a' + varint(len(pkt)) + pkt)
PY
check "overflow: merge" "$MERGE" "$W/ex.host.pb" "$W/far.pb" -o "$W/far.out.pb" \
      --report "$W/far.json"
check "overflow: counted in the report" python3 -c "
import json,sys; g=json.load(open('$W/far.json'))['guests'][0]
sys.exit(0 if g['rewrite']['overflowed'] == 1 else 1)"
check "overflow: none in an ordinary merge" python3 -c "
import json,sys; g=json.load(open('$W/ex.json'))['guests'][0]
sys.exit(0 if g['rewrite']['overflowed'] == 0 else 1)"

# 6c. two threads write the same bytes as one
check "threads: exchanges scenario, 1 and 2 threads identical" bash -c \
      "'$MERGE' -q --threads 1 '$W/ex.host.pb' '$W/ex.guest.pb' -o '$W/t1.pb' &&
       '$MERGE' -q --threads 2 '$W/ex.host.pb' '$W/ex.guest.pb' -o '$W/t2.pb' && cmp '$W/t1.pb' '$W/t2.pb'"
check "threads: two guests, no machine id, identical" bash -c \
      "'$MERGE' -q --threads 1 --no-machine-id '$W/ex.host.pb' '$W/ex.guest.pb' '$W/g2.guest.pb' -o '$W/t1.pb' &&
       '$MERGE' -q --threads 2 --no-machine-id '$W/ex.host.pb' '$W/ex.guest.pb' '$W/g2.guest.pb' -o '$W/t2.pb' && cmp '$W/t1.pb' '$W/t2.pb'"
check "threads: compressed guest, identical" bash -c \
      "'$MERGE' -q --threads 1 '$W/zh.pb' '$W/zg.pb' -o '$W/t1.pb' &&
       '$MERGE' -q --threads 2 '$W/zh.pb' '$W/zg.pb' -o '$W/t2.pb' && cmp '$W/t1.pb' '$W/t2.pb'"
# a packet in the middle of the guest with a nested length past its end
cat > "$W/corrupt.py" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
def varint(i):
    n = s = 0
    while True:
        c = b[i]; i += 1; n |= (c & 0x7f) << s; s += 7
        if c < 0x80: return n, i
def corrupt(start, end):
    """Makes the packet's track_event (field 11) claim 127 bytes."""
    i = start
    while i < end:
        tag, j = varint(i)
        wt = tag & 7
        if wt == 0:
            _, i = varint(j)
        elif wt == 2:
            n, k = varint(j)
            if tag >> 3 == 11 and n < 0x7f and k - j == 1 and end - start < 0x7f:
                b[j] = 0x7f
                return True
            i = k + n
        elif wt == 1:
            i = j + 8
        else:
            i = j + 4
    return False
i, k, target = 0, 0, int(sys.argv[3])
while i < len(b):
    n, j = varint(i + 1)
    if k >= target and corrupt(j, j + n):
        break
    i, k = j + n, k + 1
else:
    sys.exit("no packet to corrupt")
open(sys.argv[2], 'wb').write(b)
PY
check "corrupt packet: made" python3 "$W/corrupt.py" "$W/ex.guest.pb" "$W/mid.pb" 3000
expect_exit "corrupt packet mid-guest, 1 thread: exit 2 with offset" 2 "mid.pb: byte offset [0-9]+: malformed" \
      "$MERGE" --threads 1 "$W/ex.host.pb" "$W/mid.pb" -o "$W/bad.out.pb"
cp "$W/log" "$W/log1"
expect_exit "corrupt packet mid-guest, 2 threads: exit 2" 2 "mid.pb: byte offset [0-9]+: malformed" \
      "$MERGE" --threads 2 "$W/ex.host.pb" "$W/mid.pb" -o "$W/bad.out.pb"
cp "$W/log" "$W/log2"
check "corrupt packet: same message on 1 and 2 threads" cmp -s "$W/log1" "$W/log2"
check "corrupt packet: no output" test ! -e "$W/bad.out.pb"

# 7. bad input
head -c $(( $(stat -c %s "$W/ex.guest.pb") - 7 )) "$W/ex.guest.pb" > "$W/trunc.pb"
expect_exit "truncated guest: exit 2 with file and byte offset" 2 "trunc.pb: byte offset [0-9]+" \
      "$MERGE" "$W/ex.host.pb" "$W/trunc.pb" -o "$W/bad.out.pb"
check "truncated guest: no output" test ! -e "$W/bad.out.pb"
echo "precious" > "$W/exists.pb"
expect_exit "truncated guest: existing output kept" 2 "byte offset" \
      "$MERGE" "$W/ex.host.pb" "$W/trunc.pb" -o "$W/exists.pb"
check "truncated guest: existing output unchanged" grep -qx precious "$W/exists.pb"
check "no temporary files left behind" bash -c "! ls -a '$W' | grep -q '^\.exists\.pb\.'"
mkfifo "$W/fifo.pb"
expect_exit "a FIFO with no writer as guest: refused at once, exit 2" 2 \
      "fifo.pb: not a regular file" \
      timeout 20 "$MERGE" "$W/ex.host.pb" "$W/fifo.pb" -o "$W/bad.out.pb"
rm -f "$W/fifo.pb"
printf 'not a trace at all\n' > "$W/text.pb"
expect_exit "text as host: exit 2" 2 "text.pb: byte offset" \
      "$MERGE" "$W/text.pb" "$W/ex.guest.pb" -o "$W/bad.out.pb"
expect_exit "-o naming an input: exit 1" 1 "names the input" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/ex.guest.pb"
ln -s "$W/ex.host.pb" "$W/link.pb"
expect_exit "-o naming an input through a link: exit 1" 1 "names the input" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/link.pb"
# a valid trace with no sync data: one packet with a timestamp
printf '\x0a\x02\x40\x05' > "$W/nosync.pb"
expect_exit "no sync data in the host: exit 3, the host named" 3 "nosync.pb: the host trace has no usable clock-sync" \
      "$MERGE" "$W/nosync.pb" "$W/ex.guest.pb" -o "$W/bad.out.pb"
expect_exit "no sync data in the guest: exit 3" 3 "no usable cros/guest_clock_sync" \
      "$MERGE" "$W/ex.host.pb" "$W/nosync.pb" -o "$W/bad.out.pb"
check "no sync data: no output" test ! -e "$W/bad.out.pb"
# a guest beside another host recording: the same run, the host's counter
# 10^13 cycles (about an hour) later, so the guest's samples are far from
# all of the host's
sed -E 's/^c0=([0-9]+)$/echo c0=$((\1 + 10000000000000))/e' "$W/ex.params" \
	>"$W/far.params"
check "another host recording: made" "$TG" --params "$W/far.params" \
	--host "$W/far.host.pb" --guest "$W/far.guest.pb"
expect_exit "guest beside another host trace: warned, exit 0" 0 \
      "warning: guest .*ex.guest.pb: its sync samples fall at host counter [0-9]+\.\.[0-9]+ \(counter offset from the sync exchanges\) and the host trace's at [0-9]+\.\.[0-9]+: they are far apart" \
      "$MERGE" "$W/far.host.pb" "$W/ex.guest.pb" -o "$W/far.out.pb"
expect_exit "a counter offset far off on the command line: warned, exit 0" 0 \
      "warning: guest .*ex.guest.pb: .*counter offset from the command line\) .*far apart" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/far2.out.pb" \
      --guest-tsc-offset 1
expect_exit "a guest beside its own host trace: no such warning" 0 "" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/near.out.pb"
check "a guest beside its own host trace: no such warning" \
      bash -c "! grep -q 'far apart' '$W/log'"
expect_exit "no sync data + --allow-unsynced: exit 0 with a warning" 0 "not synced" \
      "$MERGE" "$W/ex.host.pb" "$W/nosync.pb" -o "$W/uns.out.pb" --allow-unsynced
check "unsynced guest: timestamp unchanged, machine id added" python3 -c "
import sys; o=open('$W/uns.out.pb','rb').read(); h=open('$W/ex.host.pb','rb').read()
# first on machine 1 a time and the machine alone (merge.c's write_machine_anchor)
r=o[len(h):]; n=r[1]; a=r[2:2+n]
ok=r[0]==0x0a and a[0]==0x40 and a.endswith(b'\xd0\x03\x06\x90\x06\x01')
sys.exit(0 if ok and r[2+n:].startswith(b'\x0a\x05\x40\x05\x90\x06\x01') else 1)"
expect_exit "missing input: exit 2" 2 "nope.pb: cannot open" \
      "$MERGE" "$W/nope.pb" "$W/ex.guest.pb" -o "$W/bad.out.pb"
expect_exit "usage: no -o" 1 "no output file" "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb"
expect_exit "usage: -o twice" 1 "-o given twice" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/x1.pb" -o "$W/x2.pb"
expect_exit "usage: -o empty" 1 "-o: an empty file name" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o ""
expect_exit "usage: --report twice" 1 "--report given twice" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/x1.pb" --report "$W/r1.json" --report "$W/r2.json"
check "usage errors: nothing written" bash -c "! ls '$W'/x1.pb '$W'/x2.pb '$W'/r1.json '$W'/r2.json 2>/dev/null"
expect_exit "usage: 65 guest traces" 1 "too many guest traces \(at most 64\)" \
      "$MERGE" "$W/ex.host.pb" $(for i in $(seq 65); do printf '%s ' "$W/ex.guest.pb"; done) -o "$W/x1.pb"
expect_exit "usage: offsets not once per guest" 1 "once per guest" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" "$W/g2.guest.pb" -o "$W/x.pb" --guest-tsc-offset 1
expect_exit "usage: bad scaling" 1 "RATIO:FRACBITS" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/x.pb" --guest-tsc-scaling 12
expect_exit "report in a missing directory: exit 4 before merging" 4 "nodir/r.json" \
      "$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/rep.out.pb" --report "$W/nodir/r.json"
check "report in a missing directory: no output" test ! -e "$W/rep.out.pb"
# Ctrl-C in the middle of a merge: exit 130, nothing left behind.  The
# signal handler removes the temporary file and ends the process at once,
# with its threads still running (the tsan test setup of meson.build does
# not call that a leak).
"$TG" --host "$W/big.host.pb" --guest "$W/big.guest.pb" --seed 5 --target-bytes 150M -q >/dev/null
"$MERGE" -q "$W/big.host.pb" "$W/big.guest.pb" -o "$W/int.out.pb" 2>"$W/log" &
mpid=$!
sleep 0.3
kill -INT "$mpid"
wait "$mpid"; st=$?
if [ "$st" -eq 130 ] && grep -q interrupted "$W/log" && [ ! -e "$W/int.out.pb" ] &&
   ! ls -a "$W" | grep -q '^\.int\.out\.pb\.'; then ok "interrupted: exit 130, no output, no temporary"
else echo "    exit $st"; bad "interrupted: exit 130, no output, no temporary"; fi
# Any other signal that ends a process cleans up the same way.
"$MERGE" -q "$W/big.host.pb" "$W/big.guest.pb" -o "$W/usr.out.pb" \
	--report "$W/usr.json" 2>"$W/log" &
mpid=$!
sleep 0.3
kill -USR1 "$mpid"
wait "$mpid"; st=$?
if [ "$st" -eq 138 ] && grep -q "signal 10" "$W/log" &&
   [ ! -e "$W/usr.out.pb" ] && [ ! -e "$W/usr.json" ] &&
   ! ls -a "$W" | grep -q '^\.usr\.'; then ok "SIGUSR1: exit 138, no output, no temporary"
else echo "    exit $st"; bad "SIGUSR1: exit 138, no output, no temporary"; fi
# A file size limit (ulimit -f): the write fails (no SIGXFSZ death), the
# merge says so and exits 4, leaving nothing; an existing output is kept.
echo "precious" > "$W/fsz.out.pb"
(ulimit -f 20000; exec "$MERGE" -q "$W/big.host.pb" "$W/big.guest.pb" \
	-o "$W/fsz.out.pb") >"$W/log" 2>&1; st=$?
if [ "$st" -eq 4 ] && grep -q "fsz.out.pb: cannot write: File too large" "$W/log" &&
   grep -qx precious "$W/fsz.out.pb" && ! ls -a "$W" | grep -q '^\.fsz\.'; then
	ok "ulimit -f: exit 4, File too large, old output kept, no temporary"
else echo "    exit $st: $(cat "$W/log")"; bad "ulimit -f: exit 4, old output kept, no temporary"; fi
# stderr closed under the merge (| head -c0): the output is still written.
"$MERGE" "$W/ex.host.pb" "$W/ex.guest.pb" -o "$W/pipe.out.pb" 2>&1 | head -c0
st=${PIPESTATUS[0]}
check "stderr a closed pipe: exit 0 ($st) and the output written" \
	bash -c "[ $st -eq 0 ] && [ -s '$W/pipe.out.pb' ]"
rm -f "$W/big.host.pb" "$W/big.guest.pb"
check "inputs never modified" bash -c "cmp -s '$W/ex.host.pb' '$W/link.pb'"

echo "merge_e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
