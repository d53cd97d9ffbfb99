#!/usr/bin/env bash
# The second command of the 2026-11-28 H200 draw: coopmat's self-checks and
# forced-coopmat prefill after the shared-array alignment fix, beside
# tiled. From the project root on the GPU machine, OUT set by the device.
set -u
. tools/gpu/gpu_env.sh
B=build/examples/vkattn-bench
T=build/tests/test_attention
cases="--case prefill-1k-8h-causal --case prefill-1k-8h --case prefill-2k-gqa --case prefill-1k-d64 --case prefill-1k-d256 --case mla-prefill"
export VKATTN_PIPELINE_CACHE_DIR=
ck() {  # NAME ENV...: the coopmat self-checks of the attention suite's shape grid
  local n=$1; shift
  env "$@" VKATTN_ATTN_KERNEL=coopmat VKATTN_TEST_KV_DTYPE=f16 VKATTN_LOG=kernels \
    timeout 100 $T --gtest_filter='*HeadDims*:*GqaAndMqa*:*AdditiveMasks*:*Sinks*' >"$OUT/$n.log" 2>&1
  echo "$n: exit $? passed $(grep -c 'self-check family=coopmat passed' "$OUT/$n.log")" \
    "failed $(grep -c 'self-check family=coopmat FAILED' "$OUT/$n.log")" | tee -a "$OUT/summary.txt"
}
ck cm_default &
ck cm_sg2_shared_o VKATTN_ATTN_SUBGROUPS=2 VKATTN_ATTN_O_REGS=0 &
ck cm_sg1 VKATTN_ATTN_SUBGROUPS=1 &
wait
grep -h "self-check family=coopmat" "$OUT"/cm_*.log | sort | uniq -c | sort -rn | head -40 >>"$OUT/summary.txt"
timeout 100 env VKATTN_ATTN_KERNEL=coopmat VKATTN_LOG=kernels,stats $B --reps 5 $cases --json "$OUT/prefill_coopmat.json" >"$OUT/prefill_coopmat.log" 2>&1
echo "prefill coopmat exit $?" >>"$OUT/summary.txt"
timeout 80 env VKATTN_ATTN_KERNEL=tiled $B --reps 5 $cases --json "$OUT/prefill_tiled.json" >"$OUT/prefill_tiled.log" 2>&1
echo "prefill tiled exit $?" >>"$OUT/summary.txt"
python3 - "$OUT" >>"$OUT/summary.txt" <<'PY'
import json, sys, os
o = sys.argv[1]
def load(n):
    try: return {c['name']: c for c in json.load(open(os.path.join(o, n)))['cases']}
    except Exception as e: return {}
a, b = load('prefill_coopmat.json'), load('prefill_tiled.json')
for k in a:
    ca, cb = a[k], b.get(k, {})
    print(k, 'coopmat', ca.get('median_ms'), ca.get('variant', '')[:60], '| tiled', cb.get('median_ms'))
PY
cat "$OUT/summary.txt"
