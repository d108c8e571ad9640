#!/usr/bin/env bash
# service_bench.sh - MB/s one producer pushes through vtraced into a ring
# buffer, and the loss at that rate.  Not a test: prints a table of figures
# against the target (>= 500 MB/s, nothing lost before the buffer).
#
# Usage: bash tests/bench/service_bench.sh BUILD_DIR [SECONDS] [SMB_KB]
#
# Builds nothing: BUILD_DIR must hold service/vtraced,
# consumer/vperfetto, tests/service/service_bench and
# tests/shm/tb_bench (all built by default; use a release build).
#
# One run: vtraced on temporary sockets; service_bench raw as the producer
# (4 KiB chunks of ~100-byte packets written straight into the SMB, batched
# CommitData); vperfetto as the consumer with one 64 MiB RING_BUFFER.  The
# service's own figures come from the trace_stats packet of the trace.
set -u
if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [SECONDS] [SMB_KB]" >&2
	exit 2
fi
build=$(cd "$1" && pwd) || exit 2
secs=${2:-5}
smb_kb=${3:-256}
vtraced=$build/service/vtraced
consumer=$build/consumer/vperfetto
bench=$build/tests/service/service_bench
tb_bench=$build/tests/shm/tb_bench
for x in "$vtraced" "$consumer" "$bench" "$tb_bench"; do
	if [ ! -x "$x" ]; then
		echo "$0: $x is not built (ninja -C $1)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/service_bench.XXXXXX") || exit 1
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	echo "$0: $*" >&2
	for f in vtraced.log bench.err consumer.log; do
		[ -s "$tmp/$f" ] && { echo "--- $f" >&2; tail -20 "$tmp/$f" >&2; }
	done
	exit 1
}

# value KEY FILE (0 when absent: the service leaves zero counters out)
value() { awk -v k="$1" '$1 == k { v = $2 } END { print (v == "") ? 0 : v }' "$2"; }
calc() { awk "BEGIN { $1 }"; }

"$vtraced" --foreground --producer-socket "$tmp/p.sock" \
	--consumer-socket "$tmp/c.sock" >"$tmp/vtraced.log" 2>&1 &
vtraced_pid=$!
pids+=($vtraced_pid)
for _ in $(seq 100); do
	[ -S "$tmp/c.sock" ] && [ -S "$tmp/p.sock" ] && break
	sleep 0.05
done
[ -S "$tmp/c.sock" ] || fail "vtraced did not start"

cat >"$tmp/config.txt" <<CFG
buffers { size_kb: 65536 fill_policy: RING_BUFFER }
data_sources { config { name: "bench.raw" target_buffer: 0 } }
duration_ms: $(( (secs + 3) * 1000 ))
CFG

"$bench" raw "$tmp/p.sock" "$secs" "$smb_kb" "$vtraced_pid" \
	>"$tmp/bench.txt" 2>"$tmp/bench.err" &
bench_pid=$!
pids+=($bench_pid)
"$consumer" --consumer-socket "$tmp/c.sock" -c "$tmp/config.txt" --txt \
	-o "$tmp/trace.pftrace" >"$tmp/consumer.log" 2>&1 &
consumer_pid=$!
pids+=($consumer_pid)

wait "$bench_pid" || fail "the producer failed"
wait "$consumer_pid" || fail "the consumer failed"
"$bench" stats "$tmp/trace.pftrace" >"$tmp/stats.txt" 2>>"$tmp/bench.err" ||
	fail "no service stats in the trace"
"$tb_bench" 1024 >"$tmp/tb.txt" 2>&1 || fail "tb_bench failed"

b=$tmp/bench.txt
s=$tmp/stats.txt
elapsed=$(value seconds "$b")
committed=$(value chunks_committed "$b")
chunk_size=$(value chunk_size "$b")
committed_mbps=$(value committed_mbps "$b")
stalled=$(value stalled_chunks "$b")
vt_cpu=$(awk '$1 == "vtraced_cpu_s" { print $2 }' "$b")
memcpy_mbps=$(value memcpy_mbps "$b")
written=$(value chunks_written "$s")
bytes_written=$(value bytes_written "$s")
overwritten=$(value chunks_overwritten "$s")
discarded=$(( $(value chunks_discarded "$s") + $(value svc_chunks_discarded "$s") ))
copied_mbps=$(calc "printf \"%.1f\", $bytes_written / $elapsed / 1e6")
lost_before=$(( committed - written ))
cpu_mbps=n/a
if [ -n "$vt_cpu" ]; then
	cpu_mbps=$(calc "if ($vt_cpu > 0) printf \"%.1f\", $committed * $chunk_size / $vt_cpu / 1e6; else print \"n/a\"")
fi
tb_copy=$(awk '$1 == "copy_chunk" { print $2 }' "$tmp/tb.txt")
tb_memcpy=$(awk '$1 == "memcpy" { print $2 }' "$tmp/tb.txt")

echo "service_bench: ${secs}s, SMB $(value smb_kb "$b") KiB, $(value batch "$b") chunks per" \
	"CommitData, $chunk_size-byte chunks of $(value packets_per_chunk "$b") packets," \
	"64 MiB RING_BUFFER, $(nproc) cpus"
echo
# row FIGURE VALUE [TARGET_OP TARGET]
row() {
	local verdict=-
	if [ -n "${3:-}" ]; then
		verdict=$(awk -v x="$2" -v op="$3" -v t="$4" 'BEGIN {
			ok = (op == ">=") ? (x >= t) : (x == t)
			print ok ? "met" : "MISSED" }')
	fi
	printf "%-50s %12s %10s  %s\n" "$1" "$2" "${3:+$3 $4}" "$verdict"
}
printf "%-50s %12s %10s  %s\n" "figure" "value" "target" "result"
printf "%-50s %12s %10s  %s\n" "--------------------------------------------------" "------------" "----------" "------"
row "committed into vtraced (MB/s)" "$committed_mbps" ">=" 500
row "copied by vtraced into the buffer (MB/s)" "$copied_mbps" ">=" 500
row "vtraced MB/s per CPU-second" "$cpu_mbps"
row "vtraced CPU during the run (s of ${elapsed}s)" "${vt_cpu:-n/a}"
row "chunks committed by the producer" "$committed"
row "chunks written into the buffer (service)" "$written"
row "chunks lost before the buffer" "$lost_before" "==" 0
row "chunks discarded by the service" "$discarded" "==" 0
row "chunks overwritten (ring wrapped, expected)" "$overwritten"
row "producer stalls (chunks not free at once)" "$stalled"
row "memcpy of the same bytes (MB/s)" "$memcpy_mbps"
row "tb_bench: trace buffer copy_chunk alone (MB/s)" "$tb_copy"
row "tb_bench: memcpy (MB/s)" "$tb_memcpy"
exit 0
