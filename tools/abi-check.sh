#!/usr/bin/env bash
# The ABI check: compares libvkattn.so (built with -g) against the committed
# baseline abi/libvkattn.abi with libabigail (Debian: abigail-tools).
#
#   tools/abi-check.sh <libvkattn.so>            check (CI)
#   tools/abi-check.sh --update <libvkattn.so>   regenerate the baseline
#
# Passes when nothing changed, or when the only changes are additions the
# growth rule allows (vkattn.h "ABI stability", src/core/abi.h): new
# functions, fields appended to a struct (inserted at or past its old end),
# enumerators appended. A change or removal fails, with abidiff's report.
# An addition passes with a note: regenerate the baseline in the same
# commit that adds it.
#
# The arguments, the library, the baseline (when checking), the headers and
# libabigail's tools are checked first: a usage line (exit 2) or a clear
# error (exit 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
baseline=$root/abi/libvkattn.abi
usage() { echo "usage: tools/abi-check.sh [--update] <libvkattn.so> [baseline]" >&2; exit 2; }
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
case $# in 1 | 2) ;; *) usage ;; esac
case "$1" in -*) echo "abi-check: unknown option $1" >&2; usage ;; esac
lib=$1
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
if [ "$update" = 1 ]; then
  cp "$tmp/new.abi" "$baseline"
  echo "abi-check: baseline regenerated: $baseline"
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
