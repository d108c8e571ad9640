#!/usr/bin/env bash
# tp_e2e.sh - end-to-end checks of the vperfetto_tp command line.
#
# Usage: tp_e2e.sh BUILD_DIR
#
# Uses BUILD_DIR/processor/vperfetto_tp and the trace generator
# BUILD_DIR/tests/vperfetto_tp_gen ($VP_TP and $VP_TP_GEN override them).
# Checks: the conformance cases (when ../shared/conformance exists next to
# the repository), slice counts of a generated trace, SQL errors, INCLUDE
# PERFETTO MODULE and SPAN_JOIN (errors, stdin, export), damaged
# and missing traces, -e export, --summary and CSV formatting.
# Prints PASS/FAIL per check; exits 1 if any check failed, 2 on bad usage.
set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
build=$1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${VP_TP:-$build/processor/vperfetto_tp}
gen=${VP_TP_GEN:-$build/tests/vperfetto_tp_gen}
for f in "$bin" "$gen"; do
	if [ ! -x "$f" ]; then
		echo "$0: $f is missing (build first)" >&2
		exit 2
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tp_e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0

pass() { echo "PASS $1"; }
fail() {
	echo "FAIL $1${2:+: $2}"
	failures=$((failures + 1))
}
# check NAME COMMAND...: PASS when the command succeeds.
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

# ---- conformance ---------------------------------------------------------
conf=$repo/../shared/conformance
if [ -x "$conf/run" ]; then
	if "$conf/run" "$bin" --min-pass 90 >"$tmp/conf.out" 2>&1; then
		pass "conformance ($(tail -n 1 "$tmp/conf.out"))"
	else
		grep '^FAIL' "$tmp/conf.out" | head -n 20
		fail conformance "$(tail -n 1 "$tmp/conf.out")"
	fi
else
	echo "SKIP conformance: no runner at $conf/run"
fi

# ---- a generated trace ---------------------------------------------------
events=2000
trace=$tmp/gen.pb
if ! "$gen" -n $events -o "$trace" --threads 4 >/dev/null; then
	fail "generate trace" "vperfetto_tp_gen failed"
	exit 1
fi

q() { "$bin" --quiet "$trace" -Q "$1" 2>"$tmp/q.err" | tail -n +2; }

got=$(q "select count(*) from slice")
check "slice count = events/2 ($got)" [ "$got" = $((events / 2)) ]
got=$(q "select count(*) from thread where name glob 'worker-*'")
check "four worker threads ($got)" [ "$got" = 4 ]
got=$(q "select count(*) from slice where EXTRACT_ARG(arg_set_id, 'debug.count') is not null")
check "every slice has its debug annotation ($got)" [ "$got" = $((events / 2)) ]
got=$(q "select count(*) from slice where dur < 0 or name is null")
check "every slice ended and named ($got)" [ "$got" = 0 ]
got=$(q "select max(depth) > 0 from slice")
check "slices nest" [ "$got" = 1 ]

# ---- SQL errors ----------------------------------------------------------
"$bin" --quiet "$trace" -Q "select 1;
selec nonsense from slice" >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
check "bad SQL exits non-zero (exit $rc)" [ $rc -ne 0 ]
check "bad SQL message names the line" grep -q 'line 2' "$tmp/bad.err"
"$bin" --quiet "$trace" -Q "select * from no_such_table" >/dev/null 2>"$tmp/bad2.err"
rc=$?
check "unknown table exits 1 with a message" \
	bash -c "[ $rc -eq 1 ] && grep -q no_such_table '$tmp/bad2.err'"

