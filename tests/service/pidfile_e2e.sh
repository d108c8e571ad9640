#!/usr/bin/env bash
# pidfile_e2e.sh - vtraced's --pidfile holds against a second daemon and a
# hostile path: a second vtraced on the same pidfile (other sockets) is
# refused and the first one's pid stays in the file, also after the second
# exits; a symbolic link at the path is refused and its target left as it
# was; with --background the file holds the pid of the daemon that stays;
# at exit vtraced removes its pidfile, but not a file put in its place.
# And one address given for both sockets is refused up front, by name.
#
# usage: pidfile_e2e.sh BUILD_DIR
set -uo pipefail
B=$1
VTRACED=$B/service/vtraced

# shellcheck source=SCRIPTDIR/../lib/e2e_lib.sh
. "$(dirname "$0")/../lib/e2e_lib.sh"
E2E_VTRACED=$VTRACED
e2e_init vp-pidfile
D=$E2E_DIR

# wait_for_pid FILE: until FILE holds a pid (5 s); 1 if it does not.
wait_for_pid() {
  for _ in $(seq 100); do
    grep -qE '^[0-9]+$' "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# gone PID: until PID has exited (10 s).
gone() {
  for _ in $(seq 200); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.05
  done
  return 1
}

# --- 1. a second vtraced on the same pidfile is refused ----------------------
echo "--- second daemon"
mkdir "$D/a" "$D/b"
start_vtraced "$D/a" --pidfile "$D/vtraced.pid" ||
  fail "the first vtraced did not create its sockets"
FIRST=$VTRACED_PID
wait_for_pid "$D/vtraced.pid"
check "the pidfile holds the first vtraced's pid" \
  test "$(cat "$D/vtraced.pid")" = "$FIRST"

timeout 10 "$VTRACED" --foreground --producer-socket "$D/b/p.sock" \
  --consumer-socket "$D/b/c.sock" --pidfile "$D/vtraced.pid" \
  >"$D/second.log" 2>&1
rc=$?
check "the second vtraced is refused (exit $rc)" test $rc -ne 0 -a $rc -ne 124
check "it says why, naming the pidfile and the first pid: $(cat "$D/second.log")" \
  grep -q "$D/vtraced.pid.*locked.*pid $FIRST" "$D/second.log"
check "the second vtraced created no socket" \
  test ! -e "$D/b/p.sock" -a ! -e "$D/b/c.sock"
check "the pidfile still holds the first vtraced's pid" \
  test "$(cat "$D/vtraced.pid" 2>/dev/null)" = "$FIRST"
check "the first vtraced is still running" kill -0 "$FIRST"

e2e_stop "$FIRST"
check "the first vtraced removed its pidfile at exit" test ! -e "$D/vtraced.pid"

# --- 2. a symbolic link at the path is refused --------------------------------
echo "--- symbolic link"
mkdir "$D/s"
echo "precious contents" >"$D/victim.txt"
ln -s "$D/victim.txt" "$D/pid.link"
timeout 10 "$VTRACED" --foreground --producer-socket "$D/s/p.sock" \
  --consumer-socket "$D/s/c.sock" --pidfile "$D/pid.link" \
  >"$D/link.log" 2>&1
rc=$?
check "a symlinked pidfile is refused (exit $rc)" test $rc -ne 0 -a $rc -ne 124
check "it says why, naming the path: $(cat "$D/link.log")" \
  grep -q "$D/pid.link.*symbolic link" "$D/link.log"
check "the link's target is unchanged" \
  test "$(cat "$D/victim.txt")" = "precious contents"
check "the link is still there" test -L "$D/pid.link"
check "vtraced created no socket" test ! -e "$D/s/p.sock"

# A dangling link: its target must not be created.
ln -s "$D/nowhere.txt" "$D/dangling.link"
timeout 10 "$VTRACED" --foreground --producer-socket "$D/s/p.sock" \
  --consumer-socket "$D/s/c.sock" --pidfile "$D/dangling.link" \
  >>"$D/link.log" 2>&1
rc=$?
check "a dangling symlinked pidfile is refused (exit $rc)" \
  test $rc -ne 0 -a $rc -ne 124
check "the dangling link's target was not created" test ! -e "$D/nowhere.txt"

# --- 3. --background: the daemon that stays holds the pidfile ----------------
echo "--- background"
mkdir "$D/g" "$D/h"
# A relative path names a file in the directory vtraced started in.
(cd "$D" && timeout 10 "$VTRACED" --background \
  --producer-socket "$D/g/p.sock" --consumer-socket "$D/g/c.sock" \
  --pidfile bg.pid) >"$D/bg.log" 2>&1
rc=$?
check "vtraced --background started (exit $rc)" test $rc -eq 0
if wait_for_pid "$D/bg.pid"; then
  BG=$(cat "$D/bg.pid")
  e2e_track "$BG"
  check "the pidfile holds the pid of a running vtraced ($BG)" \
    grep -q vtraced "/proc/$BG/cmdline"
  (cd "$D" && timeout 10 "$VTRACED" --background \
    --producer-socket "$D/h/p.sock" --consumer-socket "$D/h/c.sock" \
    --pidfile bg.pid) >"$D/bg2.log" 2>&1
  rc=$?
  check "a second vtraced --background is refused (exit $rc)" \
    test $rc -ne 0 -a $rc -ne 124
  check "it names the pid of the one running: $(cat "$D/bg2.log")" \
    grep -q "bg.pid.*locked.*pid $BG" "$D/bg2.log"
  check "the pidfile still holds $BG" test "$(cat "$D/bg.pid")" = "$BG"
  kill -TERM "$BG"
  if gone "$BG"; then
    pass "the background vtraced exited on SIGTERM"
  else
    fail "the background vtraced did not exit on SIGTERM"
  fi
  check "it removed its pidfile (relative to where it started)" \
    test ! -e "$D/bg.pid"
else
  fail "vtraced --background wrote no pid to $D/bg.pid: $(cat "$D/bg.log")"
fi

# --- 4. a file put in the pidfile's place is not removed ----------------------
echo "--- replaced pidfile"
mkdir "$D/r"
start_vtraced "$D/r" --pidfile "$D/r.pid" ||
  fail "vtraced did not create its sockets"
R=$VTRACED_PID
wait_for_pid "$D/r.pid"
rm -f "$D/r.pid"
echo "someone else's" >"$D/r.pid"
e2e_stop "$R"
check "vtraced left the file it did not lock" \
  test "$(cat "$D/r.pid" 2>/dev/null)" = "someone else's"

# --- 5. one address for both sockets -------------------------------------------
echo "--- one address for both sockets"
mkdir "$D/same"
out=$(PERFETTO_PRODUCER_SOCK_NAME="$D/same/x.sock" \
  PERFETTO_CONSUMER_SOCK_NAME="$D/same/y.sock,$D/same/x.sock" \
  timeout 10 "$VTRACED" --pidfile "$D/same.pid" 2>&1)
rc=$?
check "it exits 2 at once (exit $rc)" test $rc -eq 2
check "it names the address: $out" \
  grep -q "$D/same/x.sock is both a producer and a consumer socket" <<<"$out"
check "it made no socket and no pidfile" \
  test ! -e "$D/same/x.sock" -a ! -e "$D/same/y.sock" -a ! -e "$D/same.pid"

e2e_finish pidfile_e2e
