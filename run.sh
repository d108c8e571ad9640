#!/usr/bin/env bash
# run.sh - the two commands a newcomer runs on a fresh Debian machine.
#
#   ./run.sh          install what is missing, build, and run the main job on
#                     an embedded default: generate sample host and guest
#                     traces, merge them, print the sync report
#   ./run.sh test     install what is missing, build, and pass the tests:
#                     unit and end-to-end tests, the same under ASan+UBSan
#                     and under TSan, and a short run of every libFuzzer
#                     target
#
# Other verbs: ./run.sh build | bench | fuzz SECONDS
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD

# Debian packages the build, the tests and the benchmarks need.
PACKAGES=(meson ninja-build pkg-config gcc clang libclang-rt-14-dev
          protobuf-c-compiler libprotobuf-c-dev protobuf-compiler
          libcmocka-dev zlib1g-dev python3 libsqlite3-dev sqlite3
          libedit-dev libtracefs-dev libtraceevent-dev libvirt-dev
          qemu-system-x86 cpio libvirt-daemon-system libvirt-daemon-driver-qemu
          libvirt-clients)
# Only for ./run.sh bench: the LTTng-UST comparison of the SDK benchmark.
BENCH_PACKAGES=(liblttng-ust-dev lttng-tools)

say() { printf '\n== %s\n' "$*" >&2; }

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
}

