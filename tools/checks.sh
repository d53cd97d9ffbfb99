#!/usr/bin/env bash
# The checkers (issue E), run by .ci/run after the test suite; each builds
# what it needs beside build/ (which tools/test.sh made):
#   abi       build-abi (gcc, -g): exported symbols = the header's functions,
#             and abidiff against abi/libvkattn-X.Y.Z.abi, the last
#             release's baseline (tools/abi-check.sh)
#   asan      build-asan (clang, ASan + UBSan): ctest -L "unit|sanitize"
#             (unit tests, the small kernel grid, fault sweeps, the fuzz
#             corpus)
#   fuzz      build-asan/tests/fuzz_api for VKATTN_FUZZ_SECONDS (default 270)
#             from tests/fuzz/corpus (new inputs go to build-asan/fuzz-corpus)
#   tsan      build-tsan (clang, TSan): tests/test_threads.cpp
#   memcheck  valgrind on a few C API tests of build/
#   canaries  tools/canaries.sh: every checker must catch its canary
# Prints what each step cost. VKATTN_CHECKS="abi asan" runs a subset. No
# arguments; an unknown step, a VKATTN_FUZZ_SECONDS that is not a whole
# number, or no build/ for memcheck and canaries is refused before any step.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/sanitizer-env.sh
all_steps="abi asan fuzz tsan memcheck canaries"
[ $# -eq 0 ] || { echo "usage: tools/checks.sh (no arguments; VKATTN_CHECKS=\"$all_steps\" picks steps)" >&2; exit 2; }
steps=${VKATTN_CHECKS:-$all_steps}
for s in $steps; do
  case " $all_steps " in
    *" $s "*) ;;
    *) echo "checks: no step \"$s\" in VKATTN_CHECKS (steps: $all_steps)" >&2; exit 2 ;;
  esac
  case "$s" in
    memcheck | canaries) [ -f build/CMakeCache.txt ] ||
      { echo "checks: $s needs build/ (tools/test.sh builds it)" >&2; exit 1; } ;;
  esac
done
fuzz_seconds=${VKATTN_FUZZ_SECONDS:-270}
[[ "$fuzz_seconds" =~ ^[0-9]+$ ]] ||
  { echo "checks: VKATTN_FUZZ_SECONDS needs a whole number of seconds (got $fuzz_seconds)" >&2; exit 2; }
jobs=$(nproc)
clang=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14)
declare -a table
run_step() {  # name, function
  local t0=$SECONDS
  echo "== checks: $1"
  "$2"
  table+=("$(printf '  %-9s %5d s  %s' "$1" $((SECONDS - t0)) "${note:-}")")
  note=""
}

abi() {
  cmake -S . -B build-abi -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVKATTN_BUILD_TESTS=OFF \
    -DVKATTN_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build build-abi -j"$jobs" --target vkattn >/dev/null
  tests/abi/check_exports.sh build-abi/libvkattn.so include/vkattn/vkattn.h
  tools/abi-check.sh build-abi/libvkattn.so
}

asan() {
  cmake -S . -B build-asan -G Ninja "${clang[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVKATTN_SANITIZE=address,undefined -DVKATTN_FUZZ=ON -DVKATTN_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build build-asan -j"$jobs" --target test_api_core test_reference test_attention_plan test_overlap \
    test_faults test_kernel_grid fuzz_api vkattn_keep_loaded canary_leak canary_oob_read \
    visibility_pictures >/dev/null
  asan_env build-asan ctest --test-dir build-asan -j"$jobs" -L "unit|sanitize" \
    --output-on-failure --timeout 900
}

fuzz() {
  mkdir -p build-asan/fuzz-corpus
  local log=build-asan/fuzz.log
  # Hangs: -timeout (a first compile of a variant takes seconds on lavapipe).
  if ! asan_env build-asan build-asan/tests/fuzz_api -max_total_time="$fuzz_seconds" \
    -timeout=120 -rss_limit_mb=6144 -max_len=600 -print_final_stats=1 \
    -artifact_prefix=build-asan/ \
    build-asan/fuzz-corpus tests/fuzz/corpus >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "checks: the fuzzer found a failure (the input is saved in build-asan/)"
    return 1
  fi
  local execs corpus
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  corpus=$(ls build-asan/fuzz-corpus | wc -l)
  note="$execs executions, corpus $corpus new + $(ls tests/fuzz/corpus | wc -l) committed"
  echo "fuzz: $note"
}

tsan() {
  cmake -S . -B build-tsan -G Ninja "${clang[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVKATTN_SANITIZE=thread -DVKATTN_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build build-tsan -j"$jobs" --target test_threads canary_race >/dev/null
  tsan_env build-tsan/tests/test_threads
}

memcheck() {
  valgrind_memcheck build/tests/test_api_core \
    --gtest_filter='Tensors.RoundTripEveryDtypeAndOddSizes:Tensors.BadInput:Abi.*'
  valgrind_memcheck build/tests/test_kv_cache --gtest_filter='KvCacheTest.AbortRestoresEverything'
  note="valgrind memcheck: 0 errors"
}

canaries() {
  cmake --build build -j"$jobs" --target canary_validation >/dev/null
  tools/canaries.sh build build-asan build-tsan build-abi
}

for s in $steps; do run_step "$s" "$s"; done
echo "checks: passed. Time per step:"
printf '%s\n' "${table[@]}"
