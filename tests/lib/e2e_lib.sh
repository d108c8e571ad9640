# shellcheck shell=bash
# e2e_lib.sh - the harness the bash end-to-end tests share.  Source it
# (". "$(dirname "$0")/../lib/e2e_lib.sh"), then call e2e_init.
#
#   e2e_init NAME        makes the temporary directory E2E_DIR
#                        (${TMPDIR:-/tmp}/NAME.XXXXXX) and installs the
#                        EXIT trap that stops what e2e_track registered,
#                        runs the E2E_CLEANUP_HOOKS functions and removes
#                        E2E_DIR (kept, and named, when KEEP is set)
#   e2e_track PID...     background processes the cleanup stops
#   e2e_stop PID...      stops processes within bounds: SIGTERM, up to
#                        10 s for them to exit, then SIGKILL (a sanitizer's
#                        exit-time leak check has been seen to hang)
#   pass MSG, fail MSG   print "PASS MSG" / "FAIL MSG" and count
#   check MSG CMD...     pass if CMD succeeds, else fail
#   e2e_tracefs_lock     serializes the tests that record ftrace
#   e2e_finish [NAME]    prints the counts and exits 1 if any check
#                        failed, else 0
#   query TRACE SQL      the last line vperfetto_tp prints (one value;
#                        an error message shows up in its place)
#   query_rows TRACE SQL the rows without the header (stderr goes to
#                        E2E_DIR/tp.log)
#   expect NAME TRACE SQL WANT, expect_ge NAME TRACE SQL MIN,
#   expect_range NAME TRACE SQL LO HI
#                        a check of query's answer
#   wait_for_socket PATH until a socket exists (10 s); 1 if it does not
#   wait_for_listener PATH
#                        until a UNIX socket accepts a connection (10 s):
#                        its file exists from bind(), before listen()
#   start_vtraced DIR [ARGS...]
#                        vtraced in the background on DIR/p.sock and
#                        DIR/c.sock (with E2E_VTRACED_ENV=1 no socket
#                        flags are given: the caller exported
#                        PERFETTO_PRODUCER_SOCK_NAME / _CONSUMER_ to those
#                        paths), log appended to DIR/vtraced.log; sets
#                        VTRACED_PID; 1 if its sockets did not appear
#   stop_consumer PID    SIGINT (the consumer stops the session and writes
#                        the trace), then its exit status
#
# Set E2E_VTRACED and E2E_TP to the programs before using start_vtraced or
# the queries.  A test that cannot run prints "SKIP: reason" and exits 77.

E2E_PIDS=()
E2E_CLEANUP_HOOKS=()
E2E_PASSES=0
E2E_FAILURES=0

e2e_init() {
	E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
	trap e2e_cleanup EXIT
}

e2e_track() {
	E2E_PIDS+=("$@")
}

e2e_stop() {
	local p live
	[ $# -gt 0 ] || return 0
	for p in "$@"; do
		kill -CONT "$p" 2>/dev/null
		kill -TERM "$p" 2>/dev/null
	done
	for _ in $(seq 100); do
		live=0
		for p in "$@"; do
			kill -0 "$p" 2>/dev/null && live=1
		done
		[ $live = 0 ] && break
		sleep 0.1
	done
	for p in "$@"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	return 0
}

e2e_cleanup() {
	local h
	e2e_stop "${E2E_PIDS[@]}"
	# Anything else still running in the background (workloads).
	jobs -p | xargs -r kill -9 2>/dev/null
	wait 2>/dev/null
	for h in "${E2E_CLEANUP_HOOKS[@]}"; do
		"$h"
	done
	if [ -n "${KEEP:-}" ]; then
		echo "kept $E2E_DIR"
	else
		rm -rf "$E2E_DIR"
	fi
}

# e2e_tracefs_lock: holds, until the test exits, the lock every test that
# records ftrace takes, so that two of them (run in parallel by meson) do
# not see each other's tracefs instances come and go.
e2e_tracefs_lock() {
	exec {E2E_TRACEFS_FD}>"${TMPDIR:-/tmp}/vperfetto-tests-tracefs.lock"
	flock "$E2E_TRACEFS_FD"
}

# e2e_guest_report REPORT.json EXPR: EXPR (Python, over g) for the first
# guest of a vperfetto_merge --report file, printed.
e2e_guest_report() {
	python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))["guests"][0]
print(eval(sys.argv[2], {}, {"g": g}))' "$1" "$2"
}

