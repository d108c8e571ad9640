#!/usr/bin/env bash
# make_domain.sh - fills in vm-images/domain.xml.in: a libvirt domain for
# the test guest with vperfetto's virtio-serial channels.
#
# Usage: make_domain.sh NAME KERNEL INITRD CHARDEV_DIR [KEY=VALUE...] > domain.xml
#
#   type=qemu|kvm     the domain type (default qemu: TCG)
#   vsock=no|yes|CID  a virtio vsock device, its CID picked by libvirt (yes)
#                     or fixed (default no)
#   mem=MB            memory (default 512)
#   smp=N             vcpus (default 2)
#   append=ARGS       more kernel command line (e.g. vperfetto.workload=1)
#
# The channels' sockets are CHARDEV_DIR/control.sock and
# CHARDEV_DIR/sync.sock, the console goes to CHARDEV_DIR/console.log (as
# with run_qemu.sh).  Paths are made absolute; values are XML-escaped.
set -euo pipefail

prog=make_domain.sh
here=$(cd "$(dirname "$0")" && pwd)
die() {
	echo "$prog: error: $*" >&2
	exit 1
}
if [ $# -lt 4 ]; then
	sed -n '/^# Usage:/,/^#   append/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
name=$1 kernel=$2 initrd=$3 dir=$4
shift 4
type=qemu vsock=no mem=512 smp=2 append=""
for kv in "$@"; do
	case "$kv" in
	type=qemu | type=kvm) type=${kv#*=} ;;
	vsock=*) vsock=${kv#*=} ;;
	mem=*) mem=${kv#*=} ;;
	smp=*) smp=${kv#*=} ;;
	append=*) append=${kv#*=} ;;
	*) die "unknown or bad argument '$kv'" ;;
	esac
done
[[ "$name" =~ ^[A-Za-z0-9_.+-]+$ ]] ||
	die "domain name '$name': use letters, digits and _ . + -"
[[ "$mem" =~ ^[0-9]+$ ]] && [ "$mem" -ge 64 ] || die "mem=$mem: want MB >= 64"
[[ "$smp" =~ ^[0-9]+$ ]] && [ "$smp" -ge 1 ] || die "smp=$smp: want a count >= 1"
case "$vsock" in
no) vsock_xml="    <!-- no vsock device: make_domain.sh vsock=yes adds one -->" ;;
yes) vsock_xml="    <vsock model='virtio'><cid auto='yes'/></vsock>" ;;
*)
	[[ "$vsock" =~ ^[0-9]+$ ]] && [ "$vsock" -ge 3 ] ||
		die "vsock=$vsock: want no, yes or a CID >= 3"
	vsock_xml="    <vsock model='virtio'><cid auto='no' address='$vsock'/></vsock>"
	;;
esac
cpu_xml=""
[ "$type" = kvm ] && cpu_xml="  <cpu mode='host-passthrough'/>"

abs() { # PATH: absolute, the file need not exist yet
	local d
	d=$(cd "$(dirname "$1")" 2>/dev/null && pwd) ||
		die "$1: directory does not exist"
	echo "$d/$(basename "$1")"
}
[ -r "$kernel" ] || die "kernel $kernel: not readable"
[ -r "$initrd" ] || die "initrd $initrd: not readable"
[ -d "$dir" ] || die "chardev directory $dir: not a directory"
kernel=$(abs "$kernel")
initrd=$(abs "$initrd")
dir=$(cd "$dir" && pwd)
[ ${#dir} -le 94 ] || die "chardev directory $dir: too long for UNIX socket paths"

xml_escape() {
	local s=$1
	s=${s//&/"&amp;"}
	s=${s//</"&lt;"}
	s=${s//>/"&gt;"}
	s=${s//\'/"&apos;"}
	s=${s//\"/"&quot;"}
	printf '%s' "$s"
}

tpl=$(cat "$here/domain.xml.in") || die "cannot read $here/domain.xml.in"
# Replacement strings are quoted so that bash 5.2 does not expand '&'.
subst() { # WORD VALUE
	tpl=${tpl//"@$1@"/"$2"}
}
subst TYPE "$type"
subst NAME "$name"
subst MEM "$mem"
subst SMP "$smp"
subst KERNEL "$(xml_escape "$kernel")"
subst INITRD "$(xml_escape "$initrd")"
subst CMDLINE "$(xml_escape "console=ttyS0 panic=-1 $append")"
subst CHARDEV_DIR "$(xml_escape "$dir")"
subst CPU "$cpu_xml"
subst VSOCK "$vsock_xml"
printf '%s\n' "$tpl" | grep -v '^$'
