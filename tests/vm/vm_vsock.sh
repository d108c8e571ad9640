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
. "$(dirname "$0")/vm_lib.sh"
[ -c /dev/vhost-vsock ] ||
	vm_skip "no /dev/vhost-vsock on this host: the vsock path (guest agent on vsock 2:20020, control on vsock port 20021, vperfetto_record --guest-vsock) is not tested here; virtio-serial covers the same flow (vm_record)"
vm_require_qemu

E2E_TP=$B/processor/vperfetto_tp
e2e_init vm_vsock
vm_image "$E2E_DIR"
cid=$((1000 + RANDOM % 50000))
vm_boot_qemu "$E2E_DIR/ch" "$E2E_DIR/console.log" --vsock "$cid" \
	--append "vperfetto.workload=1 vperfetto.host=vsock://2:20020 vperfetto.ctl=vsock://-1:20021"
[ -n "$VM_QEMU_PID" ] && e2e_track "$VM_QEMU_PID"
ready=no
vm_wait_ready "$E2E_DIR/console.log" && ready=yes
check "the guest booted with a vsock device (cid $cid)" test $ready = yes
[ $ready = yes ] || e2e_finish vm_vsock
"$B/host/vperfetto_record" --guest-vsock "$cid" -t 8s -v -o "$E2E_DIR/merged.pb" \
	>"$E2E_DIR/rec.log" 2>&1
rc=$?
check "vperfetto_record --guest-vsock $cid (exit $rc)" test $rc -eq 0
sed 's/^/# /' "$E2E_DIR/rec.log"
n=$(query "$E2E_DIR/merged.pb" "select count(*) from slice s join track t
     on s.track_id = t.id where t.machine_id = 1 and s.name = 'guest_clock_sync_exchange'")
check "sync exchanges over vsock on the guest machine ($n)" test "${n:-0}" -ge 30
e2e_finish vm_vsock
