#!/usr/bin/env bash
# build_guest.sh - builds the bootable test guest: Debian's kernel and an
# initramfs with busybox, the virtio-serial / vsock modules and our guest
# binaries (vtraced, vtraced_probes, vperfetto_guest_agent, vperfetto,
# vperfetto_guest_ctl), started by vm-images/init.
#
# Usage: build_guest.sh BUILD_DIR OUT_DIR
#
# Exit status: 0 done, 1 error, 2 usage, 3 a Debian package could not be
# had (no package lists or no network, and nothing cached).
#
# Writes OUT_DIR/vmlinuz, OUT_DIR/initramfs.img (newc cpio, gzip) and
# OUT_DIR/manifest.txt (what went in).  Nothing is downloaded but Debian
# packages, with apt-get download, into a cache directory
# ($VPERFETTO_VM_CACHE, default vm-images/.cache) that later runs reuse; the
# kernel package is unpacked there with dpkg-deb, never installed.
#
# Environment:
#   VPERFETTO_VM_CACHE     the package cache (default vm-images/.cache)
#   VPERFETTO_VM_KERNEL    a kernel package name (default: the one
#                          linux-image-amd64 depends on)
set -euo pipefail

prog=build_guest.sh
here=$(cd "$(dirname "$0")" && pwd)

die() {
	echo "$prog: error: $*" >&2
	exit 1
}
# A Debian package that cannot be had (no package lists, offline): exit 3,
# which the tests take for "cannot be done on this machine".
die_fetch() {
	echo "$prog: error: $*" >&2
	exit 3
}
say() { echo "$prog: $*" >&2; }