# e2e_need_perfetto PROGRAM...: PB is where Perfetto's own programs are
# (PERFETTO_BIN, default ~/.cache/perfetto-real/bin, which
# ../shared/perfetto/build.sh fills); without one of those named, the
# test prints why and exits 77 (skipped).
e2e_need_perfetto() {
	PB=${PERFETTO_BIN:-$HOME/.cache/perfetto-real/bin}
	local p
	for p in "$@"; do
		if [ ! -x "$PB/$p" ]; then
			echo "SKIP: Perfetto's $p is not at $PB" \
				"(build it with ../shared/perfetto/build.sh or set PERFETTO_BIN)"
			exit 77
		fi
	done
}

# e2e_ftrace_usable: true when this test can use ftrace (root, tracefs
# mounted or mountable), holding the tracefs lock; else false with the
# reason in E2E_FTRACE_WHY.
e2e_ftrace_usable() {
	E2E_FTRACE_WHY=
	if [ "$(id -u)" != 0 ]; then
		E2E_FTRACE_WHY="not root"
	elif [ ! -e /sys/kernel/tracing/trace_clock ] &&
		! mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
		E2E_FTRACE_WHY="tracefs cannot be mounted"
	fi
	[ -z "$E2E_FTRACE_WHY" ] || return 1
	e2e_tracefs_lock
}

pass() {
	echo "PASS $1"
	E2E_PASSES=$((E2E_PASSES + 1))
}

fail() {
	echo "FAIL $*"
	E2E_FAILURES=$((E2E_FAILURES + 1))
}

check() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

e2e_finish() {
	echo "${1:+$1: }$E2E_PASSES passed, $E2E_FAILURES failed"
	exit $((E2E_FAILURES > 0))
}

query() {
	timeout 120 "$E2E_TP" --quiet "$1" -Q "$2" 2>&1 | tail -n 1 |
		tr -d '"\r'
}

query_rows() {
	timeout 120 "$E2E_TP" --quiet "$1" -Q "$2" 2>>"$E2E_DIR/tp.log" |
		tail -n +2 | tr -d '"\r'
}

expect() {
	local got
	got=$(query "$2" "$3")
	if [ "$got" = "$4" ]; then
		pass "$1"
	else
		fail "$1: '$3' gave '$got', want '$4'"
	fi
}

expect_ge() {
	local got
	got=$(query "$2" "$3")
	if [[ "$got" =~ ^[0-9]+$ ]] && [ "$got" -ge "$4" ]; then
		pass "$1 ($got)"
	else
		fail "$1: '$3' gave '$got', want >= $4"
	fi
}

expect_range() {
	local got
	got=$(query "$2" "$3")
	if [[ "$got" =~ ^-?[0-9]+$ ]] && [ "$got" -ge "$4" ] &&
		[ "$got" -le "$5" ]; then
		pass "$1 ($got)"
	else
		fail "$1: '$3' gave '$got', want $4..$5"
	fi
}

wait_for_socket() {
	for _ in $(seq 200); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

wait_for_listener() {
	python3 - "$1" <<'PY'
import socket, sys, time
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sys.argv[1])
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
    finally:
        s.close()
sys.exit(1)
PY
}

start_vtraced() {
	local dir=$1
	shift
	local socks=(--producer-socket "$dir/p.sock"
		--consumer-socket "$dir/c.sock")
	[ "${E2E_VTRACED_ENV:-}" = 1 ] && socks=()
	"$E2E_VTRACED" --foreground "${socks[@]}" "$@" \
		>>"$dir/vtraced.log" 2>&1 &
	VTRACED_PID=$!
	e2e_track "$VTRACED_PID"
	# vtraced listens on the producer socket first, then the consumer's
	wait_for_socket "$dir/p.sock" && wait_for_listener "$dir/c.sock"
}

# consumer_e2e_init NAME VPERFETTO VTRACED VPERFETTO_TP: what the consumer's
# e2e scripts share: the programs as absolute paths (VP, E2E_VTRACED,
# E2E_TP; the scripts run in directories of their own), the work
# directory D, both socket variables pointed there so that no real
# service is reached, and a vtraced on those sockets.
consumer_e2e_init() {
	local name=$1
	VP=$(readlink -f "$2")
	E2E_VTRACED=$(readlink -f "$3")
	E2E_TP=$(readlink -f "$4")
	e2e_init "vp-$name"
	D=$E2E_DIR
	export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
	export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
	start_vtraced "$D" || { fail "vtraced did not start"; e2e_finish "$name"; }
}

stop_consumer() {
	kill -INT "$1" 2>/dev/null
	wait "$1"
}
