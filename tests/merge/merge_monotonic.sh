#!/usr/bin/env bash
# merge_monotonic.sh - with --clock monotonic a guest lands where it does
# on BOOTTIME, in vperfetto_tp and in Perfetto's trace_processor_shell.
#
# A trace processor's trace clock is BOOTTIME whatever the merge's axis:
# it converts each machine's MONOTONIC through that machine's snapshots.
# So onto the host's MONOTONIC a guest's snapshots must hold the host's
# BOOTTIME too (through the host's own MONOTONIC/BOOTTIME snapshots), and
# its ftrace times, which carry no clock id and are read as BOOTTIME, go
# onto the host's BOOTTIME.  The host here is the generator's with a
# MONOTONIC 5 ms behind BOOTTIME in every snapshot (a suspend), and a
# first snapshot with REALTIME; the guest has 4 logcat entries.  Each
# guest event must then read as it does in the BOOTTIME merge: ftrace
# and logcat to the nanosecond, slices within 1 us, but for events on the
# guest's sequence-scoped clock, which the merge leaves as they are
# (their snapshot has no MONOTONIC), placed through their snapshot's
# BOOTTIME: within 100 us (the guest's drift over the ticks' distance
# from it).  With --no-machine-id, where the host's snapshots are the
# only ones of global clocks, ftrace and logcat must read the same too.
# And, the other way round, a guest's legacy microseconds (MONOTONIC by
# definition) with --no-machine-id onto BOOTTIME, and the host onto a
# guest's MONOTONIC (--onto guest --clock monotonic).
#
# Usage: merge_monotonic.sh BUILD_ROOT
set -u
B=$1
LIB=$(cd "$(dirname "$0")/../lib" && pwd)
. "$LIB/e2e_lib.sh"
E2E_TP=$B/processor/vperfetto_tp
MERGE=$B/merge/vperfetto_merge
GEN=$B/tests/vperfetto_tracegen
e2e_init merge_monotonic
t=$E2E_DIR

"$GEN" --host "$t/h.pb" --guest "$t/g.pb" --seed 9 --duration-s 5 \
	--events 300 >/dev/null || { echo "FAIL: tracegen"; exit 1; }

python3 "$LIB/clock_edit.py" host-realtime "$t/h.pb" "$t/host.pb" 5000000
python3 "$LIB/clock_edit.py" guest-logcat "$t/g.pb" "$t/guest.pb"
[ -s "$t/host.pb" ] && [ -s "$t/guest.pb" ] ||
	{ echo "FAIL: no traces"; exit 1; }

not_grep() { ! grep -q "$1" "$2"; }

check "merge onto BOOTTIME" "$MERGE" -q "$t/host.pb" "$t/guest.pb" \
	-o "$t/b.pb"
check "merge --clock monotonic" "$MERGE" "$t/host.pb" "$t/guest.pb" \
	-o "$t/m.pb" --clock monotonic 2>"$t/m.err"
check "no warning that ftrace went onto MONOTONIC" \
	not_grep "ftrace timestamps are on BOOTTIME" "$t/m.err"

Q_SLICES="select s.name, s.ts from slice s join thread_track tt
	on s.track_id = tt.id join thread t using (utid)
	join machine m on t.machine_id = m.id where m.raw_id = 1
	order by s.name, s.ts, s.dur"
Q_EXACT="select 'ftrace', ts, cpu from ftrace_event union all
	select msg, ts, 0 from android_logs order by 1, 2"

# same rows in a and b (name ts), ts within tick_ns for the ticks and
# 1 us for the rest: prints how many differ
near() {
	paste -d' ' <(printf '%s\n' "$1") <(printf '%s\n' "$2") | awk '
	{ d = $2 - $4; if (d < 0) d = -d
	  lim = $1 == "tick" ? 100000 : 1000
	  if (NF != 4 || $1 != $3 || d > lim) bad++ }
	END { print bad + 0 }'
}

sb=$(query_rows "$t/b.pb" "$Q_SLICES" | tr ',' ' ')
sm=$(query_rows "$t/m.pb" "$Q_SLICES" | tr ',' ' ')
check "vperfetto_tp: $(echo "$sb" | wc -l) guest slices as onto BOOTTIME
# differ: $(near "$sb" "$sm")" [ "$(near "$sb" "$sm")" = 0 ]
check "vperfetto_tp: guest slices are there" [ "$(echo "$sb" | wc -l)" -ge 250 ]
eb=$(query_rows "$t/b.pb" "$Q_EXACT")
em=$(query_rows "$t/m.pb" "$Q_EXACT")
check "vperfetto_tp: ftrace events and logcat entries exactly as onto
BOOTTIME ($(echo "$eb" | wc -l) rows)" [ "$eb" = "$em" ]
check "vperfetto_tp: the 4 logcat entries" \
	[ "$(echo "$em" | grep -vc '^ftrace')" = 4 ]

