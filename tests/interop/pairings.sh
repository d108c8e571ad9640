#!/bin/bash
# pairings.sh - each of our programs with each of Perfetto's, both ways:
#
#   traced  + our SDK producer        + our consumer / Perfetto's client
#   traced  + our vtraced_probes      + our consumer
#   vtraced + Perfetto's traced_probes + Perfetto's client
#   vtraced + Perfetto's client --detach / --attach
#   vtraced_probes beside traced_probes, the same config: the same kinds
#   of packets, the same non-empty tables
#
# Every trace is read by vperfetto_tp and, when it is built, by Perfetto's
# trace_processor_shell too, and both must give the same counts.
#
#   pairings.sh BUILD_DIR
#
# Perfetto's programs come from PERFETTO_BIN (default
# ~/.cache/perfetto-real/bin, from ../shared/perfetto/build.sh); without
# traced, traced_probes and perfetto the test prints why and exits 77.
# The ftrace pairings need root and tracefs; where they are missing those
# checks are skipped with the reason printed.
set -u
B=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/e2e_lib.sh"
e2e_need_perfetto traced traced_probes perfetto
TPS=$PB/trace_processor_shell
[ -x "$TPS" ] || TPS=
E2E_VTRACED=$B/service/vtraced
E2E_TP=$B/processor/vperfetto_tp
WRITER=$B/tests/stack/stack_writer
PROBES=$B/probes/vtraced_probes
CONSUMER=$B/consumer/vperfetto
e2e_init pairings
D=$E2E_DIR
T=60 # seconds any one command may take

ftrace_ok=
e2e_ftrace_usable && ftrace_ok=1
ftrace_why=$E2E_FTRACE_WHY

# Both sockets of one side, for the programs that follow.
use_side() {
	export PERFETTO_PRODUCER_SOCK_NAME=$1/p.sock
	export PERFETTO_CONSUMER_SOCK_NAME=$1/c.sock
}

start_traced() {
	mkdir -p "$1"
	use_side "$1"
	LD_LIBRARY_PATH=$PB "$PB/traced" >"$1/traced.log" 2>&1 &
	e2e_track $!
	wait_for_socket "$1/c.sock" && wait_for_socket "$1/p.sock"
}

start_ours() {
	mkdir -p "$1"
	use_side "$1"
	E2E_VTRACED_ENV=1 start_vtraced "$1"
}

# count_both TRACE SQL: one number, the same from both processors (a
# difference fails and prints both); in $N.
count_both() {
	N=$(query_rows "$1" "$2")
	if [ -n "$TPS" ]; then
		local theirs
		theirs=$("$TPS" -Q "$2" "$1" 2>/dev/null | tail -n 1 | tr -d '"')
		check "Perfetto's processor agrees on '$2' in $(basename "$1") (ours $N, theirs $theirs)" \
			test "$N" = "$theirs"
	fi
}

# no_errors TRACE: Perfetto's processor finds no error or data loss in it
# (where it is built).
no_errors() {
	[ -n "$TPS" ] || return 0
	local errs
	errs=$("$TPS" -Q "select name || '=' || value from stats where severity in ('error', 'data_loss') and value > 0" "$1" 2>/dev/null | tail -n +2 | tr -d '"' | tr '\n' ' ')
	check "Perfetto's processor finds no error in $(basename "$1") (${errs:-none})" \
		test -z "$errs"
}

TE_CFG=$D/te.txt
cat >"$TE_CFG" <<'CFG'
buffers { size_kb: 8192 }
data_sources { config { name: "track_event"
  track_event_config { enabled_categories: "stack" } } }
duration_ms: 4000
CFG

# ---- traced with our SDK producer, read by both consumers ------------------

