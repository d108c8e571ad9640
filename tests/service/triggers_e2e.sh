#!/usr/bin/env bash
# triggers_e2e.sh - TraceConfig.trigger_config in vtraced, as traced runs
# it: STOP_TRACING (a trigger stops the session after its stop_delay_ms;
# none, and it ends at trigger_timeout_ms with an empty trace),
# START_TRACING (nothing is recorded before the trigger; none, and it ends
# at the timeout), producer_name_regex, skip_probability, max_per_24_h,
# the TracePacket.trigger the service writes, and the configs traced
# refuses.  Triggers come from a producer's ActivateTriggers
# (trigger_tool.py, as Perfetto's `perfetto --trigger`, trigger_perfetto
# and a config's activate_triggers send them), and from Perfetto's own
# `perfetto` with activate_triggers when it is built.
#
# usage: triggers_e2e.sh BUILD_DIR PROTOS_DIR TRIGGER_TOOL
set -uo pipefail
B=$1
PROTOS=$(readlink -f "$2")
TOOL=$(readlink -f "$3")
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
VP=$(readlink -f "$B/consumer/vperfetto")
E2E_VTRACED=$(readlink -f "$B/service/vtraced")
WRITER=$(readlink -f "$B/tests/stack/stack_writer")
e2e_init vp-triggers
D=$E2E_DIR
export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
start_vtraced "$D" -v || { fail "vtraced did not start"; e2e_finish triggers; }

now_ms() { date +%s%3N; }
trig() { # trig PRODUCER_NAME TRIGGER...
	timeout 20 python3 "$TOOL" "$PROTOS" activate "$D/p.sock" "$@"
}
summary() { python3 "$TOOL" "$PROTOS" summary "$1"; }
val() { # val SUMMARY_FILE KEY: the value of "KEY value"
	awk -v k="$2" '$1 == k { print $2; exit }' "$1"
}
# cfg FILE TRIGGER_CONFIG...: a track_event session of category "stack"
cfg() {
	local f=$1
	shift
	printf 'buffers { size_kb: 4096 }\ndata_sources { config { name: "track_event" track_event_config { enabled_categories: "stack" } } }\ntrigger_config { %s }\n' \
		"$*" >"$f"
}
# A producer writing events of "stack" whenever a session enables it.
"$WRITER" --forever --threads 1 --pause-every 10 --pause-us 5000 \
	--wait-ms 120000 --name trig_writer >"$D/writer.log" 2>&1 &
e2e_track $!

# ---- STOP_TRACING, no trigger: ends at trigger_timeout_ms, empty -----------
cfg "$D/stop_none.txt" 'trigger_mode: STOP_TRACING trigger_timeout_ms: 2000' \
	'triggers { name: "boom" stop_delay_ms: 500 }'
t0=$(now_ms)
timeout 30 "$VP" --txt -c "$D/stop_none.txt" -o "$D/stop_none.pb" \
	>"$D/stop_none.log" 2>&1
rc=$?
el=$(($(now_ms) - t0))
summary "$D/stop_none.pb" >"$D/stop_none.sum"
if [ $rc = 0 ] && [ $el -ge 1900 ] && [ $el -lt 8000 ]; then
	pass "STOP_TRACING without a trigger ends at trigger_timeout_ms ($el ms)"
else
	fail "STOP_TRACING without a trigger: exit $rc after $el ms"
fi
check "... and its trace is empty, as traced's" \
	test "$(val "$D/stop_none.sum" packets)" = 0

# ---- STOP_TRACING with a trigger: stops stop_delay_ms after it -------------
cfg "$D/stop.txt" 'trigger_mode: STOP_TRACING trigger_timeout_ms: 60000' \
	'triggers { name: "boom" stop_delay_ms: 1500 }'
timeout 90 "$VP" --txt -c "$D/stop.txt" -o "$D/stop.pb" \
	>"$D/stop.log" 2>&1 &
vp=$!
sleep 1.5
t0=$(now_ms)
check "ActivateTriggers is answered" trig trig_client boom
trig trig_client boom >/dev/null 2>&1 # a second one: kept, acts not
wait $vp
rc=$?
el=$(($(now_ms) - t0))
if [ $rc = 0 ] && [ $el -ge 1400 ] && [ $el -lt 20000 ]; then
	pass "a trigger stops a STOP_TRACING session after stop_delay_ms ($el ms)"
else
	fail "STOP_TRACING trigger: exit $rc, $el ms after the trigger"
fi
summary "$D/stop.pb" >"$D/stop.sum"
tline=$(grep -m1 '^trigger ' "$D/stop.sum")
if [[ "$tline" == "trigger boom producer=trig_client uid=$(id -u) delay=1500 "*" seq=1" ]]; then
	pass "the trace has the service's trigger packet ($tline)"
