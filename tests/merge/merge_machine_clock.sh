#!/usr/bin/env bash
# merge_machine_clock.sh - every guest machine keeps the host's trace clock.
#
# Perfetto's trace processor has a clock tracker per machine; a
# ClockSnapshot with BOOTTIME that a machine's tracker parses before it has
# converted any timestamp makes that machine's BOOTTIME the trace's clock
# (ProtoTraceReader::ParseClockSnapshot -> ClockTracker::SetGlobalClock).
# With two guests the second then took it from the first, and the packets
# of machine 1 written after machine 2's (--vm-tracks) found no clock path:
# clock_sync_failure_no_path, and machine 1's "vCPU N host state" tracks
# were missing.  The merge writes a timestamped packet first on each guest
# machine, so no guest snapshot is a machine's first conversion.  Checked
# in the output's packet order (always) and, where Perfetto's
# trace_processor_shell is built (PERFETTO_BIN, default
# ~/.cache/perfetto-real/bin), by loading the merge with it.
#
# Usage: merge_machine_clock.sh BUILD_ROOT
set -u
B=$1
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_TP=$B/processor/vperfetto_tp
MERGE=$B/merge/vperfetto_merge
GEN=$B/tests/vperfetto_tracegen
VGEN=$B/tests/vperfetto_vcpu_gen
e2e_init merge_machine_clock
t=$E2E_DIR

"$GEN" --host "$t/h.pb" --guest "$t/g.pb" --seed 5 --duration-s 1 \
	--events 200 --params-out "$t/p.txt" >/dev/null ||
	{ echo "FAIL: tracegen"; exit 1; }
hb0=$(sed -n 's/^hb0=//p' "$t/p.txt")
gb0=$(sed -n 's/^gb0=//p' "$t/p.txt")
"$VGEN" $((hb0 + 100000000)) $((gb0 + 100000000)) 1000 "$t/hx.pb" \
	"$t/gx.pb" || { echo "FAIL: vcpu_gen"; exit 1; }
cat "$t/h.pb" "$t/hx.pb" >"$t/host.pb"
cat "$t/g.pb" "$t/gx.pb" >"$t/guest.pb"

# Two guests; the first is the scenario's VM (vmm pid 1000), the second
# has none, so machine 1's tracks come after machine 2's packets.
check "merge --vm-tracks, two guests" "$MERGE" -q "$t/host.pb" \
	"$t/guest.pb" "$t/guest.pb" -o "$t/m.pb" --vm-tracks \
	--guest-vm-pid 1000 --guest-vm-pid 77
check "merge, one guest" "$MERGE" -q "$t/host.pb" "$t/guest.pb" \
	-o "$t/m1.pb" --vm-tracks

# A machine whose first ClockSnapshot comes before its first packet with
# a timestamp to convert takes Perfetto's trace clock.
first_conversion() { # TRACE
	python3 - "$1" "$(dirname "$0")/../lib" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
from pb_walk import fields, packets

converted, bad = set(), set()
for pkt in packets(open(sys.argv[1], 'rb').read()):
    f = dict(fields(pkt))
    m = f.get(98, 0)  # machine_id
    if not m:
        continue
    if 6 in f:        # clock_snapshot
        if m not in converted:
            bad.add(m)
    elif 8 in f:      # timestamp
        converted.add(m)
print(' '.join(str(m) for m in sorted(bad)) or 'none')
EOF
}
got=$(first_conversion "$t/m.pb")
check "no guest machine's snapshot comes before its first timestamp (got: $got)" \
	[ "$got" = none ]
got=$(first_conversion "$t/m1.pb")
check "one guest: the same (got: $got)" [ "$got" = none ]

expect "vperfetto_tp: machine 1's vCPU tracks" "$t/m.pb" \
	"select count(*) from track t join machine m on t.machine_id = m.id
	 where t.name like 'vCPU % host state' and m.raw_id = 1" 2

PB=${PERFETTO_BIN:-$HOME/.cache/perfetto-real/bin}
if [ -x "$PB/trace_processor_shell" ]; then
	pq() { # TRACE SQL: the last line Perfetto's processor prints
		echo "$2" >"$t/q.sql"
		LD_LIBRARY_PATH=$PB "$PB/trace_processor_shell" -q "$t/q.sql" \
			"$1" 2>>"$t/ptp.log" | tail -n 1
	}
	for m in m m1; do
		got=$(pq "$t/$m.pb" "select ifnull(sum(value), 0) from stats
			where name like 'clock_sync_failure%'")
		check "Perfetto, $m.pb: no clock_sync_failure (got: $got)" \
			[ "$got" = 0 ]
		got=$(pq "$t/$m.pb" "select count(*) from track t join machine m
			on t.machine_id = m.id where t.name like 'vCPU % host state'
			and m.raw_id = 1")
		check "Perfetto, $m.pb: machine 1's vCPU tracks (got: $got)" \
			[ "$got" = 2 ]
	done
	# The guest's times are those of the one-guest merge.
	sq="select s.ts, s.dur, s.name from slice s join track t on
	    s.track_id = t.id join machine m on t.machine_id = m.id where
	    m.raw_id = 1 order by 1, 2, 3"
	check "Perfetto: machine 1's slices as with one guest" \
		[ "$(pq "$t/m.pb" "select count(*), sum(ts), sum(dur) from ($sq)")" \
		= "$(pq "$t/m1.pb" "select count(*), sum(ts), sum(dur) from ($sq)")" ]
else
	echo "SKIP: Perfetto's trace_processor_shell is not built ($PB)"
fi

e2e_finish merge_machine_clock
