#!/usr/bin/env bash
# guest_ctl_e2e.sh - the guest control channel end to end: a guest-side
# stack (vtraced + vperfetto_guest_ctl) on temporary UNIX sockets, driven
# through the host's client library by ctl_client_tool.
#
# Usage: guest_ctl_e2e.sh GUEST_CTL CLIENT_TOOL VTRACED VPERFETTO
#                         SDK_EXAMPLE VPERFETTO_TP FAKE_CONSUMER
#
# Scenarios:
#   real    the real consumer against vtraced: garbage before HELLO is
#           survived, a PULL with no trace fails, START / second START
#           (refused: session running) / STOP / PULL, the pulled trace has
#           sdk_example's slices; a config the consumer rejects fails START
#   fake    a stand-in consumer: an 8 MiB trace pulled intact, a consumer
#           that fails at once / dies on its own / ignores SIGINT, and the
#           daemon killed mid-pull leaves nothing at the destination
#   slow    a START answered after 6.5 s: the host's copy sent again after
#           5 s is answered as the first, and starts no second consumer
#   pty     the same protocol over a pseudo-terminal (a character device,
#           like the guest's virtio-serial port), garbage included
# Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 7 ]; then
	echo "usage: $0 GUEST_CTL CLIENT_TOOL VTRACED VPERFETTO SDK_EXAMPLE" \
		"VPERFETTO_TP FAKE_CONSUMER" >&2
	exit 2
fi
ctl=$1 tool=$2 vtraced=$3 consumer=$4 example=$5 tp=$6 fake=$7
D=$(mktemp -d "${TMPDIR:-/tmp}/guest_ctl_e2e.XXXXXX")
pids=()
# Every long-lived process runs under `timeout -k 5`: a TERM passed on to
# a program that ignores it is followed by KILL, so cleanup cannot hang.
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
failures=0

pass() { echo "PASS $1"; }
fail() {
	echo "FAIL $1"
	failures=$((failures + 1))
}

wait_for() { # FILE [TENTHS]: until FILE exists
	for _ in $(seq "${2:-200}"); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# check NAME LOG PATTERN: LOG (a file) contains PATTERN.
check() {
	if grep -q -- "$3" "$2"; then
		pass "$1"
	else
		fail "$1: no '$3' in $2:"
		sed 's/^/    /' "$2"
	fi
}

# steps NAME ADDR STEP...: runs the client tool; passes if every step did
# what it should.
steps() {
	local name=$1
	shift
	if timeout -k 5 120 "$tool" "$@" >"$D/$name.out" 2>&1; then
		pass "$name"
	else
		fail "$name:"
		sed 's/^/    /' "$D/$name.out"
	fi
}

query() {
	timeout 60 "$tp" --quiet "$1" -Q "$2" 2>&1 | tail -n 1 | tr -d '"\r'
}

printf 'ok' >"$D/mode_ok"
printf 'fail' >"$D/mode_fail"
printf 'die' >"$D/mode_die"
printf 'hang' >"$D/mode_hang"

# ---- real: vtraced, the real consumer, sdk_example --------------------------
mkdir -p "$D/guest"
timeout -k 5 200 "$vtraced" --foreground --consumer-socket "$D/c.sock" \
	--producer-socket "$D/p.sock" >"$D/vtraced.log" 2>&1 &
pids+=($!)
wait_for "$D/c.sock" || fail "vtraced did not start"
PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock timeout -k 5 200 "$ctl" \
	--listen "unix:$D/ctl.sock" --consumer "$consumer" \
	--out-dir "$D/guest" -v >"$D/ctl.log" 2>&1 &
ctl_pid=$!
pids+=($ctl_pid)
wait_for "$D/ctl.sock" || fail "vperfetto_guest_ctl did not listen"

steps real_garbage_then_hello "$D/ctl.sock" garbage hello \
	"!pull=$D/none.pb" ping
check "real: garbage was skipped and logged" "$D/ctl.log" "skipped"
check "real: an echoed reply frame is not answered" "$D/ctl.log" \
	"ignored PONG (id 7): not a request"
check "real: pull with no trace refused" "$D/real_garbage_then_hello.out" \
	"failed pull=.*: guest: PULL failed: no trace to pull: no session"
[ ! -e "$D/none.pb" ] && pass "real: failed pull wrote nothing" ||
	fail "real: failed pull left $D/none.pb"

cat >"$D/cfg.txt" <<CFG
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "track_event"
    track_event_config {
      enabled_categories: "example*"
      disabled_categories: "example.off"
    }
  }
}
CFG
# The traced program first: it waits for the session to enable it.
timeout -k 5 120 "$example" system "$D/p.sock" 90 >"$D/example.log" 2>&1 &
ex=$!
pids+=($ex)
timeout -k 5 150 "$tool" "$D/ctl.sock" hello "start=$D/cfg.txt:e2e" \
	"mark=$D/started" "!start=$D/cfg.txt:again" "wait=$D/traced" stop \
	"pull=$D/guest.pb" ping >"$D/real_session.out" 2>&1 &
