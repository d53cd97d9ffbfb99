#!/usr/bin/env bash
# The GPU campaign in one command, inside a time budget (issue G). From the
# project root on the GPU machine:
#   bash tools/gpu/run_checks.sh OUTDIR --budget [SECONDS]     (default 540)
# A draw gives about 15 minutes of device time, starts included, in
# commands of at most 10 (../shared/gpu/README.md); this runs the open
# questions, most valuable first, each step under its own timeout, skips a
# step that no longer fits what is left (the summary says so), and always
# leaves OUTDIR/summary.md (tools/gpu/campaign_summary.py) and
# OUTDIR/../campaign.tar.gz before the budget ends, even when a step hangs.
#   0. facts (no GPU work): NUMA nodes, the IOMMU, BAR1, vkattn's memory
#      types (system.txt), for the spread between processes;
#   1. decode: the bench's decode cases (long contexts first) on the
#      table's choice in four processes A B A B (A pinned to NUMA node 0,
#      B to node 1 where numactl sees two; no VKATTN_* knob: the
#      default-choice runs), between them the plan forced into host memory
#      (VKATTN_PLAN_MEMORY=host: the spread's first suspect, 2026-11-28),
#      forced tiled, PyTorch where it is installed, and one run with the
#      kernel log and the driver's statistics (VKATTN_LOG; named forced);
#   2. coopmat and prefill: coopmat's self-checks where the device offers
#      it, the prefill cases on the table's choice, forced tiled, forced
#      coopmat, and PyTorch;
#   3. the driver's pipeline statistics of every pipeline 1-2 ran
#      (VKATTN_LOG=stats: every bench run here has it on; no GPU time);
#   4. tuning: vkattn-tune for TUNE_SECONDS (90) over the cases that
#      matter most, then those cases with the tuning file against the table;
#   5. the attention, step, decode, batch-invariance and self-check suites
#      with the validation layer on, in parallel, with whatever is left.
# The case lists and suites can be narrowed for a dry run (ctest
# tools.gpu_campaign_dry_run runs it on lavapipe): CAMPAIGN_DECODE_CASES,
# CAMPAIGN_LONG_CASES, CAMPAIGN_PREFILL_CASES, CAMPAIGN_TUNE_CASES,
# CAMPAIGN_NP_CASES, CAMPAIGN_CAUSAL_CASES (the coopmat probes of step 2),
# CAMPAIGN_SUITES (space-separated), CAMPAIGN_REPS (bench --reps, 5);
# VKATTN_BUILD names the build folder (default build).
#
# The arguments are read before anything runs: --budget takes the next
# argument as its value unless that starts with "-" (then 540); a value
# that is not a whole number of seconds, an unknown option or a second
# OUTDIR is refused with a usage line (exit 2). Then tools/gpu/preflight.sh:
# a build folder without the programs the steps run, or an OUTDIR (or
# OUTDIR/../campaign.tar.gz) that is not a campaign's, is an error (exit 1).
set -u
usage() {
  echo "usage: bash tools/gpu/run_checks.sh [OUTDIR] --budget [SECONDS]   (default 540)" >&2
  exit 2
}
budget_value() {
  if ! [[ "$1" =~ ^[0-9]+$ ]]; then
    echo "--budget needs a whole number of seconds (got $1)" >&2
    usage
  fi
  budget=$((10#$1)) # (a leading 0 is not octal)
}
out=""
budget=540
while [ $# -gt 0 ]; do
  case "$1" in
    --budget)
      if [ $# -gt 1 ] && [[ "$2" != -* ]]; then budget_value "$2"; shift; fi ;;
    -*) echo "campaign.sh: unknown option $1" >&2; usage ;;
    *) if [ -z "$out" ]; then out=$1; else echo "campaign.sh: stages are not taken with --budget ($1)" >&2; usage; fi ;;
  esac
  shift
done
out=${out:-.gpu/out}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preflight.sh"
preflight_build campaign.sh || exit 1
preflight_outdir campaign.sh "$out" || exit 1
t0=$SECONDS
. "$here/gpu_env.sh"
mkdir -p "$out"
out=$(cd "$out" && pwd)
preflight_mark "$out"
# Pipelines compiled by one step are reused by the next (and by the tuning
# file's step); the folder is left out of the archive.
export VKATTN_PIPELINE_CACHE_DIR=$out/cache
mkdir -p "$out/cache"
B=$build/examples/vkattn-bench
reps=${CAMPAIGN_REPS:-5}
long=${CAMPAIGN_LONG_CASES:-decode-8x32768-paged decode-1x32768 decode-16x2048 decode-1x4096}
decode=${CAMPAIGN_DECODE_CASES:-$long decode-16x2048-gqa8 decode-16x2048-int8 decode-16x2048-fp8 decode-16x512 gptoss-decode mla-decode mixed-step serving-step}
prefill=${CAMPAIGN_PREFILL_CASES:-prefill-1k-8h-causal prefill-1k-8h prefill-2k-gqa prefill-1k-d64 prefill-1k-d256 mla-prefill}
tune_cases=${CAMPAIGN_TUNE_CASES:-decode-1x32768 decode-16x2048 prefill-1k-8h-causal prefill-2k-gqa}
np_cases=${CAMPAIGN_NP_CASES:-prefill-2k-gqa prefill-1k-8h prefill-1k-d256}
causal_cases=${CAMPAIGN_CAUSAL_CASES:-prefill-1k-8h-causal}
suites=${CAMPAIGN_SUITES:-test_attention test_step_attention test_decode_family test_batch_invariance test_self_check}
reserve=12 # seconds kept for the summary and the archive

left() { echo $((budget - (SECONDS - t0))); }
log() { echo "$*" >>"$out/steps.log"; }
pack() {
  python3 "$here/campaign_summary.py" "$out" >"$out/summary.md" 2>"$out/summary.err"
  tar czf "$out/../campaign.tar.gz" --exclude=cache -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null
}
cases_args() { local a=""; for c in $1; do a="$a --case $c"; done; echo "$a"; }
# step NAME MIN_SECONDS CAP_SECONDS CMD...: runs CMD with its output in
# OUTDIR/NAME.log under min(CAP, what is left), or skips it when less than
# MIN is left; steps.log gets one line either way (the summary reads it).
step() {
  local name=$1 need=$2 cap=$3
  shift 3
  local t=$(($(left) - reserve))
  [ "$t" -gt "$cap" ] && t=$cap
  if [ "$t" -lt "$need" ]; then
    log "== $name skipped for time ($(left) s left, needs $need)"
    return 1
  fi
  local s=$SECONDS
  timeout -k 5 "$t" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  log "== $name exit $rc in $((SECONDS - s)) s (limit $t)"
  pack
  return 0
}

: >"$out/steps.log"
log "budget $budget s, started $(date -u +%FT%TZ)"
# The GPU's clocks beside the steps, where nvidia-smi exists (the spread
# between processes is the open question of the H200 draw, 2026-11-27).
# Beside them, utilization and memory in use (a second sampler: a field
# an older driver does not know must not cost the clocks): busy samples
# while no vkattn process runs, or memory in use beyond ours, would mean
# another tenant shares the GPU (the spread's first suspect, 2026-11-28);
# and the compute processes and throttle reasons nvidia-smi sees, at the
# start and in the summary's archive.
clock_pid=""
util_pid=""
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,temperature.gpu \
    --format=csv,noheader -lms 500 >"$out/clocks.csv" 2>/dev/null &
  clock_pid=$!
  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used \
    --format=csv,noheader -lms 500 >"$out/util.csv" 2>/dev/null &
  util_pid=$!
  { nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    nvidia-smi -q -d PERFORMANCE; } >"$out/gpu_start.txt" 2>&1
fi
stop_clocks() {
  [ -n "$clock_pid" ] && kill "$clock_pid" 2>/dev/null
  [ -n "$util_pid" ] && kill "$util_pid" 2>/dev/null
}
trap 'stop_clocks; pack' EXIT

step info 5 40 bash -c "{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $build/examples/vkattn-info; $B --variants; }"
coopmat_ok=1
grep -q "coopmat (VKATTN_ATTN_KERNEL=coopmat): unavailable" "$out/info.log" 2>/dev/null && coopmat_ok=0
torch_ok=0
python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null && torch_ok=1
[ $torch_ok = 1 ] || log "== torch not applicable (no PyTorch with CUDA on this machine)"

# 0. Facts: where the GPU hangs, whether an IOMMU translates its reads of
# host memory, what vkattn's buffers get (vkattn-info's memory line).
step facts 3 30 bash "$here/facts.sh" "$build"
# Processes A and B on NUMA nodes 0 and 1 where there are two.
pin_a="" pin_b=""
if command -v numactl >/dev/null && [ "$(numactl -H 2>/dev/null | sed -n 's/^available: \([0-9]*\) nodes.*/\1/p')" -ge 2 ] 2>/dev/null; then
  pin_a="numactl --cpunodebind=0 --membind=0" pin_b="numactl --cpunodebind=1 --membind=1"
  log "== pinning processes A to NUMA node 0, B to node 1"
fi
# 1. Decode: default-choice processes A B A B with the forced runs between.
default_run() {  # NAME PIN: the table's choice over every decode case, no VKATTN_* knob
  step "$1" 20 120 env -u VKATTN_LOG -u VKATTN_PLAN_MEMORY $2 $B --reps "$reps" \
    $(cases_args "$decode") --json "$out/$1.json"
}
default_run q1_decode_a "$pin_a"
step q1_decode_forced_plan_host 20 90 env VKATTN_PLAN_MEMORY=host $pin_a $B --reps "$reps" \
  $(cases_args "$long") --json "$out/q1_decode_forced_plan_host.json"
default_run q1_decode_b "$pin_b"
[ $torch_ok = 1 ] && step q1_torch 10 90 python3 tools/bench_torch.py $(cases_args "$decode $prefill") \
  --json "$out/q1_torch.json"
step q1_decode_tiled 20 90 env VKATTN_ATTN_KERNEL=tiled VKATTN_LOG=kernels,stats $B --reps "$reps" \
  $(cases_args "$long") --json "$out/q1_decode_tiled.json"
default_run q1_decode_a2 "$pin_a"
default_run q1_decode_b2 "$pin_b"
step q1_decode_forced_log 15 60 env VKATTN_LOG=kernels,stats $B --reps 1 $(cases_args "$long") \
  --json "$out/q1_decode_forced_log.json"

# 2. coopmat and prefill.
if [ $coopmat_ok = 1 ]; then
  step q2_coopmat_checks 15 60 env VKATTN_PIPELINE_CACHE_DIR= VKATTN_ATTN_KERNEL=coopmat \
    VKATTN_TEST_KV_DTYPE=f16 VKATTN_LOG=kernels,compile \
    $build/tests/test_attention --gtest_filter='*HeadDims*:*GqaAndMqa*'
else
  log "== q2_coopmat_checks not applicable (the device offers no usable VK_KHR_cooperative_matrix, or the build has no coopmat)"
fi
step q2_prefill 20 90 env VKATTN_LOG=kernels,stats $B --reps "$reps" $(cases_args "$prefill") \
  --json "$out/q2_prefill.json"
# Forced tiled only where the table chose another family for some case.
if python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['cases']; sys.exit(0 if c and all(x['variant'].startswith('tiled') for x in c) else 1)" \
  "$out/q2_prefill.json" 2>/dev/null; then
  log "== q2_prefill_tiled not applicable (the table chose tiled for every prefill case: step q2_prefill)"
else
  step q2_prefill_tiled 20 90 env VKATTN_ATTN_KERNEL=tiled VKATTN_LOG=kernels,stats $B --reps "$reps" \
    $(cases_args "$prefill") --json "$out/q2_prefill_tiled.json"
fi
[ $coopmat_ok = 1 ] && step q2_prefill_coopmat 20 90 env VKATTN_ATTN_KERNEL=coopmat \
  VKATTN_LOG=kernels,stats $B --reps "$reps" $(cases_args "$prefill") --json "$out/q2_prefill_coopmat.json"
# A second default-choice process over every prefill case (issue NP judges
# the worst of two), on the other NUMA node where there are two.
step q2_prefill_b 20 90 env -u VKATTN_LOG -u VKATTN_PLAN_MEMORY $pin_b $B --reps "$reps" \
  $(cases_args "$prefill") --json "$out/q2_prefill_b.json"
# NP's probes (2026-11-28, unmeasured on a GPU): O in accumulators (the
# default, one accumulator loaded from shared memory a tile) against O in
# scalar registers (VKATTN_ATTN_O_REGS=1: a round trip a P V block), and
# the causal diagonal balanced (the default) against not
# (VKATTN_ATTN_BALANCE_ITEMS=0).
if [ $coopmat_ok = 1 ]; then
  step q2_prefill_coopmat_oregs1 15 60 env VKATTN_ATTN_KERNEL=coopmat VKATTN_ATTN_O_REGS=1 \
    VKATTN_LOG=kernels,stats $B --reps "$reps" $(cases_args "$np_cases") \
    --json "$out/q2_prefill_coopmat_oregs1.json"
  step q2_prefill_coopmat_nobalance 10 40 env VKATTN_ATTN_KERNEL=coopmat VKATTN_ATTN_BALANCE_ITEMS=0 \
    VKATTN_LOG=kernels $B --reps "$reps" $(cases_args "$causal_cases") \
    --json "$out/q2_prefill_coopmat_nobalance.json"
fi

# 4. Tuning (3 needs no GPU time: the summary reads the statistics from the
# JSON files above).
tune=${TUNE_SECONDS:-90}
if step q4_tune 40 $((tune + 40)) $build/examples/vkattn-tune --seconds "$tune" \
  $(cases_args "$tune_cases") --json "$out/q4_tune.json"; then
  step q4_tuned 20 90 env VKATTN_LOG=kernels,stats $B --reps "$reps" $(cases_args "$tune_cases") \
    --json "$out/q4_tuned.json"
  cp "$out"/cache/tuning-*.txt "$out"/ 2>/dev/null
fi

# 5. Suites with the validation layer on, in parallel. The carried layer
# (Debian 12's 1.3.239) predates VK_KHR_cooperative_matrix and fails
# vkCreateDevice with its feature struct: the suites run with it off.
t=$(($(left) - reserve))
if [ "$t" -ge 20 ]; then
  s=$SECONDS
  pids=""
  for n in $suites; do
    [ -x "$build/tests/$n" ] || { log "== suite $n missing"; continue; }
    (VKATTN_DISABLE_COOPMAT=1 timeout -k 5 "$t" "$build/tests/$n" \
      --gtest_filter='-*Slow*:*ForcedVariants*' >"$out/q5_$n.log" 2>&1
      echo "== $n exit $?" >>"$out/q5_$n.log") &
    pids="$pids $!"
  done
  [ -n "$pids" ] && wait $pids
  log "== q5_tests in $((SECONDS - s)) s (limit $t)"
else
  log "== q5_tests skipped for time ($(left) s left)"
fi
stop_clocks
log "done in $((SECONDS - t0)) s"
trap - EXIT
pack
cat "$out/summary.md"
