#!/usr/bin/env bash
# guest_agent_e2e.sh - vperfetto_guest_agent end to end: the agent writes
# into vtraced on temporary sockets, exchanges with sync_responder (a test
# double of the host's sync endpoint) over a UNIX socket, vperfetto records
# the "cros" category, and vperfetto_tp checks what arrived.  Then the
# merge reads the recorded guest trace against a host trace of the same
# machine made by vperfetto_tracegen, and must find every exchange.
#
# Usage: guest_agent_e2e.sh AGENT RESPONDER VTRACED VPERFETTO VPERFETTO_TP
#                           VPERFETTO_MERGE VPERFETTO_TRACEGEN
#
# Scenarios:
#   clean    the responder answers everything
#   rough    late replies (stale after a timeout), garbage, dropped requests
#   dies     the responder exits after 30 replies and comes back later:
#            samples keep coming, exchanges resume after a reconnect
#   count    --count and bad flags
#   merge    vperfetto_merge --report on the clean recording
# Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 7 ]; then
	echo "usage: $0 AGENT RESPONDER VTRACED VPERFETTO VPERFETTO_TP" \
		"VPERFETTO_MERGE VPERFETTO_TRACEGEN" >&2
	exit 2
fi
agent=$1
responder=$2
vtraced=$3
consumer=$4
tp=$5
merge=$6
tracegen=$7
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$vtraced
E2E_TP=$tp
e2e_init guest_e2e
tmp=$E2E_DIR

# A summary field of the agent's last line: "... exchanges ok N ..." etc.
summary_field() { # LOG 'exchanges ok'
	sed -n "s/.*$2 \([0-9]*\).*/\1/p" "$1" | tail -n 1
}

SYNC="name = 'guest_clock_sync'"
EX="name = 'guest_clock_sync_exchange'"
arg() { echo "extract_arg(arg_set_id, 'debug.$1')"; }

# The samples: about every 100 ms, three args from one sandwich, the event
# at the BOOTTIME value, no gap even while the host is away.
check_samples() { # NAME TRACE MIN_COUNT
	local n=$1 t=$2
	expect_ge "$n: guest_clock_sync samples" "$t" \
		"select count(*) from slice where $SYNC" "$3"
	expect "$n: every sample has the three args" "$t" \
		"select count(*) from slice where $SYNC and
		 ($(arg clock_sync_boottime) is null or
		  $(arg clock_sync_monotonic) is null or
		  $(arg clock_sync_cputime) is null)" 0
	expect "$n: sample timestamp is its BOOTTIME value" "$t" \
		"select count(*) from slice where $SYNC and
		 ts != $(arg clock_sync_boottime)" 0
	# BOOTTIME - MONOTONIC is the time spent suspended: never less than
	# the few ns between the two reads, and the same in every sample
	expect "$n: BOOTTIME - MONOTONIC is >= 0 and steady" "$t" \
		"select min(b - m) > -1000000 and max(b - m) - min(b - m) <
		 1000000 from (select $(arg clock_sync_boottime) as b,
		 $(arg clock_sync_monotonic) as m from slice where $SYNC)" 1
	# mean period within 80..130 ms, no gap over 600 ms, and the counter
	# grows with time
	expect "$n: mean sample period ~100 ms" "$t" \
		"select (max(ts) - min(ts)) / (count(*) - 1) between 80000000
		 and 130000000 from slice where $SYNC" 1
	expect "$n: no gap between samples over 600 ms" "$t" \
		"select count(*) from (select ts - lag(ts) over (order by ts)
		 as d from slice where $SYNC) where d > 600000000" 0
	expect "$n: the counter grows with time" "$t" \
		"select count(*) from (select $(arg clock_sync_cputime) -
		 lag($(arg clock_sync_cputime)) over (order by ts) as d
		 from slice where $SYNC) where d <= 0" 0
}

# The exchanges: all four args, send <= host <= recv (one machine, one
# counter), unique increasing seqs.
check_exchanges() { # NAME TRACE MIN_COUNT
	local n=$1 t=$2
	expect_ge "$n: exchanges" "$t" \
		"select count(*) from slice where $EX" "$3"
	expect "$n: every exchange has the four args" "$t" \
		"select count(*) from slice where $EX and
		 ($(arg sync_seq) is null or $(arg guest_cputime_send) is null
		  or $(arg guest_cputime_recv) is null or
		  $(arg host_cputime) is null)" 0
	expect "$n: send <= host <= recv in every exchange" "$t" \
		"select count(*) from slice where $EX and not
		 ($(arg guest_cputime_send) <= $(arg host_cputime) and
		  $(arg host_cputime) <= $(arg guest_cputime_recv))" 0
	expect "$n: seqs unique and increasing" "$t" \
		"select count(*) from (select $(arg sync_seq) -
		 lag($(arg sync_seq)) over (order by ts) as d
		 from slice where $EX) where d <= 0" 0
}

