#!/usr/bin/env bash
# merge_onto.sh - vperfetto_merge --onto guest: the output on a guest's
# time axis.  The chosen guest's rows in vperfetto_tp must be the ones of
# its own trace, unchanged; the host's events (and another guest's) must
# land where the generator's truth puts them on that guest's axis, within
# the error bound the report gives, also across a change of the counter
# offset (a migration, --tsc-step) either way; --onto host is the default,
# byte for byte; the options it does not go with are refused.
#
# Usage: merge_onto.sh BUILD_ROOT
set -u
B=$1
HERE=$(dirname "$0")
. "$HERE/../lib/e2e_lib.sh"
E2E_TP=$B/processor/vperfetto_tp
MERGE=$B/merge/vperfetto_merge
GEN=$B/tests/vperfetto_tracegen
e2e_init merge_onto
t=$E2E_DIR

# Guest rows, by machine (0 for a trace read on its own: the processor
# takes the machine of a trace without host data for the host).  Times and
# what identifies each row, ordered, so two traces compare line for line.
guest_rows() { # TRACE MACHINE
	query_rows "$1" "select s.ts, s.dur, s.name from slice s join track t
		on s.track_id = t.id where coalesce(t.machine_id, 0) = $2
		order by s.ts, s.name, s.dur"
	query_rows "$1" "select s.ts, s.dur, c.cpu, s.utid is not null from
		sched_slice s join cpu c using (ucpu) where
		coalesce(c.machine_id, 0) = $2 order by s.ts, c.cpu"
	query_rows "$1" "select f.ts, f.name, c.cpu from ftrace_event f join
		cpu c using (ucpu) where coalesce(c.machine_id, 0) = $2
		order by f.ts, f.name, c.cpu"
}
# Slice times of a machine (0: the host's tracks, no machine_id).
slice_ts() { # TRACE MACHINE
	query_rows "$1" "select s.ts from slice s join track t on s.track_id =
		t.id where coalesce(t.machine_id, 0) = $2 order by s.ts, s.name,
		s.dur"
}
# The truth of a guest: its slices' times in its own trace and in its
# ideal merge, paired by name and order.  Its legacy microsecond events
# are left out: the processor reads the ideal trace's differently.
truth_slices() { # GUEST IDEAL
	local sql="select ts from slice where name != 'legacy_event'
		order by name, ts"
	paste -d, <(query_rows "$1" "$sql") <(query_rows "$2" "$sql")
}
# Ftrace event times of a machine's cpus: two generated guests have the
# same track uuids, which the processor takes for one track, so with two
# guests the truth and the checks go by their cpus' events instead.
ftrace_ts() { # TRACE MACHINE
	query_rows "$1" "select f.ts from ftrace_event f join cpu c using
		(ucpu) where coalesce(c.machine_id, 0) = $2 order by f.ts,
		f.name, c.cpu"
}
# A bound out of the report: the larger of the sync samples' maximum and
# the trace's ends, plus 3 ns of rounding (the mapped value's and the
# truth's).  $2 is a python expression for the trace's "onto" object.
bound() { # REPORT EXPR
	python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
o=$2; print(max(o['error_bound_ns']['max'], \
o['error_bound_at_trace_ends_ns']) + 3)" "$1"
}

