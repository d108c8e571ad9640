#!/usr/bin/env bash
# outputs_e2e.sh - no command clobbers its inputs or leaves half a result.
#
# usage: outputs_e2e.sh BUILD_DIR
#
# For vperfetto_merge, vperfetto_tp -e, the vperfetto consumer and
# vperfetto_record:
#   1. every output option naming an input (the same path, another
#      spelling, a symbolic link, a hard link) is refused with exit 1 and
#      the input is left byte for byte as it was;
#   2. a full disk (a 1 MiB tmpfs; skipped, with the reason, where mount
#      is not allowed): non-zero exit naming the path and the reason, the
#      previous file as it was, no temporary file; the merge's trace and
#      report appear together or not at all;
#   3. SIGINT / SIGTERM mid-run: non-zero exit, no temporary file, the
#      previous output as it was; after SIGKILL the leftover says what it
#      is and the next run of the command removes it (not one of a live
#      process).
set -uo pipefail
B=$1
MERGE=$B/merge/vperfetto_merge
TP=$B/processor/vperfetto_tp
CONSUMER=$B/consumer/vperfetto
VTRACED=$B/service/vtraced
RECORD=$B/host/vperfetto_record
TG=$B/tests/vperfetto_tracegen
WRITER=$B/tests/stack/stack_writer

# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$VTRACED
E2E_TP=$TP
e2e_init vp-outputs
D=$E2E_DIR
FULL=$D/full
mkdir -p "$FULL"
unmount_full() { mountpoint -q "$FULL" && umount "$FULL"; }
E2E_CLEANUP_HOOKS+=(unmount_full)

# expect_exit NAME STATUS PATTERN CMD...: exits STATUS, stderr matching
# PATTERN (extended regex), within 120 s.
expect_exit() {
	local n=$1 want=$2 pat=$3
	shift 3
	timeout 120 "$@" >"$D/log" 2>&1 </dev/null
	local got=$?
	if [ "$got" -eq "$want" ] && grep -Eq -- "$pat" "$D/log"; then
		pass "$n"
	else
		fail "$n: exit $got (want $want), pattern '$pat':"
		sed 's/^/    /' "$D/log" | tail -5
	fi
}
# no_temps NAME DIR...: no temporary file of ours in the directories.
no_temps() {
	local n=$1 left
	shift
	left=$(find "$@" -maxdepth 1 -name '*vperfetto-tmp*' 2>/dev/null)
	if [ -z "$left" ]; then pass "$n"; else fail "$n: left $left"; fi
}
# same NAME FILE COPY: FILE is byte for byte COPY.
same() {
	if cmp -s "$2" "$3"; then pass "$1"; else fail "$1: $2 changed"; fi
}
# wait_temp GLOB: until a file matching GLOB exists (10 s).
wait_temp() {
	for _ in $(seq 500); do
		compgen -G "$1" >/dev/null && return 0
		sleep 0.02
	done
	return 1
}

"$TG" --host "$D/h.pb" --guest "$D/g.pb" --seed 3 --duration-s 5 -q >/dev/null
cp "$D/h.pb" "$D/h.orig"
cp "$D/g.pb" "$D/g.orig"
ln -s g.pb "$D/g.link"
ln "$D/g.pb" "$D/g.hard"
mkdir -p "$D/sub"

# ---- 1. clobbering an input ---------------------------------------------------
expect_exit "merge: -o HOST refused" 1 "names the input" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/h.pb"
expect_exit "merge: -o another spelling of GUEST refused" 1 "names the input" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/sub/../g.pb"
expect_exit "merge: -o symlink to GUEST refused" 1 "names the input" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/g.link"
expect_exit "merge: --report HOST refused" 1 "--report .* names the input" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/m.pb" --report "$D/h.pb"
expect_exit "merge: --report symlink to GUEST refused" 1 "names the input" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/m.pb" --report "$D/g.link"
expect_exit "merge: --report hard link to GUEST refused" 1 "names the input" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/m.pb" --report "$D/g.hard"
expect_exit "merge: -o and --report the same new file refused" 1 "name the same file" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/m.pb" --report "$D/sub/../m.pb"
check "merge: nothing written by the refused runs" test ! -e "$D/m.pb"

echo "select 1;" >"$D/q.sql"
cp "$D/q.sql" "$D/q.orig"
expect_exit "tp: -e TRACE refused" 1 "names the input" \
	"$TP" --quiet -e "$D/g.pb" "$D/g.pb"