write_config() { # FILE DURATION_MS
	cat >"$1" <<CFG
buffers { size_kb: 4096 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "track_event"
    track_event_config { enabled_categories: "cros" }
  }
}
duration_ms: $2
CFG
}

# start_vt DIR: vtraced on DIR/p.sock and DIR/c.sock; sets vt_pid.
start_vt() {
	start_vtraced "$1" || fail "vtraced did not start"
	vt_pid=$VTRACED_PID
}

start_responder() { # DIR LOGNAME [options]
	local d=$1 log=$2
	shift 2
	timeout 120 "$responder" --listen "$d/h.sock" "$@" >>"$d/$log" 2>&1 &
	resp_pid=$!
	e2e_track $resp_pid
}

start_agent() { # DIR
	timeout 120 "$agent" --producer-socket "$1/p.sock" \
		--host "unix:$1/h.sock" -v >"$1/agent.out" 2>"$1/agent.err" &
	agent_pid=$!
	e2e_track $agent_pid
	# Let the SDK connect and register before the session starts.
	sleep 1
}

record() { # DIR DURATION_MS
	write_config "$1/config.txt" "$2"
	if ! timeout 60 "$consumer" --consumer-socket "$1/c.sock" \
		-c "$1/config.txt" --txt -o "$1/trace.pb" \
		>"$1/consumer.log" 2>&1; then
		fail "$(basename "$1"): the consumer failed: $(cat "$1/consumer.log")"
	fi
}

stop_agent() { # DIR NAME
	kill -TERM "$agent_pid" 2>/dev/null
	if wait "$agent_pid"; then
		pass "$2: the agent stopped cleanly on SIGTERM"
	else
		fail "$2: the agent exited with an error: $(cat "$1/agent.err")"
	fi
	if grep -q "ticks [0-9]* (traced [0-9]*), exchanges ok" "$1/agent.out"
	then
		pass "$2: the agent printed its summary"
	else
		fail "$2: no summary: $(cat "$1/agent.out")"
	fi
}

# ---- clean --------------------------------------------------------------
d=$tmp/clean
mkdir -p "$d"
start_vt "$d"
start_responder "$d" responder.log
wait_for_socket "$d/h.sock" || fail "clean: the responder did not start"
start_agent "$d"
record "$d" 3000
stop_agent "$d" clean
e2e_stop "$resp_pid" "$vt_pid"
t=$d/trace.pb
if [ -s "$t" ]; then
	check_samples clean "$t" 20
	check_exchanges clean "$t" 20
	recorded=$(query "$t" "select count(*) from slice where $EX")
	ok=$(summary_field "$d/agent.out" "exchanges ok")
	if [ -n "$ok" ] && [ "$ok" -ge "$recorded" ]; then
		pass "clean: the summary counts every recorded exchange ($ok >= $recorded)"
	else
		fail "clean: summary says ok '$ok', recorded $recorded"
	fi
else
	fail "clean: no trace written"
fi

# ---- rough --------------------------------------------------------------
# Every 5th reply 700 ms late (the agent times out at 500 ms; the late
# reply then arrives during the next exchange and must be skipped), junk
# before every 3rd reply, every 11th request never answered.
d=$tmp/rough
mkdir -p "$d"
start_vt "$d"
start_responder "$d" responder.log --delay-ms 700 --delay-every 5 \
	--garbage-every 3 --drop-every 11
wait_for_socket "$d/h.sock" || fail "rough: the responder did not start"
start_agent "$d"
record "$d" 2500
stop_agent "$d" rough
e2e_stop "$resp_pid" "$vt_pid"
t=$d/trace.pb
if [ -s "$t" ]; then
	check_samples rough "$t" 20
	check_exchanges rough "$t" 8
	for f in "stale replies" "garbage bytes" "failed"; do
		v=$(summary_field "$d/agent.out" "$f")
		if [ -n "$v" ] && [ "$v" -gt 0 ]; then
			pass "rough: summary: $f $v"
		else
			fail "rough: summary has no $f: $(cat "$d/agent.out")"
		fi
	done
else
	fail "rough: no trace written"
fi

