#!/usr/bin/env bash
# idle_conns_e2e.sh - vtraced with the common limit of 1024 open files
# keeps serving while thousands of connections that never send a frame are
# open on both of its sockets: a normal session (vperfetto consumer, an
# SDK program) records all its events while 2,000 idle connections are held
# on each socket, vtraced does not spin meanwhile (its CPU time stays
# small), and it closes idle connections.  Once with the default limits,
# once with the caps off, where accept() runs out of fds.
#
# usage: idle_conns_e2e.sh BUILD_DIR
set -uo pipefail
B=$1
VTRACED=$B/service/vtraced
CONSUMER=$B/consumer/vperfetto
WRITER=$B/tests/stack/stack_writer
TP=$B/processor/vperfetto_tp

# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$VTRACED
E2E_TP=$TP
e2e_init vp-idle-conns
D=$E2E_DIR
export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
N=2000

if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt $((2 * N + 64)) ]; then
  echo "SKIP: this test holds $((2 * N)) sockets (hard limit $(ulimit -Hn))"
  exit 77
fi
ulimit -n $((2 * N + 64))

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run_case NAME [VTRACED ARGS...]
run_case() {
  echo "--- $1"
  shift
  # vtraced with 1024 open files, as a default system gives it.
  rm -f "$D/crowd.ready" "$D/s.pb" "$D/p.sock" "$D/c.sock"
  (ulimit -n 1024 && exec "$VTRACED" --foreground -v "$@") >>"$D/vtraced.log" 2>&1 &
  VTRACED_PID=$!
  e2e_track "$VTRACED_PID"
  if ! wait_for_socket "$D/c.sock" || ! wait_for_socket "$D/p.sock"; then
    fail "vtraced did not create its sockets"; cat "$D/vtraced.log"; exit 1
  fi

  # The idle crowd: N connections on each socket, held until told to stop
  # (SIGTERM), never sending a byte.  It reports how many connected and,
  # at the end, how many the service had closed.
  python3 - "$D/p.sock" "$D/c.sock" "$N" "$D/crowd.ready" >"$D/crowd.log" 2>&1 <<'PY' &
import os, signal, socket, sys, time
paths, n, ready = sys.argv[1:3], int(sys.argv[3]), sys.argv[4]
socks, failed = [], 0
for i in range(n):
    for p in paths:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(p)
        except OSError:
            failed += 1
            s.close()
            continue
        s.setblocking(False)
        socks.append(s)
print("connected", len(socks), "failed", failed, flush=True)
open(ready, "w").close()
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
while not stop:
    time.sleep(0.1)
closed = 0
for s in socks:
    try:
        closed += s.recv(1) == b""
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print("closed by the service", closed, flush=True)
PY
  CROWD_PID=$!
  e2e_track "$CROWD_PID"
  for _ in $(seq 300); do [ -e "$D/crowd.ready" ] && break; sleep 0.1; done
  check "the idle crowd is connected: $(cat "$D/crowd.log")" test -e "$D/crowd.ready"

  # --- 1. a normal session works meanwhile -------------------------------------
  cat >"$D/s.cfg" <<CFG
  buffers { size_kb: 4096 fill_policy: RING_BUFFER }
  data_sources { config { name: "track_event"
    track_event_config { enabled_categories: "stack" } } }
  duration_ms: 60000
CFG
  t0=$(cpu_ticks "$VTRACED_PID")
  "$CONSUMER" -c "$D/s.cfg" --txt -o "$D/s.pb" >"$D/consumer.log" 2>&1 &
  CPID=$!
  e2e_track "$CPID"
  # The writer waits (up to 20 s) for the session to enable its category.
  timeout -k 5 60 "$WRITER" --threads 2 --events 1000 --wait-ms 20000 \
    >"$D/writer.log" 2>&1
  rc=$?
  check "the SDK program ran (exit $rc)" test $rc -eq 0
  [ $rc -eq 0 ] || cat "$D/writer.log"
  # SIGINT stops the session and writes the trace; give it 30 s.
  kill -INT "$CPID"
  for _ in $(seq 300); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$CPID" 2>/dev/null
  rc=0
  wait "$CPID" || rc=$?
  check "the consumer recorded a trace (exit $rc)" test $rc -eq 0
  [ $rc -eq 0 ] || cat "$D/consumer.log"
  n=$(query_rows "$D/s.pb" "select count(*) from slice where name = 'work'")
  check "all 2000 events arrived (got $n)" test "$n" = 2000

  # --- 2. no busy loop; idle connections are closed ---------------------------
  t1=$(cpu_ticks "$VTRACED_PID")
  sleep 3
  t2=$(cpu_ticks "$VTRACED_PID")
  check "vtraced idles while the crowd waits ($((t2 - t1)) ticks in 3 s)" \
    test $((t2 - t1)) -lt 30
  echo "vtraced CPU during the session: $((t1 - t0)) ticks"
  kill -TERM "$CROWD_PID"
  wait "$CROWD_PID"
  closed=$(sed -n 's/^closed by the service //p' "$D/crowd.log")
  check "idle connections were closed by the service ($closed of $((2 * N)))" \
    test "${closed:-0}" -gt 0
  check "vtraced is still running" kill -0 "$VTRACED_PID"
  e2e_stop "$VTRACED_PID"
}

# 1. The defaults: the per-uid cap and the connection cap make room.
run_case "default limits"
# 2. No caps, no timeout: accept() meets EMFILE, and fresh connections
#    give way to the new ones and to the producer's shared memory.
run_case "no caps: EMFILE" --max-conns 100000 --max-conns-per-uid 0 \
  --init-timeout-ms 0

e2e_finish idle_conns_e2e
