#!/usr/bin/env bash
# The ABI check: compares libvkattn.so (built with -g) against the baseline
# of the last release, abi/libvkattn-X.Y.Z.abi, with libabigail (Debian:
# abigail-tools).
#
#   tools/abi-check.sh <libvkattn.so> [baseline]   check (CI)
#   tools/abi-check.sh --update <libvkattn.so>     at a release: write its baseline
#   tools/abi-check.sh --update <lib.so> <file>    write that baseline file only
#
# Passes when nothing changed, or when the only changes are additions the
# growth rule allows (vkattn.h "ABI stability", src/core/abi.h): new
# functions, fields appended to a struct (inserted at or past its old end),
# enumerators appended. A change or removal fails, with abidiff's report.
# Additions since the release pass with a note; tools/check_abi_version.py
# (ctest abi.versioned) requires the minor version to have moved for them.
# --update without a file is for cutting a release: it writes abi/libvkattn-<version>.abi
# and abi/exports-<version>.txt (the version the header's VKATTN_VERSION_*
# say) and removes the previous release's pair: abi/ keeps the last
# release's baseline only.
#
# The arguments, the library, the baseline (when checking), the headers and
# libabigail's tools are checked first: a usage line (exit 2) or a clear
# error (exit 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The last release's baseline (abi/ holds one).
baseline=$(ls "$root"/abi/libvkattn-*.abi 2>/dev/null | sort -V | tail -n 1)
header_version() {
  local h=$root/include/vkattn/vkattn.h
  printf '%s.%s.%s' "$(sed -n 's/^#define VKATTN_VERSION_MAJOR \([0-9]*\)$/\1/p' "$h")" \
    "$(sed -n 's/^#define VKATTN_VERSION_MINOR \([0-9]*\)$/\1/p' "$h")" \
    "$(sed -n 's/^#define VKATTN_VERSION_PATCH \([0-9]*\)$/\1/p' "$h")"
}
usage() { echo "usage: tools/abi-check.sh [--update] <libvkattn.so> [baseline]" >&2; exit 2; }
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
case $# in 1 | 2) ;; *) usage ;; esac
case "$1" in -*) echo "abi-check: unknown option $1" >&2; usage ;; esac
lib=$1
explicit=${2:-}  # a baseline named by the caller (the canary's): --update writes just it
baseline=${2:-$baseline}
headers=${ABI_HEADERS_DIR:-$root/include/vkattn}  # the canary points it elsewhere
[ -f "$lib" ] || { echo "abi-check: no library $lib" >&2; exit 1; }
[ "$update" = 1 ] || [ -f "$baseline" ] ||
  { echo "abi-check: no baseline $baseline (tools/abi-check.sh --update writes it)" >&2; exit 1; }
[ -d "$headers" ] || { echo "abi-check: no headers folder $headers" >&2; exit 1; }
for t in abidw abidiff; do
  command -v "$t" >/dev/null || { echo "abi-check: $t not found (Debian: abigail-tools)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
abidw --headers-dir "$headers" --drop-private-types --exported-interfaces-only \
  --drop-undefined-syms --no-corpus-path --no-comp-dir-path --short-locs --out-file "$tmp/new.abi" "$lib"
if [ "$update" = 1 ] && [ -n "$explicit" ]; then
  cp "$tmp/new.abi" "$explicit"
  echo "abi-check: baseline written: $explicit"
  exit 0
fi
if [ "$update" = 1 ]; then
  version=$(header_version)
  [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    { echo "abi-check: cannot read VKATTN_VERSION_* from the header (got $version)" >&2; exit 1; }
  new=$root/abi/libvkattn-$version.abi
  cp "$tmp/new.abi" "$new.tmp"
  { echo "# The functions release $version exported (tools/check_abi_version.py; written by tools/abi-check.sh --update)"
    grep -oE 'VKATTN_API[^;]*[^a-z0-9_]vkattn_[a-z0-9_]+\(' "$root/include/vkattn/vkattn.h" |
      grep -oE 'vkattn_[a-z0-9_]+\($' | tr -d '(' | sort -u; } >"$root/abi/exports-$version.txt.tmp"
  for old in "$root"/abi/libvkattn-*.abi "$root"/abi/exports-*.txt; do
    case "$old" in "$new" | "$root/abi/exports-$version.txt") ;; *) rm -f "$old" ;; esac
  done
  mv "$new.tmp" "$new"
  mv "$root/abi/exports-$version.txt.tmp" "$root/abi/exports-$version.txt"
  echo "abi-check: the baseline of release $version: $new and abi/exports-$version.txt"
  exit 0
fi
set +e
abidiff "$baseline" "$tmp/new.abi" >"$tmp/report" 2>&1
rc=$?
set -e
if [ "$rc" = 0 ]; then
  echo "abi-check: no ABI change against $(basename "$baseline")"
  exit 0
fi
if [ $((rc & 3)) != 0 ] || [ $((rc & 8)) != 0 ]; then
  cat "$tmp/report"
  echo "abi-check: FAILED (abidiff exit $rc: an error, or an incompatible change such as a removal)"
  exit 1
fi
# rc == 4: changes. Every line of the report must be one the growth rule allows.
if awk '
  /^[[:space:]]*$/ { next }
  /changes summary/ { next }
  /Added (function|variable)/ { next }
  /^[[:space:]]*\[A\]/ { next }
  /with some indirect sub-type change/ { next }
  /^[[:space:]]*\[C\] .*has some indirect sub-type changes:/ { next }
  /^[[:space:]]*(parameter [0-9]+|return type) of type .* has sub-type changes:/ { next }
  /^[[:space:]]*in (pointed to|unqualified underlying|referenced) type/ { next }
  /^[[:space:]]*underlying type .* changed:$/ { next }
  /^[[:space:]]*type of .* changed:$/ { next }
  /^[[:space:]]*type name changed/ { print "renamed: " $0; bad = 1; next }
  /^[[:space:]]*type size changed from [0-9]+ to [0-9]+ \(in bits\)/ {
    old = $5; if ($7 + 0 < old + 0) { print "shrunk: " $0; bad = 1 } next }
  /^[[:space:]]*[0-9]+ data member insertions?:/ { next }
  /^[[:space:]]*[0-9]+ enumerator insertions?:/ { enums = 1; next }
  enums && /^[[:space:]]*'[A-Za-z0-9_:]+' value '-?[0-9]+'$/ { next }
  /^[[:space:]]*.*, at offset [0-9]+ \(in bits\)/ {
    match($0, /at offset [0-9]+/); off = substr($0, RSTART + 10, RLENGTH - 10) + 0
    if (off < old) { print "inserted inside the struct: " $0; bad = 1 } next }
  { print "not allowed by the growth rule: " $0; bad = 1 }
  END { exit bad }
' "$tmp/report" >"$tmp/why"; then
  cat "$tmp/report"
  echo "abi-check: passed with additions the growth rule allows;" \
    "regenerate the baseline in this commit: tools/abi-check.sh --update $lib"
  exit 0
fi
cat "$tmp/report"
cat "$tmp/why"
echo "abi-check: FAILED (a change the growth rule does not allow)"
exit 1
