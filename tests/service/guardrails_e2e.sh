#!/usr/bin/env bash
# guardrails_e2e.sh - the limits vtraced puts on a consumer, as traced has
# them: at most 5 sessions at once per uid, a duration_ms of at most 7
# days, sessions of other users than the service's own held to three
# quarters of the buffer budget (so that nobody can lock its owner out),
# and TraceConfig.lockdown_mode: set, producers of other uids are refused
# until a config clears it.  And TraceConfig.trace_filter: a field the
# filter drops is not in the trace, filter_stats is, and a bytecode that
# does not load is refused.  The other users' cases need root (runuser).
#
# usage: guardrails_e2e.sh BUILD_DIR
set -uo pipefail
B=$1
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
VP=$(readlink -f "$B/consumer/vperfetto")
E2E_VTRACED=$(readlink -f "$B/service/vtraced")
WRITER=$(readlink -f "$B/tests/stack/stack_writer")
e2e_init vp-guardrails
D=$E2E_DIR
export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
start_vtraced "$D" -v || { fail "vtraced did not start"; e2e_finish guardrails; }

cfg() { # cfg FILE SIZE_KB: a config of one buffer for 2 s, no data source
	printf 'buffers { size_kb: %s }\nduration_ms: 2000\n' "$2" >"$1"
}

# ---- five sessions at once per uid -----------------------------------------
cfg "$D/small.txt" 64
for i in 1 2 3 4 5; do
	timeout 20 "$VP" --txt -c "$D/small.txt" --detach="k$i" \
		-o "$D/k$i.pb" >"$D/det$i.log" 2>&1
done
timeout 20 "$VP" --txt -c "$D/small.txt" --detach=k6 -o "$D/k6.pb" \
	>"$D/det6.log" 2>&1
grep -q "too many concurrent tracing sessions (5) for uid $(id -u), the limit is 5" \
	"$D/det6.log" "$D/vtraced.log" &&
	pass "a sixth session of one uid is refused" ||
	fail "sixth session: $(tail -2 "$D/det6.log")"
# ended, a detached session still counts until it is attached and read
for i in 1 2 3 4 5; do
	timeout 20 "$VP" --attach="k$i" -o "$D/k$i.pb" >/dev/null 2>&1
done
timeout 20 "$VP" --txt -c "$D/small.txt" --detach=k7 -o "$D/k7.pb" \
	>"$D/det7.log" 2>&1
check "once they ended, the uid may start one again" \
	grep -q "detached as 'k7'" "$D/det7.log"
timeout 20 "$VP" --attach=k7 -o "$D/k7.pb" >/dev/null 2>&1

# ... and --attach --stop ends one at once, as perfetto's does
printf 'buffers { size_kb: 64 }\nduration_ms: 600000\n' >"$D/long10.txt"
timeout 20 "$VP" --txt -c "$D/long10.txt" --detach=k8 -o "$D/k8.pb" \
	>"$D/det8.log" 2>&1
timeout 20 "$VP" --attach=k8 --stop -o "$D/k8.pb" >"$D/stop8.log" 2>&1
check "--attach --stop ends a session of 10 minutes now" \
	grep -q "wrote [0-9]* packets" "$D/stop8.log"

# ---- duration_ms ------------------------------------------------------------
printf 'buffers { size_kb: 64 }\nduration_ms: 604800001\n' >"$D/long.txt"
timeout 20 "$VP" --txt -c "$D/long.txt" -o "$D/long.pb" >"$D/long.log" 2>&1
grep -q "duration_ms 604800001 is too long (max 604800000, 7 days)" \
	"$D/long.log" "$D/vtraced.log" &&
	pass "a duration over 7 days is refused" ||
	fail "duration: $(tail -2 "$D/long.log")"

# ---- trace_filter ------------------------------------------------------------
# Perfetto's filter bytecode (trace_filter.py writes it, with its checksum):
# Trace.packet -> message 1, which allows TracePacket's fields 1..10,
# 12..32 and 34..1999, so it drops track_event (11) and trace_config (33).
# Facts from Perfetto's traced (v58.2): every packet read out is filtered,
# the service's too, but trace_stats; a packet emptied whole stays, empty;
# filter_stats counts every packet but trace_stats itself, and
# bytes_discarded_per_buffer only the buffers' packets; an invalid
# bytecode is refused "Trace filter bytecode invalid", one whose
# Trace.packet is no message "Failed to set filter root.".
TF=$(dirname "$0")/trace_filter.py
flt=$(python3 "$TF" bytecode 1:3:1 0 1:2:10 12:2:21 34:2:1966 0)
printf 'buffers { size_kb: 1024 }\ndata_sources { config { name: "track_event" track_event_config { enabled_categories: "stack" } } }\nduration_ms: 1500\ntrace_filter { bytecode_v2: "%s" }\n' \
	"$flt" >"$D/filt.txt"
printf 'buffers { size_kb: 1024 }\ndata_sources { config { name: "track_event" track_event_config { enabled_categories: "stack" } } }\nduration_ms: 1500\nwrite_into_file: true\nfile_write_period_ms: 300\ntrace_filter { bytecode_v2: "%s" }\n' \
	"$flt" >"$D/filtf.txt"
for c in filt filtf; do
	timeout 20 "$VP" --txt -c "$D/$c.txt" -o "$D/$c.pb" >"$D/$c.log" 2>&1 &
	FP=$!
	e2e_track "$FP"
	sleep 0.4
	timeout 10 "$WRITER" --events 50 --wait-ms 1000 >"$D/${c}w.log" 2>&1
	wait "$FP"
	if python3 "$TF" check "$D/$c.pb" >"$D/$c.check" 2>&1; then
		pass "$c: the filter dropped track_event and trace_config; $(cat "$D/$c.check")"
	else
		fail "$c: $(cat "$D/$c.check") $(tail -2 "$D/$c.log")"
	fi
