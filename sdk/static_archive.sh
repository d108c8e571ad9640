#!/bin/sh
# static_archive.sh - makes the installed libvperfetto.a: one relocatable
# object holding the SDK and the layers under it, in which only the
# public API (the global names of libvperfetto.map) stays global.
#
# Without this a static archive exports every internal function of the
# tree (pb_buf_init, vp_trace_buffer_new, ...), whose generic names
# collide with the application's own; the shared library hides them with
# the version script, and this does the same for static linking.
#
#   static_archive.sh OUT.a WHOLE.a MAP [LD] [OBJCOPY] [AR]
set -eu
out=$1 whole=$2 map=$3
ld=${4:-ld} objcopy=${5:-objcopy} ar=${6:-ar}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

grep -oE '^ *vp_[a-z0-9_]+;' "$map" | tr -d ' ;' >"$tmp/keep"
[ -s "$tmp/keep" ] || { echo "$0: no symbols in $map" >&2; exit 1; }
"$ld" -r -o "$tmp/libvperfetto.o" --whole-archive "$whole"
"$objcopy" --keep-global-symbols="$tmp/keep" "$tmp/libvperfetto.o"
rm -f "$out.tmp"
"$ar" rcsD "$out.tmp" "$tmp/libvperfetto.o"
mv "$out.tmp" "$out"
