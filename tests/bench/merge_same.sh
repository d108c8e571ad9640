#!/usr/bin/env bash
# merge_same.sh - two vperfetto_merge binaries give the same bytes: the
# check after every change that should only make the merge faster.  Not a
# test of its own: prints each difference and a count.
#
# Usage: bash tests/bench/merge_same.sh OLD_MERGE NEW_MERGE BUILD_DIR [BENCH_DIR]
#
# Generates (once, into BUILD_DIR/merge_same) pairs of traces that take the
# merge's different paths: plain, a counter offset that changes (--tsc-step,
# with kvm_tsc records), kvm_tsc, scaled counters (a ratio other than 1),
# a host clock step with outliers, a large trace, an incremental clock in
# ns, more threads and cpus.  Merges each with both binaries, on 1 and 2
# threads, plain, --no-machine-id, --clock monotonic, --onto guest, and a
# few command-line cases, and compares exit status, stderr and output.
# With BENCH_DIR (merge_bench.py's work directory), also the bench traces.
set -u
if [ $# -lt 3 ]; then
	echo "usage: $0 OLD_MERGE NEW_MERGE BUILD_DIR [BENCH_DIR]" >&2
	exit 1
fi
OLD=$1 NEW=$2 GEN=$3/tests/vperfetto_tracegen W=$3/merge_same BENCH=${4:-}
mkdir -p "$W"
fail=0 n=0

gen() { # NAME ARGS...
	local name=$1; shift
	[ -f "$W/$name.g.pb" ] && return
	"$GEN" -q --host "$W/$name.h.pb" --guest "$W/$name.g.pb" "$@" ||
		{ echo "tracegen $name failed" >&2; exit 1; }
}

# compare LABEL HOST GUEST OPTS...: both binaries on 1 and 2 threads
compare() {
	local label=$1 host=$2 guest=$3; shift 3
	for t in 1 2; do
		"$OLD" -q --threads $t "$host" "$guest" -o "$W/old.pb" "$@" \
			2>"$W/old.err"
		local ro=$?
		"$NEW" -q --threads $t "$host" "$guest" -o "$W/new.pb" "$@" \
			2>"$W/new.err"
		local rn=$?
		n=$((n + 1))
		if [ $ro != $rn ] || ! cmp -s "$W/old.err" "$W/new.err" ||
		   { [ $ro = 0 ] && ! cmp -s "$W/old.pb" "$W/new.pb"; }; then
			echo "DIFFERENT: $label, --threads $t $* (exit $ro / $rn)"
			fail=1
		fi
		rm -f "$W/old.pb" "$W/new.pb"
	done
}

gen plain --seed 3 --duration-s 20 --events 20000
gen tscstep --seed 4 --duration-s 20 --tsc-step 5000000 --kvm-tsc --events 20000
gen kvm --seed 5 --kvm-tsc --events 20000
gen scale --seed 6 --tsc-scaling 0x1400000000000:48 --events 20000 --exchanges 200
gen scale2 --seed 9 --tsc-scaling 0xc00000000000:48 --kvm-tsc --events 20000
gen step --seed 7 --step-ns 3000000000 --outlier-every 7 --jitter-ns 500 --events 20000
gen big --seed 8 --target-bytes 30M --exchanges 300
gen incr --seed 10 --incr-unit-ns 1 --events 20000 --threads 9 --cpus 5

for p in plain tscstep kvm scale scale2 step big incr; do
	for opts in "" "--no-machine-id" "--clock monotonic" "--onto guest"; do
		# shellcheck disable=SC2086 # opts are words
		compare "$p" "$W/$p.h.pb" "$W/$p.g.pb" $opts
	done
done
compare plain "$W/plain.h.pb" "$W/plain.g.pb" --guest-offset-ns 12345
compare scale "$W/scale.h.pb" "$W/scale.g.pb" --guest-tsc-offset -0x123456789AB \
	--guest-tsc-scaling 0x1400000000000:48
compare kvm "$W/kvm.h.pb" "$W/kvm.g.pb" --guest-vm-pid 4242
if [ -n "$BENCH" ]; then
	for s in small ftrace; do
		[ -f "$BENCH/$s/guest.pb" ] || continue
		compare "bench $s" "$BENCH/$s/host.pb" "$BENCH/$s/guest.pb"
		compare "bench $s" "$BENCH/$s/host.pb" "$BENCH/$s/guest.pb" \
			--no-machine-id
	done
fi
rm -f "$W/old.err" "$W/new.err"
echo "$n merges compared: $([ $fail = 0 ] && echo "all the same bytes" ||
	echo DIFFERENCES)"
exit $fail
