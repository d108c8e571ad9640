#!/usr/bin/env bash
# vm_libvirt.sh - the test guest as a libvirt domain (TCG), traced with
# `vperfetto_record --domain NAME`: the domain's channels and QEMU pid are
# found through the libvirt API, the guest records over its
# org.vperfetto.control / org.vperfetto.sync channels, the traces are
# merged and checked in vperfetto_tp.
#
# Runs as root: starts virtlogd and libvirtd itself when they are not
# running (and stops what it started).  Skips (exit 77, "SKIP: reason")
# when not root, without libvirtd / virsh / QEMU, or when the guest's
# Debian packages cannot be had.
#
# Usage: vm_libvirt.sh BUILD_ROOT VM_IMAGES_DIR
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 BUILD_ROOT VM_IMAGES_DIR" >&2
	exit 2
fi
B=$(cd "$1" && pwd)
V=$(cd "$2" && pwd)
RECORD=$B/host/vperfetto_record
TP=$B/processor/vperfetto_tp
URI=qemu:///system
. "$(dirname "$0")/vm_lib.sh"
skip() { vm_skip "$@"; }
vm_require_qemu
[ "$(id -u)" -eq 0 ] || skip "libvirtd is started by this test, which needs root"
for t in libvirtd virtlogd virsh qemu-system-x86_64; do
	command -v "$t" >/dev/null || PATH=$PATH:/usr/sbin command -v "$t" >/dev/null ||
		skip "$t not found (Debian packages libvirt-daemon-system, libvirt-clients, qemu-system-x86)"
