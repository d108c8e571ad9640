#!/usr/bin/env bash
# sdk_bench.sh - what a track event costs with libvperfetto, and for scale
# the same workload through LTTng-UST, in one run.  Not a test: prints a
# table of figures against the SDK's targets.
#
# Usage: bash tests/bench/sdk_bench.sh BUILD_DIR [PAIRS]
#
# Figures (ns, best of three runs of PAIRS begin/end pairs, one thread):
#   disabled event             TRACE_EVENT_BEGIN of a disabled category
#   enabled begin or end       half a TRACE_EVENT_BEGIN/END pair, interned
#                              name: in process (64 MiB ring buffer), and
#                              into a running vtraced when BUILD_DIR has one
#   + uint annotation          the same, the begin with one uint argument
#   LTTng-UST                  the same events as tracepoints
#                              (tests/bench/lttng/vp_bench_tp.h) in an lttng
#                              session; skipped, with the reason, when
#                              LTTng-UST or lttng-tools are not installed
set -u
if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [PAIRS]" >&2
	exit 2
fi
build=$(cd "$1" && pwd)
pairs=${2:-1000000}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sdk_bench.XXXXXX")
pids=()
sessiond_pid=
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	if [ -n "$sessiond_pid" ]; then
		kill "$sessiond_pid" 2>/dev/null
	fi
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

libs=(sdk/libvperfetto.a ipc/libvp_ipc.a
      shm/libvp_shm.a wire/libvp_wire.a base/libvp_base.a)
for l in "${libs[@]}"; do
	if [ ! -f "$build/$l" ]; then
		ninja -C "$build" "$l" >/dev/null || {
			echo "$0: cannot build $build/$l" >&2
			exit 1
		}
	fi
done
"$cc" -O2 -std=c17 -D_GNU_SOURCE -I"$repo/include" \
	-o "$tmp/sdk_bench" "$here/sdk_bench.c" \
	"${libs[@]/#/$build/}" -lpthread || exit 1

# value KEY FILE
value() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
half() { awk -v x="$1" 'BEGIN { if (x == "") print ""; else printf "%.1f", x / 2 }'; }

echo "sdk_bench: $pairs pairs per run, $(nproc) cpus, clocksource" \
	"$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo '?')"

# ---- in process
"$tmp/sdk_bench" inproc "$tmp/inproc.pftrace" "$pairs" >"$tmp/inproc.txt" ||
	{ echo "$0: the in-process run failed" >&2; exit 1; }
disabled=$(value disabled_ns "$tmp/inproc.txt")
in_ev=$(half "$(value pair_ns "$tmp/inproc.txt")")
in_arg=$(half "$(value pair_arg_ns "$tmp/inproc.txt")")

# ---- system backend, into vtraced
sys_ev= sys_arg= sys_note=
vtraced=$build/service/vtraced
consumer=$build/consumer/vperfetto
if [ -x "$vtraced" ] && [ -x "$consumer" ]; then
	"$vtraced" --foreground --producer-socket "$tmp/p.sock" \
		--consumer-socket "$tmp/c.sock" >"$tmp/vtraced.log" 2>&1 &
	pids+=($!)
	cat >"$tmp/config.txt" <<CFG
buffers { size_kb: 65536 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event"
  track_event_config { enabled_categories: "bench" } } }
duration_ms: 60000
CFG
	for _ in $(seq 100); do [ -S "$tmp/c.sock" ] && break; sleep 0.05; done
	"$tmp/sdk_bench" system "$tmp/p.sock" "$pairs" >"$tmp/system.txt" 2>"$tmp/system.err" &
	bench_pid=$!
	pids+=($bench_pid)
	sleep 0.5
	"$consumer" --consumer-socket "$tmp/c.sock" -c "$tmp/config.txt" --txt \
		-o "$tmp/system.pftrace" >"$tmp/consumer.log" 2>&1 &
	pids+=($!)
	if wait "$bench_pid"; then
		sys_ev=$(half "$(value pair_ns "$tmp/system.txt")")
		sys_arg=$(half "$(value pair_arg_ns "$tmp/system.txt")")
	else
		sys_note="system run failed: $(head -c 200 "$tmp/system.err")"
	fi
else
	sys_note="skipped: $vtraced or $consumer not built"
fi

# ---- LTTng-UST
lt_ev= lt_arg= lt_note=
if ! command -v lttng >/dev/null || ! command -v lttng-sessiond >/dev/null; then
	lt_note="skipped: lttng-tools (lttng, lttng-sessiond) not installed"
