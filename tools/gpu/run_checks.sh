#!/usr/bin/env bash
# The GPU campaign. On the GPU machine, from the project root:
#   bash .gpu/run_checks.sh OUTDIR [STAGE...]
# Stages, in order (default: every one not done yet): info coopmat decode
# tests bench tune forced summary. Each fits one remote command (10
# minutes; the TIMEOUT variables below bound its steps), writes its logs
# and JSON files under OUTDIR, marks itself done (OUTDIR/.done-STAGE), and
# packs OUTDIR into OUTDIR/../campaign.tar.gz, so a session runs the stages
# one command after another, resumes where a cut-off command stopped
# (named stages run again), and fetches one archive. The summary stage
# writes OUTDIR/summary.md (tools/gpu/summary.py: the tables a closing
# note needs) and keeps the tuning file (OUTDIR/tuning-*.txt): the
# device's measured defaults. The loader and driver setup: tools/gpu/gpu_env.sh.
#
# With --budget [SECONDS] (default 540) it runs tools/gpu/campaign.sh instead:
# the whole campaign in one command, the open questions first, inside the
# budget (what one GPU draw allows: ../shared/gpu/README.md).
#
# Before anything runs (tools/gpu/preflight.sh): an option or stage it does
# not know is refused with a usage line (exit 2); a build folder
# (VKATTN_BUILD, default build) without the programs the stages run, or an
# OUTDIR (or OUTDIR/../campaign.tar.gz) that is not a campaign's, is an
# error (exit 1).
set -u
# The campaign's other files: beside this script, or (the copy in .gpu/ that
# tools/gpu/pack_extra.sh makes) under tools/gpu of the project root.
lib=$(dirname "$0")
[ -f "$lib/campaign.sh" ] || lib=tools/gpu
if [ ! -f "$lib/campaign.sh" ]; then
  echo "run_checks.sh: no tools/gpu/campaign.sh here: run it from the project root" >&2
  exit 1
fi
for a in "$@"; do
  if [ "$a" = --budget ]; then exec bash "$lib/campaign.sh" "$@"; fi
done
all=(info coopmat decode tests bench tune forced summary)
usage() {
  echo "usage: bash tools/gpu/run_checks.sh [OUTDIR [STAGE...]]   (stages: ${all[*]})" >&2
  echo "       bash tools/gpu/run_checks.sh [OUTDIR] --budget [SECONDS]   (tools/gpu/campaign.sh)" >&2
  exit 2
}
case "${1:-}" in -*) echo "run_checks.sh: unknown option $1" >&2; usage ;; esac
out=${1:-.gpu/out}; shift || true
stages=("$@")
for s in "${stages[@]}"; do
  case "$s" in -*) echo "run_checks.sh: unknown option $s" >&2; usage ;; esac
  case " ${all[*]} " in
    *" $s "*) ;;
    *) echo "run_checks.sh: no stage \"$s\" (stages: ${all[*]})" >&2; usage ;;
  esac
