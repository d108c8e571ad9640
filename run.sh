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
          libvirt-clients scdoc bash-completion debhelper dpkg-dev
          fakeroot lintian)
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
  vm_demo "$w/vm"
  say "the merge against known truth: generated traces (guest counter offset -0x123456789ab, 40 ppm drift)"
  build/tests/vperfetto_tracegen --host "$w/host.pb" --guest "$w/guest.pb" \
    --seed 1 --duration-s 30 --drift-ppm 40 --jitter-ns 200 --exchanges 100 \
    --outlier-every 50 --params-out "$w/params.txt"
  build/merge/vperfetto_merge "$w/host.pb" "$w/guest.pb" -o "$w/merged.pb" \
    --report "$w/report.json"
  build/tests/check_truth "$w/params.txt" "$w/guest.pb" "$w/merged.pb" \
    --machine 1 --tolerance-ns 1000
}

# vm_demo DIR: the whole job on the bundled test guest: build the guest
# image (Debian's kernel, busybox, our guest stack), boot it in QEMU (TCG
# where KVM cannot run a guest), record host and guest for 10 s with
# vperfetto_record over virtio-serial, merge, print the sync report and
# query the merged trace.
vm_demo() {
  local d=$1 qemu_pid=""
  rm -rf "$d"; mkdir -p "$d/ch"
  say "building the test guest (vm-images/build_guest.sh)"
  bash vm-images/build_guest.sh build build/vm-images/guest | tail -n 4
  say "booting it in QEMU (vm-images/run_qemu.sh; console in $d/console.log)"
  qemu_pid=$(bash vm-images/run_qemu.sh --kernel build/vm-images/guest/vmlinuz \
    --initrd build/vm-images/guest/initramfs.img --chardev-dir "$d/ch" \
    --log "$d/console.log" --append vperfetto.workload=1 | tail -n 1)
  local i
  for i in $(seq 180); do
    grep -q "vperfetto-guest: ready" "$d/console.log" 2>/dev/null && break
    sleep 1
  done
  grep "vperfetto-guest:" "$d/console.log" || true
  say "vperfetto_record --qemu-chardev $d/ch -t 10s -o $d/merged.pb"
  local rc=0
  build/host/vperfetto_record --qemu-chardev "$d/ch" -t 10s -o "$d/merged.pb" || rc=$?
  kill "$qemu_pid" 2>/dev/null || true
  [ "$rc" -eq 0 ] || { echo "vperfetto_record failed (exit $rc)"; return 1; }
  say "sync report ($d/merged.report.json), the guest's clock model"
  python3 - "$d/merged.report.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["guests"][0]
cm, ex, b = g["counter_map"], g["exchanges"], g["error_bound_ns"]
print(f"  counter offset {cm['offset']} (from {cm['source']}, interval {cm['offset_interval']}), ratio {cm['ratio']}/2^{cm['frac_bits']}")
print(f"  drift {g['drift_ppm']} ppm; {ex['count']} sync exchanges, {ex['causality_violations']} causality violations")
print(f"  error bound p50 {b['p50']:.0f} ns, p99 {b['p99']:.0f} ns, max {b['max']:.0f} ns")
PY
  say "vperfetto_tp $d/merged.pb: what each machine recorded"
  build/processor/vperfetto_tp "$d/merged.pb" -Q "
    select m.id as machine, m.name, m.release,
      (select count(*) from sched s join cpu c using (ucpu)
        where c.machine_id = m.id) as sched_slices,
      (select count(*) from slice s join track t on s.track_id = t.id
        where t.machine_id = m.id) as slices,
      (select count(*) from process p where p.machine_id = m.id) as processes
    from machine m order by m.id;
    select t.name as guest_thread, count(*) as slices_on_cpu, sum(s.dur) as ns_on_cpu
    from sched s join thread t using (utid)
    where t.machine_id = 1 and t.tid != 0
    group by t.utid order by ns_on_cpu desc limit 5;
    select name, count(*) as n, min(ts) as first_ts, max(ts) as last_ts
    from slice where name like 'guest_clock_sync%' group by name"
  echo
  echo "Open $d/merged.pb in ui.perfetto.dev, or query it with build/processor/vperfetto_tp."
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
  # The release build users and packagers make, with clang: it must build
  # (warnings are not errors there) and install (the install suite).
  say "release build with clang, and its install"
  CC=clang build build-release-clang -Dbuildtype=release
  meson_tests build-release-clang -- --suite=install
  # The sanitizer runs use the test setups of meson.build (asan, asane2e,
  # tsan): any ASan, UBSan or TSan report fails its test.  Both compilers'
  # UBSan: clang's checks more (pointer arithmetic on NULL, for one).
  say "build and test under AddressSanitizer + UndefinedBehaviorSanitizer (gcc)"
  build build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
  meson_tests build-asan -- --setup=asan
  meson_tests build-asan -- --setup=asane2e
  say "build and test under AddressSanitizer + UndefinedBehaviorSanitizer (clang)"
  CC=clang build build-asan-clang -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
  # (The end-to-end suite runs under gcc's build above; here only the
  # in-process suites, to keep ./run.sh test within CI's 90 minutes.)
  meson_tests build-asan-clang -- --setup=asan
  say "end-to-end tests under ThreadSanitizer (the merge runs on two threads)"
  CC=clang build build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug
  meson_tests build-tsan -- --setup=tsan
  fuzz "${FUZZ_SECONDS:-20}" || true
  echo
  echo "vperfetto tests: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

# fuzz_one EXE SECONDS CORPUS: one libFuzzer target for SECONDS from its
# seeds; writes build-fuzz/<target>.log and .status (ok or failed).
fuzz_one() {
  local exe=$1 secs=$2 corpus=$3 t
  t=$(basename "$exe")
  rm -f "build-fuzz/$t.status"
  if UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
     "$exe" -max_total_time="$secs" -max_len=65536 -print_final_stats=0 \
       "$corpus/$t" "tests/fuzz/seeds/$t" "$corpus/trace" \
       >"build-fuzz/$t.log" 2>&1; then
    echo ok >"build-fuzz/$t.status"
  else
    echo failed >"build-fuzz/$t.status"
  fi
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
  # Targets run side by side, one per CPU: each gets its full time and
  # the wall time is divided by the CPUs.
  local jobs
  jobs=$(nproc 2>/dev/null || echo 1)
  local total=0 failed=0 running=0
  local exe t
  local -a targets=()
  # Every libFuzzer target the build made (tests/*/fuzz_*, and one level
  # deeper: tests/probes/*/fuzz_*).
  for exe in build-fuzz/tests/*/fuzz_* build-fuzz/tests/*/*/fuzz_*; do
    [ -f "$exe" ] && [ -x "$exe" ] || continue
    t=$(basename "$exe")
    total=$((total + 1))
    # Each target starts from its checked-in seeds (tests/fuzz/make_seeds.sh);
    # what it finds goes to build-fuzz/corpus/<target>.
    if [ ! -d "tests/fuzz/seeds/$t" ]; then
      failed=$((failed + 1))
      echo "fuzz: $t has no seed corpus in tests/fuzz/seeds/$t"
      continue
    fi
    mkdir -p "$corpus/$t"
    targets+=("$t")
    fuzz_one "$exe" "$secs" "$corpus" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
      wait -n || true
      running=$((running - 1))
    fi
  done
  wait || true
  # The verdicts, in order: each run left build-fuzz/<target>.status.
  for t in "${targets[@]}"; do
    if [ "$(cat "build-fuzz/$t.status" 2>/dev/null)" = ok ]; then
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
         { python3 tests/bench/tp_vs_perfetto.py --build build || true; } &&
         bash tests/bench/sdk_bench.sh build &&
         bash tests/bench/service_bench.sh build ;;
  fuzz) fuzz "${2:-60}" ;;
  *) echo "usage: $0 [demo|test|build|bench|fuzz SECONDS]" >&2; exit 1 ;;
esac
