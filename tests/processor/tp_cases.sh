#!/usr/bin/env bash
# tp_cases.sh - vperfetto_tp against rows Perfetto's trace processor gives.
#
# Usage: tp_cases.sh VPERFETTO_TP [CASES_DIR]
#
# Each directory under CASES_DIR (default: cases/ next to this script) holds
# trace.pb (trace.textproto is the same trace, readable), query.sql and
# expected.csv.  The query's output must equal expected.csv after Perfetto's
# diff-test normalisation (leading blank lines dropped, each line stripped).
# Cases named like Perfetto's tests (Suite__name) are taken from Perfetto's
# diff tests with the rows its processor gives (see cases/NOTICE); vp_* cases
# are ours, with rows worked out from Perfetto v58's importer.
# Prints PASS/FAIL per case; exits 1 if any failed, 2 on bad usage.
set -u
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 VPERFETTO_TP [CASES_DIR]" >&2
	exit 2
fi
bin=$1
cases=${2:-$(cd "$(dirname "$0")" && pwd)/cases}
norm() { sed -e 's/\r$//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | sed -e '/./,$!d'; }
failures=0 n=0
for d in "$cases"/*/; do
	d=${d%/}
	[ -f "$d/query.sql" ] || continue
	n=$((n + 1))
	name=$(basename "$d")
	if got=$("$bin" --quiet "$d/trace.pb" -q "$d/query.sql" 2>"${TMPDIR:-/tmp}/tp_cases.$$.err") &&
		[ "$(printf '%s\n' "$got" | norm)" = "$(norm <"$d/expected.csv")" ]; then
		echo "PASS $name"
	else
		echo "FAIL $name"
		diff <(norm <"$d/expected.csv") <(printf '%s\n' "$got" | norm) | head -n 20
		head -n 5 "${TMPDIR:-/tmp}/tp_cases.$$.err"
		failures=$((failures + 1))
	fi
done
rm -f "${TMPDIR:-/tmp}/tp_cases.$$.err"
echo "$((n - failures)) passed, $failures failed"
[ "$failures" -eq 0 ] && [ "$n" -gt 0 ]
