#!/usr/bin/env bash
# merge_options.sh - vperfetto_merge's ways of aligning a guest other than
# the clock model: an offset given by hand (--guest-offset-ns), for traces
# recorded with no sync producer.  The generated traces' guest events are
# read back with vperfetto_tp before and after the merge.
#
# Usage: merge_options.sh BUILD_ROOT
set -u
B=$1
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_TP=$B/processor/vperfetto_tp
MERGE=$B/merge/vperfetto_merge
GEN=$B/tests/vperfetto_tracegen
e2e_init merge_options
t=$E2E_DIR

"$GEN" --host "$t/host.pb" --guest "$t/guest.pb" --seed 11 --duration-s 2 \
	--events 400 --exchanges 5 >/dev/null || { echo "FAIL: tracegen"; exit 1; }

# ---- --guest-offset-ns: every guest timestamp moves by exactly N --------
off=-1234567
"$MERGE" -q "$t/host.pb" "$t/guest.pb" -o "$t/m.pb" --guest-offset-ns "$off" \
	--report "$t/r.json" 2>"$t/merge.log"
check "offset: merge exits 0" test $? -eq 0
# Paired by name and time: BOOTTIME events move by exactly N; MONOTONIC
# ones go through the guest's own BOOTTIME/MONOTONIC relation and legacy
# microseconds are rounded, so within 1 us.
query_rows "$t/guest.pb" "select name, ts from slice order by name, ts" \
	>"$t/before"
query_rows "$t/m.pb" "select s.name, s.ts from slice s join track t on \
	s.track_id = t.id where t.machine_id = 1 order by s.name, s.ts" \
	>"$t/after"
n=$(wc -l <"$t/before")
exact=$(paste -d, "$t/before" "$t/after" |
	awk -F, -v off="$off" '$1 == $3 && $4 - $2 == off' | wc -l)
