#!/usr/bin/env bash
# Runs every checker's canary once: a program or library that breaks the
# checker's rule on purpose. Each must be caught; a canary that passes means
# its checker is blind, and this script fails. Kept out of the test suites
# (tools/checks.sh runs it after them).
#   tools/canaries.sh [build] [build-asan] [build-tsan] [build-abi]
# The canaries these folders must hold (tools/checks.sh builds them) are
# checked first: a missing one is an error (exit 1), not a blind checker.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 4 ] || [[ "${1:-}" == -* ]]; then
  echo "usage: tools/canaries.sh [build] [build-asan] [build-tsan] [build-abi]" >&2
  exit 2
fi
build=${1:-build} asan=${2:-build-asan} tsan=${3:-build-tsan} abi=${4:-build-abi}
missing=""
for f in "$build/CMakeCache.txt" "$asan/tests/canary_leak" "$asan/tests/canary_oob_read" \
  "$tsan/tests/canary_race" "$build/tests/canary_validation" "$asan/tests/libvkattn_keep_loaded.so"; do
  [ -f "$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
  echo "canaries: missing$missing (tools/checks.sh builds them: VKATTN_CHECKS=\"asan tsan canaries\")" >&2
  exit 1
fi
source tools/sanitizer-env.sh
export VKATTN_PIPELINE_CACHE_DIR=
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
report() {  # name, caught (0/1), evidence
  if [ "$2" = 1 ]; then
    printf '  %-28s caught: %s\n' "$1" "$3"
  else
    printf '  %-28s NOT CAUGHT: %s\n' "$1" "$3"
    failed=1
  fi
}
echo "canaries:"

asan_env "$asan" "$asan/tests/canary_leak" >"$tmp/leak.log" 2>&1
grep -q "ERROR: LeakSanitizer: detected memory leaks" "$tmp/leak.log" &&
  grep -q "vkattn_tensor_create" "$tmp/leak.log"
report "leak (LSan)" $((1 - $?)) "$(grep -m1 'SUMMARY' "$tmp/leak.log")"

asan_env "$asan" "$asan/tests/canary_oob_read" >"$tmp/oob.log" 2>&1
grep -q "ERROR: AddressSanitizer: heap-buffer-overflow" "$tmp/oob.log"
report "out-of-bounds read (ASan)" $((1 - $?)) "$(grep -m1 'SUMMARY' "$tmp/oob.log")"

tsan_env "$tsan/tests/canary_race" >"$tmp/race.log" 2>&1
grep -q "WARNING: ThreadSanitizer: data race" "$tmp/race.log"
report "data race (TSan)" $((1 - $?)) "$(grep -m1 'SUMMARY' "$tmp/race.log")"

"$build/tests/canary_validation" >"$tmp/val.log" 2>&1
n=$?
[ "$n" -gt 0 ]
report "validation error (layer)" $((1 - $?)) "$(grep -m1 'messages counted' "$tmp/val.log")"

cmake --build "$build" --target canary_exports >/dev/null 2>&1
tests/abi/check_exports.sh "$build/tests/libcanary_exports.so" include/vkattn/vkattn.h \
  >"$tmp/exp.log" 2>&1
[ $? != 0 ] && grep -q "_ZN6vkattn19leaked_cpp_function" "$tmp/exp.log"
report "exported C++ symbol" $((1 - $?)) "$(grep -m1 '_Z' "$tmp/exp.log")"

for v in v1 v2; do
  gcc -g -shared -fPIC -fvisibility=hidden -Itests/canary/$v tests/canary/abi_toy.c \
    -o "$tmp/toy_$v.so"
done
ABI_HEADERS_DIR=tests/canary/v1 tools/abi-check.sh --update "$tmp/toy_v1.so" "$tmp/toy.abi" \
  >/dev/null 2>&1
ABI_HEADERS_DIR=tests/canary/v1 tools/abi-check.sh "$tmp/toy_v1.so" "$tmp/toy.abi" \
  >"$tmp/abi1.log" 2>&1
same=$?
ABI_HEADERS_DIR=tests/canary/v2 tools/abi-check.sh "$tmp/toy_v2.so" "$tmp/toy.abi" \
  >"$tmp/abi2.log" 2>&1
[ $? != 0 ] && [ "$same" = 0 ]
report "ABI change (abidiff)" $((1 - $?)) "$(grep -m1 'type name changed\|FAILED' "$tmp/abi2.log")"

if [ "$failed" != 0 ]; then
  echo "canaries: a checker did not catch its canary (logs above)"
  exit 1
fi
echo "canaries: every checker caught its canary"
