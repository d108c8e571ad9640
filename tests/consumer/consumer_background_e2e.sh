#!/usr/bin/env bash
# consumer_background_e2e.sh - vperfetto -d / -D (--background,
# --background-wait) against a real vtraced on private sockets, as with
# Perfetto's perfetto -d / -D: the PID is printed at once and the command
# returns; the child traces on, in /, and writes the -o it was given
# relative to the directory the command was run in (a relative -c and a
# relative --consumer-socket too); -D returns once tracing has started,
# and fails (exit 1, with the reason) when it cannot start; -o - is
# refused; a bad config fails in the foreground; SIGTERM to the child
# stops the trace cleanly and writes it.
#
# usage: consumer_background_e2e.sh VPERFETTO VTRACED VPERFETTO_TP
set -uo pipefail
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
consumer_e2e_init background "$1" "$2" "$3"

W=$D/run
mkdir -p "$W"
cd "$W" || exit 1
cat >cfg.txt <<'CFG'
buffers { size_kb: 1024 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event" track_event_config { enabled_categories: "*" } } }
duration_ms: 1000
CFG
{ printf 'write_into_file: true\nfile_write_period_ms: 100\n'
  cat cfg.txt; } >into.txt

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# packets TRACE: the packet count vperfetto_tp sees (empty if it cannot
# load the trace).
packets() {
	timeout 60 "$E2E_TP" --quiet "$1" --summary 2>/dev/null |
		sed -n 's/^size: [0-9]* bytes, \([0-9]*\) packets$/\1/p'
}
trace_ok() {
	local n
	n=$(packets "$2")
	if [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ]; then
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
# wait_gone PID SECONDS: the process has ended within SECONDS (it is not
# our child: the vperfetto that forked it has exited).
wait_gone() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}
# no_temps: no temporary output is left in the run directory.
no_temps() { [ -z "$(find "$W" -name '*vperfetto-tmp*')" ]; }

# ---- -d: the PID at once, the trace later, relative paths kept ----------
t0=$(now_ms)
timeout 20 "$VP" -d -c cfg.txt --txt -o rel.pb -t 1s >pid.out 2>err.log
rc=$?
t1=$(now_ms)
pid=$(cat pid.out)
status "-d exits 0" "$rc" 0 pid.out '^[0-9]+$'
check "-d prints only the PID and a newline" \
	test "$(wc -l <pid.out)" -eq 1 -a "$(wc -c <pid.out)" -eq $((${#pid} + 1))
check "-d says nothing on stderr" test ! -s err.log
if [ $((t1 - t0)) -lt 700 ]; then
	pass "-d returns at once ($((t1 - t0)) ms)"
else
	fail "-d took $((t1 - t0)) ms (the trace lasts 1 s)"
fi
if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
	pass "-d: the PID is a live process"
	e2e_track "$pid"
	check "-d: the child has its own session" \
		test "$(ps -o sid= -p "$pid" | tr -d ' ')" = "$pid"
	check "-d: the child works in /" \
		test "$(readlink "/proc/$pid/cwd")" = /
	check "-d: the trace is not there before the session ends" \
		test ! -e rel.pb
	check "-d: the child ends after the session" wait_gone "$pid" 30
else
	fail "-d: '$pid' is not a live process"
fi
trace_ok "-d: rel.pb, relative to the run directory, is a trace" rel.pb
check "-d: nothing written in /" test ! -e /rel.pb
check "-d: no temporary left" no_temps

# ---- -d with write_into_file ----------------------------------------------
pid=$(timeout 20 "$VP" -d -c into.txt --txt -o into.pb -t 500ms 2>err.log)
if [[ "$pid" =~ ^[0-9]+$ ]]; then
	e2e_track "$pid"
	check "-d, write_into_file: the child ends" wait_gone "$pid" 30
else
	fail "-d, write_into_file: no PID ('$pid')"
fi
trace_ok "-d, write_into_file: into.pb is a trace" into.pb
check "-d, write_into_file: no temporary left" no_temps

# ---- a relative --consumer-socket ----------------------------------------
pid=$(timeout 20 "$VP" -d --consumer-socket ../c.sock -c cfg.txt --txt \
	-o sock.pb -t 300ms 2>err.log)
if [[ "$pid" =~ ^[0-9]+$ ]]; then
	e2e_track "$pid"
	wait_gone "$pid" 30
fi
trace_ok "-d, relative --consumer-socket: a trace" sock.pb

# ---- -D: returns once tracing has started ---------------------------------
t0=$(now_ms)
timeout 20 "$VP" -D -c cfg.txt --txt -o wait.pb -t 3s >pid.out 2>err.log
rc=$?
t1=$(now_ms)
pid=$(cat pid.out)
status "-D exits 0 once started, prints the PID" "$rc" 0 pid.out '^[0-9]+$'
if [ $((t1 - t0)) -lt 2500 ]; then
	pass "-D returns before the session ends ($((t1 - t0)) ms)"
else
	fail "-D took $((t1 - t0)) ms (the trace lasts 3 s)"
fi
if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
	pass "-D: the child traces on"
	e2e_track "$pid"
	check "-D: the child ends after the session" wait_gone "$pid" 30
else
	fail "-D: '$pid' is not a live process"
fi
trace_ok "-D: wait.pb is a trace" wait.pb
check "--background-wait is -D" \
	bash -c "timeout 20 '$VP' --background-wait -c cfg.txt --txt \
		-o long.pb -t 100ms >/dev/null 2>&1"
sleep 1

# -D when tracing cannot start: no service.
timeout 20 "$VP" -D --consumer-socket "$D/none.sock" -c cfg.txt --txt \
	-o none.pb -t 1s >pid.out 2>err.log
status "-D, no service: exit 1, the reason said" $? 1 err.log \
	"did not start in the background .*cannot connect"
check "-D, no service: the PID was printed" grep -Eq '^[0-9]+$' pid.out
check "-D, no service: no output" test ! -e none.pb

# ---- refusals, in the foreground ------------------------------------------
timeout 20 "$VP" -d -c cfg.txt --txt -o - -t 1s >out.pb 2>err.log
status "-d -o -: refused, exit 1" $? 1 err.log "--background.*-o -"
check "-d -o -: nothing on stdout" test ! -s out.pb
timeout 20 "$VP" -D -c cfg.txt --txt -o /dev/stdout -t 1s >out.pb 2>err.log
status "-D -o /dev/stdout: refused, exit 1" $? 1 err.log "--background"
timeout 20 "$VP" -d --query >out.txt 2>err.log
status "-d --query: refused, exit 1" $? 1 err.log "--background.*--query"
printf 'buffers { size_kb: nope }\n' >bad.txt
timeout 20 "$VP" -d -c bad.txt --txt -o bad.pb -t 1s >out.txt 2>err.log
status "-d, bad config: exit 1 in the foreground, said" $? 1 err.log \
	"bad.txt:1"
check "-d, bad config: no PID printed" test ! -s out.txt
check "-d, bad config: no output" test ! -e bad.pb
timeout 20 "$VP" -d -c cfg.txt --txt -o nodir/x.pb -t 1s >out.txt 2>err.log
status "-d, output directory missing: exit 1 in the foreground" $? 1 \
	err.log "nodir/x.pb"
check "-d, output directory missing: no PID printed" test ! -s out.txt

# ---- SIGTERM to the child: the trace is stopped and written ----------------
pid=$(timeout 20 "$VP" -D -c cfg.txt --txt -o term.pb -t 60s 2>err.log)
if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
	e2e_track "$pid"
	sleep 0.3
	kill -TERM "$pid"
	check "SIGTERM: the child ends well before the 60 s" wait_gone "$pid" 20
	trace_ok "SIGTERM: term.pb is a trace" term.pb
	check "SIGTERM: no temporary left" no_temps
else
	fail "SIGTERM: no child ('$pid')"
fi

e2e_finish background
