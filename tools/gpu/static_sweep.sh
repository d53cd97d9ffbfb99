#!/usr/bin/env bash
# tools/gpu/static_sweep.sh OUTDIR [--quick]: compiles vkattn-bench's
# attention cases for each fake GPU of tools/gpu-static.sh and tabulates the
# compilers' statistics (tools/gpu/static_table.py -> OUTDIR/static.md,
# OUTDIR/static.json). Needs no GPU; nothing runs on one.
#
# One bench process per GPU x case (x forced family), so each case compiles
# its own pipelines (a process compiles a pipeline once):
#   tools/gpu-static.sh GPU env VKATTN_LOG=stats,kernels,compile \
#     [VKATTN_ATTN_KERNEL=F] vkattn-bench --build-only --case CASE
# stderr -> OUTDIR/GPU/CASE[@F].log, stdout -> .out, exit status -> .rc.
#
# Default: all 8 GPUs x the bench's prefill (d 64/128/256, GQA 1/4, a chunk
# over a cache) and decode (d 128 GQA 4, dense and paged; d 64 GQA 8) cases,
# each also with a family forced where sensible (tiled everywhere; coopmat
# for prefill on GPUs offering cooperative matrices). --quick: navi31,
# navi21, ga102, a740, a660, m1 x 9 cases, defaults only, plus ga102's forced
# coopmat at d 128, d 256 and MLA (a CI check, minutes).
# Overrides: VKATTN_SWEEP_GPUS, VKATTN_SWEEP_CASES (space-separated; a case
# may name a family, "prefill-1k-d64@coopmat"), VKATTN_SWEEP_JOBS (parallel
# runs; default the CPU count), VKATTN_SWEEP_TIMEOUT (seconds a run, 600),
# VKATTN_BENCH (default build/examples/vkattn-bench).
#
# The arguments, the overrides, the bench and python3 are checked before
# Mesa is fetched. OUTDIR is the sweep's own: it must be new, empty, or one
# a sweep made (its mark, OUTDIR/.vkattn-static-sweep; or, from before the
# mark, nothing but GPU folders and static.md/static.json); each run
# replaces OUTDIR/GPU for the GPUs it sweeps. Any other folder is refused
# (exit 1), never touched.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() { echo "usage: tools/gpu/static_sweep.sh OUTDIR [--quick]" >&2; exit 2; }
case $# in 1 | 2) ;; *) usage ;; esac
case "$1" in -*) echo "static_sweep: OUTDIR first, not $1" >&2; usage ;; esac
outdir=$1
quick=${2:-}
[ -z "$quick" ] || [ "$quick" = --quick ] || { echo "static_sweep: unknown option $quick" >&2; usage; }
for v in VKATTN_SWEEP_JOBS VKATTN_SWEEP_TIMEOUT; do
  if [ -n "${!v:-}" ] && ! [[ "${!v}" =~ ^[1-9][0-9]*$ ]]; then
    echo "static_sweep: $v needs a whole number above 0 (got ${!v})" >&2
    exit 2
  fi
done
all_gpus=$("$root/tools/gpu-static.sh" --list | tr '\n' ' ')
for g in ${VKATTN_SWEEP_GPUS:-}; do
  [[ " $all_gpus" == *" $g "* ]] || { echo "static_sweep: VKATTN_SWEEP_GPUS: no fake GPU $g (one of: $all_gpus)" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "static_sweep: python3 not found (tools/gpu/static_table.py needs it)" >&2; exit 1; }
bench=${VKATTN_BENCH:-$root/build/examples/vkattn-bench}
[ -x "$bench" ] || { echo "static_sweep: no $bench (build vkattn-bench first)" >&2; exit 1; }
mark=.vkattn-static-sweep
if [ -e "$outdir" ] || [ -L "$outdir" ]; then
  if [ ! -f "$outdir/$mark" ]; then
    theirs=""
    if [ -d "$outdir" ] && [ ! -L "$outdir" ]; then
      for e in "$outdir"/* "$outdir"/.[!.]* "$outdir"/..?*; do
        [ -e "$e" ] || [ -L "$e" ] || continue
        n=${e##*/}
        case "$n" in static.md | static.json) [ -f "$e" ] && [ ! -L "$e" ] && continue ;; esac
        [ -d "$e" ] && [ ! -L "$e" ] && [[ " $all_gpus" == *" $n "* ]] && continue
        theirs="$theirs $n"
      done
    else
      theirs=" (not a folder)"
    fi
    if [ -n "$theirs" ]; then
      echo "static_sweep: $outdir is not a sweep's folder (no $outdir/$mark; it holds:$theirs);" \
        "it is left as it is: give a new or empty OUTDIR" >&2
      exit 1
    fi
  fi
fi

if [ "$quick" = "--quick" ]; then
  gpus="navi31 navi21 ga102 a740 a660 m1"
  cases="prefill-1k-d64 prefill-2k-gqa prefill-1k-d256 decode-16x512 decode-16x2048-gqa8 gptoss-decode mla-decode
         decode-16x2048-q4-rot mla-prefill spec-tree-64x4096 topk-decode-2048-of-131072"
