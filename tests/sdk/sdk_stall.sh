#!/usr/bin/env bash
# sdk_stall.sh - DataSourceConfig.buffer_exhausted_policy end to end: a
# traced program (sdk_flood) with a tiny shared memory buffer writes far
# faster than vtraced drains it, into a session the consumer (vperfetto)
# records; the trace processor counts what arrived.
#
# Usage: sdk_stall.sh SDK_FLOOD VTRACED VPERFETTO VPERFETTO_TP
#
# Scenarios:
#   stall  STALL_THEN_DROP: writers wait for free chunks; nothing is lost
#   abort  STALL_THEN_ABORT: the same, and the program does not abort
#   drop   DROP (the default): packets are dropped, the chunk_id gaps are
#          counted by the service, and what arrived is still decodable
#          (each writer starts a new incremental-state generation after
#          it dropped)
#   pause  STALL_THEN_DROP with vtraced stopped (SIGSTOP) for longer than
#          the stall limit: the writer gives up, drops, and finishes
# Prints PASS/FAIL per check; exits 1 if any failed.
set -u
if [ $# -ne 4 ]; then
	echo "usage: $0 SDK_FLOOD VTRACED VPERFETTO VPERFETTO_TP" >&2
	exit 2
fi
flood=$1
vtraced=$2
consumer=$3
tp=$4
# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$vtraced
E2E_TP=$tp
e2e_init sdk_stall
tmp=$E2E_DIR

stat() { # stat TRACE NAME: the sum of a stat, 0 if absent
	query "$1" "select coalesce(sum(value), 0) from stats
	  where name = '$2'"
}

# session NAME POLICY: starts vtraced and a consumer recording with
# POLICY (empty: none given); sets VT, CP, DIR.
session() {
	DIR=$tmp/$1
	mkdir -p "$DIR"
	start_vtraced "$DIR" || fail "$1: vtraced did not start"
	VT=$VTRACED_PID
	local policy=""
	[ -n "$2" ] && policy="buffer_exhausted_policy: $2"
	cat >"$DIR/config.txt" <<CFG
buffers { size_kb: 65536 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "track_event"
    $policy
    track_event_config { enabled_categories: "flood" }
  }
}
duration_ms: 60000
CFG
	timeout --foreground 120 "$consumer" --consumer-socket "$DIR/c.sock" \
		-c "$DIR/config.txt" --txt -o "$DIR/trace.pftrace" \
		>"$DIR/consumer.log" 2>&1 &
	CP=$!
	e2e_track "$CP"
	# The consumer takes the first SIGINT as "stop" once tracing runs.
	sleep 0.5
}

# end_session: stops the consumer (SIGINT: it stops the session and
# writes the trace) and vtraced.
end_session() {
	if ! stop_consumer "$CP"; then
		fail "$(basename "$DIR"): the consumer failed: $(cat "$DIR/consumer.log")"
	fi
	e2e_stop "$VT"
}

# flood NAME SHMEM_KB THREADS EVENTS [MIN_MS]: runs sdk_flood against the
# current session; sets WROTE.
flood() {
	local name=$1
	shift
	WROTE=$(timeout 60 "$flood" "$DIR/p.sock" "$@" 2>"$DIR/flood.err")
	local rc=$?
	check "$name: sdk_flood ran (exit $rc)" test $rc -eq 0
	[ $rc -eq 0 ] || cat "$DIR/flood.err"
}

events() { # events: how many "ev" slices the trace holds
	query "$DIR/trace.pftrace" "select count(*) from slice where name = 'ev'"
}

# --- stall: nothing lost -------------------------------------------------------
session stall BUFFER_EXHAUSTED_STALL_THEN_DROP
flood stall 16 4 20000
end_session
t=$DIR/trace.pftrace
n=$(events)
check "stall: all 80000 slices arrived through 16 KiB of shared memory (got $n)" \
	test "$n" = 80000
n=$(stat "$t" traced_buf_sequence_packet_loss)
check "stall: no packet loss on any sequence ($n)" test "$n" = 0
n=$(stat "$t" traced_buf_trace_writer_packet_loss)
check "stall: no chunk_id gap seen by the service ($n)" test "$n" = 0
n=$(query "$t" "select count(*) from slice where name = 'ev' and dur < 0")
check "stall: every begin has its end ($n unfinished)" test "$n" = 0

# --- abort: stalls, does not abort ---------------------------------------------
session abort BUFFER_EXHAUSTED_STALL_THEN_ABORT
flood abort 16 2 20000
end_session
n=$(events)
check "abort: all 40000 slices arrived (got $n)" test "$n" = 40000

# --- drop: loses, and says so --------------------------------------------------
session drop ""
# For 1.5 s at least: a writer that drops keeps writing until the service
# frees a chunk, so the chunk_id it skipped shows as a gap (packets lost
# after a writer's last chunk leave no gap for the service to see).
flood drop 16 4 20000 1500
end_session
t=$DIR/trace.pftrace
n=$(events)
check "drop: some but not all slices arrived (got $n of ${WROTE:-?})" \
	test "${n:-0}" -gt 0 -a "${n:-0}" -lt "${WROTE:-0}"
n=$(stat "$t" traced_buf_trace_writer_packet_loss)
check "drop: the service counted the writers' losses ($n)" test "${n:-0}" -gt 0
# Packets skipped for lack of incremental state, by any of Perfetto's
# counts: a sequence's packets after a loss, and track events whose delta
# times have no ThreadDescriptor to start from.
n=$(query "$t" "select coalesce(sum(value), 0) from stats where name in
	('packet_skipped_seq_needs_incremental_state_invalid',
	 'track_event_skipped_timestamp_delta_without_valid_state',
	 'track_event_skipped_thread_time_delta_without_valid_state',
	 'track_event_skipped_thread_instruction_delta_without_valid_state',
	 'thread_descriptor_skipped_incremental_state_invalid')")
ow=$(stat "$t" traced_buf_chunks_overwritten)
# Every writer that dropped starts a new incremental-state generation, so
# what arrives decodes: nothing is skipped for lack of state...
if [ "${ow:-0}" = 0 ]; then
	check "drop: each sequence restarts its interning after a drop ($n skipped)" \
		test "$n" = 0
else
	# ... unless the ring buffer wrapped (a fast machine writes more than
	# its 64 MB): then each sequence's oldest surviving chunks may begin
	# inside a generation whose start was overwritten, and the processor
	# skips up to the next generation, as Perfetto's does.  Generations
	# end every 32 KiB of a writer's chunks (sdk_writer.c), so at most
	# 4 writers x 32 KiB / 8-byte packets are skipped.
	check "drop: after the ring wrapped ($ow chunks overwritten), only the start of each sequence's window skipped ($n packets)" \
		test "${n:-0}" -le $((4 * 32768 / 8))
fi

# --- pause: the stall gives up -------------------------------------------------
session pause BUFFER_EXHAUSTED_STALL_THEN_DROP
(
	sleep 1.5
	kill -STOP "$VT"
	sleep 5
	kill -CONT "$VT"
) &
pauser=$!
start=$SECONDS
flood pause 16 1 0 5000
wait "$pauser"
took=$((SECONDS - start))
check "pause: the writer finished despite the stopped service (${took} s)" \
	test $took -lt 30
end_session
n=$(events)
check "pause: slices before and after the pause arrived ($n)" \
	test "${n:-0}" -gt 0
check "pause: some were dropped ($n of ${WROTE:-?})" \
	test -n "$WROTE" -a "${n:-0}" -lt "${WROTE:-0}"
e2e_finish sdk_stall
