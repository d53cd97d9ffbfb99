#!/usr/bin/env bash
# One prepared draw (2026-11-27, second H200 session): answers first, always leaves r.tar.gz.
set -u
O=$OUT/r; mkdir -p $O; T0=$SECONDS; BUDGET=${BUDGET:-480}
root=$(pwd); gpu=$root/.gpu; rm -rf $gpu/root; mkdir -p $gpu/root
for f in $gpu/debs/*.deb; do dpkg -x $f $gpu/root; done
lib=$gpu/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$lib:$root/build:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
export VK_LAYER_PATH=$gpu/root/usr/share/vulkan/explicit_layer.d XDG_RUNTIME_DIR=/tmp
for m in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
  [ -f $m ] && { export VK_DRIVER_FILES=$m; break; }; done
export GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4194304
export LD_PRELOAD=$lib/libEGL.so.1:$lib/libGLdispatch.so.0
export VKATTN_PIPELINE_CACHE_DIR=$O/cache
pack() { tar czf $OUT/r.tar.gz -C $OUT r 2>/dev/null; }
left() { echo $(( BUDGET - (SECONDS - T0) )); }
step() { # name timeout cmd...
  local n=$1 t=$2; shift 2; local l=$(( $(left) - 15 )); [ $l -lt $t ] && t=$l
  if [ $t -lt 10 ]; then echo "== $n skipped for time" | tee -a $O/steps.log; return; fi
  local s=$SECONDS; timeout $t "$@" >$O/$n.log 2>&1; echo "== $n exit $? in $((SECONDS-s)) s (limit $t)" | tee -a $O/steps.log; pack; }
B=build/examples/vkattn-bench
step info 30 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; build/examples/vkattn-info; $B --variants"
step dec_long 120 env VKATTN_LOG=kernels,stats $B --case decode-8x32768-paged --case decode-1x32768 --case decode-16x2048-gqa8 --case decode-16x2048 --json $O/dec_long.json
step torch 90 python3 tools/bench_torch.py --case 'decode-*' --case mla-decode --case gptoss-decode --case mixed-step --case 'prefill-*' --json $O/torch.json
step dec_rest 100 env VKATTN_LOG=kernels,stats $B --case decode-1x4096 --case decode-16x2048-int8 --case mla-decode --case gptoss-decode --case mixed-step --json $O/dec_rest.json
step prefill_tiled 100 env VKATTN_ATTN_KERNEL=tiled VKATTN_LOG=kernels,stats $B --case 'prefill-*' --json $O/prefill_tiled.json
step dec_tiled 70 env VKATTN_ATTN_KERNEL=tiled $B --case decode-1x32768 --case decode-16x2048-gqa8 --case mla-decode --json $O/dec_tiled.json
# suites with validation, in parallel, with what time is left
s=$SECONDS; l=$(( $(left) - 12 ))
if [ $l -ge 20 ]; then
  for t in test_decode_family test_attention test_step_attention test_batch_invariance test_self_check; do
    ( VKATTN_DISABLE_COOPMAT=1 timeout $l build/tests/$t --gtest_filter='-*Slow*:*ForcedVariants*' >$O/t_$t.log 2>&1; echo "== $t exit $?" >>$O/t_$t.log ) &
  done; wait
  echo "== tests in $((SECONDS-s)) s (limit $l)" >>$O/steps.log
else echo "== tests skipped for time" >>$O/steps.log; fi
rm -rf $O/cache; pack; cat $O/steps.log
