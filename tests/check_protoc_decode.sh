#!/usr/bin/env bash
# check_protoc_decode.sh - decode a trace with protoc and vperfetto's protos
# and fail if anything is left undecoded.
#
# Usage: check_protoc_decode.sh [--print] FILE.pb
#
# --print writes protoc's decoded text to stdout instead of checking it.
# $VP_ALLOW_FIELDS (comma-separated numbers) lists top-level TracePacket
# fields that are expected to be unknown (a test trace that carries one on
# purpose); their lines are not counted.
#
# Runs `protoc --decode=perfetto.protos.Trace` with every .proto file under the
# protos directory ($VP_PROTO_DIR, or ../protos next to this script).  protoc
# prints fields it does not know (and proto2 enum values it does not know) by
# bare number, as `123: ...` or `123 {`; any such line is an error.
#
# Exit status: 0 clean (one summary line), 1 unknown fields or protoc failed
# (the offending lines are printed), 2 usage error.
set -u
set -o pipefail

print=0
if [ "${1:-}" = "--print" ]; then
	print=1
	shift
fi
if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
	echo "usage: $0 [--print] FILE.pb" >&2
	exit 2
fi
trace=$1
if [ ! -r "$trace" ]; then
	echo "$trace: cannot read" >&2
	exit 2
fi

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
proto_dir=${VP_PROTO_DIR:-$script_dir/../protos}
if [ ! -d "$proto_dir" ]; then
	echo "$0: protos directory $proto_dir not found (set VP_PROTO_DIR)" >&2
	exit 2
fi
proto_dir=$(cd "$proto_dir" && pwd)

if ! command -v protoc >/dev/null 2>&1; then
	echo "$0: protoc not found" >&2
	exit 2
fi

# Proto paths relative to the include root, as the imports spell them.
mapfile -t protos < <(cd "$proto_dir" && find . -name '*.proto' -type f |
	sed 's|^\./||' | LC_ALL=C sort)
if [ ${#protos[@]} -eq 0 ]; then
	echo "$0: no .proto files under $proto_dir" >&2
	exit 2
fi

if [ "$print" -eq 1 ]; then
	exec protoc --decode=perfetto.protos.Trace -I"$proto_dir" "${protos[@]}" <"$trace"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Stream protoc's text through awk so that huge traces need no temp copy:
# awk counts packets and keeps the first offending lines.
protoc --decode=perfetto.protos.Trace -I"$proto_dir" "${protos[@]}" \
	<"$trace" 2>"$tmp/protoc.err" |
	awk -v max=50 -v report="$tmp/bad" -v allow="${VP_ALLOW_FIELDS:-}" '
		BEGIN { n = split(allow, a, ","); for (i = 1; i <= n; i++) ok[a[i]] = 1 }
		/^packet \{/ { packets++ }
		/^  [0-9]+(:| \{)/ {
			f = $1; sub(/:$/, "", f)
			if (f in ok) next
		}
		/^[[:space:]]*[0-9]+(:| \{)/ {
			bad++
			if (bad <= max) print NR ": " $0 > report
		}
		END {
			printf "%d %d\n", packets, bad
		}' >"$tmp/summary"
status=("${PIPESTATUS[@]}")

if [ "${status[0]}" -ne 0 ]; then
	echo "$trace: protoc --decode=perfetto.protos.Trace failed (status ${status[0]}):"
	cat "$tmp/protoc.err"
	exit 1
fi
if [ "${status[1]}" -ne 0 ]; then
	echo "$trace: awk failed (status ${status[1]})" >&2
	exit 1
fi

read -r packets bad <"$tmp/summary"
if [ "$bad" -ne 0 ]; then
	echo "$trace: protoc printed $bad line(s) with bare field numbers (unknown fields or enum values; line: text):"
	cat "$tmp/bad"
	if [ "$bad" -gt 50 ]; then
		echo "... $((bad - 50)) more not shown"
	fi
	exit 1
fi
echo "$trace: protoc decoded $packets packets, no unknown fields"
exit 0
