#!/usr/bin/env bash
# stack_test.sh - multi-process tests of the tracing stack.
#
# Runs vtraced, SDK programs (stack_writer) and the vperfetto consumer as
# separate processes on sockets in a temporary directory, and checks the
# traces they record with vperfetto_tp:
#   1. every event of a 4-thread SDK program arrives, in order per thread
#   2. a small ring buffer overwrites, and the loss is counted
#   3. a producer killed mid-trace: its committed events are kept and the
#      service goes on serving
#   4. a consumer that vanishes: its session is freed, the next one works
#   5. a remote producer over TCP (no shared memory) gets a machine_id
#   6. captured IPC frames decode with protoc and our .proto files
#   7. mutated captured frames and garbage thrown at a live service, which
#      keeps serving a well-behaved client afterwards
#
# usage: stack_test.sh BUILD_DIR PROTO_DIR IPC_REPLAY_FUZZ_PY
set -uo pipefail
B=$1
PROTOS=$2
REPLAY=$3
VTRACED=$B/service/vtraced
CONSUMER=$B/consumer/vperfetto
WRITER=$B/tests/stack/stack_writer
TP=$B/processor/vperfetto_tp

# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$VTRACED
E2E_TP=$TP
e2e_init vp-stack
D=$E2E_DIR
# vtraced, the writers and the consumer find the sockets through
# Perfetto's environment variables.
export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
E2E_VTRACED_ENV=1

start_vt() {
  start_vtraced "$D" "$@" ||
    { fail "vtraced did not create its sockets"; cat "$D/vtraced.log"; exit 1; }
}

vtraced_alive() { kill -0 "$VTRACED_PID" 2>/dev/null; }

# config NAME SIZE_KB POLICY [EXTRA]: a text TraceConfig enabling category
# "stack".  Writers stall rather than drop when shared memory is full, so
# that every event reaches the service (Perfetto's
# BUFFER_EXHAUSTED_STALL_THEN_DROP).
config() {
  cat >"$D/$1.cfg" <<CFG
buffers { size_kb: $2 fill_policy: $3 }
data_sources {
  config {
    name: "track_event"
    buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP
    track_event_config { enabled_categories: "stack" }
  }
}
duration_ms: 60000
${4:-}
CFG
}

# start_consumer NAME: records with $D/NAME.cfg into $D/NAME.pb, in the
# background; CONSUMER_PID is set.
start_consumer() {
  "$CONSUMER" -c "$D/$1.cfg" --txt -o "$D/$1.pb" >"$D/$1.consumer.log" 2>&1 &
  CONSUMER_PID=$!
  # The session is up once the service lists it; give it a moment.
  sleep 0.5
}

stop_cons() { # stop_cons NAME: SIGINT, wait, check exit status
  local rc=0
  stop_consumer "$CONSUMER_PID" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "consumer $1 exited $rc:"; cat "$D/$1.consumer.log"
    return 1
  fi
}

# Slices whose seq annotation does not follow the previous one of the same
# thread track by exactly 1 (STEP=eq) or is not larger (STEP=gt).
out_of_order() { # out_of_order TRACE eq|gt
  local cond='seq != prev + 1'
  [ "$2" = gt ] && cond='seq <= prev'
  query_rows "$1" "select count(*) from (
      select extract_arg(arg_set_id, 'debug.seq') as seq,
             lag(extract_arg(arg_set_id, 'debug.seq'))
               over (partition by track_id order by ts, id) as prev
      from slice where name = 'work')
    where prev is not null and $cond"
}

start_vt -v

