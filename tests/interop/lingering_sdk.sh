#!/bin/bash
# lingering_sdk.sh - a Perfetto SDK producer that stays alive after the
# session and never flushes (lingering_producer.cc) records into vtraced
# with no loss: 200 of 200 slices, whole, three runs in a row.  Its threads'
# last chunks are still being written when the session stops; only the
# service's scraping of shared memory at flush and at stop gets them.
#
#   lingering_sdk.sh BUILD_DIR
#
# Needs Perfetto's C++ SDK (PERFETTO_SDK, default ~/.cache/perfetto-real/sdk,
# from ../shared/perfetto/build.sh) and clang++; without them it prints why
# and exits 77 (skipped).
set -u
B=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/e2e_lib.sh"
SDK=${PERFETTO_SDK:-$HOME/.cache/perfetto-real/sdk}
LIB=$SDK/lib/libperfetto_client_experimental.a
if [ ! -f "$LIB" ]; then
	echo "SKIP: Perfetto's C++ SDK is not at $SDK" \
		"(build it with ../shared/perfetto/build.sh or set PERFETTO_SDK)"
	exit 77
fi
command -v clang++ >/dev/null || { echo "SKIP: no clang++"; exit 77; }
E2E_VTRACED=$B/service/vtraced
E2E_TP=$B/processor/vperfetto_tp
CONSUMER=$B/consumer/vperfetto
e2e_init vp-lingering-sdk
D=$E2E_DIR
if ! clang++ -std=c++17 -O1 -I"$SDK/include" "$HERE/lingering_producer.cc" \
	"$LIB" -lpthread -o "$D/lingering_producer" 2>"$D/cc.log"; then
	fail "lingering_producer.cc does not compile"
	cat "$D/cc.log"
	e2e_finish lingering_sdk
fi
export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
E2E_VTRACED_ENV=1
start_vtraced "$D" || { fail "vtraced did not start"; e2e_finish lingering_sdk; }
for run in 1 2 3; do
	"$D/lingering_producer" --threads 2 --events 100 \
		>"$D/producer$run.log" 2>&1 &
	P=$!
	e2e_track $P
	timeout 60 "$CONSUMER" -o "$D/t$run.pb" -t 2s -b 4mb \
		--track-event stack >"$D/consumer$run.log" 2>&1
	check "run $run: the consumer wrote its trace" test $? = 0
	n=$(query_rows "$D/t$run.pb" \
		"select count(*) from slice where name = 'work' and dur >= 0")
	check "run $run: 200 of 200 slices, whole (got $n)" test "$n" = 200
	wait $P
	check "run $run: the producer outlived the session, then ended" \
		test $? = 0
done
e2e_finish lingering_sdk
