#!/usr/bin/env bash
# vm_boot.sh - smoke test of the test guest (vm-images/): builds it, boots
# it in QEMU (TCG where KVM cannot run a guest), waits for its ready
# marker, checks from the console that the guest stack started and the
# virtio-serial ports are named, and that the guest agent's clock-sync
# exchanges reach the real host clock producer through QEMU's
# org.vperfetto.sync chardev.  Also checks the libvirt domain XML that
# make_domain.sh writes (with virt-xml-validate, when installed) and the
# launcher's handling of a bad command line.
#
# Usage: vm_boot.sh BUILD_ROOT VM_IMAGES_DIR
# Prints PASS/FAIL per check; exits 1 if any failed, 77 (with "SKIP:
# reason") when QEMU or the guest's Debian packages are not to be had.
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 BUILD_ROOT VM_IMAGES_DIR" >&2
	exit 2
fi
B=$1
V=$2
. "$(dirname "$0")/vm_lib.sh"
skip() { vm_skip "$@"; }
vm_require_qemu

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vm_boot.XXXXXX")
qemu_pid=""
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	if [ -n "$qemu_pid" ]; then
		kill "$qemu_pid" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$qemu_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$qemu_pid" 2>/dev/null
	fi
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() {
	echo "FAIL $1"
	failures=$((failures + 1))
}
pass() { echo "PASS $1"; }

# The image, in the build directory (the package cache makes a rebuild
# take seconds), reused when nothing that goes into it is newer.
vm_image "$tmp"
img=$VM_IMG
pass "$VM_IMAGE_NOTE: $(tr '\n' ';' <"$img/manifest.txt")"
for m in virtio_console vsock vmw_vsock_virtio_transport; do
	grep -q "^modules:.* $m\( \|$\)" "$img/manifest.txt" &&
		pass "module $m in the image" || fail "module $m not in the image"
done

# The launcher refuses a bad command line.
"$V/run_qemu.sh" --kernel "$img/vmlinuz" >"$tmp/bad.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "required" "$tmp/bad.log" &&
	pass "run_qemu.sh without --initrd: usage, exit 2" ||
	fail "run_qemu.sh without --initrd: exit $rc: $(cat "$tmp/bad.log")"
"$V/run_qemu.sh" --kernel "$img/vmlinuz" --initrd "$img/initramfs.img" \
	--chardev-dir "$tmp/x" --smp zero >"$tmp/bad.log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q -- "--smp zero" "$tmp/bad.log" &&
	pass "run_qemu.sh --smp zero: named, exit 1" ||
	fail "run_qemu.sh --smp zero: exit $rc: $(cat "$tmp/bad.log")"

# The libvirt domain XML.
dom=$tmp/domain.xml
if "$V/make_domain.sh" vperfetto-test "$img/vmlinuz" "$img/initramfs.img" \
	"$tmp" vsock=yes "append=vperfetto.workload=1" >"$dom" 2>"$tmp/dom.log"; then
	n=$(grep -c "<target type='virtio' name='org.vperfetto.\(control\|sync\)'/>" "$dom")
	[ "$n" = 2 ] && grep -q "<source mode='bind' path='$tmp/sync.sock'/>" "$dom" &&
		pass "domain XML: both channels" ||
		fail "domain XML channels: $(grep -A2 '<channel' "$dom")"
	if command -v virt-xml-validate >/dev/null; then
		virt-xml-validate "$dom" domain >"$tmp/val.log" 2>&1 &&
			pass "domain XML validates against libvirt's schema" ||
			fail "virt-xml-validate: $(cat "$tmp/val.log")"
	else
		echo "(virt-xml-validate not installed: schema check not run)"
	fi
else
	fail "make_domain.sh: $(cat "$tmp/dom.log")"
fi