expect_exit "tp: -e symlink to TRACE refused" 1 "names the input" \
	"$TP" --quiet -e "$D/g.link" "$D/g.pb"
expect_exit "tp: -e hard link to TRACE refused" 1 "names the input" \
	"$TP" --quiet -e "$D/g.hard" "$D/g.pb"
expect_exit "tp: -e the -q query file refused" 1 "names the input" \
	"$TP" --quiet -q "$D/q.sql" -e "$D/q.sql" "$D/g.pb"

printf 'duration_ms: 100\nbuffers { size_kb: 64 }\n' >"$D/c.cfg"
cp "$D/c.cfg" "$D/c.orig"
ln -s c.cfg "$D/c.link"
export PERFETTO_CONSUMER_SOCK_NAME=$D/none.sock
expect_exit "consumer: -o CONFIG refused" 1 "names the input" \
	"$CONSUMER" -c "$D/c.cfg" --txt -o "$D/c.cfg"
expect_exit "consumer: -o symlink to CONFIG refused" 1 "names the input" \
	"$CONSUMER" -c "$D/c.cfg" --txt -o "$D/c.link"
printf 'duration_ms: 100\nwrite_into_file: true\n' >"$D/wif.cfg"
cp "$D/wif.cfg" "$D/wif.orig"
expect_exit "consumer: write_into_file -o CONFIG refused" 1 "names the input" \
	"$CONSUMER" -c "$D/wif.cfg" --txt -o "$D/wif.cfg"

cp "$D/c.cfg" "$D/rec.host.pb"
expect_exit "record: -o HOST_CONFIG refused" 1 "names the input" \
	"$RECORD" --qemu-chardev "$D/nope" -c "$D/c.cfg" --txt -o "$D/c.cfg"
expect_exit "record: OUT.host.pb is the -g config: refused" 1 "names the input" \
	"$RECORD" --qemu-chardev "$D/nope" -g "$D/rec.host.pb" --txt -o "$D/rec.pb"
expect_exit "record: symlink to the config refused" 1 "names the input" \
	"$RECORD" --qemu-chardev "$D/nope" -c "$D/c.cfg" --txt -o "$D/c.link"

same "merge inputs unchanged (host)" "$D/h.pb" "$D/h.orig"
same "merge inputs unchanged (guest)" "$D/g.pb" "$D/g.orig"
same "tp query file unchanged" "$D/q.sql" "$D/q.orig"
same "consumer config unchanged" "$D/c.cfg" "$D/c.orig"
same "consumer write_into_file config unchanged" "$D/wif.cfg" "$D/wif.orig"
check "symlinks still symlinks" test -L "$D/g.link" -a -L "$D/c.link"
no_temps "no temporaries after the refusals" "$D" "$D/sub"

# A destination that is a symbolic link to an output is written through:
# the link stays, its target gets the trace.
ln -s sub/target.pb "$D/out.link"
check "merge through a symlink to a new file" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/out.link"
check "the link is still a link, the target the trace" \
	test -L "$D/out.link" -a -s "$D/sub/target.pb"

# ---- 2. a full disk -------------------------------------------------------------
if ! mount -t tmpfs -o size=1m tmpfs "$FULL" 2>"$D/mount.log"; then
	echo "SKIP full-disk checks: cannot mount a tmpfs ($(cat "$D/mount.log"))"