start_traced "$D/t" || fail "traced did not start"
for client in ours theirs; do
	out=$D/t_sdk_$client.pb
	if [ $client = ours ]; then
		timeout $T "$CONSUMER" --txt -c "$TE_CFG" -o "$out" \
			>"$D/t_sdk_$client.log" 2>&1 &
	else
		timeout $T "$PB/perfetto" --txt -c "$TE_CFG" -o "$out" \
			>"$D/t_sdk_$client.log" 2>&1 &
	fi
	C=$!
	sleep 0.5
	timeout $T "$WRITER" --threads 2 --events 300 --wait-ms 10000 \
		>"$D/writer_$client.log" 2>&1
	check "traced: our SDK producer wrote its events ($client consumer)" \
		test $? = 0
	wait $C
	check "traced: the $client consumer wrote the trace" test $? = 0
	count_both "$out" "select count(*) from slice where name = 'work' and dur >= 0"
	check "traced + our SDK + $client consumer: 600 of 600 slices (got $N)" \
		test "$N" = 600
done

# ---- traced with our vtraced_probes ------------------------------------------

PROBE_CFG=$D/probes.txt
cat >"$PROBE_CFG" <<'CFG'
buffers { size_kb: 16384 }
data_sources { config { name: "linux.ftrace" ftrace_config {
  ftrace_events: "sched/sched_switch" ftrace_events: "sched/sched_waking"
  ftrace_events: "task/task_newtask" ftrace_events: "task/task_rename"
  ftrace_events: "sched/sched_process_exit"
  ftrace_events: "sched/sched_process_free" } } }
data_sources { config { name: "linux.process_stats"
  process_stats_config { scan_all_processes_on_start: true } } }
data_sources { config { name: "linux.sys_stats" sys_stats_config {
  meminfo_period_ms: 100 vmstat_period_ms: 100 stat_period_ms: 100
  stat_counters: STAT_CPU_TIMES stat_counters: STAT_FORK_COUNT } } }
data_sources { config { name: "linux.system_info" } }
duration_ms: 2000
CFG

# record_probes SIDE_DIR PROBES_CMD OUT CONSUMER: one recording with the
# given probes program on the given service.
record_probes() {
	local dir=$1 probes=$2 out=$3 consumer=$4
	use_side "$dir"
	LD_LIBRARY_PATH=$PB $probes >"$out.probes.log" 2>&1 &
	local P=$!
	e2e_track $P
	sleep 1 # the probes register their data sources
	( for _ in 1 2 3 4 5 6 7 8; do sh -c 'sleep 0.1' ; done ) &
	timeout $T "$consumer" --txt -c "$PROBE_CFG" -o "$out" \
		>"$out.consumer.log" 2>&1
	local rc=$?
	kill $P 2>/dev/null
	wait $P 2>/dev/null
	return $rc
}

# probe_checks LABEL TRACE: what a recording of the probes must hold.
probe_checks() {
	count_both "$2" "select count(*) > 100 from sched"
	check "$1: sched rows" test "$N" = 1
	count_both "$2" "select count(*) > 10 from process"
	check "$1: processes" test "$N" = 1
	count_both "$2" \
		"select count(*) > 0 from counter join counter_track t on t.id = track_id where t.name = 'MemTotal'"
	check "$1: memory counters" test "$N" = 1
}

if [ -n "$ftrace_ok" ]; then
	record_probes "$D/t" "$PROBES" "$D/t_probes.pb" "$CONSUMER"
	check "traced + vtraced_probes + our consumer: a trace" test $? = 0
	probe_checks "traced + vtraced_probes" "$D/t_probes.pb"
else
	echo "SKIP (ftrace pairings): $ftrace_why"
fi

# ---- vtraced with Perfetto's traced_probes and client -------------------------

start_ours "$D/v" || fail "vtraced did not start"
if [ -n "$ftrace_ok" ]; then
	record_probes "$D/v" "$PB/traced_probes" "$D/v_probes.pb" "$PB/perfetto"
	check "vtraced + traced_probes + Perfetto's client: a trace" test $? = 0
	probe_checks "vtraced + traced_probes" "$D/v_probes.pb"
fi

# ---- vtraced with Perfetto's client, detached and attached again ------------