# Boot.  The guest powers itself off after 240 s should this test die.
chr=$tmp/chr
log=$tmp/console.log
start=$(date +%s)
qemu_pid=$("$V/run_qemu.sh" --kernel "$img/vmlinuz" \
	--initrd "$img/initramfs.img" --chardev-dir "$chr" --log "$log" \
	--append "vperfetto.poweroff_after=240 vperfetto.workload=1" \
	2>"$tmp/run_qemu.log")
if [ -z "$qemu_pid" ] || ! kill -0 "$qemu_pid" 2>/dev/null; then
	fail "run_qemu.sh: $(cat "$tmp/run_qemu.log")"
	exit 1
fi
pass "QEMU started (pid $qemu_pid) $(cat "$tmp/run_qemu.log")"
ready=0
for _ in $(seq 240); do
	if grep -aq "vperfetto-guest: ready" "$log"; then
		ready=1
		break
	fi
	kill -0 "$qemu_pid" 2>/dev/null || break
	sleep 0.5
done
if [ $ready = 0 ]; then
	fail "no ready marker within 120 s; console: $(tail -n 30 "$log")"
	exit 1
fi
pass "guest ready $(($(date +%s) - start)) s after QEMU started: $(grep -a "vperfetto-guest: ready" "$log")"

console_has() { # NAME PATTERN
	if grep -aq -- "$2" "$log"; then
		pass "$1"
	else
		fail "$1: no '$2' on the console: $(grep -a vperfetto-guest "$log")"
	fi
}
console_has "vtraced started" "vperfetto-guest: vtraced started (pid"
console_has "vtraced_probes started" "vperfetto-guest: vtraced_probes started (pid"
console_has "guest agent started" "vperfetto-guest: vperfetto_guest_agent started (pid"
console_has "sync port named" \
	"virtio-serial port /dev/virtio-ports/org.vperfetto.sync -> /dev/vport"
console_has "control port named" \
	"virtio-serial port /dev/virtio-ports/org.vperfetto.control -> /dev/vport"
console_has "agent uses the sync port" \
	"agent sync endpoint: /dev/virtio-ports/org.vperfetto.sync"
if [ -x "$B/guest/vperfetto_guest_ctl" ]; then
	console_has "guest control daemon started" \
		"vperfetto-guest: vperfetto_guest_ctl started (pid"
fi
if grep -aq "vperfetto-guest: error" "$log"; then
	fail "errors on the console: $(grep -a "vperfetto-guest: error" "$log")"
fi

# The host side: vtraced on temporary sockets and the host clock producer
# on QEMU's end of org.vperfetto.sync.
timeout 120 "$B/service/vtraced" --foreground \
	--consumer-socket "$tmp/c.sock" --producer-socket "$tmp/p.sock" \
	>"$tmp/vtraced.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	[ -S "$tmp/p.sock" ] && break
	sleep 0.05
done
timeout 120 "$B/host/vperfetto_host_clock" --producer-socket "$tmp/p.sock" \
	--no-vsock --qemu-chardev "$chr/sync.sock" -v >"$tmp/host_clock.log" 2>&1 &
hc=$!
pids+=("$hc")
sleep 6
kill -INT "$hc"
wait "$hc"
rc=$?
[ $rc = 0 ] && pass "vperfetto_host_clock stopped on SIGINT" ||
	fail "vperfetto_host_clock exit $rc: $(cat "$tmp/host_clock.log")"
summary=$(grep "exchanges served" "$tmp/host_clock.log")
served=$(sed -n 's/.* \([0-9][0-9]*\) exchanges served.*/\1/p' <<<"$summary")
if [ "${served:-0}" -gt 0 ]; then
	pass "the guest agent's exchanges reached the host: $summary"
else
	fail "no exchanges served: '$summary'; host_clock log: $(cat "$tmp/host_clock.log"); console: $(tail -n 20 "$log")"
fi
kill -0 "$qemu_pid" 2>/dev/null && pass "the guest is still running" ||
	fail "QEMU exited: $(tail -n 20 "$log")"

exit $((failures > 0))
