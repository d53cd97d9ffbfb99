#!/usr/bin/env bash
# The third command of the 2026-11-28 H200 draw: the suites with every call
# forced onto coopmat (f16 K/V where a test lets the dtype be chosen),
# with the validation layer on (the tests require it), whose Debian 12
# version 1.3.239 does not know VK_KHR_cooperative_matrix and reports every
# coopmat pipeline: the summary counts the failures at other lines than
# the validation-message check (test_util.h:86), i.e. wrong answers.
set -u
. tools/gpu/gpu_env.sh
export VKATTN_PIPELINE_CACHE_DIR= VKATTN_ATTN_KERNEL=coopmat VKATTN_TEST_KV_DTYPE=f16 VKATTN_LOG=kernels
run() {
  local n=$1; shift
  timeout 120 build/tests/$n "$@" >"$OUT/$n.log" 2>&1
  echo "$n: exit $? $(grep -c '^\[       OK' "$OUT/$n.log") ok, failed: $(grep '^\[  FAILED  \] [A-Za-z]' "$OUT/$n.log" | grep -v ' ms)$' | sed 's/.*\] //' | tr '\n' ' ')" \
    >>"$OUT/summary.txt"
}
run test_attention --gtest_filter='-*Slow*:*ForcedVariants*' &
run test_step_attention --gtest_filter='-*Slow*' &
run test_batch_invariance &
run test_numeric_edges &
wait
echo "failures other than the validation count, by place:" >>"$OUT/summary.txt"
grep -ho "[a-z_]*\.[ch]p*:[0-9]*: Failure" "$OUT"/*.log | grep -v "test_util.h:86" | sort | uniq -c >>"$OUT/summary.txt"
grep -h "self-check family=coopmat" "$OUT"/*.log | grep -c passed | sed 's/^/coopmat self-checks passed: /' >>"$OUT/summary.txt"
grep -h "self-check family=coopmat FAILED" "$OUT"/*.log | sort | uniq -c >>"$OUT/summary.txt"
grep -h "fallback from coopmat" "$OUT"/*.log | sed 's/.*fallback/fallback/' | sort | uniq -c | sort -rn | head >>"$OUT/summary.txt"
cat "$OUT/summary.txt"
gzip "$OUT"/*.log
