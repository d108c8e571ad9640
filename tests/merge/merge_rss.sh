#!/usr/bin/env bash
# merge_rss.sh - the merge runs in bounded memory whatever the packet size.
#
# usage: merge_rss.sh TRACEGEN MERGE FTRACE_HEAVY_PY [SIZE_MB]
#
# Merges an ftrace-heavy guest trace of a few hundred MB (34 KB
# compact_sched bundles, nearly all on one sequence: the shape that once
# took 660 MiB on two threads) on 1, 2 and as many threads as there are
# CPUs, and fails when the peak RSS of any run exceeds 64 MiB or the
# outputs differ; then a trace of 600k sync samples a side, which must
# stay within 64 MiB too, a host packet of 60 MiB, and 65500 sequences
# (one more than the limit is refused).  The traces go
# under /tmp and are removed.
set -uo pipefail
# Generated traces are of small packets, which the merge rewrites on one
# thread whatever --threads says; here two threads must really be two.
export VPERFETTO_MERGE_SHARE_MIN=0
TG=$1 MERGE=$2 GEN=$3 SIZE_MB=${4:-300}
LIMIT_KIB=$((64 * 1024))
W=$(mktemp -d /tmp/vp_rss.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }

if ! python3 "$GEN" "$TG" "$W/host.pb" "$W/guest.pb" $((SIZE_MB * 1000000)); then
  echo "not ok - generate the traces"; exit 1
fi
echo "# guest trace: $(($(stat -c %s "$W/guest.pb") / 1000000)) MB"
ncpu=$(nproc)
first=
for t in $(printf '%s\n' 1 2 "$ncpu" | sort -nu); do
  [ "$t" -le "$ncpu" ] || continue
  if ! /usr/bin/time -f %M -o "$W/rss" "$MERGE" -q --threads "$t" \
       "$W/host.pb" "$W/guest.pb" -o "$W/out.$t.pb" 2>"$W/log"; then
    bad "--threads $t: merge"; sed 's/^/    /' "$W/log"; continue
  fi
  rss=$(tail -1 "$W/rss")
  if [ "$rss" -le "$LIMIT_KIB" ]; then ok "--threads $t: peak RSS $((rss / 1024)) MiB <= 64 MiB"
  else bad "--threads $t: peak RSS $((rss / 1024)) MiB > 64 MiB"; fi
  if [ -z "$first" ]; then first=$W/out.$t.pb
  elif cmp -s "$first" "$W/out.$t.pb"; then ok "--threads $t: same bytes as --threads 1"; rm -f "$W/out.$t.pb"
  else bad "--threads $t: output differs from --threads 1"; fi
