#!/usr/bin/env bash
# consumer_cli.sh - the vperfetto command line where no service is needed:
# option errors, config errors with file:line:col, light-mode checks, and
# an unreachable service (clear message, exit 1, no output file left).
#
# usage: consumer_cli.sh VPERFETTO [PROTO_DIR]
# With PROTO_DIR (and protoc installed) binary configs are checked too.
set -uo pipefail
VP=$1 PROTO_DIR=${2:-}
[ -x "$VP" ] || { echo "not ok - $VP is not an executable"; exit 1; }
W=$(mktemp -d /tmp/vp_cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
# Never reach a real service, whatever the environment says.
export PERFETTO_CONSUMER_SOCK_NAME="$W/no-such-consumer.sock"

ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; sed 's/^/    /' "$W/log" | tail -20; }

# expect NAME STATUS FIXED_STRING CMD...: exit STATUS, output containing
# FIXED_STRING (stdout and stderr together), within 20 s.
expect() {
  local n=$1 want=$2 str=$3; shift 3
  timeout 20 "$@" >"$W/log" 2>&1 </dev/null; local got=$?
  if [ "$got" -eq "$want" ] && grep -Fq -- "$str" "$W/log"; then ok "$n"
  else echo "    exit $got (want $want), wanted text: $str"; bad "$n"; fi
}
# no_output NAME DIR: DIR holds nothing (no output, no temporary file).
no_output() {
  if [ -z "$(ls -A "$2")" ]; then ok "$1"
  else ls -la "$2" >"$W/log"; bad "$1"; fi
}

mkdir -p "$W/out"
OUT="$W/out/trace.pb"

# ---- options ---------------------------------------------------------------
expect "help" 0 "usage: vperfetto -c CONFIG" "$VP" --help
expect "unknown long option" 1 "unrecognized option '--bogus'" "$VP" --bogus -o "$OUT"
expect "unknown short option" 1 "invalid option -- 'z'" "$VP" -z
expect "option missing its argument" 1 "requires an argument" "$VP" -o
expect "missing -o" 1 "vperfetto: no output file: give -o OUT" \
  "$VP" --track-event cat
printf 'duration_ms: 1\n' >"$W/ok.txt"
expect "missing -o with -c" 1 "no output file: give -o OUT" "$VP" -c "$W/ok.txt" --txt
expect "--txt without -c" 1 "--txt needs -c CONFIG" "$VP" --txt -o "$OUT" sched/sched_switch
expect "-c with light-mode events" 1 "-c excludes the light-mode" \
  "$VP" -c "$W/ok.txt" --txt -o "$OUT" sched/sched_switch
expect "--attach with -c" 1 "--attach takes the config of the attached session" \
  "$VP" --attach=k -c "$W/ok.txt" -o "$OUT"
expect "--attach with --detach" 1 "--attach and --detach exclude each other" \
  "$VP" --attach=k --detach=k -o "$OUT"
expect "--query with -o" 1 "--query takes no other option" "$VP" --query -o "$OUT"
expect "bad -t unit" 1 "vperfetto: duration '10x': unknown unit 'x' (use ms, s, m, h)" \
  "$VP" -o "$OUT" -t 10x sched/sched_switch
expect "bad -t value" 1 "duration 'abc': expected a number" \
  "$VP" -o "$OUT" -t abc sched/sched_switch
expect "-t too large" 1 "duration '9999999h': too large" \
  "$VP" -o "$OUT" -t 9999999h sched/sched_switch
expect "-b without unit" 1 "buffer size '32': give a unit (e.g. 32mb)" \
  "$VP" -o "$OUT" -b 32 sched/sched_switch
expect "-b zero" 1 "buffer size '0kb': must not be 0" \
  "$VP" -o "$OUT" -b 0kb sched/sched_switch
expect "light mode with nothing to trace" 1 "nothing to trace" "$VP" -o "$OUT"
expect "light mode with a bad ftrace event" 1 \
  "'sched': not an ftrace event (expected GROUP/NAME" "$VP" -o "$OUT" sched
expect "light mode with empty categories" 1 "--track-event: no categories given" \
  "$VP" -o "$OUT" --track-event ,,
no_output "option errors leave no output" "$W/out"

# ---- config files ----------------------------------------------------------
cat >"$W/bad_field.txt" <<'EOF'
buffers {
  size_kb: 1024
  sizekb: 2
}
EOF
expect "text config: unknown field with line:col" 1 \
  "vperfetto: $W/bad_field.txt:3:3: field 'buffers.sizekb': unknown field" \
  "$VP" -c "$W/bad_field.txt" --txt -o "$OUT"
