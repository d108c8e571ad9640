#!/usr/bin/env bash
# vm_vsock.sh - the vsock path: the test guest with a vhost-vsock device,
# its agent exchanging with the host clock producer on vsock 2:20020 and
# its control endpoint on vsock port 20021, traced with
# `vperfetto_record --guest-vsock CID`.  Needs /dev/vhost-vsock: where the
# host has none (as on machines whose kernel lacks vhost_vsock, or
# containers), the test says so and skips (exit 77).
#
# Usage: vm_vsock.sh BUILD_ROOT VM_IMAGES_DIR
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 BUILD_ROOT VM_IMAGES_DIR" >&2
	exit 2
fi
B=$(cd "$1" && pwd)
V=$(cd "$2" && pwd)
. "$(dirname "$0")/../lib/e2e_lib.sh"
skip() {
	echo "SKIP: $*"
	exit 77
}
[ -c /dev/vhost-vsock ] ||
	skip "no /dev/vhost-vsock on this host: the vsock path (guest agent on vsock 2:20020, control on vsock port 20021, vperfetto_record --guest-vsock) is not tested here; virtio-serial covers the same flow (vm_record)"
[ "$(uname -m)" = x86_64 ] || skip "the test guest is x86_64 only"
command -v qemu-system-x86_64 >/dev/null ||
	skip "qemu-system-x86_64 not found (Debian package qemu-system-x86)"

E2E_TP=$B/processor/vperfetto_tp
e2e_init vm_vsock
img=$B/vm-images/guest
if [ ! -s "$img/initramfs.img" ]; then
	bash "$V/build_guest.sh" "$B" "$img" >"$E2E_DIR/build.log" 2>&1
	rc=$?
	[ $rc -eq 3 ] && skip "the guest's Debian packages cannot be had"
	[ $rc -eq 0 ] || { cat "$E2E_DIR/build.log"; exit 1; }
fi
cid=$((1000 + RANDOM % 50000))
mkdir -p "$E2E_DIR/ch"
qemu_pid=$(bash "$V/run_qemu.sh" --kernel "$img/vmlinuz" --initrd "$img/initramfs.img" \
	--chardev-dir "$E2E_DIR/ch" --log "$E2E_DIR/console.log" --vsock "$cid" \
	--append "vperfetto.workload=1 vperfetto.host=vsock://2:20020 vperfetto.ctl=vsock://-1:20021" |
	tail -n 1)
e2e_track "$qemu_pid"
ready=no
for _ in $(seq 180); do
	grep -q "vperfetto-guest: ready" "$E2E_DIR/console.log" 2>/dev/null && { ready=yes; break; }
	sleep 1
done
check "the guest booted with a vsock device (cid $cid)" test $ready = yes
[ $ready = yes ] || e2e_finish vm_vsock
"$B/host/vperfetto_record" --guest-vsock "$cid" -t 8s -o "$E2E_DIR/merged.pb" \
	>"$E2E_DIR/rec.log" 2>&1
rc=$?
check "vperfetto_record --guest-vsock $cid (exit $rc)" test $rc -eq 0
sed 's/^/# /' "$E2E_DIR/rec.log"
n=$(query "$E2E_DIR/merged.pb" "select count(*) from slice s join track t
     on s.track_id = t.id where t.machine_id = 1 and s.name = 'guest_clock_sync_exchange'")
check "sync exchanges over vsock on the guest machine ($n)" test "${n:-0}" -ge 30
e2e_finish vm_vsock