# ---- INCLUDE PERFETTO MODULE and SPAN_JOIN --------------------------------
got=$(q "INCLUDE PERFETTO MODULE slices.with_context;
	 select count(*) from thread_slice where thread_name glob 'worker-*'")
check "-Q: include, then thread_slice ($got)" [ "$got" = $((events / 2)) ]
got=$(printf 'include perfetto module slices.*;\nselect count(*) from thread_slice;\n' |
	"$bin" --quiet "$trace" 2>/dev/null | tail -n +2)
check "stdin: include with a wildcard ($got)" [ "$got" = $((events / 2)) ]
got=$(q "INCLUDE PERFETTO MODULE *; INCLUDE PERFETTO MODULE sched.with_context;
	 select count(*) from sqlite_schema where name = 'thread_slice'")
check "include everything, then one again: created once ($got)" [ "$got" = 1 ]
"$bin" --quiet "$trace" -Q "INCLUDE PERFETTO MODULE slices.no_such" \
	>/dev/null 2>"$tmp/inc1.err"
rc=$?
check "unknown module exits 1 (exit $rc)" [ $rc -eq 1 ]
check "unknown module: message names it" \
	grep -q "unknown module 'slices.no_such'" "$tmp/inc1.err"
"$bin" --quiet "$trace" -Q "INCLUDE PERFETTO MODULE android.binder" \
	>/dev/null 2>"$tmp/inc2.err"
rc=$?
check "unknown package exits 1 (exit $rc)" [ $rc -eq 1 ]
check "unknown package: message names it" \
	grep -q "Package 'android.binder' not found" "$tmp/inc2.err"
"$bin" --quiet "$trace" -Q "INCLUDE PERFETTO MODULE slices.with_context extra" \
	>/dev/null 2>"$tmp/inc3.err"
rc=$?
check "junk after the module name exits 1 (exit $rc)" [ $rc -eq 1 ]
db=$tmp/include.db
"$bin" --quiet "$trace" -Q "INCLUDE PERFETTO MODULE slices.with_context;
	CREATE VIEW sl AS SELECT ts, dur, utid, name FROM thread_slice;
	CREATE VIEW sc AS SELECT ts, dur, utid, cpu FROM sched WHERE dur > 0;
	CREATE VIRTUAL TABLE sj USING SPAN_JOIN(sl PARTITIONED utid,
	  sc PARTITIONED utid)" -e "$db" >/dev/null 2>"$tmp/include.err"
rc=$?
check "include and span join, then -e (exit $rc)" [ $rc -eq 0 ]
if command -v sqlite3 >/dev/null; then
	got=$(sqlite3 "$db" "select count(*) from thread_slice" 2>&1)
	check "exported module view ($got)" [ "$got" = $((events / 2)) ]
	got=$(sqlite3 "$db" "select count(*) from pragma_table_info('sj')" 2>&1)
	check "exported span join table ($got columns)" [ "$got" = 5 ]
fi
sj_err() { # name, expected message, SQL
	"$bin" --quiet "$trace" -Q "create table t1(ts, dur, p, x);
		create table t2(ts, dur, q, y); create table t3(x); $3" \
		>/dev/null 2>"$tmp/sj.err"
	local rc=$?
	if [ $rc -eq 1 ] && grep -q "$2" "$tmp/sj.err"; then
		pass "SPAN_JOIN error: $1"
	else
		fail "SPAN_JOIN error: $1" "exit $rc, $(head -c 200 "$tmp/sj.err")"
	fi
}
sj_err "mismatching partitions" "mismatching partitions" \
	"create virtual table j using span_join(t1 partitioned p, t2 partitioned q)"
sj_err "no ts" "Missing ts column in table t3" \
	"create virtual table j using span_join(t1, t3)"
sj_err "a column in both" "column p present in both tables t1 and t1" \
	"create virtual table j using span_join(t1, t1)"
sj_err "partition not an integer" "partition is not an INT column" \
	"insert into t1 values (1, 2, 'a', 3);
	 create virtual table j using span_join(t1 partitioned p, t2);
	 select * from j"
sj_err "one argument" "expected exactly two arguments" \
	"create virtual table j using span_join(t1)"

# ---- damaged traces ------------------------------------------------------
size=$(stat -c %s "$trace")
head -c $((size - 7)) "$trace" >"$tmp/trunc.pb"
"$bin" "$tmp/trunc.pb" -Q "select count(*) from slice" >"$tmp/trunc.out" 2>"$tmp/trunc.err"
rc=$?
check "truncated trace loads (exit $rc)" [ $rc -eq 0 ]
check "truncated trace warns on stderr" [ -s "$tmp/trunc.err" ]
check "truncated trace: the warning names the byte offset" \
	grep -q "trunc.pb: byte offset [0-9]*: truncated" "$tmp/trunc.err"
got=$(tail -n +2 "$tmp/trunc.out")
check "truncated trace: what came before is loaded ($got slices)" [ "${got:-0}" -gt 0 ]
lost=$("$bin" --quiet "$tmp/trunc.pb" -Q \
	"select count(*) from stats where value > 0 and severity in ('error', 'data_loss')" |
	tail -n +2)
check "truncated trace: stats show the loss ($lost)" [ "${lost:-0}" -gt 0 ]

python3 -c '
import random, sys
r = random.Random(42)
sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(65536)))
' >"$tmp/garbage.pb"
"$bin" "$tmp/garbage.pb" -Q "select count(*) from slice" >"$tmp/garbage.out" 2>"$tmp/garbage.err"
rc=$?
check "garbage file loads without crashing (exit $rc)" [ $rc -eq 0 ]
check "garbage file: the warning names the file and byte offset 0" \
	grep -q "garbage.pb: byte offset 0: .*not a Perfetto trace" "$tmp/garbage.err"