printf 'duration_ms: 10\nbuffers { fill_policy: FOO }\n' >"$W/bad_enum.txt"
expect "text config: unknown enum value" 1 \
  "$W/bad_enum.txt:2:24: field 'buffers.fill_policy': unknown enum value 'FOO'" \
  "$VP" -c "$W/bad_enum.txt" --txt -o "$OUT"
printf 'data_sources {\n  config {\n    name: "track_event\n' >"$W/bad_str.txt"
expect "text config: unterminated string" 1 \
  "$W/bad_str.txt:3:11: field 'data_sources.config.name': unterminated string" \
  "$VP" -c "$W/bad_str.txt" --txt -o "$OUT"
printf 'duration_ms: 1\nduration_ms: 2\n' >"$W/twice.txt"
expect "text config: field given twice" 1 \
  "$W/twice.txt:2:1: field 'duration_ms': given twice" \
  "$VP" -c "$W/twice.txt" --txt -o "$OUT"
printf 'buffers {\n  size_kb: 99999999999\n}\n' >"$W/range.txt"
expect "text config: value out of range" 1 \
  "$W/range.txt:2:12: field 'buffers.size_kb': value out of range for uint32: 99999999999" \
  "$VP" -c "$W/range.txt" --txt -o "$OUT"
printf 'buffers {\n  size_kb: 1\n' >"$W/eof.txt"
expect "text config: unexpected end of input" 1 \
  "$W/eof.txt:3:1: field 'buffers': unexpected end of input (missing '}')" \
  "$VP" -c "$W/eof.txt" --txt -o "$OUT"
expect "text config from stdin: errors name <stdin>" 1 \
  "vperfetto: <stdin>:1:14: field 'duration_ms': expected a number, got 'x'" \
  bash -c "printf 'duration_ms: x' | '$VP' -c - --txt -o '$OUT'"
expect "missing config file" 1 "vperfetto: config $W/none.cfg: No such file or directory" \
  "$VP" -c "$W/none.cfg" -o "$OUT"
expect "text config without --txt" 1 \
  "$W/ok.txt: not a valid binary TraceConfig (it looks like text: use --txt)" \
  "$VP" -c "$W/ok.txt" -o "$OUT"
printf '\xff\xff\xff\xff' >"$W/garbage.bin"
expect "binary config: garbage" 1 "$W/garbage.bin: not a valid binary TraceConfig" \
  "$VP" -c "$W/garbage.bin" -o "$OUT"
no_output "config errors leave no output" "$W/out"

