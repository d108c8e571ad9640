#!/usr/bin/env bash
# merge_android_log.sh - a guest's logcat entries land on the host's axis.
#
# An android_log entry carries its own time, CLOCK_REALTIME, inside the
# payload; a trace processor converts it through the clock snapshots of
# the packet's machine: REALTIME to BOOTTIME through the snapshot at or
# before it.  The merge keeps each guest snapshot's REALTIME as it was and
# moves its BOOTTIME onto the host's axis, so an entry written d ns after
# the guest's snapshot k (in REALTIME) must read as snapshot k's merged
# BOOTTIME + d, on the guest's machine, in vperfetto_tp and, where it is
# built (PERFETTO_BIN, default ~/.cache/perfetto-real/bin), in Perfetto's
# trace_processor_shell.  With --no-machine-id the guest's REALTIME
# snapshots are left out (the host's hold that clock), and the merge
# moves each entry's timestamp onto the host's REALTIME instead.
#
# Usage: merge_android_log.sh BUILD_ROOT
set -u
B=$1
LIB=$(cd "$(dirname "$0")/../lib" && pwd)
. "$LIB/e2e_lib.sh"
E2E_TP=$B/processor/vperfetto_tp
MERGE=$B/merge/vperfetto_merge
GEN=$B/tests/vperfetto_tracegen
e2e_init merge_android_log
t=$E2E_DIR

"$GEN" --host "$t/h.pb" --guest "$t/g.pb" --seed 9 --duration-s 5 \
	--events 300 --params-out "$t/p.txt" >/dev/null ||
	{ echo "FAIL: tracegen"; exit 1; }

# The guest with 4 entries written d ns after its snapshots k (REALTIME),
# each entry's message "k d".
python3 "$LIB/clock_edit.py" guest-logcat "$t/g.pb" "$t/guest.pb"
[ -s "$t/guest.pb" ] || { echo "FAIL: no guest trace"; exit 1; }

# expected TRACE: "k d ts" of each entry, ts = snapshot k's BOOTTIME in
# the merged trace (the k-th guest snapshot with REALTIME) + d.
expected() {
	python3 - "$1" "$LIB" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from pb_walk import fields, packets, snapshot_clocks
snaps = []
for pkt in packets(open(sys.argv[1], 'rb').read()):
    f = dict(fields(pkt))
    if 6 not in f or not f.get(98):
        continue
    clocks = snapshot_clocks(f[6])
    if 1 in clocks and 6 in clocks:
        snaps.append(clocks[6])
for k in (1, 3):
    for d in (1000, 5000000):
        print(k, d, snaps[k] + d)
PY
}

check "merge" "$MERGE" -q "$t/h.pb" "$t/guest.pb" -o "$t/m.pb"
want=$(expected "$t/m.pb")
got=$(query_rows "$t/m.pb" "select l.msg || ' ' || l.ts from android_logs l
	join thread t using (utid) join machine m on t.machine_id = m.id
	where m.raw_id = 1 order by l.ts")
check "vperfetto_tp: the entries on the guest's machine, at snapshot + d
# want: $(echo $want)
# got:  $(echo $got)" [ "$(echo $got)" = "$(echo $want)" ]

# --no-machine-id: the host's REALTIME (a snapshot put first in the host
# trace, REALTIME 1.6e18 at its first BOOTTIME) holds for every entry,
# whose time the merge moves onto it; the entries then read as before,
# but for the fit's drift over d (well within 1 us), with tids moved
# clear of the host's.
python3 "$LIB/clock_edit.py" host-realtime "$t/h.pb" "$t/host.pb"
check "merge --no-machine-id" "$MERGE" -q "$t/host.pb" "$t/guest.pb" \
	-o "$t/n.pb" --no-machine-id --report "$t/n.json"
nm=$(query_rows "$t/n.pb" "select l.msg || ' ' || l.ts || ' ' || t.tid
	from android_logs l join thread t using (utid) order by l.ts")
close=$(printf '%s\n' "$want" | paste - <(printf '%s\n' "$nm") | awk '
	NF == 7 && $1 == $4 && $2 == $5 && ($3 - $6) ^ 2 <= 1e6 &&
	$7 == 4194304 + 701 { n++ } END { print n + 0 }')
check "--no-machine-id: the 4 entries within 1 us, tid moved (got: $(echo $nm))" \
	[ "$close" = 4 ]
check "--no-machine-id: the report counts them" \
	grep -q '"android_log_timestamps": 4' "$t/n.json"

PB=${PERFETTO_BIN:-$HOME/.cache/perfetto-real/bin}
if [ -x "$PB/trace_processor_shell" ]; then
	echo "select l.msg || ' ' || l.ts from android_logs l join thread t
	using (utid) join machine m on t.machine_id = m.id where m.raw_id = 1
	order by l.ts" >"$t/q.sql"
	got=$(LD_LIBRARY_PATH=$PB "$PB/trace_processor_shell" -q "$t/q.sql" \
		"$t/m.pb" 2>"$t/ptp.log" | tail -n +2 | tr -d '"')
	check "Perfetto: the same
# got:  $(echo $got)" [ "$(echo $got)" = "$(echo $want)" ]
	echo "select l.msg || ' ' || l.ts || ' ' || t.tid from android_logs l
	join thread t using (utid) order by l.ts" >"$t/q.sql"
	pn=$(LD_LIBRARY_PATH=$PB "$PB/trace_processor_shell" -q "$t/q.sql" \
		"$t/n.pb" 2>>"$t/ptp.log" | tail -n +2 | tr -d '"')
	check "Perfetto, --no-machine-id: as vperfetto_tp reads it
# got:  $(echo $pn)" [ "$(echo $pn)" = "$(echo $nm)" ]
else
	echo "SKIP: Perfetto's trace_processor_shell is not built ($PB)"
fi

e2e_finish merge_android_log
