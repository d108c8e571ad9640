#!/usr/bin/env bash
# fake_consumer.sh - a stand-in for the consumer (vperfetto) that
# vperfetto_guest_ctl runs, for the tests of what the daemon does when a
# consumer behaves well or badly.  Called as the daemon calls vperfetto:
#
#   fake_consumer.sh -c CONFIG -o OUT
#
# The "config" (the bytes START carried) names the behaviour:
#   ok       wait for SIGINT, then write 8 MiB of random bytes to OUT
#            (through a temporary file, like vperfetto) and exit 0
#   fail     complain on stderr and exit 1 at once (a bad config)
#   die      run 2 s, then complain and exit 3 (the service went away)
#   hang     ignore SIGINT and never write anything
set -u
cfg= out=
while [ $# -gt 0 ]; do
	case $1 in
	-c) cfg=$2; shift 2 ;;
	-o) out=$2; shift 2 ;;
	*) echo "fake consumer: unknown argument $1" >&2; exit 2 ;;
	esac
done
mode=$(head -c 16 "$cfg" | tr -dc 'a-z')
case $mode in
fail)
	echo "fake consumer: bad config: no buffers" >&2
	exit 1 ;;
die)
	sleep 2
	echo "fake consumer: lost the tracing service" >&2
	exit 3 ;;
hang)
	trap '' INT
	while :; do sleep 1; done ;;
ok)
	stop=0
	trap 'stop=1' INT
	echo "fake consumer: tracing" >&2
	while [ $stop = 0 ]; do
		sleep 10 &
		wait $! 2>/dev/null
	done
	kill $! 2>/dev/null
	head -c $((8 << 20)) /dev/urandom >"$out.tmp" && mv "$out.tmp" "$out"
	echo "fake consumer: wrote $out" >&2
	exit 0 ;;
*)
	echo "fake consumer: unknown mode '$mode'" >&2
	exit 2 ;;
esac