session=$!
if wait_for "$D/started" 600; then
	# Time for the program to register, trace and flush (it needs
	# milliseconds; the margin is for a loaded machine).
	sleep 3
fi
touch "$D/traced"
if wait "$session"; then
	pass "real: hello/start/stop/pull"
else
	fail "real: session:"
	sed 's/^/    /' "$D/real_session.out"
fi
check "real: second START refused" "$D/real_session.out" \
	"failed start=.*: guest: START failed: session running"
check "real: ping after the session" "$D/real_session.out" "ok ping state=ended"
if wait "$ex"; then
	pass "real: sdk_example traced and saw the stop"
else
	fail "real: sdk_example: $(cat "$D/example.log")"
fi
if [ -s "$D/guest.pb" ] && cmp -s "$D/guest.pb" "$D/guest/guest.pb"; then
	pass "real: pulled trace equals the guest's"
else
	fail "real: pulled trace missing or different"
fi
got=$(query "$D/guest.pb" "select count(*) from slice")
[ "$got" = 600 ] && pass "real: 600 slices in the pulled trace" ||
	fail "real: slice count '$got', want 600"
got=$(query "$D/guest.pb" \
	"select count(*) from slice where name = 'inner' and depth = 1")
[ "$got" = 200 ] && pass "real: nested slices" ||
	fail "real: nested slice count '$got', want 200"

printf '\xff\xff\xff\x0f' >"$D/junk.cfg"
steps real_bad_config "$D/ctl.sock" "!startraw=$D/junk.cfg" "!stop" "!ping"
check "real: consumer's own error reported" "$D/real_bad_config.out" \
	"failed startraw=.*: guest: START failed: guest consumer failed (exit status 1): vperfetto: .*guest.cfg"
kill -0 "$ctl_pid" 2>/dev/null && pass "real: daemon alive" ||
	fail "real: vperfetto_guest_ctl exited: $(tail -5 "$D/ctl.log")"

# ---- fake: a stand-in consumer ---------------------------------------------
mkdir -p "$D/g2"
timeout -k 5 200 "$ctl" --listen "unix:$D/ctl2.sock" --consumer "$fake" \
	--out-dir "$D/g2" --stop-timeout 2000 -v >"$D/ctl2.log" 2>&1 &
ctl2=$!
pids+=($ctl2)
wait_for "$D/ctl2.sock" || fail "vperfetto_guest_ctl (fake) did not listen"

steps fake_pull_8mib "$D/ctl2.sock" hello "startraw=$D/mode_ok" stop \
	"pull=$D/fake.pb"
cmp -s "$D/fake.pb" "$D/g2/guest.pb" && pass "fake: 8 MiB pulled intact" ||
	fail "fake: pulled file differs from the guest's"
steps fake_fail_at_once "$D/ctl2.sock" "!startraw=$D/mode_fail" "!pull=$D/x.pb"
check "fake: START reports the consumer's message" \
	"$D/fake_fail_at_once.out" "bad config: no buffers"
steps fake_dies "$D/ctl2.sock" "startraw=$D/mode_die" sleep=3500 "!ping" \
	"!stop"
check "fake: PING reports a consumer that died" "$D/fake_dies.out" \
	"failed ping: guest session failed: guest consumer failed (exit status 3): fake consumer: lost the tracing service"
