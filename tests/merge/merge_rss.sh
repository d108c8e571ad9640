#!/usr/bin/env bash
# merge_rss.sh - the merge runs in bounded memory whatever the packet size.
#
# usage: merge_rss.sh TRACEGEN MERGE FTRACE_HEAVY_PY [SIZE_MB]
#
# Merges an ftrace-heavy guest trace of a few hundred MB (34 KB
# compact_sched bundles, nearly all on one sequence: the shape that once
# took 660 MiB on two threads) on 1, 2 and as many threads as there are
# CPUs, and fails when the peak RSS of any run exceeds 64 MiB or the
# outputs differ; runs it again inside a memory cgroup capped at 64 MiB
# where there is one; then a trace of 600k sync samples a side, which must
# stay within 64 MiB too (and four such guests), a host and a guest packet of 60 MiB, a guest
# ftrace bundle of 56 MiB (and one that would grow past the 64 MiB a
# packet may be, refused), packets with a part the merge reads whole (of
# 12 MiB merged, of 60 MiB refused), and 65500 sequences, in one guest and
# in 16 (one more than the limit
# is refused).  The traces go
# under /tmp and are removed.
set -uo pipefail
TG=$1 MERGE=$2 GEN=$3 SIZE_MB=${4:-300}
LIMIT_KIB=$((64 * 1024))
W=$(mktemp -d /tmp/vp_rss.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
# rss_case NAME LIMIT_KIB CMD...: CMD must succeed within LIMIT_KIB of
# peak RSS (not judged under a sanitizer, whose shadow memory and
# quarantine are not the merge's).
rss_case() {
  local name=$1 limit=$2; shift 2
  if ! /usr/bin/time -f %M -o "$W/rss" "$@" 2>"$W/log"; then
    bad "$name: merge"; sed 's/^/    /' "$W/log"; return 1
  fi
  local rss; rss=$(tail -1 "$W/rss")
  if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    echo "# skip: $name: peak RSS $((rss / 1024)) MiB not held to $((limit / 1024)) MiB under a sanitizer"
  elif [ "$rss" -le "$limit" ]; then ok "$name: peak RSS $((rss / 1024)) MiB <= $((limit / 1024)) MiB"
  else bad "$name: peak RSS $((rss / 1024)) MiB > $((limit / 1024)) MiB"; fi
}

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
  if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    echo "# skip: --threads $t: peak RSS $((rss / 1024)) MiB not held to 64 MiB under a sanitizer"
  elif [ "$rss" -le "$LIMIT_KIB" ]; then ok "--threads $t: peak RSS $((rss / 1024)) MiB <= 64 MiB"
  else bad "--threads $t: peak RSS $((rss / 1024)) MiB > 64 MiB"; fi
  if [ -z "$first" ]; then first=$W/out.$t.pb
  elif cmp -s "$first" "$W/out.$t.pb"; then ok "--threads $t: same bytes as --threads 1"; rm -f "$W/out.$t.pb"
  else bad "--threads $t: output differs from --threads 1"; fi
done

# The same merge inside a memory cgroup capped at 64 MiB (page cache of
# the output included, which the kernel reclaims as it goes): the cap is
# enforced, not just measured.  Needs root and a writable memory
# controller (cgroup v2 or v1); skipped, saying why, where there is none.
memcg_dir() {
  local v2=/sys/fs/cgroup
  if [ -f "$v2/cgroup.subtree_control" ] &&
     grep -qw memory "$v2/cgroup.subtree_control" 2>/dev/null &&
     mkdir "$v2/vp_rss.$$" 2>/dev/null; then
    echo $((64 << 20)) >"$v2/vp_rss.$$/memory.max" 2>/dev/null &&
      { echo 0 >"$v2/vp_rss.$$/memory.swap.max"; } 2>/dev/null
    echo "$v2/vp_rss.$$"; return 0
  fi
  local v1=/sys/fs/cgroup/memory
  if [ -f "$v1/memory.limit_in_bytes" ] && mkdir "$v1/vp_rss.$$" 2>/dev/null; then
    echo $((64 << 20)) >"$v1/vp_rss.$$/memory.limit_in_bytes" &&
      { echo 0 >"$v1/vp_rss.$$/memory.swappiness"; } 2>/dev/null
    echo "$v1/vp_rss.$$"; return 0
  fi
  return 1
}
if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
  echo "# skip: 64 MiB memory cgroup: not under a sanitizer (its shadow memory is not the merge's)"
elif ! cg=$(memcg_dir); then
  echo "# skip: 64 MiB memory cgroup: no writable memory controller here (needs root and cgroup v1 or v2 with memory)"
else
  for t in $(printf '%s\n' 2 "$ncpu" | sort -nu); do
    [ "$t" -le "$ncpu" ] || continue
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
      "$MERGE" -q --threads "$t" "$W/host.pb" "$W/guest.pb" \
      -o "$W/cg.$t.pb" 2>"$W/log"
    st=$?
    if [ $st -ne 0 ]; then
      bad "--threads $t in a 64 MiB memory cgroup: exit $st$([ $st -eq 137 ] && echo ' (killed at the cap)')"
      sed 's/^/    /' "$W/log"
    elif cmp -s "$first" "$W/cg.$t.pb"; then
      ok "--threads $t in a 64 MiB memory cgroup: same bytes as without"
    else
      bad "--threads $t in a 64 MiB memory cgroup: output differs"
    fi
    rm -f "$W/cg.$t.pb"
  done
  rmdir "$cg" 2>/dev/null || true
fi
rm -f "$W"/*.pb

# The sync data is bounded too: 600k samples a side (10 minutes every
# 1 ms), of which the scan keeps an even spread (sync_scan.h).
"$TG" --host "$W/sh.pb" --guest "$W/sg.pb" --seed 7 --duration-s 600 \
  --sync-period-ms 1 --events 2000 --exchanges 200000 >/dev/null
if rss_case "600k sync samples" "$LIMIT_KIB" \
     "$MERGE" "$W/sh.pb" "$W/sg.pb" -o "$W/s.out.pb"; then
  if grep -q "left out, an even spread of them kept" "$W/log"; then ok "600k sync samples: the thinning is reported"
  else bad "600k sync samples: the thinning is reported"; sed 's/^/    /' "$W/log"; fi
fi
# Every input's sync data is held at once: four such guests (the same
# file four times) keep a share each, not four times as much (70 MiB
# before they did).
rm -f "$W/s.out.pb"
if rss_case "four guests of 600k sync samples" "$LIMIT_KIB" \
     "$MERGE" "$W/sh.pb" "$W/sg.pb" "$W/sg.pb" "$W/sg.pb" "$W/sg.pb" \
     -o "$W/s4.out.pb"; then
  if grep -q "more than 52428 of a kind were left out" "$W/log"; then ok "four guests of 600k sync samples: each keeps 2/5 of 131072"
  else bad "four guests of 600k sync samples: each keeps 2/5 of 131072"; sed 's/^/    /' "$W/log"; fi
fi
rm -f "$W/s4.out.pb"

APPEND=$(dirname "$0")/append_packets.py
CHECK=$(dirname "$0")/check_big_output.py
"$TG" --host "$W/h.pb" --guest "$W/bg.pb" --seed 8 --duration-s 2 \
  --events 200 >/dev/null

# A host packet of 60 MiB is copied from file to output in pieces, never
# held whole.
python3 "$APPEND" bigpacket "$W/h.pb" "$W/bh.pb" 60
if rss_case "a 60 MiB host packet" $((16 * 1024)) \
     "$MERGE" -q "$W/bh.pb" "$W/bg.pb" -o "$W/b.out.pb"; then
  if cmp -s -n "$(stat -c %s "$W/bh.pb")" "$W/bh.pb" "$W/b.out.pb"; then ok "a 60 MiB host packet: the host copied byte for byte"
  else bad "a 60 MiB host packet: the host copied byte for byte"; fi
fi
# --concat copies it in pieces too: the two files as they are, as one.
if rss_case "--concat of a 60 MiB host packet" $((16 * 1024)) \
     "$MERGE" -q --concat "$W/bh.pb" "$W/bg.pb" -o "$W/b.out.pb"; then
  if cat "$W/bh.pb" "$W/bg.pb" | cmp -s - "$W/b.out.pb"; then ok "--concat of a 60 MiB host packet: the bytes of both inputs"
  else bad "--concat of a 60 MiB host packet: the bytes of both inputs"; fi
fi

# A guest packet of 60 MiB of a field the rewrite copies as it is: the
# field passes from file to output in pieces, never held whole; the
# output is the merge without it, then the packet with its machine_id.
python3 "$APPEND" bigpacket "$W/bg.pb" "$W/bgb.pb" 60
"$MERGE" -q "$W/h.pb" "$W/bg.pb" -o "$W/bg.out.pb" 2>"$W/log" ||
  { bad "a 60 MiB guest packet: the merge without it"; sed 's/^/    /' "$W/log"; }
for t in 1 2; do
  if rss_case "a 60 MiB guest packet, --threads $t" $((16 * 1024)) \
       "$MERGE" -q --threads $t "$W/h.pb" "$W/bgb.pb" -o "$W/bgb.out.pb"; then
    if python3 "$CHECK" passed "$W/bg.out.pb" "$W/bgb.out.pb"
    then ok "a 60 MiB guest packet, --threads $t: its field passed byte for byte"
    else bad "a 60 MiB guest packet, --threads $t: the output"; fi
  fi
done

# A track event of 60 MiB, a sync sample with a 60 MiB debug annotation
# beside its values: the scan finds its sample reading only its names and
# values, and the rewrite passes the annotation from file to output; on
# the host side as on the guest's.  The same samples as the event with a
# small annotation gives, the same bytes on 1 and 2 threads.
python3 "$APPEND" bigevent "$W/bg.pb" "$W/be.pb" "$W/bes.pb" 60
python3 "$APPEND" bigevent "$W/h.pb" "$W/bhe.pb" "$W/bhes.pb" 60
"$MERGE" "$W/h.pb" "$W/bes.pb" -o "$W/bes.out.pb" 2>"$W/small.log"
"$MERGE" "$W/bhes.pb" "$W/bg.pb" -o "$W/bes.out.pb" 2>"$W/hsmall.log"
samples() { grep -Eo '[0-9]+ (BOOTTIME sync )?samples \([0-9]+ rejected\)|[0-9]+ BOOTTIME sync samples, [0-9 a-z(),]* rejected' "$1"; }
for t in 1 2; do
  if rss_case "a 60 MiB guest track event, --threads $t" $((16 * 1024)) \
       "$MERGE" --threads $t "$W/h.pb" "$W/be.pb" -o "$W/be.$t.pb"; then
    if [ -n "$(samples "$W/log")" ] && [ "$(samples "$W/log")" = "$(samples "$W/small.log")" ]
    then ok "a 60 MiB guest track event, --threads $t: its sync sample found"
    else bad "a 60 MiB guest track event, --threads $t: its sync sample found"; sed 's/^/    /' "$W/log" "$W/small.log"; fi
  fi
done
if cmp -s "$W/be.1.pb" "$W/be.2.pb"; then ok "a 60 MiB guest track event: the same bytes on 1 and 2 threads"
else bad "a 60 MiB guest track event: the same bytes on 1 and 2 threads"; fi
if rss_case "a 60 MiB host track event" $((16 * 1024)) \
     "$MERGE" "$W/bhe.pb" "$W/bg.pb" -o "$W/bhe.out.pb"; then
  if [ -n "$(samples "$W/log")" ] && [ "$(samples "$W/log")" = "$(samples "$W/hsmall.log")" ] &&
     cmp -s -n "$(stat -c %s "$W/bhe.pb")" "$W/bhe.pb" "$W/bhe.out.pb"
  then ok "a 60 MiB host track event: its sync sample found, the host copied byte for byte"
  else bad "a 60 MiB host track event: its sync sample found, the host copied byte for byte"; sed 's/^/    /' "$W/log" "$W/hsmall.log"; fi
fi
rm -f "$W"/be*.pb "$W"/bhe*.pb

# Interned data and a process tree of 60 MiB: the scan reads only the
# names and ids it looks for, the rewrite passes them as they are.
for kind in biginterned:12 bigtree:2; do
  num=${kind#*:} kind=${kind%:*}
  python3 "$APPEND" $kind "$W/bg.pb" "$W/bk.pb" 60
  for t in 1 2; do
    if rss_case "$kind of 60 MiB, --threads $t" $((16 * 1024)) \
         "$MERGE" -q --threads $t "$W/h.pb" "$W/bk.pb" -o "$W/bk.$t.pb" &&
       python3 "$CHECK" field "$num" "$W/bk.pb" "$W/bg.out.pb" "$W/bk.$t.pb"
    then ok "$kind of 60 MiB, --threads $t: passed byte for byte"
    else bad "$kind of 60 MiB, --threads $t: passed byte for byte"; fi
  done
  rm -f "$W"/bk*.pb
done
# The same process tree with --no-machine-id, which remaps its pids: its
# processes are rewritten a chunk at a time, like a bundle's events.
python3 "$APPEND" bigtree "$W/bg.pb" "$W/bk.pb" 60
"$MERGE" -q --no-machine-id "$W/h.pb" "$W/bg.pb" -o "$W/bgn.out.pb"
for t in 1 2; do
  if rss_case "bigtree of 60 MiB, --no-machine-id --threads $t" $((16 * 1024)) \
       "$MERGE" -q --no-machine-id --threads $t "$W/h.pb" "$W/bk.pb" -o "$W/bk.$t.pb" &&
     python3 "$CHECK" remapped 2 "$W/bk.pb" "$W/bgn.out.pb" "$W/bk.$t.pb"
  then ok "bigtree of 60 MiB, --no-machine-id --threads $t: its pids remapped, the rest as it is"
  else bad "bigtree of 60 MiB, --no-machine-id --threads $t: its pids remapped, the rest as it is"; fi
done
rm -f "$W"/bk*.pb "$W/bgn.out.pb"

# A guest ftrace bundle of 56 MiB: its events are all rewritten, a chunk
# at a time (merge/partition_large.c), not read whole; they come out as
# the same events in bundles of 1000 do.  (Remapped, its timestamps are a
# byte longer: it comes out 60 MiB long.)
python3 "$APPEND" bigbundle "$W/bg.pb" "$W/bb.pb" "$W/bs.pb" 56
"$MERGE" -q "$W/h.pb" "$W/bs.pb" -o "$W/bs.out.pb" 2>"$W/log" ||
  { bad "a 56 MiB guest ftrace bundle: the merge of its events in small bundles"; sed 's/^/    /' "$W/log"; }
for t in 1 2; do
  if rss_case "a 56 MiB guest ftrace bundle, --threads $t" $((16 * 1024)) \
       "$MERGE" -q --threads $t "$W/h.pb" "$W/bb.pb" -o "$W/bb.out.pb"; then
    if python3 "$CHECK" events "$W/bg.out.pb" "$W/bb.out.pb" "$W/bs.out.pb"
    then ok "a 56 MiB guest ftrace bundle, --threads $t: its events rewritten as in small bundles"
    else bad "a 56 MiB guest ftrace bundle, --threads $t: the output"; fi
  fi
done

# A bundle of 61 MiB would come out over the 64 MiB a packet may be (what
# every reader of the output accepts): the merge refuses it, naming the
# packet, and leaves no output.
python3 "$APPEND" bigbundle "$W/bg.pb" "$W/bb.pb" "$W/bs.pb" 61
bb_off=$(( $(stat -c %s "$W/bg.pb") ))
rm -f "$W/bbo.pb"
if "$MERGE" -q "$W/h.pb" "$W/bb.pb" -o "$W/bbo.pb" 2>"$W/log"; then
  bad "a 61 MiB guest ftrace bundle: refused (it would grow past 64 MiB)"
elif grep -q "bb.pb: byte offset $((bb_off + 5)): this packet would come out [0-9]* bytes long, over the 64 MiB" "$W/log" &&
     [ ! -e "$W/bbo.pb" ]; then
  ok "a 61 MiB guest ftrace bundle: refused, naming it, no output left"
else
  bad "a 61 MiB guest ftrace bundle: refused, naming it, no output left"; sed 's/^/    /' "$W/log"
fi
rm -f "$W/bb.pb" "$W/bs.pb"

# Parts of a packet the merge reads whole (a clock snapshot, packet
# defaults, a single ftrace event): a packet with one of 12 MiB is
# merged within 64 MiB; one of 60 MiB would not be, so it is refused
# (exit 2), naming the packet, with no output left (merge_limits.h).
python3 "$APPEND" bigwhole "$W/bg.pb" "$W/bw.pb" defaults 12
for t in 1 2; do
  rss_case "packet defaults of 12 MiB, --threads $t" "$LIMIT_KIB" \
    "$MERGE" -q --threads $t "$W/h.pb" "$W/bw.pb" -o "$W/bw.out.pb"
done
bw_off=$(stat -c %s "$W/bg.pb")
for part in snapshot defaults print; do
  python3 "$APPEND" bigwhole "$W/bg.pb" "$W/bw.pb" $part 60
  for t in 1 2; do
    rm -f "$W/bw.out.pb"
    /usr/bin/time -f %M -o "$W/rss" "$MERGE" -q --threads $t "$W/h.pb" "$W/bw.pb" -o "$W/bw.out.pb" 2>"$W/log"
    st=$? rss=$(tail -1 "$W/rss")
    # (under a sanitizer the RSS is its shadow memory's: not judged)
    [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] && rss=0
    if [ $st -eq 2 ] && [ ! -e "$W/bw.out.pb" ] && [ "$rss" -le $((16 * 1024)) ] &&
       grep -q "bw.pb: byte offset $bw_off: a packet of 60.0 MiB that would be held whole" "$W/log"
    then ok "a $part of 60 MiB, --threads $t: refused (exit 2) naming the packet, within 16 MiB"
    else bad "a $part of 60 MiB, --threads $t: exit $st, peak RSS $((rss / 1024)) MiB"; sed 's/^/    /' "$W/log"; fi
  done
done
rm -f "$W"/bw*.pb

# compressed_case NAME LIMIT_KIB KIND ARG: append_packets.py KIND writes
# a guest with one compressed packet (bz.pb) and with the same packets
# uncompressed (bzp.pb); on 1 and 2 threads the merge of bz.pb must stay
# within LIMIT_KIB and hold inside its compressed packets, one after
# another, the bytes the merge of bzp.pb writes for them.
compressed_case() {
  local name=$1 limit=$2
  python3 "$APPEND" "$3" "$W/bg.pb" "$W/bz.pb" "$W/bzp.pb" "$4"
  "$MERGE" -q "$W/h.pb" "$W/bzp.pb" -o "$W/bzp.out.pb" 2>"$W/log" ||
    { bad "$name: the merge of its packets uncompressed"; sed 's/^/    /' "$W/log"; }
  for t in 1 2; do
    if rss_case "$name, --threads $t" "$limit" \
         "$MERGE" -q --threads $t "$W/h.pb" "$W/bz.pb" -o "$W/bz.out.pb"; then
      if python3 "$CHECK" compressed "$W/bg.out.pb" "$W/bz.out.pb" "$W/bzp.out.pb"
      then ok "$name, --threads $t: the packets inside rewritten as uncompressed"
      else bad "$name, --threads $t: the output"; fi
    fi
  done
}

# A compressed packet of 4.6 MB that inflates to 57 MB of small packets:
# inflated from the file as it is read, rewritten and deflated again a
# chunk at a time (merge/compressed.c), never whole.
compressed_case "a compressed packet of 4.6 MB inflating to 57 MB" \
  $((40 * 1024)) bigcompressed 2500000

# A compression bomb: a compressed packet of a few KB that inflates to
# one packet of 60 MiB.  That packet is written aside as it inflates and
# rewritten from there as a large packet of a trace is (its annotation
# passed from file to output), never held whole.
compressed_case "a compression bomb (a few KB holding a 60 MiB packet)" \
  $((16 * 1024)) bomb 60
# With no $TMPDIR to write in, the packet is held in memory instead: the
# same output.
if TMPDIR=$W/none "$MERGE" -q "$W/h.pb" "$W/bz.pb" -o "$W/bzn.out.pb" 2>"$W/log" &&
   cmp -s "$W/bz.out.pb" "$W/bzn.out.pb"
then ok "compression bomb, \$TMPDIR missing: held in memory, the same output"
else bad "compression bomb, \$TMPDIR missing: the same output"; sed 's/^/    /' "$W/log"; fi
rm -f "$W"/bz*.pb

# A compressed packet of 60 MiB of data that does not compress: inflated
# as it is read from the file, and deflated again into packets of about
# 1 MiB, so that neither it nor its output is held whole.
compressed_case "a compressed packet of 60 MiB that does not compress" \
  $((24 * 1024)) randcompressed 60
rm -f "$W"/bz*.pb

# A malformed packet of 2 MiB inside compressed_packets, handled from its
# file aside: the message names the compressed packet in the input.
python3 "$APPEND" badinside "$W/bg.pb" "$W/bzb.pb"
"$MERGE" -q "$W/h.pb" "$W/bzb.pb" -o "$W/bzb.out.pb" 2>"$W/log"
st=$?
if [ $st -eq 2 ] && [ ! -e "$W/bzb.out.pb" ] &&
   grep -q "bzb.pb: byte offset $(($(stat -c %s "$W/bg.pb") + 3)): in a packet inside compressed_packets" "$W/log"
then ok "a malformed 2 MiB packet inside compressed_packets: exit 2 naming the compressed packet"
else bad "a malformed 2 MiB packet inside compressed_packets: exit $st"; sed 's/^/    /' "$W/log"; fi
rm -f "$W"/bzb*.pb

# Sequences: the rewrite keeps state for each, so a trace may have at
# most 65536 (SYNC_MAX_SEQUENCES).  That many stay within 64 MiB; one
# more is refused at the packet that opens it.
python3 "$APPEND" sequences "$W/bg.pb" "$W/s65k.pb" 65500
python3 "$APPEND" sequences "$W/bg.pb" "$W/s66k.pb" 65600
rss_case "65500 sequences" "$LIMIT_KIB" \
  "$MERGE" -q "$W/h.pb" "$W/s65k.pb" -o "$W/s.out.pb"
# The scan's state of each sequence goes once that input is scanned, not
# at the end with every guest's sync data (16 such guests: 76 MiB).
rss_case "16 guests of 65500 sequences" "$LIMIT_KIB" \
  "$MERGE" -q "$W/h.pb" $(for _ in $(seq 16); do echo "$W/s65k.pb"; done) \
  -o "$W/s.out.pb"
"$MERGE" -q "$W/h.pb" "$W/s66k.pb" -o "$W/s.out.pb" 2>"$W/log"
st=$?
if [ $st -eq 2 ] && grep -Eq "s66k.pb: byte offset [0-9]+: sequence [0-9]+ is one more than the 65536 packet sequences" "$W/log"; then
  ok "65600 sequences: refused (exit 2) at the packet past the limit"
else
  bad "65600 sequences: refused (exit $st)"; sed 's/^/    /' "$W/log"
fi
echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