# ---- no service ------------------------------------------------------------
cat >"$W/good.txt" <<'EOF'
buffers { size_kb: 1024 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event" track_event_config { enabled_categories: "*" } } }
duration_ms: 1000
EOF
expect "unreachable socket (--consumer-socket)" 1 \
  "vperfetto: cannot connect to the tracing service at $W/nosock" \
  "$VP" -c "$W/good.txt" --txt -o "$OUT" --consumer-socket "$W/nosock"
no_output "unreachable socket leaves no output" "$W/out"
expect "unreachable socket (PERFETTO_CONSUMER_SOCK_NAME)" 1 \
  "cannot connect to the tracing service at $W/no-such-consumer.sock" \
  "$VP" -o "$OUT" -t 1s -b 1mb --track-event cat sched/sched_switch
expect "unreachable socket, config from stdin" 1 \
  "cannot connect to the tracing service at $W/nosock" \
  bash -c "'$VP' -c - --txt -o '$OUT' --consumer-socket '$W/nosock' <'$W/good.txt'"
printf 'write_into_file: true\nduration_ms: 100\n' >"$W/into.txt"
expect "unreachable socket with write_into_file" 1 \
  "cannot connect to the tracing service at $W/nosock" \
  "$VP" -c "$W/into.txt" --txt -o "$OUT" --consumer-socket "$W/nosock"
no_output "write_into_file failure leaves no output or temporary" "$W/out"
echo old >"$OUT"
expect "failure keeps an existing output file" 1 "cannot connect" \
  "$VP" -c "$W/good.txt" --txt -o "$OUT" --consumer-socket "$W/nosock"
if [ "$(cat "$OUT")" = old ] && [ "$(ls -A "$W/out")" = trace.pb ]; then
  ok "existing output untouched"
else ls -la "$W/out" >"$W/log"; bad "existing output untouched"; fi
rm -f "$OUT"
expect "output directory missing: fails before connecting" 1 \
  "$W/nodir/t.pb: cannot create output" \
  "$VP" -c "$W/good.txt" --txt -o "$W/nodir/t.pb" --consumer-socket "$W/nosock"
expect "--query, unreachable socket" 1 \
  "cannot connect to the tracing service at $W/nosock" \
  "$VP" --query --consumer-socket "$W/nosock"
# A socket file nobody listens on.
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$W/dead.sock"
expect "dead socket file" 1 "cannot connect to the tracing service at $W/dead.sock" \
  "$VP" -c "$W/good.txt" --txt -o "$OUT" --consumer-socket "$W/dead.sock"
no_output "dead socket leaves no output" "$W/out"

# ---- binary configs (protoc encodes the text config) -----------------------
if [ -n "$PROTO_DIR" ] && command -v protoc >/dev/null; then
  if protoc -I"$PROTO_DIR" --encode=perfetto.protos.TraceConfig \
       perfetto/config/config.proto <"$W/good.txt" >"$W/good.bin" 2>"$W/log"; then
    expect "binary config is read (then the socket fails)" 1 \
      "cannot connect to the tracing service at $W/nosock" \
      "$VP" -c "$W/good.bin" -o "$OUT" --consumer-socket "$W/nosock"
    expect "binary config from stdin" 1 \
      "cannot connect to the tracing service at $W/nosock" \
      bash -c "'$VP' -c - -o '$OUT' --consumer-socket '$W/nosock' <'$W/good.bin'"
    no_output "binary config failures leave no output" "$W/out"
  else
    bad "protoc --encode of the text config"
  fi
fi

# ---- a scripted fake ConsumerPort (tests/consumer/fake_consumer_service.py) --
FAKE="$(dirname "$0")/fake_consumer_service.py"
SOCK="$W/fake.sock"
# fake MODE: starts the fake service, waits for its socket.
fake() {
  rm -f "$SOCK" "$W/fake.log"; : >"$W/fake.log"
  timeout 60 python3 "$FAKE" "$SOCK" "$1" "$W/fake.log" &
  FPID=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && return 0; sleep 0.05; done
  echo "    fake service did not start"
}
fake_done() { wait "$FPID" 2>/dev/null; }
# reap PID: waits up to 20 s for a background PID (then kills it); its
# exit status in rc.
reap() {
  for _ in $(seq 400); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$1" 2>/dev/null
  wait "$1"; rc=$?
}
# The trace the fake service's ReadBuffers yields (3 packets), or the first
# 2 for write_into_file.
expected_trace() {
  python3 - "$1" "$2" <<'PY'
import sys
pk = [b"\x08\x01" + b"A" * 300, b"\x08\x02BB", b"\x08\x03" + b"C" * 70000]
def varint(v):
    o = bytearray()
    while v >= 0x80:
        o.append((v & 0x7F) | 0x80); v >>= 7
    o.append(v); return bytes(o)
open(sys.argv[1], "wb").write(b"".join(b"\x0a" + varint(len(p)) + p for p in pk[:int(sys.argv[2])]))
PY
}
# same_file NAME A B
same_file() { if cmp "$2" "$3" >"$W/log" 2>&1; then ok "$1"; else bad "$1"; fi; }
# log_is NAME WANT: the methods the fake service saw, space-separated.
log_is() {
  local got; got=$(grep -v = "$W/fake.log" | tr '\n' ' ')
  if [ "$got" = "$2 " ]; then ok "$1"
  else echo "    methods: '$got' (want '$2 ')" >"$W/log"; bad "$1"; fi
}

if command -v python3 >/dev/null && [ -f "$FAKE" ]; then
  expected_trace "$W/want3.pb" 3
  expected_trace "$W/want2.pb" 2

  fake trace
  expect "fake: trace for -t, read the buffers" 0 "wrote 3 packets" \
    "$VP" -c "$W/good.txt" --txt -t 300ms -o "$OUT" --consumer-socket "$SOCK"
  fake_done
  same_file "fake: packets joined from slices, framed as a Trace" "$W/want3.pb" "$OUT"
  log_is "fake: EnableTracing, ReadBuffers, FreeBuffers" \
    "EnableTracing ReadBuffers FreeBuffers"
  if grep -q "duration_ms=300 fds=0" "$W/fake.log"; then ok "fake: -t overrides duration_ms"
  else cp "$W/fake.log" "$W/log"; bad "fake: -t overrides duration_ms"; fi
  rm -f "$OUT"

  fake stop
  "$VP" -o "$OUT" --track-event cat -t 0s --consumer-socket "$SOCK" >"$W/log" 2>&1 &
  VPID=$!
  for _ in $(seq 100); do grep -q EnableTracing "$W/fake.log" && break; sleep 0.05; done
  kill -INT "$VPID"
  reap "$VPID"
  if [ "$rc" -eq 0 ]; then ok "fake: SIGINT stops cleanly (exit 0)"; else bad "fake: SIGINT stops cleanly (exit 0)"; fi
  fake_done
  same_file "fake: SIGINT still writes the trace" "$W/want3.pb" "$OUT"
  log_is "fake: SIGINT sends Flush then DisableTracing" \
    "EnableTracing Flush DisableTracing ReadBuffers FreeBuffers"
  rm -f "$OUT"

  fake stuck
  "$VP" -o "$OUT" sched/sched_switch --consumer-socket "$SOCK" >"$W/log" 2>&1 &
  VPID=$!
  for _ in $(seq 100); do grep -q EnableTracing "$W/fake.log" && break; sleep 0.05; done
  kill -TERM "$VPID"; sleep 0.3; kill -TERM "$VPID"
  reap "$VPID"
  if [ "$rc" -eq 143 ] && grep -q "interrupted by signal 15" "$W/log"; then ok "fake: a second signal aborts (exit 143)"
  else echo "    exit $rc" >>"$W/log"; bad "fake: a second signal aborts (exit 143)"; fi
  kill "$FPID" 2>/dev/null; fake_done
  no_output "fake: abort leaves no output" "$W/out"

  fake error
  expect "fake: service error is reported" 1 \
    "vperfetto: tracing failed: no such data source: foo" \
    "$VP" -c "$W/good.txt" --txt -o "$OUT" --consumer-socket "$SOCK"
  fake_done
  no_output "fake: service error leaves no output" "$W/out"

  fake hangup
  expect "fake: lost connection is reported" 1 "$SOCK: EnableTracing: the connection to the service was lost" \
    "$VP" -c "$W/good.txt" --txt -o "$OUT" --consumer-socket "$SOCK"
  fake_done
  no_output "fake: lost connection leaves no output" "$W/out"

  fake into
  expect "fake: write_into_file" 0 "wrote" \
    "$VP" -c "$W/into.txt" --txt -o "$OUT" --consumer-socket "$SOCK"
  fake_done
  same_file "fake: write_into_file output is what the service wrote" "$W/want2.pb" "$OUT"
  log_is "fake: write_into_file skips ReadBuffers" "EnableTracing FreeBuffers"
  if grep -q "fds=1" "$W/fake.log"; then ok "fake: write_into_file passes the fd"
  else cp "$W/fake.log" "$W/log"; bad "fake: write_into_file passes the fd"; fi
  if [ "$(ls -A "$W/out")" = trace.pb ]; then ok "fake: no temporary left"
  else ls -la "$W/out" >"$W/log"; bad "fake: no temporary left"; fi
  rm -f "$OUT"

  fake trace
  expect "fake: --detach" 0 "session detached as 'k1'" \
    "$VP" -c "$W/good.txt" --txt --detach=k1 --consumer-socket "$SOCK"
  fake_done
  log_is "fake: --detach sends EnableTracing, Detach" "EnableTracing Detach"
  if grep -q "key=k1" "$W/fake.log"; then ok "fake: --detach passes the key"
  else cp "$W/fake.log" "$W/log"; bad "fake: --detach passes the key"; fi
  no_output "fake: --detach writes nothing" "$W/out"

  fake trace
  expect "fake: --attach waits for the end, reads the buffers" 0 "wrote 3 packets" \
    "$VP" --attach=k1 -o "$OUT" --consumer-socket "$SOCK"
  fake_done
  same_file "fake: --attach writes the trace" "$W/want3.pb" "$OUT"
  log_is "fake: --attach sends Attach, EnableTracing, ReadBuffers, FreeBuffers" \
    "Attach EnableTracing ReadBuffers FreeBuffers"
  rm -f "$OUT"

  fake query
  expect "fake: --query lists producers" 0 "1      4242     1000     vtraced_probes" \
    "$VP" --query --consumer-socket "$SOCK"
  fake_done
  if grep -q "linux.ftrace  *1 (vtraced_probes)" "$W/log" &&
     grep -q "Service: vtraced-test" "$W/log"; then
    ok "fake: --query merges the streamed data sources"
  else bad "fake: --query merges the streamed data sources"; fi
fi

echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