done
rm -f "$W"/*.pb

# The sync data is bounded too: 600k samples a side (10 minutes every
# 1 ms), of which the scan keeps an even spread (sync_scan.h).
"$TG" --host "$W/sh.pb" --guest "$W/sg.pb" --seed 7 --duration-s 600 \
  --sync-period-ms 1 --events 2000 --exchanges 200000 >/dev/null
if /usr/bin/time -f %M -o "$W/rss" "$MERGE" "$W/sh.pb" "$W/sg.pb" \
     -o "$W/s.out.pb" 2>"$W/log"; then
  rss=$(tail -1 "$W/rss")
  if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    # A sanitizer's shadow memory and its quarantine of freed blocks
    # (the fits free arrays of MiBs) are not the merge's.
    echo "# skip: 600k sync samples: peak RSS $((rss / 1024)) MiB not held to 64 MiB under a sanitizer"
  elif [ "$rss" -le "$LIMIT_KIB" ]; then ok "600k sync samples: peak RSS $((rss / 1024)) MiB <= 64 MiB"
  else bad "600k sync samples: peak RSS $((rss / 1024)) MiB > 64 MiB"; fi
  if grep -q "left out, an even spread of them kept" "$W/log"; then ok "600k sync samples: the thinning is reported"
  else bad "600k sync samples: the thinning is reported"; sed 's/^/    /' "$W/log"; fi
else
  bad "600k sync samples: merge"; sed 's/^/    /' "$W/log"
fi
# A host packet of 60 MiB (an unknown field, as a newer producer may
# write) is copied from file to output in pieces, never held whole.
"$TG" --host "$W/bh.pb" --guest "$W/bg.pb" --seed 8 --duration-s 2 \
  --events 200 >/dev/null
python3 - "$W/bh.pb" <<'PY'
import sys
def varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7f) | (0x80 if v >> 7 else 0))
        v >>= 7
        if not v:
            return bytes(out)
body = b"\x00" * (60 << 20)
inner = varint(9000 << 3 | 2) + varint(len(body)) + body
with open(sys.argv[1], "ab") as f:
    f.write(b"\x0a" + varint(len(inner)) + inner)
PY
if /usr/bin/time -f %M -o "$W/rss" "$MERGE" -q "$W/bh.pb" "$W/bg.pb" \
     -o "$W/b.out.pb" 2>"$W/log"; then
  rss=$(tail -1 "$W/rss")
  if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    echo "# skip: a 60 MiB host packet: peak RSS $((rss / 1024)) MiB not held to 16 MiB under a sanitizer"
  elif [ "$rss" -le $((16 * 1024)) ]; then ok "a 60 MiB host packet: peak RSS $((rss / 1024)) MiB <= 16 MiB"
  else bad "a 60 MiB host packet: peak RSS $((rss / 1024)) MiB > 16 MiB"; fi
  if cmp -s -n "$(stat -c %s "$W/bh.pb")" "$W/bh.pb" "$W/b.out.pb"; then ok "a 60 MiB host packet: the host copied byte for byte"
  else bad "a 60 MiB host packet: the host copied byte for byte"; fi
else
  bad "a 60 MiB host packet: merge"; sed 's/^/    /' "$W/log"
fi
# Sequences: the rewrite keeps state for each, so a trace may have at
# most 65536 (SYNC_MAX_SEQUENCES).  That many stay within 64 MiB; one
# more is refused at the packet that opens it.
seqs() { # OUT N: the generated guest and N packets of sequences of their own
  python3 - "$W/bg.pb" "$1" "$2" <<'PY'
import sys
def varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7f) | (0x80 if v >> 7 else 0))
        v >>= 7
        if not v:
            return bytes(out)
base = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    f.write(base)
    for i in range(int(sys.argv[3])):
        # timestamp (8) and trusted_packet_sequence_id (10)
        pkt = b"\x40" + varint(10**9 + i) + b"\x50" + varint(100000 + i)
        f.write(b"\x0a" + varint(len(pkt)) + pkt)
PY
}
seqs "$W/s65k.pb" 65500
seqs "$W/s66k.pb" 65600
if /usr/bin/time -f %M -o "$W/rss" "$MERGE" -q "$W/bh.pb" "$W/s65k.pb" \
     -o "$W/s.out.pb" 2>"$W/log"; then
  rss=$(tail -1 "$W/rss")
  if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    echo "# skip: 65500 sequences: peak RSS $((rss / 1024)) MiB not held to 64 MiB under a sanitizer"
  elif [ "$rss" -le "$LIMIT_KIB" ]; then ok "65500 sequences: peak RSS $((rss / 1024)) MiB <= 64 MiB"
  else bad "65500 sequences: peak RSS $((rss / 1024)) MiB > 64 MiB"; fi
else
  bad "65500 sequences: merge"; sed 's/^/    /' "$W/log"
fi
"$MERGE" -q "$W/bh.pb" "$W/s66k.pb" -o "$W/s.out.pb" 2>"$W/log"
st=$?
if [ $st -eq 2 ] && grep -Eq "s66k.pb: byte offset [0-9]+: sequence [0-9]+ is one more than the 65536 packet sequences" "$W/log"; then
  ok "65600 sequences: refused (exit 2) at the packet past the limit"
else
  bad "65600 sequences: refused (exit $st)"; sed 's/^/    /' "$W/log"
fi
echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