done
export PATH=$PATH:/usr/sbin

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vm_libvirt.XXXXXX")
# vperfetto_record keeps a failed run's logs under $TMPDIR: in $tmp, so
# that they go with it
export TMPDIR=$tmp
chmod 755 "$tmp"
name=vperfetto-test-$$
started=()
cleanup() {
	virsh -c "$URI" destroy "$name" >/dev/null 2>&1
	for d in "${started[@]}"; do
		pkill -x "$d" 2>/dev/null
	done
	[ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() {
	echo "FAIL $1"
	failures=$((failures + 1))
}
pass() { echo "PASS $1"; }
check() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
q() { timeout 120 "$TP" --quiet "$1" -Q "$2" 2>>"$tmp/tp.log" | tail -n +2 | tr -d '"'; }

# --- the daemons ---------------------------------------------------------------
for d in virtlogd libvirtd; do
	if ! pgrep -x "$d" >/dev/null; then
		"$d" -d >"$tmp/$d.log" 2>&1 || skip "$d does not start: $(tail -n 1 "$tmp/$d.log")"
		started+=("$d")
	fi
done
for _ in $(seq 100); do
	virsh -c "$URI" version >/dev/null 2>&1 && break
	sleep 0.1
done
virsh -c "$URI" version >/dev/null 2>&1 || skip "libvirtd does not answer on $URI"

# --- the image and the domain --------------------------------------------------
vm_image "$tmp"
img=$VM_IMG
echo "# $VM_IMAGE_NOTE"
# QEMU runs as libvirt's user: give it its own copies and a directory it
# may create its sockets in.
mkdir -p "$tmp/ch"
cp "$img/vmlinuz" "$img/initramfs.img" "$tmp/"
chmod 644 "$tmp/vmlinuz" "$tmp/initramfs.img"
chmod 777 "$tmp/ch"
# start_domain NAME: the domain created and its guest booted; exits the
# test when either fails.
start_domain() {
	rm -f "$tmp/ch/console.log"
	bash "$V/make_domain.sh" "$1" "$tmp/vmlinuz" "$tmp/initramfs.img" "$tmp/ch" \
		"append=vperfetto.workload=1 vperfetto.ctl_log=1" >"$tmp/domain.xml" 2>"$tmp/make_domain.log"
	check "make_domain.sh wrote the domain XML" test -s "$tmp/domain.xml"
	virsh -c "$URI" create "$tmp/domain.xml" >"$tmp/create.log" 2>&1
	local rc=$?
	check "virsh create (a transient TCG domain) (exit $rc)" test $rc -eq 0
	[ $rc -eq 0 ] || { cat "$tmp/create.log"; exit 1; }
	local ready=no
	vm_wait_ready "$tmp/ch/console.log" && ready=yes
	check "the domain's guest booted ($(vm_ready_uptime "$tmp/ch/console.log"))" \
		test $ready = yes
	[ $ready = yes ] || { tail -n 20 "$tmp/ch/console.log" 2>/dev/null; exit 1; }
}

# record_domain NAME: vperfetto_record --domain NAME into $tmp/rec; rc.
record_domain() {
	rm -rf "$tmp/rec"
	mkdir -p "$tmp/rec"
	"$RECORD" --domain "$1" --libvirt-uri "$URI" -t 8s -v \
		-o "$tmp/rec/merged.pb" >"$tmp/rec.log" 2>&1
}

start_domain "$name"

# --- vperfetto_record --domain ---------------------------------------------------
record_domain "$name"
rc=$?
# A guest that stopped running altogether (no answer to a PING during
# the recording, or to STOP nor to a PING after it) is the emulated
# machine's failure, seen once in many CI runs under TCG: its console is
# shown, and the test runs once more on a fresh domain.  A session that
# does not stop while the guest answers is ours, and fails at once.
if [ $rc -ne 0 ] && grep -Eq "answers no PING either|did not answer PING" "$tmp/rec.log"; then
	echo "# the guest stopped running during the recording; its console:"
	sed 's/^/#   /' "$tmp/rec.log"
	tail -n 60 "$tmp/ch/console.log" | sed 's/^/# console: /'
	virsh -c "$URI" destroy "$name" >/dev/null 2>&1
	name=$name-again
	echo "# once more, on a fresh domain $name"
	start_domain "$name"
	record_domain "$name"
	rc=$?
fi
check "vperfetto_record --domain $name -t 8s (exit $rc)" test $rc -eq 0
sed 's/^/# /' "$tmp/rec.log"
# A failed run: what the guest's console (with vperfetto_guest_ctl's log,
# vperfetto.ctl_log=1) says happened on its side.
[ $rc -eq 0 ] || tail -n 40 "$tmp/ch/console.log" | sed 's/^/# console: /'
check "the domain's control channel was found through libvirt" \
	grep -q "guest: control $tmp/ch/control.sock, sync $tmp/ch/sync.sock" "$tmp/rec.log"
check "the QEMU pid was found (no 'QEMU pid unknown')" \
	bash -c "! grep -q 'QEMU pid unknown' '$tmp/rec.log'"
M=$tmp/rec/merged.pb
check "merged trace written" test -s "$M"
n=$(q "$M" "select count(*) from sched s join cpu c using (ucpu) where c.machine_id = 1")
check "guest sched slices on the guest machine ($n)" test "${n:-0}" -gt 0
n=$(q "$M" "select count(*) from slice s join track t on s.track_id = t.id
     where t.machine_id = 1 and s.name = 'guest_clock_sync_exchange'")
check "sync exchanges on the guest machine ($n)" test "${n:-0}" -ge 30
n=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["guests"][0]["exchanges"]["causality_violations"])' \
	"$tmp/rec/merged.report.json" 2>/dev/null)
check "zero causality violations ($n)" test "$n" = 0
# libvirt names QEMU's vCPU threads (debug-threads=on): the vcpu_map
# records come from the names and carry the domain's name.
n=$(q "$M" "select group_concat(cpu || ':' || source || ':' || vm, ' ') from
     (select * from vcpu where machine_id = 1 order by cpu)")
check "the vcpu table: both vCPUs by thread name, named $name ($n)" \
	test "$n" = "0:thread_name:$name 1:thread_name:$name"
n=$(q "$M" "select count(*) from track where machine_id = 1 and
     name like 'vCPU % host state'")
check "a host-state track per vCPU on the guest machine ($n)" test "$n" = 2

# A domain that does not exist: a clear message, exit 3, nothing written.
"$RECORD" --domain "no-such-domain-$$" -t 1s -o "$tmp/none.pb" >"$tmp/none.log" 2>&1
rc=$?
check "an unknown domain: exit 3 (got $rc)" test $rc -eq 3
check "an unknown domain: the message names it" grep -q "no-such-domain-$$" "$tmp/none.log"
check "an unknown domain: nothing written" test ! -e "$tmp/none.pb" -a ! -e "$tmp/none.host.pb"

echo "vm_libvirt: $failures failed"
exit $((failures > 0))