if [ $# -ne 2 ]; then
	echo "usage: $prog BUILD_DIR OUT_DIR" >&2
	exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || die "build directory '$1' not found"
mkdir -p "$2" || die "cannot create output directory '$2'"
out=$(cd "$2" && pwd)
[ "$(uname -m)" = x86_64 ] ||
	die "the test guest is x86_64 only (this machine is $(uname -m))"
for tool in apt-get apt-cache dpkg-deb cpio gzip ldd objcopy flock; do
	command -v "$tool" >/dev/null ||
		die "'$tool' not found (packages: apt, dpkg, cpio, gzip, libc-bin, binutils, util-linux)"
done

cache=${VPERFETTO_VM_CACHE:-$here/.cache}
mkdir -p "$cache" || die "cannot create cache directory '$cache'"
cache=$(cd "$cache" && pwd)
# One build at a time fills the cache.
exec 9>"$cache/.lock"
flock 9

# ---------------------------------------------------------------------
# Debian packages: apt-get download into the cache, dpkg-deb -x beside.

# apt_download PKG: the .deb of PKG's candidate version, in the cache.
apt_download() {
	local pkg=$1 ver deb
	ver=$(apt-cache policy "$pkg" 2>/dev/null |
		awk '/Candidate:/ {print $2; exit}')
	if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
		# A cached download works without package lists.
		deb=$(ls -t "$cache/${pkg}_"*.deb 2>/dev/null | head -n 1 || true)
		[ -n "$deb" ] && { echo "$deb"; return 0; }
		die_fetch "no candidate for Debian package '$pkg' (run apt-get update)"
	fi
	# Epochs ("1:") become "%3a" in file names.
	deb=$cache/${pkg}_${ver//:/%3a}_amd64.deb
	if [ ! -s "$deb" ]; then
		say "downloading $pkg $ver"
		local opts=()
		# apt's sandbox user cannot write into root-owned directories.
		[ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)
		(cd "$cache" && apt-get download -q "${opts[@]}" "$pkg=$ver" \
			>"$cache/download.log" 2>&1) ||
			die_fetch "apt-get download $pkg=$ver failed: $(tail -n 3 "$cache/download.log")"
		[ -s "$deb" ] || deb=$(ls -t "$cache/${pkg}_"*.deb | head -n 1)
	fi
	echo "$deb"
}

# unpack DEB: the directory DEB is unpacked into (once).
unpack() {
	local deb=$1 dir
	dir=${deb%.deb}
	if [ ! -e "$dir/.unpacked" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		dpkg-deb -x "$deb" "$dir" || die "dpkg-deb -x $deb failed"
		touch "$dir/.unpacked"
	fi
	echo "$dir"
}

kpkg=${VPERFETTO_VM_KERNEL:-}
if [ -z "$kpkg" ]; then
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	if [ -z "$kpkg" ]; then
		# Offline with a filled cache: the newest kernel there.
		kpkg=$(ls -t "$cache"/linux-image-[0-9]*_amd64.deb 2>/dev/null |
			head -n 1 | sed 's|.*/||; s|_.*||' || true)
	fi
	[ -n "$kpkg" ] ||
		die_fetch "cannot resolve linux-image-amd64's kernel package (run apt-get update)"
fi
kdeb=$(apt_download "$kpkg") || exit $?
kdir=$(unpack "$kdeb") || exit $?
kver=$(ls "$kdir/lib/modules" | head -n 1)
[ -n "$kver" ] && [ -f "$kdir/boot/vmlinuz-$kver" ] ||
	die "$kpkg: no kernel image or modules in the package"
kconfig=$kdir/boot/config-$kver
moddir=$kdir/lib/modules/$kver

# busybox: the host's when it is static, else busybox-static's.
busybox=""
if command -v busybox >/dev/null &&
	! ldd "$(command -v busybox)" >/dev/null 2>&1; then
	busybox=$(command -v busybox)
else
	bdeb=$(apt_download busybox-static) || exit $?
	bdir=$(unpack "$bdeb") || exit $?
	busybox=$bdir/bin/busybox
	[ -x "$busybox" ] || die "busybox-static: no bin/busybox in the package"
fi

# ---------------------------------------------------------------------
# The initramfs tree.

root=$out/initramfs.root
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc,proc,sys,dev,run,tmp,var/log,root}
mkdir -p "$root/lib/modules"

# busybox and its applets (as symlinks; our binaries are added after).
cp "$busybox" "$root/bin/busybox"
"$busybox" --list-full | while read -r applet; do
	[ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done

# ---------------------------------------------------------------------
# Kernel modules: the ones the guest needs that this kernel builds as
# modules, with their dependencies first.  The package has no modules.dep
# (depmod makes it at install time), so the dependencies come from each
# module's .modinfo section, which is what depmod reads too.

# config_of SYMBOL: y, m or empty
config_of() {
	sed -n "s/^CONFIG_$1=\(.*\)/\1/p" "$kconfig"
}

# mod_path NAME: the module file (relative to moddir) for a module name
mod_path() {
	local name=$1 re
	# Module names use '_' where file names may use '-'.
	re=$(printf '%s' "$name" | sed 's/[_-]/[_-]/g')
	grep -E "(^|/)$re\.ko(\.(xz|zst|gz))?$" "$moddir/modules.order" |
		head -n 1 || true
}

# unpack_module REL DEST: DEST is the uncompressed module
unpack_module() {
	local src=$moddir/$1
	# modules.order names the .ko; the file may be compressed.
	local f
	for f in "$src" "$src.xz" "$src.zst" "$src.gz" "${src%.*}"; do
		[ -f "$f" ] && break
	done
	[ -f "$f" ] || die "module file $1 missing from $kpkg"
	case "$f" in
	*.xz) xz -dc "$f" >"$2" || die "cannot decompress $f (xz-utils)" ;;
	*.zst) zstd -qdc "$f" >"$2" || die "cannot decompress $f (zstd)" ;;
	*.gz) gzip -dc "$f" >"$2" || die "cannot decompress $f" ;;
	*) cp "$f" "$2" ;;
	esac
}

# mod_depends FILE: the module names FILE depends on
mod_depends() {
	local tmp
	tmp=$(mktemp)
	if ! objcopy -O binary --only-section=.modinfo "$1" "$tmp" 2>/dev/null; then
		rm -f "$tmp"
		return 1
	fi
	tr '\0' '\n' <"$tmp" | sed -n 's/^depends=//p' | tr ',' '\n' |
		sed '/^$/d'
	rm -f "$tmp"
}