else
	"$TG" --host "$D/bh.pb" --guest "$D/bg.pb" --seed 4 --target-bytes 3M \
		-q >/dev/null
	echo old-merged >"$FULL/m.pb"
	echo old-report >"$FULL/r.json"
	cp "$FULL/m.pb" "$D/m.orig"
	cp "$FULL/r.json" "$D/r.orig"
	expect_exit "merge on a full disk: exit 4 naming path and reason" 4 \
		"full/m.pb: cannot write: No space left on device" \
		"$MERGE" -q "$D/bh.pb" "$D/bg.pb" -o "$FULL/m.pb" --report "$FULL/r.json"
	same "merge on a full disk: old output intact" "$FULL/m.pb" "$D/m.orig"
	same "merge on a full disk: old report intact" "$FULL/r.json" "$D/r.orig"
	no_temps "merge on a full disk: no temporary" "$FULL"

	# The trace fits (another disk), the report does not: neither appears.
	echo old-merged >"$D/m2.pb"
	cp "$D/m2.pb" "$D/m2.orig"
	dd if=/dev/zero of="$FULL/fill" bs=4k 2>/dev/null
	expect_exit "merge whose report cannot be written: exit 4" 4 \
		"r.json: cannot write: No space left on device" \
		"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/m2.pb" --report "$FULL/r.json"
	same "... and the merged output is not replaced" "$D/m2.pb" "$D/m2.orig"
	same "... nor the report" "$FULL/r.json" "$D/r.orig"
	no_temps "... and no temporary anywhere" "$FULL" "$D"
	expect_exit "merge whose report cannot be written (new files): exit 4" 4 \
		"No space left on device" \
		"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/m3.pb" --report "$FULL/r3.json"
	check "... and no merged output appears" test ! -e "$D/m3.pb"
	rm -f "$FULL/fill"

	# vperfetto_tp -e: leave about 64 KiB free.
	"$TG" --host "$D/th.pb" --guest "$D/tg.pb" --seed 6 --target-bytes 4M \
		-q >/dev/null
	dd if=/dev/zero of="$FULL/fill" bs=1k count=960 2>/dev/null
	echo old-db >"$FULL/x.sqlite"
	cp "$FULL/x.sqlite" "$D/x.orig"
	expect_exit "tp -e on a full disk: exit 1 naming path and reason" 1 \
		"x.sqlite: .*(full|No space)" \
		"$TP" --quiet -e "$FULL/x.sqlite" "$D/tg.pb"
	same "tp -e on a full disk: old database intact" "$FULL/x.sqlite" "$D/x.orig"
	no_temps "tp -e on a full disk: no temporary" "$FULL"
	rm -f "$FULL/fill"

	# The consumer: write_into_file, and reading the buffers at the end.
	export PERFETTO_PRODUCER_SOCK_NAME=$D/p.sock
	export PERFETTO_CONSUMER_SOCK_NAME=$D/c.sock
	E2E_VTRACED_ENV=1
	if ! start_vtraced "$D"; then
		fail "vtraced did not start"
	else
		for mode in into_file read_buffers; do
			extra=""
			[ $mode = into_file ] &&
				extra="write_into_file: true file_write_period_ms: 100"
			cat >"$D/full.cfg" <<CFG
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event"
  buffer_exhausted_policy: BUFFER_EXHAUSTED_STALL_THEN_DROP
  track_event_config { enabled_categories: "stack" } } }
duration_ms: 4000
$extra
CFG
			echo "old-$mode" >"$FULL/t.pb"
			cp "$FULL/t.pb" "$D/t.orig"
			"$CONSUMER" -c "$D/full.cfg" --txt -o "$FULL/t.pb" \
				>"$D/cons.log" 2>&1 &
			cpid=$!
			sleep 0.5
			"$WRITER" --threads 2 --events 3000 --pad 512 \
				>"$D/writer.log" 2>&1
			timeout 60 tail --pid="$cpid" -f /dev/null
			wait "$cpid"
			st=$?
			if [ $st -ne 0 ] && grep -Eq "t.pb: .*No space left on device" \
				"$D/cons.log"; then
				pass "consumer ($mode) on a full disk: exit $st naming path and reason"
			else
				fail "consumer ($mode) on a full disk: exit $st:"
				sed 's/^/    /' "$D/cons.log" | tail -5
			fi
			same "consumer ($mode) on a full disk: old trace intact" \
				"$FULL/t.pb" "$D/t.orig"
			no_temps "consumer ($mode) on a full disk: no temporary" "$FULL"
		done
	fi
	umount "$FULL"
fi

# ---- 3. signals -------------------------------------------------------------------
"$TG" --host "$D/bigh.pb" --guest "$D/bigg.pb" --seed 5 --target-bytes 60M \
	-q >/dev/null
for threads in 2 1; do
	for sig in INT TERM; do
		echo old >"$D/s.pb"
		echo old-report >"$D/s.json"
		"$MERGE" -q --threads $threads "$D/bigh.pb" "$D/bigg.pb" \
			-o "$D/s.pb" --report "$D/s.json" 2>"$D/log" &
		mpid=$!
		# Into the guest's rewrite pass: the host has been copied.
		wait_temp "$D/.s.pb.vperfetto-tmp.*"
		for _ in $(seq 200); do
			sz=$(stat -c %s "$D"/.s.pb.vperfetto-tmp.* 2>/dev/null |
				head -1)
			[ "${sz:-0}" -gt 2000000 ] && break
			sleep 0.01
		done
		kill -$sig $mpid
		wait $mpid
		st=$?
		want=130
		[ $sig = TERM ] && want=143
		check "merge --threads $threads, SIG$sig mid-run: exit $want (got $st)" \
			test $st -eq $want
		check "... the old output and report intact" \
			test "$(cat "$D/s.pb")" = old -a "$(cat "$D/s.json")" = old-report
		no_temps "... no temporary" "$D"
	done