# build DIR [meson options...]: quiet unless something fails
build() {
  local dir=$1; shift
  local log
  log=$(mktemp)
  if [ ! -f "$dir/build.ninja" ]; then
    if ! meson setup "$dir" "$@" >"$log" 2>&1; then
      cat "$log"; rm -f "$log"; return 1
    fi
  fi
  if ! ninja -C "$dir" >"$log" 2>&1; then
    cat "$log"; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

demo() {
  build build
  local w=build/demo
  mkdir -p "$w"
  say "generating sample traces (guest counter offset -0x123456789ab, 40 ppm drift)"
  build/tests/vperfetto_tracegen --host "$w/host.pb" --guest "$w/guest.pb" \
    --seed 1 --duration-s 30 --drift-ppm 40 --jitter-ns 200 --exchanges 100 \
    --outlier-every 50 --params-out "$w/params.txt"
  ls -l "$w/host.pb" "$w/guest.pb"
  say "vperfetto_merge $w/host.pb $w/guest.pb -o $w/merged.pb"
  build/merge/vperfetto_merge "$w/host.pb" "$w/guest.pb" -o "$w/merged.pb" \
    --report "$w/report.json"
  say "every guest timestamp against the generator's truth"
  build/tests/check_truth "$w/params.txt" "$w/guest.pb" "$w/merged.pb" \
    --machine 1 --tolerance-ns 1000
  say "sync report: $w/report.json"
  cat "$w/report.json"
  say "vperfetto_tp $w/merged.pb: what each machine recorded"
  build/processor/vperfetto_tp "$w/merged.pb" -Q "
    select coalesce(m.raw_id, 0) as machine, count(*) as slices,
           min(s.ts) as first_ts, max(s.ts + s.dur) as last_ts
    from slice s join track t on s.track_id = t.id
    left join machine m on t.machine_id = m.id
    group by 1 order by 1;
    select name, idx, severity, value from stats
    where value > 0 and severity != 'info' order by name"
  record_demo "$w/stack"
}

# record_demo DIR: the tracing stack on this machine: vtraced on sockets in
# DIR, the vperfetto consumer recording 3 s of track events, and a program
# traced with libvperfetto (tests/sdk/sdk_example.c).
record_demo() {
  local d=$1
  rm -rf "$d"; mkdir -p "$d"
  export PERFETTO_PRODUCER_SOCK_NAME=$ROOT/$d/producer.sock
  export PERFETTO_CONSUMER_SOCK_NAME=$ROOT/$d/consumer.sock
  say "recording with the tracing stack: vtraced, vperfetto -t 3s, an SDK program"
  build/common/service/vtraced --foreground 2>"$d/vtraced.log" &
  local vtraced_pid=$!
  local i
  for i in $(seq 100); do [ -S "$PERFETTO_CONSUMER_SOCK_NAME" ] && break; sleep 0.05; done
  build/common/consumer/vperfetto -o "$d/stack.pb" -t 3s -b 8mb \
    --track-event example &
  local consumer_pid=$!
  build/tests/sdk/sdk_example system "$PERFETTO_PRODUCER_SOCK_NAME" 10 ||
    echo "the SDK program failed"
  local rc=0
  wait "$consumer_pid" || rc=$?
  kill "$vtraced_pid" 2>/dev/null; wait "$vtraced_pid" 2>/dev/null || true
  unset PERFETTO_PRODUCER_SOCK_NAME PERFETTO_CONSUMER_SOCK_NAME
  [ "$rc" -eq 0 ] || { echo "vperfetto failed (exit $rc)"; return 1; }
  say "vperfetto_tp $d/stack.pb: slices per thread, and the service's stats"
  build/processor/vperfetto_tp "$d/stack.pb" -Q "
    select t.tid, t.name as thread, count(*) as slices,
           count(distinct s.name) as names, max(s.depth) as max_depth
    from slice s join thread_track tt on s.track_id = tt.id
    join thread t using (utid) group by t.utid order by t.tid;
    select name, value from stats where name like 'traced_%' and value > 0
    order by name"
}

# Counts of every test run by `./run.sh test`, for the closing line.
PASSED=0
FAILED=0

# meson_tests DIR [ENV=VALUE...] [-- MESON_TEST_ARGS...]: runs a build's
# tests and counts them
meson_tests() {
  local dir=$1; shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  local out rc=0
  out=$(mktemp "$dir/meson-test.XXXXXX")
  env "${envs[@]}" meson test -C "$dir" --print-errorlogs "$@" >"$out" 2>&1 || rc=$?
  cat "$out"
  local ok fail
  ok=$(awk '/^Ok:/ {print $2}' "$out")
  fail=$(awk '/^(Fail|Timeout|Unexpected Pass):/ {n += $NF} END {print n + 0}' "$out")
  PASSED=$((PASSED + ${ok:-0}))
  FAILED=$((FAILED + fail))
  [ "$rc" -eq 0 ] || [ "$fail" -gt 0 ] || FAILED=$((FAILED + 1))
}

run_tests() {
  say "build and test (debugoptimized)"
  build build
  meson_tests build
  say "build and test under AddressSanitizer + UndefinedBehaviorSanitizer"
  build build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
  # Leaks are checked in the unit tests (the service, the SDK and the
  # merge run in process there).  The multi-process tests run daemons that
  # are stopped by signals; LeakSanitizer's exit-time check has been seen
  # to hang in them (its tracer never sees the thread stop), so they run
  # with every other check on and leak detection off.
  meson_tests build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 -- --suite=unit
  meson_tests build-asan ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 -- --no-suite=unit \
    --no-suite=vm
  say "end-to-end tests under ThreadSanitizer (the merge runs on two threads)"
  CC=clang build build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug
  meson_tests build-tsan TSAN_OPTIONS=halt_on_error=1 -- --no-suite=vm
  fuzz "${FUZZ_SECONDS:-20}" || true
  echo
  echo "vperfetto tests: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

fuzz() {
  local secs=${1:-60}
  say "libFuzzer targets, ${secs}s each"
  if ! CC=clang build build-fuzz -Dfuzz=true -Dtests=disabled \
         -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug ||
     ! build build; then
    echo "fuzz: the fuzz build failed"
    FAILED=$((FAILED + 1))
    return 1
  fi
  local corpus=build-fuzz/corpus
  mkdir -p "$corpus/trace"
  build/tests/vperfetto_tracegen --host "$corpus/trace/host.pb" \
    --guest "$corpus/trace/guest.pb" --seed 3 --duration-s 1 --events 50 \
    --exchanges 5 >/dev/null
  # The processor's conformance traces seed its loader's corpus.
  if [ -d ../shared/conformance/cases ]; then
    for d in ../shared/conformance/cases/*/; do
      cp "$d/trace.pb" "$corpus/trace/$(basename "$d").pb"
    done
  fi
  local total=0 failed=0
  local exe t
  # Every libFuzzer target the build made (tests/*/fuzz_*, and one level
  # deeper: tests/probes/*/fuzz_*).
  for exe in build-fuzz/tests/*/fuzz_* build-fuzz/tests/*/*/fuzz_*; do
    [ -f "$exe" ] && [ -x "$exe" ] || continue
    t=$(basename "$exe")
    mkdir -p "$corpus/$t"
    total=$((total + 1))
    if "$exe" -max_total_time="$secs" -max_len=65536 \
         -print_final_stats=0 "$corpus/$t" "$corpus/trace" >"build-fuzz/$t.log" 2>&1; then
      echo "fuzz: $t ok ($(grep -c . "build-fuzz/$t.log") log lines)"
    else
      failed=$((failed + 1))
      echo "fuzz: $t FAILED"; tail -40 "build-fuzz/$t.log"
    fi
  done
  echo "fuzz targets: $((total - failed)) ran clean, $failed crashed"
  PASSED=$((PASSED + total - failed))
  FAILED=$((FAILED + failed))
  [ "$failed" -eq 0 ]
}

if [ "${1:-}" = bench ]; then install_deps "${BENCH_PACKAGES[@]}"; else install_deps; fi
case "${1:-demo}" in
  demo) demo ;;
  test) run_tests ;;
  build) build build ;;
  bench) build build && python3 tests/bench/merge_bench.py "${@:2}" &&
         python3 tests/bench/tp_bench.py --bin-dir build &&
         bash tests/bench/sdk_bench.sh build &&
         bash tests/bench/service_bench.sh build ;;
  fuzz) fuzz "${2:-60}" ;;
  *) echo "usage: $0 [demo|test|build|bench|fuzz SECONDS]" >&2; exit 1 ;;
esac