check "fake: STOP reports it too" "$D/fake_dies.out" \
	"failed stop: guest: STOP failed: guest consumer failed"
steps fake_hangs "$D/ctl2.sock" "startraw=$D/mode_hang" "!stop" "!ping"
check "fake: a consumer ignoring SIGINT is killed" "$D/fake_hangs.out" \
	"did not stop within 2000 ms of SIGINT; killed"

# The daemon killed mid-pull: nothing at the destination, no temp file.
timeout -k 5 120 "$tool" "$D/ctl2.sock" hello "startraw=$D/mode_ok" stop \
	"!pullslow=$D/big.pb:$D/pulling" >"$D/fake_kill.out" 2>&1 &
kt=$!
if wait_for "$D/pulling" 600; then
	# The daemon itself, not the timeout(1) that runs it.
	for p in $(pgrep -P "$ctl2"); do
		kill -9 "$p"
	done
fi
if wait "$kt"; then
	pass "fake: pull failed when the daemon was killed"
else
	fail "fake: kill mid-pull:"
	sed 's/^/    /' "$D/fake_kill.out"
fi
check "fake: the failure names the closed link" "$D/fake_kill.out" \
	"closed the connection"
left=$(ls -A "$D" | grep -c 'big\.pb')
[ "$left" = 0 ] && pass "fake: nothing half-written after the kill" ||
	fail "fake: left behind: $(ls -A "$D" | grep 'big\.pb')"

# ---- slow: a START answered after the host sent it again ---------------------
# With a grace of 6.5 s the host's START (resent after 5 s without an
# answer) reaches the daemon twice: the copy with the same start key is
# answered as the first, and no second consumer starts.
mkdir -p "$D/g4"
timeout -k 5 200 "$ctl" --listen "unix:$D/ctl4.sock" --consumer "$fake" \
	--out-dir "$D/g4" --start-grace 6500 -v >"$D/ctl4.log" 2>&1 &
pids+=($!)
wait_for "$D/ctl4.sock" || fail "vperfetto_guest_ctl (slow) did not listen"
steps slow_start_resent "$D/ctl4.sock" hello "startraw=$D/mode_ok" ping \
	stop "pull=$D/slow.pb"
cmp -s "$D/slow.pb" "$D/g4/guest.pb" && pass "slow: pulled intact" ||
	fail "slow: pulled file differs from the guest's"
check "slow: the repeated START was answered as the first" "$D/ctl4.log" \
	"START (id [0-9]*) repeats the one that started session"
n=$(grep -c "START (id [0-9]*) session" "$D/ctl4.log")
[ "$n" = 1 ] && pass "slow: one consumer for two copies of START" ||
	fail "slow: $n consumers started:$(sed 's/^/    /' "$D/ctl4.log")"

# ---- pty: a character device ------------------------------------------------
mkdir -p "$D/g3"
timeout -k 5 120 "$tool" "pty:$D/pts.name" garbage hello "startraw=$D/mode_ok" \
	stop "pull=$D/pty.pb" ping >"$D/pty.out" 2>&1 &
pt=$!
if ! wait_for "$D/pts.name" 100; then
	wait "$pt"
	echo "SKIP pty: no pseudo-terminal: $(cat "$D/pty.out")"
else
	timeout -k 5 200 "$ctl" --listen "$(cat "$D/pts.name")" --consumer "$fake" \
		--out-dir "$D/g3" -v >"$D/ctl3.log" 2>&1 &
	ctl3=$!
	pids+=($ctl3)
	if wait "$pt"; then
		pass "pty: garbage/hello/start/stop/pull over a tty"
	else
		fail "pty: session:"
		sed 's/^/    /' "$D/pty.out" "$D/ctl3.log"
	fi
	cmp -s "$D/pty.pb" "$D/g3/guest.pb" && pass "pty: pulled intact" ||
		fail "pty: pulled file differs"
	# The host side went away: the daemon keeps trying, never exits.
	sleep 1.5
	kill -0 "$ctl3" 2>/dev/null && pass "pty: daemon outlives its link" ||
		fail "pty: daemon exited: $(tail -5 "$D/ctl3.log")"
fi

exit $((failures > 0))
