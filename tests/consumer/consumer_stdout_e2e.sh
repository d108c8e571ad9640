#!/usr/bin/env bash
# consumer_stdout_e2e.sh - vperfetto -o - against a real vtraced on private
# sockets: the trace goes to stdout (as with Perfetto's perfetto -o -), is
# a valid trace with packets, and no file named '-' appears; through a
# pipe too; write_into_file hands stdout to the service; -o /dev/stdout
# writes stdout itself (appending under >>, never replacing the file); a
# terminal is refused; a reader that has gone away (EPIPE) and a full
# device fail with a message and exit 1.
#
# usage: consumer_stdout_e2e.sh VPERFETTO VTRACED VPERFETTO_TP
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
consumer_e2e_init stdout "$1" "$2" "$3"

cat >"$D/cfg.txt" <<'EOF'
buffers { size_kb: 1024 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event" track_event_config { enabled_categories: "*" } } }
duration_ms: 1000
EOF
{ printf 'write_into_file: true\nfile_write_period_ms: 100\n'
  cat "$D/cfg.txt"; } >"$D/into.txt"

# packets TRACE: the packet count vperfetto_tp sees (empty if it cannot
# load the trace).
packets() {
	timeout 60 "$E2E_TP" --quiet "$1" --summary 2>/dev/null |
		sed -n 's/^size: [0-9]* bytes, \([0-9]*\) packets$/\1/p'
}
# trace_ok NAME TRACE: TRACE is a trace with packets, starting with a
# Trace.packet record (nothing else was written to stdout before it).
trace_ok() {
	local n
	n=$(packets "$2")
	if [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ] &&
		[ "$(head -c 1 "$2" | od -An -tx1 | tr -d ' ')" = 0a ]; then
		pass "$1 ($n packets)"
	else
		fail "$1: '$2' has no packets (got '$n')"
	fi
}
# status NAME GOT WANT LOG PATTERN: exit GOT is WANT, LOG matches PATTERN.
status() {
	if [ "$2" -eq "$3" ] && grep -Eq -- "$5" "$4"; then
		pass "$1"
	else
		fail "$1: exit $2 (want $3), pattern '$5':"
		sed 's/^/    /' "$4" | tail -5
	fi
}

# Every run in its own empty directory: a file named '-' would show.
W=$D/run
mkdir -p "$W"
cd "$W" || exit 1

# ---- -o - into a file ------------------------------------------------------
timeout 60 "$VP" -c "$D/cfg.txt" --txt -o - -t 200ms >"$D/out.pb" \
	2>"$D/err.log"
status "-o - exits 0, says stdout" $? 0 "$D/err.log" \
	"wrote [1-9][0-9]* packets \([0-9]+ bytes\) to stdout"
trace_ok "-o - puts a valid trace on stdout" "$D/out.pb"
check "-o - creates no file named '-'" test ! -e "$W/-"
check "-o - leaves nothing in the working directory" \
	test -z "$(ls -A "$W")"

# ---- -o - through a pipe -------------------------------------------------
timeout 60 "$VP" -c "$D/cfg.txt" --txt -o - -t 200ms 2>"$D/err.log" |
	cat >"$D/pipe.pb"
status "-o - into a pipe exits 0" "${PIPESTATUS[0]}" 0 "$D/err.log" \
	"to stdout"
trace_ok "-o - into a pipe: a valid trace" "$D/pipe.pb"

# ---- write_into_file: the service writes stdout ----------------------------
timeout 60 "$VP" -c "$D/into.txt" --txt -o - -t 300ms >"$D/into.pb" \
	2>"$D/err.log"
status "write_into_file with -o - exits 0" $? 0 "$D/err.log" \
	"the service wrote the trace to stdout"
trace_ok "write_into_file with -o -: a valid trace on stdout" "$D/into.pb"
timeout 60 "$VP" -c "$D/into.txt" --txt -o - -t 300ms 2>"$D/err.log" |
	cat >"$D/into_pipe.pb"
status "write_into_file with -o - into a pipe exits 0" "${PIPESTATUS[0]}" \
	0 "$D/err.log" "wrote the trace to stdout"
trace_ok "write_into_file with -o - into a pipe: a valid trace" \
	"$D/into_pipe.pb"
check "write_into_file with -o - creates no file named '-'" test ! -e "$W/-"

# ---- -o /dev/stdout: stdout itself, appended to under >> -------------------
printf 'keep' >"$D/app.out"
timeout 60 "$VP" -c "$D/cfg.txt" --txt -o /dev/stdout -t 200ms \
	>>"$D/app.out" 2>"$D/err.log"
status "-o /dev/stdout exits 0" $? 0 "$D/err.log" "to stdout"
if [ "$(head -c 4 "$D/app.out")" = keep ]; then
	tail -c +5 "$D/app.out" >"$D/app.pb"
	trace_ok "-o /dev/stdout under >>: appended, a valid trace" "$D/app.pb"
else
	fail "-o /dev/stdout under >>: the file was replaced"
fi

# ---- failures --------------------------------------------------------------
# The reader is gone long before the session ends (200 ms).
timeout 60 "$VP" -c "$D/cfg.txt" --txt -o - -t 200ms 2>"$D/err.log" | true
status "-o -, reader gone (EPIPE): exit 1, said" "${PIPESTATUS[0]}" 1 \
	"$D/err.log" "stdout: cannot write the trace: .*Broken pipe"
if [ -w /dev/full ]; then
	timeout 60 "$VP" -c "$D/cfg.txt" --txt -o - -t 200ms >/dev/full \
		2>"$D/err.log"
	status "-o - on a full device: exit 1, said" $? 1 "$D/err.log" \
		"stdout: cannot write the trace: No space left on device"
fi
timeout 60 "$VP" -c "$D/cfg.txt" --txt -o - -t 200ms >&- 2>"$D/err.log"
status "-o - with stdout closed: exit 1, said" $? 1 "$D/err.log" \
	"stdout is not open"
# A terminal: script(1) gives the command one.
if command -v script >/dev/null &&
	script -qec true /dev/null </dev/null >/dev/null 2>&1; then
	for out in - /dev/stdout; do
		timeout 60 script -qec "'$VP' -c '$D/cfg.txt' --txt -o $out -t 200ms" \
			/dev/null </dev/null >"$D/tty.log" 2>&1
		status "-o $out on a terminal: refused, exit 1" $? 1 \
			"$D/tty.log" "stdout is a terminal; refusing"
	done
else
	echo "skip: no script(1) to give a terminal"
fi
check "failures create no file named '-'" test -z "$(ls -A "$W")"

e2e_finish consumer_stdout