else
	fail "trigger packet: '$tline'"
fi
check "every trigger the session received is in it" \
	test "$(grep -c '^trigger boom' "$D/stop.sum")" = 2
tts=$(sed 's/.* ts=\([0-9]*\).*/\1/' <<<"$tline")
last=$(val "$D/stop.sum" last_event)
first=$(val "$D/stop.sum" first_event)
if [ -n "$last" ] && [ -n "$first" ] && [ "$first" -lt "$tts" ] &&
	[ $(((last - tts) / 1000000)) -ge 1000 ]; then
	pass "it recorded before the trigger and for its stop_delay_ms after ($(((last - tts) / 1000000)) ms)"
else
	fail "events: first $first last $last, trigger at $tts"
fi
check "its trace_config says duration_ms 60000 (trigger_timeout_ms), as traced's" \
	test "$(val "$D/stop.sum" duration_ms)" = 60000

# ---- START_TRACING, no trigger: ends at the timeout, empty -----------------
cfg "$D/start_none.txt" 'trigger_mode: START_TRACING trigger_timeout_ms: 2000' \
	'triggers { name: "go" stop_delay_ms: 1000 }'
t0=$(now_ms)
timeout 30 "$VP" --txt -c "$D/start_none.txt" -o "$D/start_none.pb" \
	>"$D/start_none.log" 2>&1
rc=$?
el=$(($(now_ms) - t0))
summary "$D/start_none.pb" >"$D/start_none.sum"
if [ $rc = 0 ] && [ $el -ge 1900 ] && [ $el -lt 8000 ] &&
	[ "$(val "$D/start_none.sum" packets)" = 0 ]; then
	pass "START_TRACING without a trigger ends at the timeout, empty ($el ms)"
else
	fail "START_TRACING without a trigger: exit $rc after $el ms," \
		"$(val "$D/start_none.sum" packets) packets"
fi

# ---- START_TRACING with a trigger: records from it for stop_delay_ms -------
cfg "$D/start.txt" 'trigger_mode: START_TRACING trigger_timeout_ms: 60000' \
	'triggers { name: "go" stop_delay_ms: 1500 }'
timeout 90 "$VP" --txt -c "$D/start.txt" -o "$D/start.pb" \
	>"$D/start.log" 2>&1 &
vp=$!
sleep 1.5
t0=$(now_ms)
trig trig_client go >/dev/null
wait $vp
rc=$?
el=$(($(now_ms) - t0))
if [ $rc = 0 ] && [ $el -ge 1400 ] && [ $el -lt 20000 ]; then
	pass "a trigger starts a START_TRACING session for stop_delay_ms ($el ms)"
else
	fail "START_TRACING trigger: exit $rc, $el ms after the trigger"
fi
summary "$D/start.pb" >"$D/start.sum"
tline=$(grep -m1 '^trigger go' "$D/start.sum")
tts=$(sed 's/.* ts=\([0-9]*\).*/\1/' <<<"$tline")
first=$(val "$D/start.sum" first_event)
n=$(val "$D/start.sum" track_events)
if [ -n "$tline" ] && [ "${n:-0}" -gt 0 ] && [ "$first" -ge "$tts" ]; then
	pass "nothing was recorded before the trigger ($n events after it)"
else
	fail "START_TRACING: trigger '$tline', $n events, first at $first"
fi
check "its trace_config says duration_ms 1500 (the trigger's stop_delay_ms)" \
	test "$(val "$D/start.sum" duration_ms)" = 1500

# ---- producer_name_regex, skip_probability ----------------------------------
cfg "$D/regex.txt" 'trigger_mode: STOP_TRACING trigger_timeout_ms: 60000' \
	'triggers { name: "boom" producer_name_regex: "only_me.*" }' \
	'triggers { name: "never" skip_probability: 1.0 }'
timeout 90 "$VP" --txt -c "$D/regex.txt" -o "$D/regex.pb" \
	>"$D/regex.log" 2>&1 &
vp=$!
sleep 1
trig someone_else boom >/dev/null
trig only_me_too never >/dev/null
sleep 1.5
check "a trigger of a producer its producer_name_regex does not match, or one skip_probability 1 skips, leaves the session running" \
	kill -0 $vp
trig only_me_1 boom >/dev/null
wait $vp
summary "$D/regex.pb" >"$D/regex.sum"
check "the producer it matches stops it, and only its trigger is recorded" \
	test "$(grep '^trigger' "$D/regex.sum" | cut -d' ' -f2,3)" = \
	"boom producer=only_me_1"

# ---- max_per_24_h -------------------------------------------------------------
cfg "$D/lim.txt" 'trigger_mode: STOP_TRACING trigger_timeout_ms: 2500' \
	'triggers { name: "lim" max_per_24_h: 1 }'
