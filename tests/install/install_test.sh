#!/usr/bin/env bash
# install_test.sh - meson install into a scratch DESTDIR, check the layout,
# build the pkg-config example against that install, run it and read its
# trace with the installed vperfetto_tp.  Arguments: see meson.build.
set -euo pipefail
build=$1 example=$2 header=$3 map=$4 version=$5 prefix=$6 bindir=$7
libdir=$8 includedir=$9 mandir=${10} unitdir=${11} bashcompdir=${12}
sanitize=${13} man=${14}

if [ "$sanitize" != none ]; then
	echo "SKIP: sanitizer build ($sanitize)"
	exit 77
fi
for t in pkg-config nm; do
	command -v "$t" >/dev/null || { echo "SKIP: no $t"; exit 77; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Relative install dirs are under the prefix; absolute ones stand alone.
under() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
bin=$dest$(under "$bindir")
lib=$dest$(under "$libdir")
inc=$dest$(under "$includedir")
man_dir=$dest$(under "$mandir")

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet \
	>"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }

# ---- the layout
programs=(vtraced vtraced_probes vperfetto vperfetto_host_clock
	  vperfetto_record vperfetto_guest_agent vperfetto_guest_ctl
	  vperfetto_merge vperfetto_tp)
for p in "${programs[@]}"; do
	if [ ! -x "$bin/$p" ]; then
		bad "$bin/$p not installed"
		continue
	fi
	out=$("$bin/$p" --version 2>&1) || bad "$p --version failed: $out"
	[ "$out" = "$p $version" ] ||
		bad "$p --version says '$out', want '$p $version'"
	[ -e "$dest$bashcompdir/$p" ] || bad "no bash completion for $p"
done
for f in "$inc/vperfetto/vperfetto.h" "$lib/libvperfetto.a" \
	 "$lib/libvperfetto.so" "$lib/libvperfetto.so.0" \
	 "$lib/pkgconfig/vperfetto.pc"; do
	[ -e "$f" ] || bad "$f not installed"
done
for u in vtraced vtraced-probes vperfetto-host-clock vperfetto-guest-agent \
	 vperfetto-guest-ctl; do
	f=$dest$unitdir/$u.service
	if [ ! -f "$f" ]; then
		bad "$f not installed"
	elif ! grep -q "^ExecStart=.*$(under "$bindir")/" "$f"; then
		bad "$u.service does not start the installed program"
	fi
done
if [ "$man" = man ]; then
	for p in vperfetto.1 vperfetto_merge.1 vperfetto_record.1 \
		 vperfetto_tp.1 libvperfetto.3 vtraced.8 vtraced_probes.8 \
		 vperfetto_host_clock.8 vperfetto_guest_agent.8 \
		 vperfetto_guest_ctl.8; do
		f=$man_dir/man${p##*.}/$p
		[ -s "$f" ] || bad "man page $f not installed"
	done
fi

# ---- the shared library exports the header's functions and nothing else
soname=$(readlink "$lib/libvperfetto.so.0")
nm -D --defined-only "$lib/$soname" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' |
	sed 's/@.*//' | grep -v '^VPERFETTO_' | sort -u >"$tmp/exported"
grep -E '^[a-z]' "$header" | grep -oE '\bvp_[a-z0-9_]+\(' | tr -d '(' |
	sort -u >"$tmp/declared"
grep -oE '^ *vp_[a-z_]+;' "$map" | tr -d ' ;' | sort -u >"$tmp/mapped"
[ -s "$tmp/declared" ] || bad "no declarations found in $header"
diff -u "$tmp/declared" "$tmp/exported" >"$tmp/d1" ||
	{ bad "exports differ from the header's declarations:"; cat "$tmp/d1"; }
diff -u "$tmp/declared" "$tmp/mapped" >"$tmp/d2" ||
	{ bad "libvperfetto.map differs from the header's declarations:"; cat "$tmp/d2"; }

# ---- so does the static library: internal names are local there too, so
# an application's own pb_buf_init (say) cannot collide with ours
nm -g --defined-only "$lib/libvperfetto.a" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' |
	sort -u >"$tmp/static_exported"
diff -u "$tmp/declared" "$tmp/static_exported" >"$tmp/d3" ||
	{ bad "libvperfetto.a's global symbols differ from the header's:"; cat "$tmp/d3"; }

# ---- the pkg-config example, against the DESTDIR install
export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_LIBDIR=$lib/pkgconfig
[ "$(pkg-config --modversion vperfetto)" = "$version" ] ||
	bad "pkg-config --modversion vperfetto: $(pkg-config --modversion vperfetto)"
read -r -a cc <<<"${CC:-cc}"
flags=$(pkg-config --cflags --libs vperfetto)
echo "${cc[*]} trace_example.c $flags"
# shellcheck disable=SC2086
"${cc[@]}" -std=c17 -Wall -Wextra -Werror -o "$tmp/trace_example" "$example" \
	$flags || { echo "FAIL: the example does not build"; exit 1; }
LD_LIBRARY_PATH=$lib "$tmp/trace_example" "$tmp/shared.pftrace"
# (grep -q in a pipe could end ldd with SIGPIPE, failing the pipeline.)
libs_used=$(LD_LIBRARY_PATH=$lib ldd "$tmp/trace_example")
grep -q "$lib/libvperfetto.so.0" <<<"$libs_used" ||
	bad "the example does not use the installed libvperfetto.so.0"

# and linked statically against libvperfetto.a
static_libs=$(pkg-config --libs --static vperfetto)
# shellcheck disable=SC2086
"${cc[@]}" -std=c17 -o "$tmp/trace_example_static" "$example" \
	$(pkg-config --cflags vperfetto) "$lib/libvperfetto.a" \
	${static_libs//-lvperfetto/} ||
	{ echo "FAIL: the example does not link statically"; exit 1; }
# An application with functions named like our internal ones still links.
cat >"$tmp/clash.c" <<'CLASH'
#include <vperfetto/vperfetto.h>
int pb_buf_init(void);
int vp_errorf(void);
int vp_trace_buffer_new(void);
int pb_buf_init(void) { return 1; }
int vp_errorf(void) { return 2; }
int vp_trace_buffer_new(void) { return 3; }
int main(void)
{
	return vp_now_ns() > 0 ? pb_buf_init() + vp_errorf() +
		vp_trace_buffer_new() - 6 : 1;
}
CLASH
# shellcheck disable=SC2086
"${cc[@]}" -std=c17 -o "$tmp/clash" "$tmp/clash.c" \
	$(pkg-config --cflags vperfetto) "$lib/libvperfetto.a" \
	${static_libs//-lvperfetto/} ||
	bad "a program with functions named like libvperfetto's internals does not link statically"
[ ! -x "$tmp/clash" ] || "$tmp/clash" || bad "the clash program's functions were not its own"

"$tmp/trace_example_static" "$tmp/static.pftrace"

for t in shared static; do
	n=$("$bin/vperfetto_tp" --quiet "$tmp/$t.pftrace" -Q \
		"select count(*) from slice where name = 'fib'" | tail -n 1)
	[ "$n" = 5 ] || bad "$t example: $n 'fib' slices in the trace, want 5"
	n=$("$bin/vperfetto_tp" --quiet "$tmp/$t.pftrace" -Q \
		"select count(*) from counter" | tail -n 1)
	[ "$n" = 5 ] || bad "$t example: $n counter values in the trace, want 5"
done

[ "$fail" -eq 0 ] && echo "install: ok ($dest)"
exit "$fail"