done

"$TG" --host "$D/mh.pb" --guest "$D/mg.pb" --seed 5 --target-bytes 15M \
	-q >/dev/null
for sig in INT TERM; do
	echo old >"$D/s.sqlite"
	"$TP" --quiet -e "$D/s.sqlite" "$D/mg.pb" 2>"$D/log" &
	tpid=$!
	wait_temp "$D/.s.sqlite.vperfetto-tmp.*" ||
		fail "tp -e: no temporary file seen"
	kill -$sig $tpid
	wait $tpid
	st=$?
	check "tp -e, SIG$sig during the export: non-zero exit (got $st)" \
		test $st -ne 0
	check "... the old database intact" test "$(cat "$D/s.sqlite")" = old
	no_temps "... no temporary" "$D"
done

# The consumer: the first signal stops the session cleanly (the trace is
# written, as Perfetto's command does), a second one aborts it.
if [ -n "${VTRACED_PID:-}" ] && kill -0 "$VTRACED_PID" 2>/dev/null; then
	for sig in INT TERM; do
		cat >"$D/long.cfg" <<CFG
buffers { size_kb: 8192 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event"
  track_event_config { enabled_categories: "stack" } } }
duration_ms: 60000
write_into_file: true
file_write_period_ms: 100
CFG
		echo old >"$D/ct.pb"
		"$CONSUMER" -c "$D/long.cfg" --txt -o "$D/ct.pb" \
			>"$D/cons.log" 2>&1 &
		cpid=$!
		wait_temp "$D/.ct.pb.vperfetto-tmp.*"
		# A producer that cannot answer the flush holds the clean stop
		# long enough (5 s) for the second signal to find it running.
		"$WRITER" --forever --threads 1 >"$D/writer.log" 2>&1 &
		wpid=$!
		e2e_track $wpid
		sleep 1
		kill -STOP $wpid
		kill -$sig $cpid
		sleep 0.3 # two signals sent at once may arrive as one
		kill -$sig $cpid
		wait $cpid
		st=$?
		kill -CONT $wpid
		e2e_stop $wpid
		check "consumer, SIG$sig twice: non-zero exit (got $st)" test $st -ne 0
		check "... the old trace intact" test "$(head -c 4 "$D/ct.pb")" = old
		no_temps "... no temporary" "$D"
	done
fi

# SIGKILL: the leftover says what it is; the next run removes it, but not
# one whose process is alive.
echo old >"$D/k.pb"
"$MERGE" -q "$D/bigh.pb" "$D/bigg.pb" -o "$D/k.pb" 2>/dev/null &
kpid=$!
wait_temp "$D/.k.pb.vperfetto-tmp.*"
kill -KILL $kpid
wait $kpid 2>/dev/null
check "after SIGKILL the leftover is .k.pb.vperfetto-tmp.$kpid" \
	test -e "$D/.k.pb.vperfetto-tmp.$kpid"
sleep 1000 &
live=$!
: >"$D/.k.pb.vperfetto-tmp.$live"
check "the next merge to k.pb succeeds" \
	"$MERGE" -q "$D/h.pb" "$D/g.pb" -o "$D/k.pb"
check "... and removed the dead run's leftover" \
	test ! -e "$D/.k.pb.vperfetto-tmp.$kpid"
check "... but not the file of a live process" \
	test -e "$D/.k.pb.vperfetto-tmp.$live"
kill $live
wait $live 2>/dev/null
rm -f "$D/.k.pb.vperfetto-tmp.$live"

echo old >"$D/k.sqlite"
"$TP" --quiet -e "$D/k.sqlite" "$D/mg.pb" 2>/dev/null &
kpid=$!
wait_temp "$D/.k.sqlite.vperfetto-tmp.*"
kill -KILL $kpid
wait $kpid 2>/dev/null
check "tp -e after SIGKILL: the leftover names the export" \
	test -e "$D/.k.sqlite.vperfetto-tmp.$kpid"
check "the next tp -e succeeds" "$TP" --quiet -e "$D/k.sqlite" "$D/g.pb"
check "... and removed the leftover" test ! -e "$D/.k.sqlite.vperfetto-tmp.$kpid"

e2e_finish outputs_e2e
