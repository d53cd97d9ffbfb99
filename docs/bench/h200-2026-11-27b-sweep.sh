#!/usr/bin/env bash
# Second command of the draw: knob sweep on the cases that regressed. Always leaves $OUT/r2.tar.gz.
set -u
O=/tmp/r2; rm -rf $O; mkdir -p $O; T0=$SECONDS; BUDGET=${BUDGET:-470}
root=$(pwd); gpu=$root/.gpu; rm -rf $gpu/root; mkdir -p $gpu/root
for f in $gpu/debs/*.deb; do dpkg -x $f $gpu/root; done
lib=$gpu/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$lib:$root/build:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
export VK_LAYER_PATH=$gpu/root/usr/share/vulkan/explicit_layer.d XDG_RUNTIME_DIR=/tmp
for m in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
  [ -f $m ] && { export VK_DRIVER_FILES=$m; break; }; done
export GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4194304
export LD_PRELOAD=$lib/libEGL.so.1:$lib/libGLdispatch.so.0
export VKATTN_PIPELINE_CACHE_DIR=/tmp/r2cache
pack() { tar czf $OUT/r2.tar.gz -C /tmp r2 2>/dev/null; }
left() { echo $(( BUDGET - (SECONDS - T0) )); }
i=0
run() { # cases-var then env assignments
  local cases=$1; shift; i=$((i+1)); local t=$(( $(left) - 10 )); [ $t -gt 60 ] && t=60
  if [ $t -lt 8 ]; then echo "== $i $* skipped for time" >>$O/steps.log; return; fi
  local s=$SECONDS
  env "$@" timeout $t build/examples/vkattn-bench --reps 5 $cases --json $O/s$i.json >$O/s$i.log 2>&1
  echo "== $i [$*] exit $? in $((SECONDS-s)) s" >>$O/steps.log; pack; }
D="--case decode-1x32768 --case decode-16x2048-gqa8 --case decode-16x2048"
P="--case prefill-1k-8h-causal --case prefill-1k-8h"
run "$D" VKATTN_LOG=kernels
run "$D" VKATTN_ATTN_ROW_SPLITS=1
run "$D" VKATTN_ATTN_ROW_SPLITS=1 VKATTN_ATTN_TILE_KEYS=16
run "$D" VKATTN_ATTN_TILE_KEYS=16
run "$D" VKATTN_ATTN_TILE_KEYS=32
run "$D" VKATTN_ATTN_TARGET_ITEMS=1056
run "$P" VKATTN_ATTN_WG=128 VKATTN_ATTN_LANES_PER_ROW=4
run "$P" VKATTN_ATTN_TILE_KEYS=16
run "$P" VKATTN_ATTN_LANES_PER_ROW=16
run "$P" VKATTN_FORCE_F16_MATH=1
run "$D" VKATTN_ATTN_WG=256
run "$D" VKATTN_ATTN_WG=64
run "$D" VKATTN_ATTN_LANES_PER_ROW=32
run "$D" VKATTN_ATTN_LANES_PER_ROW=8
run "$D" VKATTN_ATTN_TARGET_ITEMS=2112 VKATTN_ATTN_ROW_SPLITS=1
run "$P" VKATTN_ATTN_DOUBLE_BUFFER=1
run "$P" VKATTN_ATTN_TARGET_ITEMS=1056
run "--case decode-1x32768" VKATTN_ATTN_KERNEL=tiled VKATTN_ATTN_TILE_KEYS=16
run "--case decode-1x32768" VKATTN_ATTN_KERNEL=lanes
pack; cat $O/steps.log