# ---- dies ---------------------------------------------------------------
# The responder exits after 30 replies (about 3 s: the session has been on
# for a while by then); 1.5 s later a new one starts.  The agent backs off
# (100, 200, 400, 800, 1600 ms ...) and reconnects.
d=$tmp/dies
mkdir -p "$d"
start_vt "$d"
start_responder "$d" responder.log --die-after 30
wait_for_socket "$d/h.sock" || fail "dies: the responder did not start"
start_agent "$d"
write_config "$d/config.txt" 7000
timeout 60 "$consumer" --consumer-socket "$d/c.sock" -c "$d/config.txt" \
	--txt -o "$d/trace.pb" >"$d/consumer.log" 2>&1 &
cons_pid=$!
e2e_track $cons_pid
for _ in $(seq 300); do # it dies after its 30 replies
	kill -0 "$resp_pid" 2>/dev/null || break
	sleep 0.1
done
if grep -q "dying after 30" "$d/responder.log"; then
	pass "dies: the responder died after 30 replies"
else
	fail "dies: the responder did not die: $(cat "$d/responder.log")"
fi
sleep 1.5
start_responder "$d" responder2.log
if ! wait "$cons_pid"; then
	fail "dies: the consumer failed: $(cat "$d/consumer.log")"
fi
stop_agent "$d" dies
e2e_stop "$resp_pid" "$vt_pid"
t=$d/trace.pb
if [ -s "$t" ]; then
	check_samples dies "$t" 40
	check_exchanges dies "$t" 10
	# The longest pause between exchanges: over a second, with samples
	# inside it and exchanges again after it.
	IFS=, read -r gap_end gap_len <<<"$(query "$t" \
		"select ts, d from (select ts, ts - lag(ts) over (order by ts)
		 as d from slice where $EX) order by d desc limit 1")"
	if [[ "$gap_len" =~ ^[0-9]+$ ]] && [ "$gap_len" -gt 1000000000 ]; then
		pass "dies: the exchanges pause while the host is away ($gap_len ns)"
		expect_ge "dies: exchanges resume after the pause" "$t" \
			"select count(*) from slice where $EX and
			 ts >= $gap_end" 5
		expect_ge "dies: samples continue during the pause" "$t" \
			"select count(*) from slice where $SYNC and
			 ts > $((gap_end - gap_len)) and ts < $gap_end" 8
	else
		fail "dies: no pause of over 1 s in the exchanges: '$gap_len'"
	fi
	v=$(summary_field "$d/agent.out" "reconnects")
	if [ -n "$v" ] && [ "$v" -ge 1 ]; then
		pass "dies: summary: reconnects $v"
	else
		fail "dies: no reconnect counted: $(cat "$d/agent.out")"
	fi
	if grep -q "connected" "$d/agent.err"; then
		pass "dies: the agent logged the reconnect"
	else
		fail "dies: no reconnect in the log: $(cat "$d/agent.err")"
	fi
else
	fail "dies: no trace written"
fi

# ---- count and flags ----------------------------------------------------
d=$tmp/count
mkdir -p "$d"
# No service, no host: --count still ends the run (samples are taken
# whether or not a session wants them; failed connects count as attempts).
if timeout 30 "$agent" --producer-socket "$d/none.sock" \
	--host "$d/no-such-port" --period-ms 20 --count 5 \
	>"$d/out" 2>"$d/err"; then
	if grep -q "ticks 5 (traced 0)" "$d/out" &&
		[ "$(summary_field "$d/out" "connect failures")" -ge 5 ]; then
		pass "count: --count 5 stops after 5 samples and 5 attempts"
	else
		fail "count: unexpected summary: $(cat "$d/out")"
	fi
	if grep -q "no-such-port" "$d/err"; then
		pass "count: the unreachable host is named on stderr"
	else
		fail "count: no message about the host: $(cat "$d/err")"
	fi
else
	fail "count: the agent failed: $(cat "$d/err")"
fi
if timeout 30 "$agent" --producer-socket "$d/none.sock" --no-exchange \
	--period-ms 10 --count 3 >"$d/out2" 2>&1 &&
	grep -q "ticks 3 .*exchanges ok 0 failed 0" "$d/out2"; then
	pass "count: --no-exchange --count 3"
else
	fail "count: --no-exchange: $(cat "$d/out2")"