near=$(paste -d, "$t/before" "$t/after" |
	awk -F, -v off="$off" '{ d = $4 - $2 - off; if (d < 0) d = -d }
		$1 == $3 && d <= 1000' | wc -l)
if [ "$n" -gt 100 ] && [ "$(wc -l <"$t/after")" = "$n" ] &&
	[ "$near" = "$n" ] && [ "$exact" -gt $((n / 2)) ]; then
	pass "offset: $n guest slices moved by $off ns ($exact exactly)"
else
	fail "offset: $near of $n guest slices moved by $off ns, $exact exactly"
	paste -d, "$t/before" "$t/after" | head -5
fi
grep -q '"source": "command_line", "offset_ns": -1234567' "$t/r.json" &&
	pass "offset: the report says the offset came from the command line" ||
	fail "offset: the report does not name the command line"
grep -q "as given (--guest-offset-ns)" "$t/merge.log" "$t/r.json" &&
	pass "offset: says the offset was given, not measured" ||
	fail "offset: no word that the offset was given by hand"

# ---- --concat: the files joined unchanged ----------------------------------
"$MERGE" "$t/host.pb" "$t/guest.pb" -o "$t/c.pb" --concat 2>"$t/concat.log"
check "concat: exits 0" test $? -eq 0
cat "$t/host.pb" "$t/guest.pb" >"$t/cat.pb"
check "concat: the same bytes as cat" cmp -s "$t/c.pb" "$t/cat.pb"
grep -q "joined 2 traces unchanged" "$t/concat.log" &&
	pass "concat: the summary says what it did" ||
	fail "concat: summary: $(cat "$t/concat.log")"
head -c $(( $(stat -c %s "$t/guest.pb") - 3 )) "$t/guest.pb" >"$t/cut.pb"
"$MERGE" -q "$t/host.pb" "$t/cut.pb" -o "$t/c2.pb" --concat 2>"$t/err"
check "concat: a truncated input is refused (exit 2)" test $? -eq 2
grep -q "cut.pb.*byte offset\|byte offset.*cut.pb" "$t/err" &&
	pass "concat: the message names the file and the offset" ||
	fail "concat: message: $(cat "$t/err")"
check "concat: no output after a refused input" test ! -e "$t/c2.pb"
"$MERGE" -q "$t/host.pb" "$t/guest.pb" -o "$t/c3.pb" --concat \
	--report "$t/c3.json" 2>"$t/err"
check "concat: no --report with --concat (exit 1)" test $? -eq 1

# ---- REALTIME timestamps go through the guest's BOOTTIME --------------------
# Two instants at one guest instant: "boot_tick" on BOOTTIME, "rt_tick" on
# REALTIME (the generator's guest snapshots say REALTIME = BOOTTIME +
# 1.7e18 ns).  After the merge both must be at the same host time, also
# without machine_id, where the processor would otherwise convert the
# guest's REALTIME through the host's snapshots.
python3 "$(dirname "$0")/append_packets.py" realtime "$t/guest.pb" \
	"$t/guest_rt.pb"
for mid in "" --no-machine-id; do
	"$MERGE" -q "$t/host.pb" "$t/guest_rt.pb" -o "$t/rt.pb" $mid 2>"$t/err"
	b=$(query "$t/rt.pb" "select ts from slice where name = 'boot_tick'")
	r=$(query "$t/rt.pb" "select ts from slice where name = 'rt_tick'")
	if [ -n "$b" ] && [ "$b" = "$r" ]; then
		pass "realtime${mid:+ ($mid)}: on the host axis with BOOTTIME ($b)"
	else
		fail "realtime${mid:+ ($mid)}: boot_tick '$b', rt_tick '$r'"
	fi
	rm -f "$t/rt.pb"
done

# ---- --no-machine-id: guest cpus after the host's, atrace pids moved -------
# The host gets ftrace on cpu 3; the guest a print "B|1234|vp_work" and
# "E|1234" on its cpu 1, by pid 1234.  Without machine_id the guest's cpu
# 1 becomes 5 (the host's cpus are 0..3) and the atrace slice belongs to
# pid 1234 moved as the guest's other pids are (+ 1 << 22).
python3 "$(dirname "$0")/append_packets.py" ftrace "$t/host.pb" "$t/guest.pb" \
	"$t/host_ft.pb" "$t/guest_ft.pb"
"$MERGE" -q "$t/host_ft.pb" "$t/guest_ft.pb" -o "$t/nm.pb" --no-machine-id \
	2>"$t/err"
check "no-machine-id: merge exits 0" test $? -eq 0
expect "no-machine-id: the guest's print is on cpu 5" "$t/nm.pb" \
	"select group_concat(distinct cpu) from ftrace_event where name = 'print'" 5
expect "no-machine-id: the host's cpu stays 3" "$t/nm.pb" \
	"select group_concat(distinct cpu) from sched where utid in \
	 (select utid from thread where tid = 77)" 3
expect "no-machine-id: the atrace slice is pid 1234 moved" "$t/nm.pb" \
	"select t.tid from slice s join thread_track tt on s.track_id = tt.id \
	 join thread t using (utid) where s.name = 'vp_work'" \
	$((1234 + (1 << 22)))
expect "no-machine-id: the pid inside the print buffer is moved too" \
	"$t/nm.pb" "select count(*) from args where key = 'buf' and \
	 display_value like 'B|$((1234 + (1 << 22)))|vp_work%'" 1

# ---- threads: a guest of small packets is shared out -----------------------
# --threads is a most: the summary says how many threads each guest's
# rewrite ran on, and whatever it says, the bytes are those of one thread.
"$MERGE" --threads 1 "$t/host.pb" "$t/guest.pb" -o "$t/th1.pb" 2>"$t/th1.log"
check "threads: merge --threads 1 exits 0" test $? -eq 0
grep -q "rewrote [0-9]* packets on 1 thread:" "$t/th1.log" &&
	pass "threads: --threads 1 rewrites on one thread" ||
	fail "threads: summary: $(grep rewrote "$t/th1.log")"
"$MERGE" --threads 2 "$t/host.pb" "$t/guest.pb" -o "$t/th2.pb" 2>"$t/th2.log"
check "threads: merge --threads 2 exits 0" test $? -eq 0
grep -q "rewrote [0-9]* packets on 2 threads:" "$t/th2.log" &&
	pass "threads: small packets are shared out on two threads" ||
	fail "threads: summary: $(grep rewrote "$t/th2.log")"
check "threads: the same bytes on one thread and two" cmp -s "$t/th1.pb" \
	"$t/th2.pb"
# ---- threads: a large guest's sync scan in parts -----------------------
# A thread free of the scans (the host's was short) scans the second half
# of what the guest's has left: the result is the same, and where the
# parts do not meet exactly (a packet that looks like records inside,
# compressed packets, which only a scan in order may inflate) the first
# thread scans on.
"$GEN" --host "$t/lh.pb" --guest "$t/lg.pb" --seed 5 --duration-s 60 \
	--exchanges 100 --target-bytes 20000000 >/dev/null ||
	fail "split: tracegen"
split_same() { # name guest
	"$MERGE" --threads 1 "$t/lh.pb" "$2" -o "$t/s1.pb" --report "$t/s1.json" \
		2>"$t/s1.log"
	check "split, $1: one thread exits 0" test $? -eq 0
	"$MERGE" --threads 2 "$t/lh.pb" "$2" -o "$t/s2.pb" --report "$t/s2.json" \
		2>"$t/s2.log"
	check "split, $1: two threads exit 0" test $? -eq 0
	check "split, $1: the same bytes on one thread and two" \
		cmp -s "$t/s1.pb" "$t/s2.pb"
	check "split, $1: the same report" \
		cmp -s <(grep -v '"output"' "$t/s1.json") \
		<(grep -v '"output"' "$t/s2.json")
}
split_same "small packets" "$t/lg.pb"
# Whether the scan is shared depends on when the host's scan ends (a
# loaded machine may start the helper late): one run of a few must say so.
shared=0
for try in 1 2 3 4 5; do
	grep -Eq "sync scan in [2-9] parts at once" "$t/s2.log" && {
		shared=1
		break
	}
	"$MERGE" --threads 2 "$t/lh.pb" "$t/lg.pb" -o "$t/s2.pb" 2>"$t/s2.log"
done
check "split, small packets: the summary says the scan was shared" \
	test "$shared" -eq 1
! grep -q "sync scan in" "$t/s1.log" &&
	pass "split: one thread scans in one part" ||
	fail "split: one thread says two parts"
# The guest with an 8 MiB packet about its middle whose bytes look like a
# run of records, and with its second half in compressed packets.
python3 "$(dirname "$0")/append_packets.py" fakemiddle "$t/lg.pb" \
	"$t/fake.pb" &&
	python3 "$(dirname "$0")/append_packets.py" compresshalf "$t/lg.pb" \
	"$t/zq.pb"
check "split: the made guests" test -s "$t/zq.pb"
# (A part may still be joined where the guess after it was right: the
# bytes are what says the scan was right.)
split_same "a packet of fake records about the middle" "$t/fake.pb"
split_same "compressed packets in the second half" "$t/zq.pb"

# The CPUs it may use are those of its affinity, as nproc counts them:
# pinned to one, it runs on one by default and refuses two.
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
	taskset -c 0 "$MERGE" "$t/host.pb" "$t/guest.pb" -o "$t/ts.pb" \
		2>"$t/ts.log"
	grep -q "rewrote [0-9]* packets on 1 thread" "$t/ts.log" &&
		pass "threads: pinned to one CPU, one thread by default" ||
		fail "threads: pinned: $(grep rewrote "$t/ts.log")"
	taskset -c 0 "$MERGE" --threads 2 "$t/host.pb" "$t/guest.pb" \
		-o "$t/ts2.pb" 2>"$t/ts2.log"
	check "threads: pinned to one CPU, --threads 2 is refused (exit 1)" \
		test $? -eq 1
	grep -q "bad --threads '2' (1 to 1, the CPUs it may use)" \
		"$t/ts2.log" && pass "threads: the message says the range" ||
		fail "threads: message: $(cat "$t/ts2.log")"
else
	echo "# skip: taskset cannot pin to CPU 0 here"
fi

# ---- an unknown option is named as it was written --------------------------
# getopt leaves optind behind inside a cluster of short options: the
# message must name the letter, not the program or a neighbouring word.
for args in "-qz|-z" "-zq|-z" "--zz|--zz" "--zz=3|--zz=3"; do
	opt=${args%%|*} want=${args#*|}
	"$MERGE" "$opt" "$t/host.pb" "$t/guest.pb" -o "$t/u.pb" 2>"$t/u.log"
	rc=$?
	if [ $rc -eq 1 ] && grep -q "unknown option '$want'\$" "$t/u.log"; then
		pass "options: '$opt' is refused as unknown option '$want'"
	else
		fail "options: '$opt': exit $rc, $(head -1 "$t/u.log")"
	fi
done
"$MERGE" "$t/host.pb" "$t/guest.pb" -o "$t/u.pb" -qz 2>"$t/u.log"
grep -q "unknown option '-z'\$" "$t/u.log" &&
	pass "options: a cluster after the inputs names its unknown letter" ||
	fail "options: after the inputs: $(head -1 "$t/u.log")"

# ---- an option of one value given twice is refused, as -o is ---------------
for opt in "--clock boottime" "--onto host" "--threads 1" "--max-inflate 1M"; do
	name=${opt%% *}
	"$MERGE" $opt $opt "$t/host.pb" "$t/guest.pb" -o "$t/u.pb" 2>"$t/u.log"
	rc=$?
	if [ $rc -eq 1 ] && grep -q -e "$name given twice" "$t/u.log" &&
		[ ! -e "$t/u.pb" ]; then
		pass "options: $name given twice is refused"
	else
		fail "options: $name twice: exit $rc, $(head -1 "$t/u.log")"
	fi
done

# ---- an offset that carries times past int64 ----------------------------------
# A trace processor takes timestamps as int64: a guest time moved past
# INT64_MAX is clamped there and counted, never written as a value that
# would read back negative.
"$MERGE" "$t/host.pb" "$t/guest.pb" -o "$t/big.pb" \
	--guest-offset-ns 9223372036854775807 2>"$t/big.log"
check "offset past int64: merge exits 0" test $? -eq 0
grep -q "mapped timestamps fell outside the range of their field" \
	"$t/big.log" && pass "offset past int64: the clamped times are counted" ||
	fail "offset past int64: no warning: $(cat "$t/big.log")"
n=$(query_rows "$t/big.pb" "select coalesce(sum(value), 0) from stats \
	where name = 'trace_sorter_negative_timestamp_dropped'")
check "offset past int64: no timestamp reads back negative ($n dropped)" \
	test "$n" = 0

# ---- usage errors ----------------------------------------------------------
"$MERGE" -q "$t/host.pb" "$t/guest.pb" -o "$t/x.pb" --guest-offset-ns 12abc \
	2>"$t/err"
check "offset: a bad number is refused (exit 1)" test $? -eq 1
grep -q "bad --guest-offset-ns '12abc'" "$t/err" &&
	pass "offset: the message names the bad value" ||
	fail "offset: message: $(cat "$t/err")"
"$MERGE" -q "$t/host.pb" "$t/guest.pb" "$t/guest.pb" -o "$t/x.pb" \
	--guest-offset-ns 5 2>"$t/err"
check "offset: once per guest (exit 1 when not)" test $? -eq 1
"$MERGE" -q "$t/host.pb" "$t/guest.pb" -o "$t/x.pb" --guest-offset-ns 5 \
	--guest-tsc-offset 7 2>"$t/err"
check "offset: not with --guest-tsc-offset (exit 1)" test $? -eq 1
"$MERGE" -q "$t/host.pb" "$t/guest.pb" -o "$t/x.pb" --guest-offset-ns 5 \
	--guest-tsc-scaling 3:1 2>/dev/null
check "offset: not with --guest-tsc-scaling (exit 1)" test $? -eq 1
"$MERGE" -q "$t/host.pb" "$t/guest.pb" -o "$t/x.pb" --guest-offset-ns 5 \
	--guest-vm-pid 77 2>/dev/null
check "offset: not with --guest-vm-pid, without --vm-tracks (exit 1)" \
	test $? -eq 1
check "usage errors leave no output" test ! -e "$t/x.pb"

e2e_finish merge_options