loaded=()
# add_module NAME: NAME and its dependencies, dependencies first
add_module() {
	local name=${1//-/_} m rel file deps
	for m in "${loaded[@]}"; do
		[ "$m" = "$name" ] && return 0
	done
	rel=$(mod_path "$name")
	if [ -z "$rel" ]; then
		# Built in (or absent): modules.builtin says which.
		if grep -Eq "/$(printf '%s' "$name" | sed 's/[_-]/[_-]/g')\.ko$" \
			"$moddir/modules.builtin"; then
			return 0
		fi
		die "module $name is neither a module nor built into $kver"
	fi
	file=$root/lib/modules/$name.ko
	unpack_module "$rel" "$file"
	deps=$(mod_depends "$file") || die "cannot read the .modinfo of $rel"
	for m in $deps; do
		add_module "$m"
	done
	loaded+=("$name")
}

# The guest's devices: virtio PCI transport, virtio-serial, vsock, and
# virtio-rng (under TCG the kernel's random pool takes ~20 s to fill
# without it, and getrandom() blocks until it is).
wanted=()
for sym_mod in VIRTIO:virtio VIRTIO_RING:virtio_ring VIRTIO_PCI:virtio_pci \
	VIRTIO_CONSOLE:virtio_console VSOCKETS:vsock \
	VIRTIO_VSOCKETS_COMMON:vmw_vsock_virtio_transport_common \
	VIRTIO_VSOCKETS:vmw_vsock_virtio_transport HW_RANDOM:rng_core \
	HW_RANDOM_VIRTIO:virtio_rng; do
	sym=${sym_mod%%:*}
	mod=${sym_mod#*:}
	case "$(config_of "$sym")" in
	m) wanted+=("$mod") ;;
	y) ;;
	*)
		# VIRTIO_RING is not a config symbol of its own in newer
		# kernels; its module goes with VIRTIO.
		[ "$sym" = VIRTIO_RING ] && [ -n "$(mod_path virtio_ring)" ] &&
			wanted+=(virtio_ring)
		# The entropy device is optional: without it the guest's
		# random pool fills slowly under TCG, that is all.
		case "$sym" in
		VIRTIO_RING | HW_RANDOM*) ;;
		*) die "$kver: CONFIG_$sym is not enabled" ;;
		esac
		;;
	esac
done
for mod in "${wanted[@]}"; do
	add_module "$mod"
done
printf '%s\n' "${loaded[@]}" >"$root/lib/modules/load-order"

# ---------------------------------------------------------------------
# Our binaries and every shared library they need.

copy_libs() { # BINARY
	local lib
	ldd "$1" 2>/dev/null | awk '
		/=> \// {print $3}
		/^[ \t]*\/[^ ]+ \(/ {print $1}' | while read -r lib; do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}

bins=(service/vtraced probes/vtraced_probes
	guest/vperfetto_guest_agent consumer/vperfetto)
optional=(guest/vperfetto_guest_ctl tests/sdk/sdk_example)
for b in "${bins[@]}"; do
	[ -x "$build/$b" ] || die "$build/$b not built (run ninja -C $build)"
done
for b in "${bins[@]}" "${optional[@]}"; do
	if [ ! -x "$build/$b" ]; then
		say "warning: $build/$b not built, not in the image"
		continue
	fi
	dest=$root/bin/$(basename "$b")
	rm -f "$dest"
	cp "$build/$b" "$dest"
	copy_libs "$dest"
done
# The loader searches lib64 and the multiarch directory; with a merged
# /usr the libraries' paths are under /lib, which is where they went.
cat >"$root/etc/ld.so.conf" <<EOF
/lib/x86_64-linux-gnu
/usr/lib/x86_64-linux-gnu
EOF

cat >"$root/etc/passwd" <<EOF
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<EOF
root:x:0:
nogroup:x:65534:
EOF
echo vperfetto-guest >"$root/etc/hostname"
cp "$here/init" "$root/init"
chmod 755 "$root/init"

# ---------------------------------------------------------------------
# The archive and the kernel.

(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --quiet -R 0:0) | gzip -6 >"$out/initramfs.img.tmp"
mv "$out/initramfs.img.tmp" "$out/initramfs.img"
cp "$kdir/boot/vmlinuz-$kver" "$out/vmlinuz"
{
	echo "kernel: $kpkg ($kver)"
	echo "busybox: $busybox"
	echo "modules: ${loaded[*]}"
	printf 'binaries:'
	for f in "$root"/bin/*; do
		[ -L "$f" ] || [ "${f##*/}" = busybox ] || printf ' %s' "${f##*/}"
	done
	echo
} >"$out/manifest.txt"
rm -rf "$root"
say "wrote $out/vmlinuz and $out/initramfs.img ($(du -h "$out/initramfs.img" | cut -f1))"
cat "$out/manifest.txt" >&2
