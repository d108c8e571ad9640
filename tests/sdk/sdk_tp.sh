#!/usr/bin/env bash
# sdk_tp.sh - the SDK's in-process trace loads in the trace processor:
# proof that libvperfetto writes Perfetto-compatible track events.
#
# Usage: sdk_tp.sh SDK_EXAMPLE VPERFETTO_TP
# Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 SDK_EXAMPLE VPERFETTO_TP" >&2
	exit 2
fi
example=$1
tp=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sdk_tp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect NAME SQL WANT: the single value the query returns.
expect() {
	local got
	got=$(timeout 60 "$tp" --quiet "$tmp/trace.pftrace" -Q "$2" 2>&1 |
		tail -n 1 | tr -d '"\r')
	if [ "$got" = "$3" ]; then
		echo "PASS $1"
	else
		echo "FAIL $1: '$2' gave '$got', want '$3'"
		failures=$((failures + 1))
	fi
}

if ! timeout 60 "$example" inproc "$tmp/trace.pftrace"; then
	echo "FAIL sdk_example did not run"
	exit 1
fi
echo "PASS sdk_example wrote $(stat -c %s "$tmp/trace.pftrace") bytes"

# 2 threads x 100 iterations x (outer + inner) slices + 200 instants.
expect "slice count" "select count(*) from slice" 600
expect "nested slices" "select count(*) from slice where name = 'inner' and depth = 1" 200
expect "slice ends" "select count(*) from slice where name = 'outer' and dur > 0" 200
expect "hidden category absent" "select count(*) from slice where name = 'hidden'" 0
expect "annotations" "select count(*) from args where key = 'debug.i'" 200
expect "threads" "select count(distinct utid) from thread_track join slice on slice.track_id = thread_track.id" 2
expect "counter values" "select count(*) from counter" 200
exit $((failures > 0))
