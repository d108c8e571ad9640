#!/usr/bin/env bash
# run_qemu.sh - starts the test guest (or any direct-boot kernel) in QEMU
# with vperfetto's host/guest channels: a virtio-serial device with the
# ports org.vperfetto.control and org.vperfetto.sync, whose host ends are
# UNIX sockets that QEMU listens on (DIR/control.sock, DIR/sync.sock), and
# a vhost-vsock device when the host has /dev/vhost-vsock and --vsock is
# given.  KVM when it can really run a guest here, else TCG.
#
# Usage: run_qemu.sh --kernel K --initrd I --chardev-dir DIR [options]
#
#   --mem MB          guest memory (default 512)
#   --smp N           vcpus (default 2)
#   --append ARGS     more kernel command line (e.g. vperfetto.workload=1)
#   --vsock CID       a vhost-vsock-pci device with this guest CID
#   --accel A         kvm, tcg or auto (default): auto boots the kernel
#                     under KVM for a few seconds first and takes TCG when
#                     it does not get as far as printing its banner
#   --log FILE        the serial console into FILE, and QEMU in the
#                     background (it prints QEMU's pid); without --log QEMU
#                     runs in the foreground with the console on stdio
#                     (Ctrl-A x quits)
#   --pidfile FILE    QEMU's pid (default DIR/qemu.pid)
#
# DIR also gets qmp.sock, a QMP server socket (e.g. for "quit").
set -euo pipefail

prog=run_qemu.sh
die() {
	echo "$prog: error: $*" >&2
	exit 1
}
usage() {
	sed -n '/^# Usage:/,/^# DIR also/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

kernel="" initrd="" dir="" mem=512 smp=2 append="" cid="" accel=auto
log="" pidfile=""
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || case "$1" in -h | --help) usage ;; *)
		echo "$prog: $1 needs a value" >&2
		usage
		;;
	esac
	case "$1" in
	--kernel) kernel=$2 ;;
	--initrd) initrd=$2 ;;
	--chardev-dir) dir=$2 ;;
	--mem) mem=$2 ;;
	--smp) smp=$2 ;;
	--append) append=$2 ;;
	--vsock) cid=$2 ;;
	--accel) accel=$2 ;;
	--log) log=$2 ;;
	--pidfile) pidfile=$2 ;;
	*)
		echo "$prog: unknown option '$1'" >&2
		usage
		;;
	esac
	shift 2
done
[ -n "$kernel" ] && [ -n "$initrd" ] && [ -n "$dir" ] ||
	{ echo "$prog: --kernel, --initrd and --chardev-dir are required" >&2; usage; }
[ -r "$kernel" ] || die "--kernel $kernel: not readable"
[ -r "$initrd" ] || die "--initrd $initrd: not readable"
[[ "$mem" =~ ^[0-9]+$ ]] && [ "$mem" -ge 64 ] || die "--mem $mem: want MB >= 64"
[[ "$smp" =~ ^[0-9]+$ ]] && [ "$smp" -ge 1 ] || die "--smp $smp: want a count >= 1"
[ -z "$cid" ] || { [[ "$cid" =~ ^[0-9]+$ ]] && [ "$cid" -ge 3 ]; } ||
	die "--vsock $cid: want a guest CID >= 3"
case "$accel" in auto | kvm | tcg) ;; *) die "--accel $accel: want kvm, tcg or auto" ;; esac
qemu=${QEMU:-qemu-system-x86_64}
command -v "$qemu" >/dev/null ||
	die "$qemu not found (Debian package qemu-system-x86)"
mkdir -p "$dir" || die "cannot create --chardev-dir $dir"
dir=$(cd "$dir" && pwd)
# sun_path holds 107 characters and a NUL.
[ ${#dir} -le 94 ] || die "--chardev-dir $dir: too long for UNIX socket paths"
[ -n "$pidfile" ] || pidfile=$dir/qemu.pid

# kvm_works: boots the kernel under KVM for up to 5 s and looks for its
# banner on the serial console.  /dev/kvm may exist and open and still
# not run a guest (a nested hypervisor without long mode, say).
kvm_works() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	local plog ppid ok=1
	plog=$(mktemp "${TMPDIR:-/tmp}/run_qemu_probe.XXXXXX")
	"$qemu" -accel kvm -M q35 -m 128 -nodefaults -no-user-config \
		-display none -monitor none -serial "file:$plog" \
		-kernel "$kernel" -append "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1" \
		-no-reboot </dev/null >/dev/null 2>&1 &
	ppid=$!
	for _ in $(seq 50); do
		if grep -q "Linux version" "$plog" 2>/dev/null; then
			ok=0
			break
		fi
		kill -0 "$ppid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$ppid" 2>/dev/null || true
	wait "$ppid" 2>/dev/null || true
	rm -f "$plog"
	return $ok
}

if [ "$accel" = auto ]; then
	if kvm_works; then
		accel=kvm
	else
		accel=tcg
		echo "$prog: KVM cannot run a guest here; using TCG (software emulation)" >&2
	fi
fi
cpu=()
[ "$accel" = kvm ] && cpu=(-cpu host)

rm -f "$dir/control.sock" "$dir/sync.sock" "$dir/qmp.sock"
# shellcheck disable=SC2054 # commas separate QEMU suboptions
args=(-accel "$accel" "${cpu[@]}" -M q35 -m "$mem" -smp "$smp"
	-nodefaults -no-user-config -no-reboot
	-kernel "$kernel" -initrd "$initrd"
	-append "console=ttyS0 panic=-1 $append"
	-chardev "socket,id=ctl,path=$dir/control.sock,server=on,wait=off"
	-chardev "socket,id=sync,path=$dir/sync.sock,server=on,wait=off"
	-device virtio-rng-pci
	-device virtio-serial-pci,id=vser0
	-device virtserialport,bus=vser0.0,chardev=ctl,name=org.vperfetto.control
	-device virtserialport,bus=vser0.0,chardev=sync,name=org.vperfetto.sync
	-qmp "unix:$dir/qmp.sock,server=on,wait=off"
	-pidfile "$pidfile")
if [ -n "$cid" ]; then
	if [ -e /dev/vhost-vsock ]; then
		args+=(-device "vhost-vsock-pci,guest-cid=$cid")
	else
		echo "$prog: no /dev/vhost-vsock on this host: no vsock device (virtio-serial only)" >&2
	fi
fi

if [ -n "$log" ]; then
	: >"$log" || die "--log $log: cannot write"
	"$qemu" "${args[@]}" -display none -monitor none \
		-serial "file:$log" -daemonize </dev/null ||
		die "$qemu failed to start"
	cat "$pidfile"
else
	echo "$prog: QEMU pid $$ ($accel); Ctrl-A x quits" >&2
	exec "$qemu" "${args[@]}" -nographic -serial mon:stdio
fi
