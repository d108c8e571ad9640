# oracle_check.sh - one check for the shell tests: traces read by
# vperfetto_tp and by Perfetto's trace_processor_shell give the same rows
# for every oracle query, and a merged trace shows its machines there
# (tests/processor/oracle/oracle_diff.py --trace says how).  Where
# Perfetto's processor is not built it prints "SKIP: " and the reason.
#
#   . tests/lib/oracle_check.sh
#   oracle_check BUILD_DIR LOG NAME=TRACE...
#
# NAME starting with merged_ or vm_ marks a merged trace.  Uses the
# caller's check NAME COMMAND... (e2e_lib.sh's, or a test's own).

ORACLE_DIFF=$(cd "$(dirname "${BASH_SOURCE[0]}")/../processor/oracle" &&
	pwd)/oracle_diff.py

oracle_check() {
	local build=$1 log=$2 t rc
	local args=()
	shift 2
	for t in "$@"; do
		args+=(--trace "$t")
	done
	python3 "$ORACLE_DIFF" "$build" "${args[@]}" >"$log" 2>&1
	rc=$?
	if [ $rc = 77 ]; then
		echo "SKIP: $(tail -n 1 "$log")"
		return 0
	fi
	check "Perfetto's processor gives our rows ($(tail -n 1 "$log"))" \
		test $rc = 0
	[ $rc = 0 ] || grep -A12 "^DIFF" "$log" | head -n 60
}
