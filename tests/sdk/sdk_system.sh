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
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$vtraced
E2E_TP=$tp
e2e_init sdk_system
tmp=$E2E_DIR

# run NAME PRODUCER_ADDR [vtraced args...]: one recording (vtraced on
# $tmp/NAME/p.sock and c.sock).
run() {
	local name=$1 addr=$2
	shift 2
	local dir=$tmp/$name
	mkdir -p "$dir"
	# The traced program first: the service is not there yet.
	timeout 60 "$example" system "$addr" 30 >"$dir/example.log" 2>&1 &
	local ex=$!
	e2e_track "$ex"
	sleep 0.3
	start_vtraced "$dir" "$@" || fail "$name: vtraced did not start"
	local vt=$VTRACED_PID
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
		pass "$name: the traced program ran and stopped"
	else
		fail "$name: the traced program failed: $(cat "$dir/example.log")"
	fi
	e2e_stop "$vt"
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

run unix "$tmp/unix/p.sock"
port=$((20000 + RANDOM % 20000))
run tcp "127.0.0.1:$port" --remote-producer "127.0.0.1:$port"
e2e_finish sdk_system
