#!/usr/bin/env bash
# merge_shared_clock.sh - --no-machine-id with two guests: the guests'
# ClockSnapshots are valid on the host's machine.
#
# Without machine_id a trace processor takes every guest's global clocks
# for the host machine's.  Perfetto's clock tracker keeps, per clock, one
# series of values for each set of clocks snapshotted together, and drops
# a snapshot in which the trace clock goes back in its series
# (invalid_clock_snapshots; another clock going back there is made
# non-monotonic instead, clock_synchronizer.cc).  The second guest's
# snapshots of BOOTTIME, MONOTONIC and REALTIME went back against the
# first's.  The merge writes of them only what is on the output axis, and
# a snapshot of global clocks only when it goes on from the guests' before;
# the guests' times must stay those of the merge with machine ids.  Checked
# with a model of that rule (always) and, where Perfetto's
# trace_processor_shell is built (PERFETTO_BIN, default
# ~/.cache/perfetto-real/bin), by loading the merge with it.
#
# Usage: merge_shared_clock.sh BUILD_ROOT
set -u
B=$1
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_TP=$B/processor/vperfetto_tp
MERGE=$B/merge/vperfetto_merge
GEN=$B/tests/vperfetto_tracegen
e2e_init merge_shared_clock
t=$E2E_DIR

"$GEN" --host "$t/h.pb" --guest "$t/g.pb" --seed 7 --duration-s 3 \
	--events 600 --exchanges 10 >/dev/null ||
	{ echo "FAIL: tracegen"; exit 1; }
# The same guest twice: the second's snapshots overlap the first's.
check "merge --no-machine-id, two guests" "$MERGE" -q "$t/h.pb" "$t/g.pb" \
	"$t/g.pb" -o "$t/nm.pb" --no-machine-id
check "merge with machine ids" "$MERGE" -q "$t/h.pb" "$t/g.pb" "$t/g.pb" \
	-o "$t/m.pb"
check "merge --no-machine-id, one guest" "$MERGE" -q "$t/h.pb" "$t/g.pb" \
	-o "$t/nm1.pb" --no-machine-id

# The rule of Perfetto's ClockSynchronizer::AddSnapshot: per machine, per
# set of clocks of a snapshot (a sequence-scoped one is its sequence's),
# no global clock goes back.  Prints the snapshots that break it.
backwards() { # TRACE
	python3 - "$1" "$(dirname "$0")/../lib" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
from pb_walk import fields, packets

bad = 0
last = {}
for pkt in packets(open(sys.argv[1], 'rb').read()):
    f = list(fields(pkt))
    env = {k: v for k, v in f if not isinstance(v, bytes)}
    for k, snap in f:
        if k != 6 or not isinstance(snap, bytes):
            continue
        clocks = []
        for ck, c in fields(snap):
            if ck == 1 and isinstance(c, bytes):
                c = dict(fields(c))
                cid = c.get(1, 0)
                key = (cid, env.get(10, 0)) if 64 <= cid < 128 else (cid, 0)
                clocks.append((key, c.get(2, 0) * (c.get(3) or 1)))
        series = (env.get(98, 0), frozenset(k for k, _ in clocks))
        for key, ts in clocks:
            if key[1]:
                continue  # sequence-scoped: its sequence's own
            prev = last.get((series, key))
            if prev is not None and ts < prev:
                bad += 1
            last[(series, key)] = ts
print(bad)
EOF
}
got=$(backwards "$t/nm.pb")
check "no guest snapshot goes back on the host's machine (got: $got)" \
	[ "$got" = 0 ]
got=$(backwards "$t/m.pb")
check "with machine ids: none either (got: $got)" [ "$got" = 0 ]

# The guests' times: those of the merge with machine ids.
rows='select ts, dur, name from slice order by 1, 2, 3'
query_rows "$t/m.pb" "$rows" >"$t/m.rows"
query_rows "$t/nm.pb" "$rows" >"$t/nm.rows"
check "vperfetto_tp: the slices of the merge with machine ids" \
	cmp -s "$t/m.rows" "$t/nm.rows"

PB=${PERFETTO_BIN:-$HOME/.cache/perfetto-real/bin}
if [ -x "$PB/trace_processor_shell" ]; then
	pq() { # TRACE SQL: Perfetto's processor's rows
		echo "$2" >"$t/q.sql"
		LD_LIBRARY_PATH=$PB "$PB/trace_processor_shell" -q "$t/q.sql" \
			"$1" 2>>"$t/ptp.log"
	}
	for m in nm nm1 m; do
		got=$(pq "$t/$m.pb" "select ifnull(sum(value), 0) from stats
			where name = 'invalid_clock_snapshots' or
			name like 'clock_sync_failure%'" | tail -n 1)
		check "Perfetto, $m.pb: no invalid snapshot, no clock failure (got: $got)" \
			[ "$got" = 0 ]
	done
	# Everything but the legacy microseconds, which go through each
	# guest's MONOTONIC with machine ids and through the one shared
	# MONOTONIC without (tens of ns apart).
	pr='select ts, dur, name from slice where name != "legacy_event"
	    union all select ts, 0, "sched" from sched
	    union all select ts, 0, "ftrace" from ftrace_event order by 1, 2, 3'
	pq "$t/m.pb" "$pr" >"$t/pm.rows"
	pq "$t/nm.pb" "$pr" >"$t/pnm.rows"
	check "Perfetto: the times of the merge with machine ids ($(wc -l <"$t/pm.rows") rows)" \
		cmp -s "$t/pm.rows" "$t/pnm.rows"
	got=$(pq "$t/nm.pb" "select count(*) from slice where name =
		'legacy_event'" | tail -n 1)
	check "Perfetto: the legacy events are there ($got)" \
		[ "$got" = "$(pq "$t/m.pb" "select count(*) from slice where
			name = 'legacy_event'" | tail -n 1)" ]
else
	echo "SKIP: Perfetto's trace_processor_shell is not built ($PB)"
fi

e2e_finish merge_shared_clock