use_side "$D/v"
# Perfetto's client detaches only from sessions that write into a file:
# the service then writes the trace into the file given at --detach.
sed 's/duration_ms: 4000/duration_ms: 3000/' "$TE_CFG" >"$D/te3.txt"
printf 'write_into_file: true\nfile_write_period_ms: 500\n' >>"$D/te3.txt"
timeout $T "$PB/perfetto" --txt -c "$D/te3.txt" --detach=pair_key \
	-o "$D/v_detach.pb" >"$D/detach.log" 2>&1
check "perfetto --detach=KEY on vtraced exits 0" test $? = 0
timeout $T "$PB/perfetto" --is_detached=pair_key >"$D/isdet.log" 2>&1
rc=$?
check "perfetto --is_detached=KEY says it is (exit 0, got $rc)" test $rc = 0
timeout $T "$WRITER" --threads 1 --events 200 --wait-ms 10000 \
	>"$D/writer_detach.log" 2>&1
check "our SDK producer wrote into the detached session" test $? = 0
timeout $T "$PB/perfetto" --attach=pair_key >"$D/attach.log" 2>&1
check "perfetto --attach=KEY on vtraced exits 0" test $? = 0
count_both "$D/v_detach.pb" "select count(*) from slice where name = 'work'"
check "the detached session's trace has 200 of 200 slices (got $N)" \
	test "$N" = 200

# ---- vtraced_probes beside traced_probes --------------------------------------

# The same config on each side's own stack, one after the other: the kinds
# of TracePacket (its field numbers) and the tables that are not empty.
kinds() {
	python3 - "$1" <<'PY'
import sys
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i
def fields(b):
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        wt = tag & 7
        if wt == 0:
            _, i = varint(b, i); yield tag >> 3, None
        elif wt == 1:
            i += 8; yield tag >> 3, None
        elif wt == 5:
            i += 4; yield tag >> 3, None
        elif wt == 2:
            n, i = varint(b, i); yield tag >> 3, b[i:i + n]; i += n
        else:
            return
kinds = set()
for num, pkt in fields(open(sys.argv[1], 'rb').read()):
    if num == 1 and pkt is not None:
        kinds.update(n for n, _ in fields(pkt))
print(' '.join(str(k) for k in sorted(kinds)))
PY
}
if [ -n "$ftrace_ok" ]; then
	record_probes "$D/t" "$PB/traced_probes" "$D/t_theirs.pb" "$PB/perfetto"
	check "traced + traced_probes: a trace" test $? = 0
	record_probes "$D/v" "$PROBES" "$D/v_ours.pb" "$CONSUMER"
	check "vtraced + vtraced_probes: a trace" test $? = 0
	theirs=$(kinds "$D/t_theirs.pb")
	ours=$(kinds "$D/v_ours.pb")
	echo "packet fields, traced_probes on traced: $theirs"
	echo "packet fields, vtraced_probes on vtraced: $ours"
	check "the same kinds of packet" test "$theirs" = "$ours"
	for tbl in sched thread_state process thread counter ftrace_event; do
		q="select count(*) > 0 from $tbl"
		a=$(query_rows "$D/t_theirs.pb" "$q")
		b=$(query_rows "$D/v_ours.pb" "$q")
		check "table $tbl: non-empty on both or neither (traced_probes $a, vtraced_probes $b)" \
			test "$a" = "$b"
	done
	q="select group_concat(name) from (select distinct name from counter_track where name not like 'cpu.%' order by name)"
	a=$(query_rows "$D/t_theirs.pb" "$q")
	b=$(query_rows "$D/v_ours.pb" "$q")
	check "the same system counters (traced_probes: $a; vtraced_probes: $b)" \
		test "$a" = "$b"
fi
for t in "$D"/t_sdk_ours.pb "$D"/t_sdk_theirs.pb "$D"/v_detach.pb \
	"$D"/v_probes.pb "$D"/v_ours.pb "$D"/t_probes.pb; do
	[ -f "$t" ] && no_errors "$t"
done
e2e_finish pairings
