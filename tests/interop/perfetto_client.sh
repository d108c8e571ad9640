#!/bin/bash
# perfetto_client.sh - Perfetto's own `perfetto` command against vtraced:
# every failure must end the command at once with the exit status it has
# against traced (no hang), and --query, --clone and --clone-by-name must
# work on a running session.
#
#   perfetto_client.sh BUILD_DIR
#
# Perfetto's binaries come from PERFETTO_BIN (default
# ~/.cache/perfetto-real/bin, see ../shared/perfetto/build.sh).  Without
# them the test prints why and exits 77 (skipped).  When traced is there
# too, each failing command also runs against traced and the exit statuses
# must match; otherwise the statuses traced is known to give are used.
set -u
B=$(cd "$1" && pwd)
. "$(dirname "$0")/../lib/e2e_lib.sh"
e2e_need_perfetto perfetto
PERFETTO=$PB/perfetto
E2E_VTRACED=$B/service/vtraced
E2E_TP=$B/processor/vperfetto_tp
WRITER=$B/tests/stack/stack_writer
e2e_init perfetto_client
D=$E2E_DIR
T=20 # seconds a command may take before it counts as a hang

# run_client SOCKDIR NAME ARGS...: the client's exit status in $RC (124:
# it hung and was killed).
run_client() {
	local dir=$1 name=$2
	shift 2
	PERFETTO_CONSUMER_SOCK_NAME=$dir/c.sock \
		PERFETTO_PRODUCER_SOCK_NAME=$dir/p.sock \
		timeout -s KILL $T "$PERFETTO" "$@" >"$D/$name.out" 2>&1
	RC=$?
	[ $RC = 137 ] && RC=124
	return 0
}

mkdir -p "$D/v"
start_vtraced "$D/v" || { fail "vtraced did not start"; e2e_finish perfetto_client; }

# The failures: status against traced when it is there, else the ones
# Perfetto's client gives: exit(2) when Attach fails; a clone that fails is
# logged ("Service error: ...") and exits 0 with no output file.
declare -A WANT=([attach]=2 [is_detached]=2 [clone_id]=0 [clone_name]=0)
declare -A ARGS=(
	[attach]="--attach=nokey -o $D/attach.pb"
	[is_detached]="--is_detached=nokey"
	[clone_id]="--clone 4242 -o $D/clone_id.pb"
	[clone_name]="--clone-by-name nosuchname -o $D/clone_name.pb")
if [ -x "$PB/traced" ]; then
	mkdir -p "$D/t"
	PERFETTO_CONSUMER_SOCK_NAME=$D/t/c.sock \
		PERFETTO_PRODUCER_SOCK_NAME=$D/t/p.sock \
		LD_LIBRARY_PATH=$PB "$PB/traced" >"$D/t/traced.log" 2>&1 &
	e2e_track $!
	if wait_for_socket "$D/t/c.sock"; then
		for k in "${!ARGS[@]}"; do
			# shellcheck disable=SC2086
			run_client "$D/t" "traced_$k" ${ARGS[$k]}
			WANT[$k]=$RC
			echo "traced: perfetto ${ARGS[$k]} exits $RC"
		done
	else
		echo "traced did not start; using the known statuses"
	fi
fi
for k in attach is_detached clone_id clone_name; do
	# shellcheck disable=SC2086
	run_client "$D/v" "$k" ${ARGS[$k]}
	if [ $RC = 124 ]; then
		fail "perfetto ${ARGS[$k]} hung (killed after $T s)"
	else
		check "perfetto ${ARGS[$k]} exits ${WANT[$k]} (got $RC)" \
			test "$RC" = "${WANT[$k]}"
	fi
done
for k in clone_id clone_name; do
	check "perfetto ${ARGS[$k]} says why" grep -q "Service error" "$D/$k.out"
	check "perfetto ${ARGS[$k]} leaves no file" test ! -e "$D/$k.pb"
done

# A running session, named, with a producer writing track events.
cat >"$D/cfg.txt" <<CFG
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event"
  track_event_config { enabled_categories: "stack" } } }
duration_ms: 60000
unique_session_name: "interop_snap"
CFG
PERFETTO_CONSUMER_SOCK_NAME=$D/v/c.sock PERFETTO_PRODUCER_SOCK_NAME=$D/v/p.sock \
	"$PERFETTO" --txt -c "$D/cfg.txt" -o "$D/main.pb" >"$D/main.out" 2>&1 &
MAIN=$!
e2e_track $MAIN
PERFETTO_PRODUCER_SOCK_NAME=$D/v/p.sock \
	"$WRITER" --threads 2 --events 500 --wait-ms 10000 >"$D/writer.log" 2>&1
check "the writer wrote its events" test $? = 0

run_client "$D/v" query --query
check "perfetto --query exits 0 (got $RC)" test $RC = 0
check "perfetto --query lists the session" grep -q interop_snap "$D/query.out"

run_client "$D/v" clone1 --clone 1 -o "$D/clone1.pb"
check "perfetto --clone 1 exits 0 (got $RC)" test $RC = 0
n=$(query_rows "$D/clone1.pb" "select count(*) from slice where name = 'work'")
check "the clone by id has the 1000 slices (got $n)" test "$n" = 1000

run_client "$D/v" clone2 --clone-by-name interop_snap -o "$D/clone2.pb"
check "perfetto --clone-by-name exits 0 (got $RC)" test $RC = 0
n=$(query_rows "$D/clone2.pb" "select count(*) from slice where name = 'work'")
check "the clone by name has the 1000 slices (got $n)" test "$n" = 1000

check "the session goes on after the clones" kill -0 $MAIN
stop_consumer $MAIN
check "perfetto stopped with Ctrl-C exits 0" test $? = 0
n=$(query_rows "$D/main.pb" "select count(*) from slice where name = 'work'")
check "the session's own trace has the 1000 slices (got $n)" test "$n" = 1000
e2e_finish perfetto_client