lost=$("$bin" --quiet "$tmp/garbage.pb" -Q \
	"select count(*) from stats where value > 0 and severity in ('error', 'data_loss')" |
	tail -n +2)
check "garbage file: stats show the loss ($lost)" [ "${lost:-0}" -gt 0 ]
# ... but garbage after a good start is a truncated trace, loaded.
{ cat "$trace"; head -c 100 "$tmp/garbage.pb"; } >"$tmp/tail.pb"
"$bin" --quiet "$tmp/tail.pb" -Q "select count(*) from slice" >"$tmp/tail.out" 2>&1
check "garbage after the trace: loads (exit $?)" [ "$(tail -n +2 "$tmp/tail.out")" = $((events / 2)) ]

# ---- inputs that are not plain files: gzip, a FIFO, stdin ------------------
gzip -c "$trace" >"$tmp/t.pb.gz"
got=$("$bin" --quiet "$tmp/t.pb.gz" -Q "select count(*) from slice" | tail -n +2)
check "a gzip'd trace loads as the plain one ($got)" [ "$got" = $((events / 2)) ]
uuid_plain=$("$bin" --quiet "$trace" -Q "select str_value from metadata where name = 'trace_uuid'" | tail -n +2)
uuid_gz=$("$bin" --quiet "$tmp/t.pb.gz" -Q "select str_value from metadata where name = 'trace_uuid'" | tail -n +2)
check "a gzip'd trace: its uuid hashes the gzip bytes, as Perfetto's ($uuid_gz)" \
	[ -n "$uuid_gz" ] && [ "$uuid_gz" != "$uuid_plain" ]
head -c $(( $(stat -c %s "$tmp/t.pb.gz") / 2 )) "$tmp/t.pb.gz" >"$tmp/half.gz"
"$bin" "$tmp/half.gz" -Q "select count(*) from slice" >"$tmp/half.out" 2>"$tmp/half.err"
rc=$?
got=$(tail -n +2 "$tmp/half.out")
check "half a gzip'd trace: loads what came before (exit $rc, $got slices)" \
	[ $rc -eq 0 ] && [ "${got:-0}" -gt 0 ] && [ "$got" -lt $((events / 2)) ]
check "half a gzip'd trace: says the stream ends early" \
	grep -q "half.gz: the gzip stream ends early" "$tmp/half.err"
rm -f "$tmp/fifo"
mkfifo "$tmp/fifo"
cat "$trace" >"$tmp/fifo" &
got=$(timeout 60 "$bin" --quiet "$tmp/fifo" -Q "select count(*) from slice" | tail -n +2)
check "a FIFO loads ($got)" [ "$got" = $((events / 2)) ]
got=$(timeout 60 "$bin" --quiet /dev/stdin -Q "select count(*) from slice" <"$tmp/t.pb.gz" | tail -n +2)
check "gzip on /dev/stdin loads ($got)" [ "$got" = $((events / 2)) ]
got=$(echo "select count(*) as n from slice;" | "$bin" --quiet "$trace" -q - | tail -n +2)
check "-q -: the SQL from stdin ($got)" [ "$got" = $((events / 2)) ]
# A statement that fails half-way prints none of its rows (Perfetto's
# shell holds a result whole); the ones before it stand.
"$bin" --quiet "$trace" -Q "select 1 as a; select id, case when id = 5 then
	abs(-9223372036854775808) else id end as v from slice order by id" \
	>"$tmp/half.csv" 2>"$tmp/half.err"
rc=$?
check "a statement failing half-way: exit 1, its rows not printed (exit $rc)" \
	[ $rc -eq 1 ] && [ "$(cat "$tmp/half.csv")" = "$(printf '"a"\n1')" ]
"$bin" --quiet "$trace" -Q ";;;" >/dev/null 2>"$tmp/nosql.err"
rc=$?
check "-Q with no statement: exit 1, No valid SQL to run (exit $rc)" \
	[ $rc -eq 1 ] && grep -q "No valid SQL to run" "$tmp/nosql.err"
got=$("$bin" --quiet "$trace" -Q "select x'00ff' as b" | tail -n +2)
check "a blob prints as Perfetto prints it ($got)" [ "$got" = '"<raw bytes>"' ]

: >"$tmp/empty.pb"
"$bin" --quiet "$tmp/empty.pb" -Q "select count(*) from slice" >"$tmp/empty.out" 2>&1
rc=$?
check "empty file loads (exit $rc)" [ $rc -eq 0 ]

"$bin" "$tmp/does-not-exist.pb" -Q "select 1" >/dev/null 2>"$tmp/missing.err"
rc=$?
check "missing file exits 1 (exit $rc)" [ $rc -eq 1 ]
check "missing file message names the file" grep -q 'does-not-exist.pb' "$tmp/missing.err"