# One pair, merged onto its guest: the guest unchanged, the host's events
# at the truth's guest times.
onto_case() { # NAME TRACEGEN-ARGS...
	local n=$1
	shift
	"$GEN" --host "$t/$n.h.pb" --guest "$t/$n.g.pb" \
		--ideal-out "$t/$n.i.pb" --duration-s 6 --events 1500 -q "$@" ||
		{ fail "$n: tracegen"; return; }
	"$MERGE" -q "$t/$n.h.pb" "$t/$n.g.pb" -o "$t/$n.m.pb" --onto guest \
		--report "$t/$n.json" 2>"$t/$n.log"
	check "$n: merge --onto guest exits 0" test $? -eq 0
	guest_rows "$t/$n.g.pb" 0 >"$t/$n.before"
	guest_rows "$t/$n.m.pb" 1 >"$t/$n.after"
	if [ "$(wc -l <"$t/$n.before")" -gt 1000 ] &&
		cmp -s "$t/$n.before" "$t/$n.after"; then
		pass "$n: the guest's $(wc -l <"$t/$n.before") slice, sched and ftrace rows are unchanged"
	else
		fail "$n: the guest's rows changed"
		diff "$t/$n.before" "$t/$n.after" | head -5
	fi
	slice_ts "$t/$n.h.pb" 0 >"$t/$n.hb"
	slice_ts "$t/$n.m.pb" 0 >"$t/$n.ha"
	truth_slices "$t/$n.g.pb" "$t/$n.i.pb" >"$t/$n.truth"
	local b
	b=$(bound "$t/$n.json" "r['host']['onto']")
	if out=$(python3 "$HERE/check_onto.py" "$t/$n.hb" "$t/$n.ha" \
		"$t/$n.truth" "$b"); then
		pass "$n: host slices on the guest's axis: $out"
	else
		fail "$n: host slices: $out"
	fi
	expect "$n: no clock conversion failed" "$t/$n.m.pb" \
		"select coalesce(sum(value), 0) from stats where name like
		 'clock_sync_failure%'" 0
}

onto_case plain --seed 11 --exchanges 20
grep -q '"axis": {"onto": "guest", "guest": 1, "path": ".*plain.g.pb", "machine_id": 1}' \
	"$t/plain.json" && pass "report: the axis is guest 1's" ||
	fail "report: no axis: $(grep axis "$t/plain.json")"
grep -q '"onto": {"map": "host -> guest 1"' "$t/plain.json" &&
	grep -q '"onto": {"map": "kept"' "$t/plain.json" &&
	pass "report: the host's map and the guest's kept times" ||
	fail "report: the maps are not named"
"$MERGE" "$t/plain.h.pb" "$t/plain.g.pb" -o "$t/x.pb" --onto guest \
	2>"$t/sum.log"
grep -q "^axis: guest 1's BOOTTIME" "$t/sum.log" &&
	grep -q "onto guest 1: host -> guest 1, error bound" "$t/sum.log" &&
	pass "summary: the axis and the host's bound" ||
	fail "summary: $(head -3 "$t/sum.log")"
rm -f "$t/x.pb"

# A migration: kvm_tsc records the old and the new offset; the counter
# goes forward, and back.
onto_case kvmstep --seed 14 --kvm-tsc --exchanges 0 --tsc-step 3000000000
grep -q '"segment_offsets_boottime"' "$t/kvmstep.json" &&
	pass "kvmstep: the map is piecewise (an offset per segment)" ||
	fail "kvmstep: no segment offsets in the report"
# (10 s, as merge_e2e has it: in a shorter trace the guest's fit does not
# find the step back, which the default merge gets wrong just as well.)
onto_case kvmback --seed 15 --kvm-tsc --exchanges 0 --duration-s 10 \
	--tsc-step -7000000000 --step-at 0.3
# ... back by far more than the trace is long (300 s of cycles)
onto_case kvmbackfar --seed 38 --kvm-tsc --duration-s 10 \
	--tsc-step -900000000000 --step-at 0.5
# ... and with no kvm_tsc record: the exchanges of each segment.
onto_case exstep --seed 16 --exchanges 100 --tsc-step 3000000000

# ---- two guests: onto the second; the first goes through the host ------------
"$GEN" --host "$t/two.h.pb" --guest "$t/two.a.pb" --ideal-out "$t/two.ai.pb" \
	--seed 21 --duration-s 6 --events 1500 -q &&
"$GEN" --host "$t/two.h2.pb" --guest "$t/two.b.pb" --ideal-out "$t/two.bi.pb" \
	--machine 2 --seed 21 --duration-s 6 --events 1500 -q \
	--offset -0x2000000000 --drift-ppm -40 || fail "two: tracegen"
check "two: the generator gave both guests one host" \
	cmp -s "$t/two.h.pb" "$t/two.h2.pb"
"$MERGE" -q "$t/two.h.pb" "$t/two.a.pb" "$t/two.b.pb" -o "$t/two.m.pb" \
	--onto guest:2 --report "$t/two.json" 2>"$t/two.log"