done
bad_filter() { # bad_filter NAME TRACE_FILTER_TEXT MESSAGE
	printf 'buffers { size_kb: 64 }\nduration_ms: 2000\ntrace_filter { %s }\n' \
		"$2" >"$D/$1.txt"
	timeout 20 "$VP" --txt -c "$D/$1.txt" -o "$D/$1.pb" >"$D/$1.log" 2>&1
	local rc=$?
	if [ $rc -ne 0 ] && grep -qF "$3" "$D/$1.log" "$D/vtraced.log"; then
		pass "$1: refused with '$3'"
	else
		fail "$1: exit $rc, $(tail -2 "$D/$1.log")"
	fi
}
bad_filter filt_sum 'bytecode: "\x0b\x01\x00\x0a\x83\x07\x00\x9b\x92\xd4\xb4\x09"' \
	"Trace filter bytecode invalid"
bad_filter filt_short 'bytecode: "\x0b"' "Trace filter bytecode invalid"
bad_filter filt_root "bytecode: \"$(python3 "$TF" bytecode 1:1 0)\"" \
	"Failed to set filter root."
bad_filter filt_str "bytecode: \"$flt\" string_filter_chain { rules { policy: SFP_MATCH_BREAK regex_pattern: \"x\" } }" \
	"string_filter_chain is not supported by vtraced"

if [ "$(id -u)" != 0 ] || ! command -v runuser >/dev/null ||
	! runuser -u nobody -- true 2>/dev/null; then
	echo "# skip: the other users' limits need root and runuser"
	e2e_finish guardrails
fi
chmod 755 "$D"
chmod 666 "$D/c.sock" "$D/p.sock"
mkdir -m 777 "$D/nob"

# ---- the buffer budget of other users ---------------------------------------
# 1 GiB in all, of which 768 MiB for other uids: a session of nobody's of
# 800 MB is refused, and root's of 300 MB still starts beside one of 700.
cfg "$D/nob/big.txt" 819200
cfg "$D/nob/mid.txt" 716800
cfg "$D/root.txt" 307200
chmod 644 "$D/nob/"*.txt
runuser -u nobody -- timeout 20 "$VP" --txt -c "$D/nob/big.txt" \
	-o "$D/nob/big.pb" >"$D/big.log" 2>&1
grep -q "exceed what sessions of other users than the service's may hold" \
	"$D/big.log" "$D/vtraced.log" &&
	pass "another user's buffers past 3/4 of the budget are refused" ||
	fail "budget: $(tail -2 "$D/big.log")"
runuser -u nobody -- timeout 20 "$VP" --txt -c "$D/nob/mid.txt" \
	--detach=nmid -o "$D/nob/mid.pb" >"$D/mid.log" 2>&1
check "another user's session within it starts" \
	grep -q "detached as 'nmid'" "$D/mid.log"
timeout 20 "$VP" --txt -c "$D/root.txt" --detach=rmid -o "$D/rmid.pb" \
	>"$D/rmid.log" 2>&1
check "the service's own uid still has room beside it" \
	grep -q "detached as 'rmid'" "$D/rmid.log"
runuser -u nobody -- timeout 20 "$VP" --attach=nmid -o "$D/nob/mid.pb" \
	>/dev/null 2>&1
timeout 20 "$VP" --attach=rmid -o "$D/rmid.pb" >/dev/null 2>&1

# ---- lockdown_mode ----------------------------------------------------------
# A session that sets it; then a producer of nobody's gets no data source
# and its packets do not reach the trace, where root's do.
printf 'buffers { size_kb: 1024 }\ndata_sources { config { name: "vperfetto.stack_test" } }\nduration_ms: 3000\nlockdown_mode: LOCKDOWN_SET\n' \
	>"$D/lock.txt"
printf 'buffers { size_kb: 1024 }\ndata_sources { config { name: "vperfetto.stack_test" } }\nduration_ms: 3000\nlockdown_mode: LOCKDOWN_CLEAR\n' \
	>"$D/unlock.txt"
"$VP" --txt -c "$D/lock.txt" -o "$D/lock.pb" >"$D/lock.log" 2>&1 &
LOCK=$!
e2e_track "$LOCK"
sleep 0.5
runuser -u nobody -- timeout 10 "$WRITER" --events 50 --wait-ms 1500 \
	>"$D/nobw.log" 2>&1
grep -q "lockdown: refusing producer of uid $(id -u nobody)" "$D/vtraced.log" &&
	pass "in lockdown, another uid's producer is refused" ||
	fail "lockdown: $(grep -i "lockdown\|producer" "$D/vtraced.log" | tail -3) $(tail -2 "$D/nobw.log")"
wait "$LOCK"
"$VP" --txt -c "$D/unlock.txt" -o "$D/unlock.pb" >"$D/unlock.log" 2>&1 &
UNLOCK=$!
e2e_track "$UNLOCK"
sleep 0.5
n_before=$(grep -c "lockdown: refusing" "$D/vtraced.log")
runuser -u nobody -- timeout 10 "$WRITER" --events 50 --wait-ms 1500 \
	>"$D/nobw2.log" 2>&1
wait "$UNLOCK"
check "a config that clears it lets other uids in again" \
	test "$(grep -c "lockdown: refusing" "$D/vtraced.log")" = "$n_before"
e2e_finish guardrails
