#!/usr/bin/env bash
# sdk_system.sh - the SDK's system backend against vtraced: a traced
# program (sdk_example) records through the service into a file the
# consumer (vperfetto) writes, and the trace processor counts what arrived.
#
# Usage: sdk_system.sh SDK_EXAMPLE VTRACED VPERFETTO VPERFETTO_TP
#
# Scenarios:
#   unix   the program starts before vtraced (the SDK retries in the
#          background), shared memory over a UNIX socket
#   tcp    the program connects to vtraced's remote producer port on
#          127.0.0.1: no shared memory, chunks travel inline
# Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 4 ]; then
	echo "usage: $0 SDK_EXAMPLE VTRACED VPERFETTO VPERFETTO_TP" >&2
	exit 2
fi
example=$1
vtraced=$2
consumer=$3
tp=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sdk_system.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
failures=0

fail() {
	echo "FAIL $1"
	failures=$((failures + 1))
}

# query TRACE SQL: the single value the query returns.
query() {
	timeout 60 "$tp" --quiet "$1" -Q "$2" 2>&1 | tail -n 1 | tr -d '"\r'
}

expect() { # NAME TRACE SQL WANT
	local got
	got=$(query "$2" "$3")
	if [ "$got" = "$4" ]; then
		echo "PASS $1"
	else
		fail "$1: '$3' gave '$got', want '$4'"
	fi
}

# run NAME PRODUCER_ADDR [vtraced args...]: one recording.
run() {
	local name=$1 addr=$2
	shift 2
	local dir=$tmp/$name
	mkdir -p "$dir"
	# The traced program first: the service is not there yet.
	timeout 60 "$example" system "$addr" 30 >"$dir/example.log" 2>&1 &
	local ex=$!
	pids+=("$ex")
	sleep 0.3
	timeout 90 "$vtraced" --foreground --consumer-socket "$dir/c.sock" \
		"$@" >"$dir/vtraced.log" 2>&1 &
	local vt=$!
	pids+=("$vt")
	for _ in $(seq 100); do
		[ -S "$dir/c.sock" ] && break
		sleep 0.05
	done
	# Give the producer time to connect and register (its backoff).
	sleep 1
	# Perfetto's category rules: the exact disabled name beats the
	# enabled glob.  trace_all_machines: the tcp producer counts as
	# another machine.
	cat >"$dir/config.txt" <<CFG
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
duration_ms: 3000
trace_all_machines: true
CFG
	if ! timeout 60 "$consumer" --consumer-socket "$dir/c.sock" \
		-c "$dir/config.txt" --txt -o "$dir/trace.pftrace" \
		>"$dir/consumer.log" 2>&1; then
		fail "$name: the consumer failed: $(cat "$dir/consumer.log")"
	fi
	if wait "$ex"; then
		echo "PASS $name: the traced program ran and stopped"
	else
		fail "$name: the traced program failed: $(cat "$dir/example.log")"
	fi
	kill "$vt" 2>/dev/null
	wait "$vt" 2>/dev/null
	if [ ! -s "$dir/trace.pftrace" ]; then
		fail "$name: no trace written"
		return
	fi
	local t=$dir/trace.pftrace
	expect "$name: slice count" "$t" "select count(*) from slice" 600
	expect "$name: nested slices" "$t" \
		"select count(*) from slice where name = 'inner' and depth = 1" 200
	expect "$name: hidden category absent" "$t" \
		"select count(*) from slice where name = 'hidden'" 0
	expect "$name: annotations" "$t" \
		"select count(*) from args where key = 'debug.i'" 200
	expect "$name: counter values" "$t" "select count(*) from counter" 200
	expect "$name: two thread tracks" "$t" \
		"select count(distinct track_id) from slice" 2
}

run unix "$tmp/unix/p.sock" --producer-socket "$tmp/unix/p.sock"
port=$((20000 + RANDOM % 20000))
run tcp "127.0.0.1:$port" --producer-socket "$tmp/tcp/p.sock" \
	--remote-producer "127.0.0.1:$port"
exit $((failures > 0))