"$bin" --no-such-option "$trace" >/dev/null 2>"$tmp/usage.err"
rc=$?
check "bad usage exits 2 (exit $rc)" [ $rc -eq 2 ]
check "bad usage prints usage" grep -q '^usage:' "$tmp/usage.err"

# ---- export --------------------------------------------------------------
db=$tmp/export.db
"$bin" --quiet "$trace" -e "$db" >/dev/null 2>"$tmp/export.err"
rc=$?
check "-e exits 0 (exit $rc)" [ $rc -eq 0 ]
if command -v sqlite3 >/dev/null; then
	got=$(sqlite3 "$db" "select count(*) from slice" 2>&1)
	check "exported slice table readable by sqlite3 ($got)" [ "$got" = $((events / 2)) ]
	got=$(sqlite3 "$db" "select count(*) from thread_track" 2>&1)
	check "exported views readable by sqlite3 ($got)" [ "${got:-0}" -ge 4 ] 2>/dev/null
else
	echo "SKIP export contents: no sqlite3 CLI"
fi
leftover=$(find "$tmp" -name 'export.db.tmp-*' | wc -l)
check "export leaves no temporary file" [ "$leftover" = 0 ]
"$bin" --quiet "$trace" -e "$tmp/no-such-dir/x.db" >/dev/null 2>"$tmp/export2.err"
rc=$?
check "export to a bad path exits 1 (exit $rc)" [ $rc -eq 1 ]

# ---- --summary -----------------------------------------------------------
"$bin" --quiet "$trace" --summary >"$tmp/summary.out" 2>&1
rc=$?
check "--summary exits 0 (exit $rc)" [ $rc -eq 0 ]
check "--summary lists slice rows" \
	grep -Eq "^ +slice +$((events / 2))\$" "$tmp/summary.out"
check "--summary prints stats" grep -q '^stats' "$tmp/summary.out"

# ---- CSV format ----------------------------------------------------------
"$bin" --quiet "$trace" -Q "select null as n, -3 as i, 2.5 as r, 'x y' as s;
create table t(a);
select 1 as one" >"$tmp/csv.out" 2>"$tmp/csv.err"
printf '"n","i","r","s"\n"[NULL]",-3,2.500000,"x y"\n\n"one"\n1\n' >"$tmp/csv.want"
if cmp -s "$tmp/csv.out" "$tmp/csv.want"; then
	pass "CSV: NULL, numbers, strings, blank line between result sets"
else
	fail "CSV format" "$(diff "$tmp/csv.want" "$tmp/csv.out" | tr '\n' ' ')"
fi
printf 'select count(*) as c from slice;\n' >"$tmp/q.sql"
got=$("$bin" --quiet "$trace" -q "$tmp/q.sql" 2>/dev/null)
check "-q FILE" [ "$got" = "\"c\"
$((events / 2))" ]
got=$(echo "select 7 as seven;" | "$bin" --quiet "$trace" 2>/dev/null)
check "SQL from stdin when it is not a terminal" [ "$got" = '"seven"
7' ]

# ---- a merged host + guest trace ------------------------------------------
# Every guest slice, whatever clock its timestamps were written in (packet
# BOOTTIME, MONOTONIC, sequence-scoped, legacy microseconds), must land on
# the host's time axis: inside the span the host trace covers.
tracegen=$build/tests/vperfetto_tracegen
merge=$build/merge/vperfetto_merge
if [ -x "$tracegen" ] && [ -x "$merge" ]; then
	"$tracegen" --host "$tmp/host.pb" --guest "$tmp/guest.pb" --seed 5 \
		--duration-s 5 --exchanges 20 >/dev/null &&
		"$merge" "$tmp/host.pb" "$tmp/guest.pb" -o "$tmp/merged.pb" \
			>/dev/null 2>&1
	trace=$tmp/merged.pb
	got=$(q "select count(*) from slice s join track t on s.track_id = t.id
		 where t.machine_id = 1")
	check "merged trace: guest slices on machine 1 ($got)" [ "${got:-0}" -gt 0 ]
	got=$(q "with h as (select min(ts) lo, max(ts) hi from slice s
		   join track t on s.track_id = t.id where t.machine_id is null)
		 select count(*) from slice s join track t on s.track_id = t.id, h
		 where t.machine_id = 1 and (s.ts < h.lo - 1000000000
		   or s.ts > h.hi + 1000000000)")
	check "merged trace: every guest slice on the host's time axis ($got outside)" \
		[ "$got" = 0 ]
else
	echo "SKIP merged trace: no $tracegen or $merge"
fi

echo
if [ $failures -ne 0 ]; then
	echo "tp_e2e: $failures check(s) failed"
	exit 1
fi
echo "tp_e2e: all checks passed"