# --- 1. every event arrives, in order per thread ---------------------------
config all 65536 RING_BUFFER
start_consumer all
"$WRITER" --threads 4 --events 20000 >"$D/writer1.log" 2>&1
rc=$?
check "4-thread SDK program ran (exit $rc)" test $rc -eq 0
stop_cons all
check "trace written" test -s "$D/all.pb"
n=$(query_rows "$D/all.pb" "select count(*) from slice where name = 'work'")
check "all 80000 slices arrived (got $n)" test "$n" = 80000
n=$(query_rows "$D/all.pb" "select count(distinct utid) from thread_track tt
     join slice s on s.track_id = tt.id where s.name = 'work'")
check "on 4 thread tracks (got $n)" test "$n" = 4
n=$(out_of_order "$D/all.pb" eq)
check "in order per thread, no gaps (out of order: $n)" test "$n" = 0
n=$(query_rows "$D/all.pb" "select count(*) from slice where name = 'work' and dur < 0")
check "every begin has its end (unfinished: $n)" test "$n" = 0
n=$(query_rows "$D/all.pb" "select count(*) from stats where name like
     'traced_buf_chunks_overwritten' and value > 0")
check "no chunk overwritten in a big buffer" test "$n" = 0

# --- 2. a small ring buffer overwrites and counts ---------------------------
# Incremental state is cleared every 50 ms, so that what survives the
# overwrites can be decoded (its interned names are re-emitted).
config ring 256 RING_BUFFER "incremental_state_config { clear_period_ms: 50 }"
start_consumer ring
"$WRITER" --threads 2 --events 20000 --pad 200 --pause-every 100 \
  --pause-us 3000 >"$D/writer2.log" 2>&1
stop_cons ring
n=$(query_rows "$D/ring.pb" "select count(*) from slice where name = 'work'")
check "ring buffer kept some but not all (kept $n of 40000)" \
  test "${n:-0}" -gt 0 -a "${n:-0}" -lt 40000
n=$(query_rows "$D/ring.pb" "select coalesce(sum(value), 0) from stats
     where name = 'traced_buf_chunks_overwritten'")
check "overwritten chunks counted in trace_stats ($n)" test "${n:-0}" -gt 0
n=$(out_of_order "$D/ring.pb" gt)
check "what survived is in order per thread (out of order: $n)" test "$n" = 0

# --- 3. a producer killed mid-trace -----------------------------------------
config kill 65536 RING_BUFFER
start_consumer kill
"$WRITER" --threads 2 --forever --name doomed >"$D/writer3.log" 2>&1 &
WPID=$!
sleep 1.5
kill -9 "$WPID"; wait "$WPID" 2>/dev/null
check "service survives a killed producer" vtraced_alive
"$WRITER" --threads 1 --events 1000 --name survivor >"$D/writer3b.log" 2>&1
stop_cons kill
n=$(query_rows "$D/kill.pb" "select count(*) from slice s join thread_track tt on
     s.track_id = tt.id join thread using (utid) join process using (upid)
     where s.name = 'work'")
check "killed producer's committed events kept, survivor's all there ($n)" \
  test "${n:-0}" -gt 1000
n=$(out_of_order "$D/kill.pb" gt)
check "in order per thread after the kill (out of order: $n)" test "$n" = 0

# --- 4. a consumer that vanishes --------------------------------------------
config vanish 4096 RING_BUFFER
start_consumer vanish
kill -9 "$CONSUMER_PID"; wait "$CONSUMER_PID" 2>/dev/null
check "service survives a vanished consumer" vtraced_alive
check "no partial output from the killed consumer" test ! -e "$D/vanish.pb"
"$CONSUMER" --query >"$D/query.txt" 2>&1
check "--query answers after the consumer vanished" test $? -eq 0
config after 4096 RING_BUFFER
start_consumer after
"$WRITER" --threads 1 --events 500 >"$D/writer4.log" 2>&1
stop_cons after
n=$(query_rows "$D/after.pb" "select count(*) from slice where name = 'work'")
check "the next session records normally ($n of 500)" test "$n" = 500

# --- 5. a remote producer over TCP --------------------------------------------
e2e_stop "$VTRACED_PID"
PORT=$((20000 + RANDOM % 20000))
start_vt -v --remote-producer "127.0.0.1:$PORT"
config remote 8192 RING_BUFFER "trace_all_machines: true"
start_consumer remote
"$WRITER" --threads 2 --events 2000 --socket "127.0.0.1:$PORT" \
  --name remote_writer >"$D/writer5.log" 2>&1
stop_cons remote
n=$(query_rows "$D/remote.pb" "select count(*) from slice where name = 'work'")
check "remote producer's 4000 slices arrived (got $n)" test "$n" = 4000
n=$(query_rows "$D/remote.pb" "select count(*) from slice s join track t on
     s.track_id = t.id where s.name = 'work' and t.machine_id != 0")
check "remote producer's slices carry a machine ($n)" test "$n" = 4000

# --- 6. captured frames decode with protoc ----------------------------------
mkdir -p "$D/capture"
config cap 4096 RING_BUFFER
start_consumer cap
VPERFETTO_IPC_CAPTURE=$D/capture "$WRITER" --threads 1 --events 100 \
  --name capture_writer >"$D/writer6.log" 2>&1
stop_cons cap
first_tx=$(ls "$D/capture"/*-tx.bin 2>/dev/null | head -1)
check "the SDK's frames were captured" test -n "$first_tx"
if [ -n "$first_tx" ]; then
  protoc --decode=perfetto.protos.IPCFrame -I "$PROTOS" perfetto/ipc/ipc.proto \
    <"$first_tx" >"$D/frame0.txt" 2>&1
  check "first frame decodes as IPCFrame with a BindService ProducerPort" \
    grep -q 'service_name: "ProducerPort"' "$D/frame0.txt"
  found=0
  for f in "$D/capture"/*-tx.bin; do
    protoc --decode=perfetto.protos.IPCFrame -I "$PROTOS" \
      perfetto/ipc/ipc.proto <"$f" >"$D/frame.txt" 2>/dev/null || continue
    grep -q msg_invoke_method "$D/frame.txt" || continue
    # The first invoke is InitializeConnection: decode its args_proto.
    python3 - "$f" >"$D/args.bin" <<'PY' || continue
import sys
b = open(sys.argv[1], 'rb').read()
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i
def fields(b):
    i = 0
    while i < len(b):
        k, i = varint(b, i); n, wt = k >> 3, k & 7
        if wt == 0: v, i = varint(b, i)
        elif wt == 2:
            l, i = varint(b, i); v = b[i:i+l]; i += l
        elif wt == 1: v = b[i:i+8]; i += 8
        elif wt == 5: v = b[i:i+4]; i += 4
        else: raise SystemExit(1)
        yield n, v
for n, v in fields(b):
    if n == 5:
        for m, a in fields(v):
            if m == 3:
                sys.stdout.buffer.write(a); raise SystemExit(0)
raise SystemExit(1)
PY
    protoc --decode=perfetto.protos.InitializeConnectionRequest -I "$PROTOS" \
      perfetto/ipc/producer_port.proto <"$D/args.bin" >"$D/args.txt" 2>&1 &&
      grep -q 'producer_name: "capture_writer"' "$D/args.txt" && found=1
    break
  done
  check "InitializeConnection args decode with producer_port.proto" test $found = 1
fi

# --- 7. fuzzed frames against the live service --------------------------------
python3 "$REPLAY" --producer "$PERFETTO_PRODUCER_SOCK_NAME" \
  --consumer "$PERFETTO_CONSUMER_SOCK_NAME" --captures "$D/capture" \
  --seconds 10 --seed 7 >"$D/replay.log" 2>&1
rc=$?
tail -3 "$D/replay.log"
check "the fuzzer ran (exit $rc)" test $rc -eq 0
check "service alive after the fuzzed frames" vtraced_alive
config post 4096 RING_BUFFER
start_consumer post
"$WRITER" --threads 2 --events 1000 >"$D/writer7.log" 2>&1
stop_cons post
n=$(query_rows "$D/post.pb" "select count(*) from slice where name = 'work'")
check "a well-behaved client records normally afterwards ($n of 2000)" \
  test "$n" = 2000

if [ "$E2E_FAILURES" -ne 0 ]; then
  echo "--- vtraced log (tail)"; tail -30 "$D/vtraced.log"
fi
e2e_finish "stack tests"