done
. "$lib/preflight.sh"
preflight_build run_checks.sh || exit 1
preflight_outdir run_checks.sh "$out" || exit 1
. "$lib/gpu_env.sh"
mkdir -p "$out"
preflight_mark "$out"
logs=$(mktemp -d)
stage_info() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $build/examples/vkattn-info; $build/examples/vkattn-bench --variants; } >"$out/info.log" 2>&1
}
# Issue P2 first: the rebuilt coopmat shader (vector-typed shared arrays, no
# accumulator reload) on small known-answer cases: the first-use self-check
# of every coopmat pipeline the attention suite's head-dim, GQA and mask
# cases build (checks in memory: VKATTN_PIPELINE_CACHE_DIR empty), once per
# creation variant (full subgroups of the reported size, then without);
# each "self-check family=coopmat passed|FAILED (max err e)" line is the
# evidence. Then the prefill cases on coopmat, on tiled, and in PyTorch.
stage_coopmat() {
  { for fs in 1 0; do
      t0=$SECONDS
      VKATTN_FULL_SUBGROUPS=$fs VKATTN_PIPELINE_CACHE_DIR= VKATTN_ATTN_KERNEL=coopmat \
        VKATTN_TEST_KV_DTYPE=f16 VKATTN_LOG=kernels,compile timeout "${TEST_TIMEOUT:-240}" \
        $build/tests/test_attention --gtest_filter='*HeadDims*:*GqaAndMqa*:*AdditiveMasks*' 2>&1 |
        grep -E "self-check|fallback|compile attention_coopmat|^\[  (FAILED|PASSED)" | sort | uniq -c
      echo "== coopmat self-checks, VKATTN_FULL_SUBGROUPS=$fs, in $((SECONDS - t0)) s"
    done
    VKATTN_ATTN_KERNEL=coopmat VKATTN_LOG=kernels timeout "${BENCH_TIMEOUT:-180}" \
      $build/examples/vkattn-bench --case 'prefill-*' --json "$out/bench_prefill_coopmat.json"
    echo "== bench prefill coopmat exit $?"
    VKATTN_ATTN_KERNEL=tiled timeout "${BENCH_TIMEOUT:-180}" $build/examples/vkattn-bench \
      --case 'prefill-*' --json "$out/bench_prefill_tiled.json"
    echo "== bench prefill tiled exit $?"
    if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
      timeout "${BENCH_TIMEOUT:-180}" python3 tools/bench_torch.py --case 'prefill-*' \
        --json "$out/torch_prefill.json"
      echo "== bench_torch prefill exit $?"
      python3 tools/compare_bench.py "$out/bench_prefill_coopmat.json" "$out/torch_prefill.json"
    fi
    python3 tools/compare_bench.py "$out/bench_prefill_tiled.json" "$out/bench_prefill_coopmat.json"
  } >"$out/coopmat.log" 2>&1
}
# Issue P1: the decode family (the table's choice for decode-shaped
# calls on GPUs) against tiled on the decode cases, with the kernel log
# (split counts), then its own test suite; the results lead the summary.
stage_decode() {
  { t0=$SECONDS
    VKATTN_LOG=kernels timeout "${BENCH_TIMEOUT:-180}" $build/examples/vkattn-bench --case 'decode-*' \
      --case gptoss-decode --case mla-decode --case mixed-step --json "$out/bench_decode.json"
    echo "== bench decode (table) exit $? in $((SECONDS - t0)) s"
    VKATTN_ATTN_KERNEL=tiled timeout "${BENCH_TIMEOUT:-180}" $build/examples/vkattn-bench \
      --case 'decode-*' --case gptoss-decode --case mla-decode --json "$out/bench_decode_tiled.json"
    echo "== bench decode forced tiled exit $?"
    VKATTN_DISABLE_COOPMAT=1 timeout "${TEST_TIMEOUT:-240}" $build/tests/test_decode_family \
      --gtest_filter='-*Slow*'
    echo "== test_decode_family exit $?"; } >"$out/decode.log" 2>&1
}
# The carried validation layer (Debian 12's 1.3.239) predates
# VK_KHR_cooperative_matrix and reports its feature struct in vkCreateDevice
# as an error, failing every test; the suites run with the extension off
# (the device table picks coopmat nowhere on NVIDIA since the H100 run of
# 2026-11-23) and the forced coopmat runs below keep it on.
stage_tests() {
  for t in $build/tests/test_*; do
    [ -x "$t" ] && [ -f "$t" ] || continue
    n=$(basename "$t")
    # Attention.ForcedVariants runs last, alone (below): its forced lanes grid
    # (4-8 rows per lane) takes NVIDIA's compiler minutes per pipeline.
    ( t0=$SECONDS; VKATTN_DISABLE_COOPMAT=1 timeout "${TEST_TIMEOUT:-240}" "$t" --gtest_filter="${TEST_FILTER:--*Slow*:*ForcedVariants*}" >"$logs/$n.log" 2>&1
      echo "== $n exit $? in $((SECONDS - t0)) s" >>"$logs/$n.log" ) &
  done
  wait
  for f in "$logs"/*.log; do
    grep -E "^\[  FAILED|^\[  PASSED|^== |validation error|Failure" "$f"
    echo "last started: $(grep '^\[ RUN' "$f" | tail -1)"
  done >"$out/tests.log"
  cat "$logs"/*.log >"$out/tests_all.log"
}
stage_bench() {
  t0=$SECONDS
  VKATTN_LOG=kernels timeout "${BENCH_TIMEOUT:-180}" $build/examples/vkattn-bench ${BENCH_ARGS:-} --json "$out/bench.json" >"$out/bench.log" 2>&1
  echo "== bench exit $? in $((SECONDS - t0)) s" >>"$out/bench.log"
  # Every case through PyTorch on the same GPU, where it is installed.
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    timeout "${BENCH_TIMEOUT:-180}" python3 tools/bench_torch.py --json "$out/torch.json" \
      >>"$out/bench.log" 2>&1
    echo "== bench_torch exit $?" >>"$out/bench.log"
    python3 tools/compare_bench.py "$out/bench.json" "$out/torch.json" >>"$out/bench.log" 2>&1
  fi
  # The tiled options no GPU has measured yet, each against the run above
  # (tools/compare_bench.py A B prints the ratios).
  # coopmat (issue COOP): the table picks it for prefill on NVIDIA (Ampere+),
  # RADV and ANV; the bench again with it off (tiled) for the ratio, and
  # the attention and step suites with it forced on f16 K/V.
  VKATTN_DISABLE_COOPMAT=1 timeout "${BENCH_TIMEOUT:-180}" $build/examples/vkattn-bench ${BENCH_ARGS:-} \
    --json "$out/bench_no_coopmat.json" >>"$out/bench.log" 2>&1
  echo "== bench VKATTN_DISABLE_COOPMAT=1 exit $?" >>"$out/bench.log"
  for t in test_attention test_step_attention; do
    t0=$SECONDS
    VKATTN_ATTN_KERNEL=coopmat VKATTN_TEST_KV_DTYPE=f16 timeout "${TEST_TIMEOUT:-240}" \
      bash tools/expect-family.sh coopmat $build/tests/$t \
      --gtest_filter='-*Slow*:*ForcedVariants*:*DecodeMode*:*TiledFamily*' >"$logs/coopmat_$t.log" 2>&1
    echo "== $t coopmat exit $? in $((SECONDS - t0)) s" >>"$out/tests.log"
    grep -E "^\[  FAILED|^\[  PASSED|validation error|^expect-family" "$logs/coopmat_$t.log" | head -20 >>"$out/tests.log"
  done
  for opt in VKATTN_ATTN_DOUBLE_BUFFER VKATTN_FORCE_F16_MATH; do
    n=$(echo "$opt" | tr 'A-Z' 'a-z')
    env "$opt=1" timeout "${BENCH_TIMEOUT:-180}" $build/examples/vkattn-bench ${BENCH_ARGS:-} \
      --json "$out/bench_$n.json" >>"$out/bench.log" 2>&1
    echo "== bench $opt=1 exit $?" >>"$out/bench.log"
  done
}
# Issue P3: tune on this GPU (every default case, TUNE_SECONDS), then the
# bench again with the tuning file it wrote (source=tuned in the kernel
# log); compare_bench.py prints tuned / table per case. The tuning file is
# kept in OUTDIR: its entries are the measured defaults for this device.
stage_tune() {
  { mkdir -p "$out/cache"
    t0=$SECONDS
    VKATTN_PIPELINE_CACHE_DIR="$out/cache" timeout "$(( ${TUNE_SECONDS:-240} + 60 ))" \
      $build/examples/vkattn-tune --seconds "${TUNE_SECONDS:-240}" --json "$out/tune.json"
    echo "== vkattn-tune exit $? in $((SECONDS - t0)) s"
    VKATTN_PIPELINE_CACHE_DIR="$out/cache" VKATTN_LOG=kernels timeout "${BENCH_TIMEOUT:-180}" \
      $build/examples/vkattn-bench ${BENCH_ARGS:-} --json "$out/bench_tuned.json" 2>&1 |
      grep -vE "^vkattn: attention (family|fallback)" ; echo "== bench tuned exit $?"
    python3 tools/compare_bench.py "$out/bench.json" "$out/bench_tuned.json"
    cp "$out"/cache/tuning-*.txt "$out"/ 2>/dev/null
  } >"$out/tune.log" 2>&1
}
stage_forced() {
  t0=$SECONDS
  timeout "${FORCED_TIMEOUT:-240}" $build/tests/test_attention --gtest_filter='*ForcedVariants*' \
    >"$logs/forced.log" 2>&1
  echo "== Attention.ForcedVariants exit $? in $((SECONDS - t0)) s" >>"$out/tests.log"
  grep -E "Failure|validation error" "$logs/forced.log" | head -20 >>"$out/tests.log"
}

# The summary: the tables a closing note needs (tools/gpu/summary.py) and
# the tuning file the tune stage wrote (this device's measured defaults).
stage_summary() {
  cp "$out"/cache/tuning-*.txt "$out"/ 2>/dev/null
  python3 tools/gpu/summary.py "$out" >"$out/summary.md" 2>"$out/summary.err"
  cat "$out/summary.md"
}

if [ ${#stages[@]} -eq 0 ]; then
  for s in "${all[@]}"; do [ -f "$out/.done-$s" ] || stages+=("$s"); done
fi
for s in "${stages[@]}"; do
  t0=$SECONDS
  "stage_$s"
  echo "== stage $s done in $((SECONDS - t0)) s" | tee -a "$out/stages.log"
  touch "$out/.done-$s"
  tar czf "$out/../campaign.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null
done