else
  gpus=$all_gpus
  cases="prefill-1k-d64 prefill-1k-8h-causal prefill-1k-d256 prefill-2k-gqa chunk-512-over-1536
         decode-16x2048 decode-16x2048-gqa8 decode-1x32768 decode-16x512 gptoss-decode mixed-step
         mla-prefill mla-decode decode-16x2048-int8 decode-16x2048-q4-rot decode-8x32768-q4"
fi
gpus=${VKATTN_SWEEP_GPUS:-$gpus}
cases=${VKATTN_SWEEP_CASES:-$cases}

# Families forced beside the default, per case and GPU.
forced() { # CASE GPU
  case "$1" in
    *@*) ;; # named already
    prefill-* | chunk-*)
      echo tiled
      case "$2" in navi31 | gfx1201 | ga102 | tu104) echo coopmat ;; esac ;;
    decode-* | gptoss-decode | mla-decode) echo tiled ;;
  esac
}

# Until the bench has --build-only, a 1-rep run (peaks, verification and
# timing of garbage: its exit status says WRONG, the pipelines are the same).
# The help text is read whole before it is searched: `bench --help | grep -q`
# under pipefail fails whenever grep exits before the bench's last line is
# written (SIGPIPE, exit 141), which a loaded CI machine hit.
help_text=$("$bench" --help 2>&1 </dev/null || true)
if grep -q -- --build-only <<<"$help_text"; then
  mode=--build-only
else
  mode="--reps 1"
  echo "static_sweep: $bench has no --build-only; running --reps 1 instead" >&2
fi
known=$("$bench" --list | awk '{print $1}')

# Mesa 26 and the drm shim, once, before the parallel runs.
"$root/tools/with-mesa26.sh" --fetch

mkdir -p "$outdir"
echo "made by tools/gpu/static_sweep.sh, which replaces its GPU folders on every run" >"$outdir/$mark"
runs=()
for gpu in $gpus; do
  rm -rf "${outdir:?}/$gpu"
  mkdir -p "$outdir/$gpu"
  for c in $cases; do
    if ! grep -qx -- "${c%@*}" <<<"$known"; then
      echo "static_sweep: the bench has no case ${c%@*}; skipped" >&2
      continue
    fi
    runs+=("$gpu $c")
    if [ -z "$quick" ]; then
      for f in $(forced "$c" "$gpu"); do runs+=("$gpu $c@$f"); done
    elif [ "$gpu" = ga102 ] && { [ "$c" = prefill-2k-gqa ] || [ "$c" = prefill-1k-d256 ] || [ "$c" = mla-prefill ]; }; then
      runs+=("$gpu $c@coopmat") # NVIDIA's coopmat is forced-only: its budgets need the runs
    fi
  done
done
rm -f "$outdir/static.md" "$outdir/static.json"

# One run: GPU CASE[@FAMILY]. Repeated kernel lines (one per dispatch) are
# kept once: a timed run logs thousands.
# shellcheck disable=SC2317 # (run by xargs)
run_one() {
  local gpu=$1 label=$2 c=${2%@*} fam='' o
  [ "$label" != "$c" ] && fam=${label#*@}
  o=$outdir/$gpu/$label
  (
    set +e +o pipefail
    # shellcheck disable=SC2086 # $mode: one or two words
    VKATTN_MESA26_QUIET='' timeout "$timeout" "$root/tools/gpu-static.sh" "$gpu" env \
      VKATTN_LOG=stats,kernels,compile ${fam:+VKATTN_ATTN_KERNEL=$fam} \
      "$bench" $mode --case "$c" 2>&1 >"$o.out" </dev/null |
      awk '!/^vkattn: attention family=/ || !seen[$0]++' >"$o.log"
    echo "${PIPESTATUS[0]}" >"$o.rc"
  )
  echo "static_sweep: $gpu $label: exit status $(cat "$o.rc")" >&2
}
export -f run_one
export outdir root bench mode
export timeout=${VKATTN_SWEEP_TIMEOUT:-600}
jobs=${VKATTN_SWEEP_JOBS:-$(nproc)}
start=$SECONDS
printf '%s\n' "${runs[@]}" | xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _
echo "static_sweep: ${#runs[@]} runs in $((SECONDS - start)) s" >&2
python3 "$root/tools/gpu/static_table.py" "$outdir"

# Failed runs (a compile failure, a vkattn error, a timeout: 124). Without
# --build-only the bench exits 2 for its garbage results: not a failure.
bad=0
for r in "${runs[@]}"; do
  rc=$(cat "$outdir/${r% *}/${r#* }.rc")
  if [ "$rc" != 0 ] && ! { [ "$mode" != --build-only ] && [ "$rc" = 2 ]; }; then
    echo "static_sweep: FAILED ${r/ / }: exit status $rc (see $outdir/${r% *}/${r#* }.log)" >&2
    bad=1
  fi
done
exit $bad