check "two: merge --onto guest:2 exits 0" test $? -eq 0
ftrace_ts "$t/two.b.pb" 0 >"$t/two.before"
ftrace_ts "$t/two.m.pb" 2 >"$t/two.after"
if [ "$(wc -l <"$t/two.before")" -gt 100 ] &&
	cmp -s "$t/two.before" "$t/two.after"; then
	pass "two: guest 2's $(wc -l <"$t/two.before") ftrace times are unchanged"
else
	fail "two: guest 2's ftrace times changed"
fi
paste -d, "$t/two.before" <(ftrace_ts "$t/two.bi.pb" 0) >"$t/two.truth"
b=$(bound "$t/two.json" "r['guests'][0]['onto']")
if out=$(python3 "$HERE/check_onto.py" <(ftrace_ts "$t/two.ai.pb" 0) \
	<(ftrace_ts "$t/two.m.pb" 1) "$t/two.truth" "$b"); then
	pass "two: guest 1 on guest 2's axis: $out"
else
	fail "two: guest 1: $out"
fi
b=$(bound "$t/two.json" "r['host']['onto']")
if out=$(python3 "$HERE/check_onto.py" <(slice_ts "$t/two.h.pb" 0) \
	<(slice_ts "$t/two.m.pb" 0) "$t/two.truth" "$b"); then
	pass "two: the host on guest 2's axis: $out"
else
	fail "two: host: $out"
fi
grep -q '"map": "guest 1 -> host -> guest 2"' "$t/two.json" &&
	pass "two: the report names guest 1's way onto guest 2" ||
	fail "two: guest 1's map is not named"

# ---- the same bytes: --onto host is the default; threads change nothing ------
"$MERGE" -q "$t/plain.h.pb" "$t/plain.g.pb" -o "$t/d.pb" 2>/dev/null
"$MERGE" -q "$t/plain.h.pb" "$t/plain.g.pb" -o "$t/dh.pb" --onto host \
	2>/dev/null
check "--onto host: the bytes of the default" cmp -s "$t/d.pb" "$t/dh.pb"
"$MERGE" -q "$t/kvmstep.h.pb" "$t/kvmstep.g.pb" -o "$t/t1.pb" --onto guest \
	--threads 1 2>/dev/null
"$MERGE" -q "$t/kvmstep.h.pb" "$t/kvmstep.g.pb" -o "$t/t2.pb" --onto guest \
	--threads 2 2>/dev/null
check "--onto guest: the same bytes on 1 and 2 threads" cmp -s "$t/t1.pb" \
	"$t/t2.pb"

# ---- usage errors --------------------------------------------------------------
refused() { # NAME WANTED-MESSAGE ARGS...
	local n=$1 msg=$2
	shift 2
	"$MERGE" -q "$@" -o "$t/x.pb" 2>"$t/err"
	local rc=$?
	if [ $rc -eq 1 ] && grep -q -- "$msg" "$t/err" && [ ! -e "$t/x.pb" ]; then
		pass "refused: $n (exit 1)"
	else
		fail "refused: $n: exit $rc, $(head -1 "$t/err")"
	fi
}
refused "no guest" "needs a guest trace" "$t/plain.h.pb" --onto guest
refused "an unknown guest" "guest:3: there are only 2 guest traces" \
	"$t/two.h.pb" "$t/two.a.pb" "$t/two.b.pb" --onto guest:3
refused "guest:0" "bad --onto 'guest:0'" "$t/plain.h.pb" "$t/plain.g.pb" \
	--onto guest:0
refused "a bad word" "bad --onto 'guests'" "$t/plain.h.pb" "$t/plain.g.pb" \
	--onto guests
refused "with --concat" "--concat maps nothing" "$t/plain.h.pb" \
	"$t/plain.g.pb" --onto guest --concat
refused "with --guest-offset-ns" "--guest-offset-ns gives none" \
	"$t/plain.h.pb" "$t/plain.g.pb" --onto guest --guest-offset-ns 5
refused "with --vm-tracks" "does not take --vm-tracks" "$t/plain.h.pb" \
	"$t/plain.g.pb" --onto guest --vm-tracks

e2e_finish merge_onto
