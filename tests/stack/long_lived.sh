#!/bin/bash
# long_lived.sh - a producer that stays alive after the session and never
# flushes on its own loses nothing: stack_writer --linger writes its events
# on two threads and idles until the session ends; the trace must hold
# every slice, whole, and the trace stats no loss.  With Perfetto's SDK the
# service's scraping is what saves the tail of each thread's chunk; ours
# flushes its writers when the service asks.
#
#   long_lived.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$B/service/vtraced
E2E_TP=$B/processor/vperfetto_tp
CONSUMER=$B/consumer/vperfetto
WRITER=$B/tests/stack/stack_writer
e2e_init vp-long-lived
D=$E2E_DIR
export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
E2E_VTRACED_ENV=1
start_vtraced "$D" || { fail "vtraced did not start"; e2e_finish long_lived; }

for run in 1 2 3; do
	"$WRITER" --threads 2 --events 100 --linger --wait-ms 20000 \
		--name "lingering$run" >"$D/writer$run.log" 2>&1 &
	W=$!
	e2e_track $W
	timeout 60 "$CONSUMER" -o "$D/t$run.pb" -t 2s -b 4mb \
		--track-event stack >"$D/consumer$run.log" 2>&1
	check "run $run: the consumer wrote its trace" test $? = 0
	n=$(query_rows "$D/t$run.pb" \
		"select count(*) from slice where name = 'work' and dur >= 0")
	check "run $run: 200 of 200 slices, whole (got $n)" test "$n" = 200
	# The writer outlived the session and ends by itself now.
	for _ in $(seq 100); do kill -0 $W 2>/dev/null || break; sleep 0.1; done
	wait $W
	check "run $run: the writer ended on its own" test $? = 0
done
check "vtraced is still up" kill -0 "$VTRACED_PID"
e2e_finish long_lived