fi
for bad in "--bogus" "--period-ms 0" "--period-ms x" "--count -1" \
	"--host foo:1" "--host vsock://2:0" "--host /" "extra"; do
	# shellcheck disable=SC2086
	timeout 30 "$agent" --producer-socket "$d/none.sock" $bad \
		>"$d/bad.out" 2>"$d/bad.err"
	rc=$?
	if [ $rc -eq 1 ] && grep -q "usage" "$d/bad.err" &&
		[ "$(wc -l <"$d/bad.err")" -ge 2 ]; then
		pass "flags: '$bad' is rejected with a message"
	else
		fail "flags: '$bad' gave rc $rc: $(cat "$d/bad.err")"
	fi
done

# ---- merge --------------------------------------------------------------
# A host trace of this same machine: vperfetto_tracegen with the counter
# frequency, counter and BOOTTIME taken from the clean recording (host =
# guest here, so the true counter offset is 0).  The merge must find every
# recorded sample and exchange, see no causality violation, and its offset
# interval from the exchanges must contain 0.
t=$tmp/clean/trace.pb
d=$tmp/merge
mkdir -p "$d"
if [ -s "$t" ]; then
	q="select min(ts), max(ts),
	   (select $(arg clock_sync_cputime) from slice where $SYNC
	    order by ts limit 1),
	   (select $(arg clock_sync_cputime) from slice where $SYNC
	    order by ts desc limit 1)
	   from slice where $SYNC"
	IFS=, read -r b0 b1 c0 c1 <<<"$(query "$t" "$q")"
	n_samples=$(query "$t" "select count(*) from slice where $SYNC")
	n_ex=$(query "$t" "select count(*) from slice where $EX")
	# counter ticks per second, and the host trace starting 1 s early
	hz=$(( (c1 - c0) * 1000000 / ((b1 - b0) / 1000) ))
	cat >"$d/params.txt" <<P
seed=1
duration_ns=$((b1 - b0 + 3000000000))
sync_period_ns=100000000
offset=0
tsc_ratio=281474976710656
tsc_frac_bits=48
drift_ppm=0
jitter_ns=10
outlier_every=0
host_step_ns=0
host_step_at=0.5
n_events=10
n_threads=1
n_cpus=1
use_kvm_tsc=0
n_exchanges=0
target_bytes=0
vm_pid=4242
incr_unit_ns=1000
host_hz=$hz
c0=$((c0 - hz))
hb0=$((b0 - 1000000000))
gb0=$((b0 - 1000000000))
guest_mono_lag_ns=0
guest_realtime_offset_ns=1700000000000000000
P
	if ! "$tracegen" --params "$d/params.txt" --host "$d/host.pb" \
		--guest "$d/unused.pb" -q >"$d/tracegen.log" 2>&1; then
		fail "merge: tracegen failed: $(cat "$d/tracegen.log")"
	elif ! "$merge" "$d/host.pb" "$t" -o "$d/merged.pb" \
		--report "$d/report.json" >"$d/merge.log" 2>&1; then
		fail "merge: vperfetto_merge failed: $(cat "$d/merge.log")"
	else
		r=$(tr -d ' \n' <"$d/report.json")
		want="\"exchanges\":{\"count\":$n_ex,\"causality_violations\":0"
		if [[ "$r" == *"$want"* ]]; then
			pass "merge: report has all $n_ex exchanges, no causality violation"
		else
			fail "merge: report lacks '$want': $(cat "$d/report.json")"
		fi
		if [[ "$r" == *"\"from_sync_events\":$n_samples"* ]]; then
			pass "merge: report has all $n_samples samples"
		else
			fail "merge: samples != $n_samples: $(cat "$d/report.json")"
		fi
		if [[ "$r" == *'"counter_map":{"source":"exchanges"'* ]]; then
			pass "merge: the counter map comes from the exchanges"
		else
			fail "merge: counter map not from exchanges: $r"
		fi
		lo=$(sed -n 's/.*"offset_interval":\[\(-\{0,1\}[0-9]*\),\(-\{0,1\}[0-9]*\)\].*/\1/p' <<<"$r")
		hi=$(sed -n 's/.*"offset_interval":\[\(-\{0,1\}[0-9]*\),\(-\{0,1\}[0-9]*\)\].*/\2/p' <<<"$r")
		if [ -n "$lo" ] && [ -n "$hi" ] && [ "$lo" -le 0 ] &&
			[ "$hi" -ge 0 ]; then
			pass "merge: offset interval [$lo, $hi] contains 0"
		else
			fail "merge: offset interval '$lo'..'$hi' lacks 0"
		fi
		expect "merge: the merged trace holds the guest's exchanges" \
			"$d/merged.pb" "select count(*) from slice where $EX" \
			"$n_ex"
	fi
else
	fail "merge: no clean recording to merge"
fi

e2e_finish guest_agent_e2e