timeout 30 "$VP" --txt -c "$D/lim.txt" -o "$D/lim1.pb" >/dev/null 2>&1 &
vp=$!
sleep 1
trig trig_client lim >/dev/null
wait $vp
summary "$D/lim1.pb" >"$D/lim1.sum"
timeout 30 "$VP" --txt -c "$D/lim.txt" -o "$D/lim2.pb" >/dev/null 2>&1 &
vp=$!
sleep 1
trig trig_client lim >/dev/null
wait $vp
summary "$D/lim2.pb" >"$D/lim2.sum"
if grep -q '^trigger lim' "$D/lim1.sum" &&
	[ "$(val "$D/lim2.sum" packets)" = 0 ]; then
	pass "max_per_24_h 1: the second activation of the day is ignored"
else
	fail "max_per_24_h: $(grep -c '^trigger' "$D/lim1.sum") then" \
		"$(val "$D/lim2.sum" packets) packets"
fi

# ---- what traced refuses, and what vtraced does not implement --------------
refused() { # refused NAME MESSAGE TRIGGER_CONFIG [EXTRA CONFIG]
	local name=$1 msg=$2
	cfg "$D/$name.txt" "$3"
	[ $# -ge 4 ] && printf '%s\n' "$4" >>"$D/$name.txt"
	timeout 20 "$VP" --txt -c "$D/$name.txt" -o "$D/$name.pb" \
		>"$D/$name.log" 2>&1
	local rc=$?
	if [ $rc -ne 0 ] && grep -qF "$msg" "$D/$name.log"; then
		pass "refused: $name ($msg)"
	else
		fail "$name: exit $rc, $(tail -1 "$D/$name.log")"
	fi
}
refused no_timeout "needs a trigger_timeout_ms of 1 to 604800000 ms" \
	'trigger_mode: STOP_TRACING triggers { name: "t" }'
refused long_timeout "got 604800001" \
	'trigger_mode: START_TRACING trigger_timeout_ms: 604800001'
refused with_duration "duration_ms must not be set with trigger_config" \
	'trigger_mode: STOP_TRACING trigger_timeout_ms: 1000' 'duration_ms: 2000'
refused duplicate 'duplicate trigger name "t"' \
	'trigger_mode: STOP_TRACING trigger_timeout_ms: 1000 triggers { name: "t" } triggers { name: "t" }'
refused clone_flag "must be STOP_TRACING when use_clone_snapshot_if_available" \
	'trigger_mode: START_TRACING trigger_timeout_ms: 1000 use_clone_snapshot_if_available: true'
refused clone "CLONE_SNAPSHOT (or use_clone_snapshot_if_available) is not supported by vtraced" \
	'trigger_mode: CLONE_SNAPSHOT trigger_timeout_ms: 1000 triggers { name: "t" }'
refused bad_regex "is not a valid POSIX extended regex" \
	'trigger_mode: STOP_TRACING trigger_timeout_ms: 1000 triggers { name: "t" producer_name_regex: "(" }'
refused stop_file "STOP_TRACING or CLONE_SNAPSHOT with write_into_file" \
	'trigger_mode: STOP_TRACING trigger_timeout_ms: 1000' \
	'write_into_file: true'

# ---- Perfetto's own client activating a trigger --------------------------------
PB=${PERFETTO_BIN:-$HOME/.cache/perfetto-real/bin}
if [ -x "$PB/perfetto" ]; then
	cfg "$D/real.txt" 'trigger_mode: STOP_TRACING trigger_timeout_ms: 60000' \
		'triggers { name: "realboom" stop_delay_ms: 0 }'
	timeout 90 "$VP" --txt -c "$D/real.txt" -o "$D/real.pb" \
		>"$D/real.log" 2>&1 &
	vp=$!
	sleep 1
	# TraceConfig.activate_triggers: the client sends them as a producer
	# (what its --trigger and trigger_perfetto do) and exits
	printf 'activate_triggers: "realboom"\n' >"$D/real_trig.txt"
	LD_LIBRARY_PATH=$PB timeout 20 "$PB/perfetto" --txt \
		-c "$D/real_trig.txt" >"$D/real_trig.log" 2>&1
	rc=$?
	timeout 20 tail --pid=$vp -f /dev/null
	summary "$D/real.pb" >"$D/real.sum"
	if [ $rc = 0 ] && grep -q '^trigger realboom producer=perfetto_cmd_producer' \
		"$D/real.sum"; then
		pass "Perfetto's perfetto (activate_triggers) stops the session"
	else
		fail "perfetto activate_triggers: exit $rc, $(grep '^trigger' "$D/real.sum")"
	fi
	wait $vp
else
	echo "# skip: Perfetto's perfetto is not at $PB (its activate_triggers case)"
fi

e2e_finish triggers