elif ! echo '#include <lttng/tracepoint.h>' | "$cc" -E - >/dev/null 2>&1; then
	lt_note="skipped: LTTng-UST headers (liblttng-ust-dev) not installed"
elif ! "$cc" -O2 -I"$here/lttng" -o "$tmp/sdk_bench_lttng" \
	"$here/lttng/sdk_bench_lttng.c" -llttng-ust -ldl 2>"$tmp/lttng_cc.log"; then
	lt_note="skipped: the LTTng-UST provider does not build: $(head -c 200 "$tmp/lttng_cc.log")"
else
	# A session daemon of our own (unless one runs already: then use it
	# and leave it running).  Root's lives in /var/run/lttng.
	if [ "$(id -u)" != 0 ]; then
		export LTTNG_HOME=$tmp/lttng-home
		mkdir -p "$LTTNG_HOME"
		pidfile=$LTTNG_HOME/.lttng/lttng-sessiond.pid
	else
		pidfile=/var/run/lttng/lttng-sessiond.pid
	fi
	started=ok
	if ! lttng list >/dev/null 2>&1; then
		if lttng-sessiond --daemonize >"$tmp/sessiond.log" 2>&1; then
			sessiond_pid=$(cat "$pidfile" 2>/dev/null)
		else
			started=
		fi
	fi
	if [ -z "$started" ]; then
		lt_note="skipped: lttng-sessiond does not start: $(head -c 200 "$tmp/sessiond.log")"
	else
		sess=vpbench$$
		lttng create "$sess" --output="$tmp/lttng-trace" >/dev/null &&
		lttng enable-channel -u -s "$sess" --subbuf-size=4M \
			--num-subbuf=8 vpchan >/dev/null &&
		lttng enable-event -u -s "$sess" -c vpchan 'vp_bench:*' >/dev/null &&
		lttng start "$sess" >/dev/null &&
		"$tmp/sdk_bench_lttng" "$pairs" >"$tmp/lttng.txt"
		rc=$?
		lttng stop "$sess" >/dev/null 2>&1
		lttng destroy "$sess" >/dev/null 2>&1
		if [ $rc -ne 0 ]; then
			lt_note="skipped: the lttng session failed"
		elif [ "$(value lttng_enabled "$tmp/lttng.txt")" != 1 ]; then
			lt_note="skipped: the tracepoints were not enabled by the session"
		else
			lt_ev=$(half "$(value lttng_pair_ns "$tmp/lttng.txt")")
			lt_arg=$(half "$(value lttng_pair_arg_ns "$tmp/lttng.txt")")
		fi
	fi
fi

# ---- table
# row FIGURE VALUE TARGET_OP TARGET
row() {
	local verdict=-
	if [ -z "$2" ]; then
		printf "%-46s %10s %10s  %s\n" "$1" "n/a" "${3:+$3 $4}" "-"
		return
	fi
	if [ -n "$3" ]; then
		verdict=$(awk -v x="$2" -v t="$4" 'BEGIN { print (x < t) ? "met" : "MISSED" }')
	fi
	printf "%-46s %10s %10s  %s\n" "$1" "$2" "${3:+$3 $4}" "$verdict"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print ""; else printf "%.2f", a / b }'; }

echo
printf "%-46s %10s %10s  %s\n" "figure (ns per event)" "value" "target" "result"
printf "%-46s %10s %10s  %s\n" "----------------------------------------------" "----------" "----------" "------"
row "disabled event" "$disabled" "<" 2
row "enabled begin or end, in process" "$in_ev" "<" 100
row "  + one uint annotation, in process" "$in_arg" "<" 100
row "enabled begin or end, system (vtraced)" "$sys_ev" "<" 100
row "  + one uint annotation, system (vtraced)" "$sys_arg" "<" 100
row "LTTng-UST begin or end" "$lt_ev" "" ""
row "  + one uint field, LTTng-UST" "$lt_arg" "" ""
row "vperfetto / LTTng-UST, in process" "$(ratio "$in_ev" "$lt_ev")" "<" 1
row "vperfetto / LTTng-UST, + annotation" "$(ratio "$in_arg" "$lt_arg")" "<" 1
[ -n "$sys_note" ] && echo "system backend: $sys_note"
[ -n "$lt_note" ] && echo "LTTng-UST: $lt_note"
exit 0