# --no-machine-id: the guest's logcat times are moved onto the host's
# REALTIME through its MONOTONIC snapshots, ftrace onto its BOOTTIME.
check "merge --clock monotonic --no-machine-id" "$MERGE" -q "$t/host.pb" \
	"$t/guest.pb" -o "$t/n.pb" --clock monotonic --no-machine-id
Q_TIMES="select 'ftrace', ts from ftrace_event union all
	select replace(msg, ' ', '_'), ts from android_logs order by 1, 2"
tb=$(query_rows "$t/b.pb" "$Q_TIMES" | tr ',' ' ')
en=$(query_rows "$t/n.pb" "$Q_TIMES" | tr ',' ' ')
check "vperfetto_tp, --no-machine-id: ftrace events and logcat entries
within 1 us of onto BOOTTIME (the fit's drift over 5 ms)
# differ: $(near "$tb" "$en")" [ "$(near "$tb" "$en")" = 0 ]
check "vperfetto_tp, --no-machine-id: all of them" \
	[ "$(echo "$en" | wc -l)" = "$(echo "$tb" | wc -l)" ]

# The same host's MONOTONIC is also what a processor reads the guest's
# legacy microseconds on with --no-machine-id onto BOOTTIME (the guest's
# packets are on the host's machine), and onto a guest's MONOTONIC the
# host's BOOTTIME must go to that guest's: every slice within 1 us.
Q_ALL="select name, ts from slice order by name, ts, dur"
check "merge --no-machine-id" "$MERGE" -q "$t/host.pb" "$t/guest.pb" \
	-o "$t/nb.pb" --no-machine-id
check "merge --onto guest" "$MERGE" -q "$t/host.pb" "$t/guest.pb" \
	-o "$t/og.pb" --onto guest
check "merge --onto guest --clock monotonic" "$MERGE" -q "$t/host.pb" \
	"$t/guest.pb" -o "$t/ogm.pb" --onto guest --clock monotonic
ab=$(query_rows "$t/b.pb" "$Q_ALL" | tr ',' ' ')
anb=$(query_rows "$t/nb.pb" "$Q_ALL" | tr ',' ' ')
aog=$(query_rows "$t/og.pb" "$Q_ALL" | tr ',' ' ')
aogm=$(query_rows "$t/ogm.pb" "$Q_ALL" | tr ',' ' ')
check "vperfetto_tp, --no-machine-id: $(echo "$ab" | wc -l) slices as with
machine ids
# differ: $(near "$ab" "$anb")" [ "$(near "$ab" "$anb")" = 0 ]
amn=$(query_rows "$t/n.pb" "$Q_ALL" | tr ',' ' ')
check "vperfetto_tp, --clock monotonic --no-machine-id: slices as onto
BOOTTIME with machine ids (the ticks through their snapshots' BOOTTIME)
# differ: $(near "$ab" "$amn")" [ "$(near "$ab" "$amn")" = 0 ]
check "vperfetto_tp, --onto guest --clock monotonic: slices as onto its
BOOTTIME
# differ: $(near "$aog" "$aogm")" [ "$(near "$aog" "$aogm")" = 0 ]

PB=${PERFETTO_BIN:-$HOME/.cache/perfetto-real/bin}
if [ -x "$PB/trace_processor_shell" ]; then
	ptp() {
		echo "$2" >"$t/q.sql"
		LD_LIBRARY_PATH=$PB "$PB/trace_processor_shell" -q "$t/q.sql" \
			"$1" 2>>"$t/ptp.log" | tail -n +2 | tr -d '"'
	}
	pm=$(ptp "$t/m.pb" "$Q_SLICES" | tr ',' ' ')
	check "Perfetto: guest slices as onto BOOTTIME
# differ: $(near "$sb" "$pm")" [ "$(near "$sb" "$pm")" = 0 ]
	check "Perfetto: ftrace events and logcat entries as vperfetto_tp" \
		[ "$(ptp "$t/m.pb" "$Q_EXACT")" = "$em" ]
	pnb=$(ptp "$t/nb.pb" "$Q_ALL" | tr ',' ' ')
	check "Perfetto, --no-machine-id: slices as with machine ids
# differ: $(near "$ab" "$pnb")" [ "$(near "$ab" "$pnb")" = 0 ]
	pmn=$(ptp "$t/n.pb" "$Q_ALL" | tr ',' ' ')
	check "Perfetto, --clock monotonic --no-machine-id: slices as onto
BOOTTIME with machine ids
# differ: $(near "$ab" "$pmn")" [ "$(near "$ab" "$pmn")" = 0 ]
	pogm=$(ptp "$t/ogm.pb" "$Q_ALL" | tr ',' ' ')
	check "Perfetto, --onto guest --clock monotonic: slices as onto its
BOOTTIME
# differ: $(near "$aog" "$pogm")" [ "$(near "$aog" "$pogm")" = 0 ]
	check "Perfetto, --clock monotonic --no-machine-id: the same" \
		[ "$(ptp "$t/n.pb" "$Q_TIMES" | tr ',' ' ')" = "$en" ]
else
	echo "SKIP: Perfetto's trace_processor_shell is not built ($PB)"
fi

e2e_finish merge_monotonic
